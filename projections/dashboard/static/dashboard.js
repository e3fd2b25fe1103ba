// quotaflow's dashboard: one page over the JSON endpoints of `quotaflow serve`.
// Everything is built with DOM calls and textContent (no HTML from data), so a workload's name
// or a message can never become markup. Long lists are paged on the server (workloads) or in the
// page (ClusterQueues, LocalQueues), so a cluster of any size renders a bounded number of rows.
"use strict";

const PAGE = 100;
const state = {
  asOf: null,          // null: live; a number: every view as of that input offset
  position: -1,        // the live projection's input offset
  decisions: [],       // the latest decisions, newest first
  refreshTimer: null,
  route: null,
  pages: {},           // paging and filters per view
};

// -- DOM helpers -----------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function table(columns, rows, empty) {
  if (!rows.length) return el("p", { class: "muted", text: empty || "None." });
  return el("table", {},
    el("thead", {}, el("tr", {}, columns.map((c) => el("th", { text: c.title })))),
    el("tbody", {}, rows.map((row) => el("tr", {}, columns.map((c) => {
      const value = c.cell(row);
      return el("td", { class: c.class || null }, value instanceof Node ? value : String(value ?? ""));
    })))));
}

function badge(status) {
  return el("span", { class: `badge ${status}`, text: status });
}

function workloadLink(ns, name) {
  return el("a", { href: `#/workload/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`, text: `${ns}/${name}` });
}

function cqLink(name) {
  return name ? el("a", { href: `#/pending?clusterQueue=${encodeURIComponent(name)}`, text: name }) : "";
}

// A bar over [0, scale]: the nominal quota as a frame, what is held in it, what is borrowed
// above it, and what others borrow from it (lent) as a hatched part of the unused quota.
function bar(row) {
  const nominal = row.nominal.value;
  const held = row.reservation.value;
  const borrowed = row.borrowed.value;
  const lent = row.lent ? row.lent.value : 0;
  const limit = row.borrowingLimit ? nominal + row.borrowingLimit.value : nominal;
  const scale = Math.max(limit, held, 1);
  const pct = (v) => `${Math.max(0, Math.min(100, (100 * v) / scale)).toFixed(2)}%`;
  const within = Math.min(held, nominal);
  const title = `${row.flavor}/${row.resource}: nominal ${row.nominal.text}, reserved ${row.reservation.text}` +
    `, borrowed ${row.borrowed.text}, lent ${row.lent ? row.lent.text : "0"}`;
  return el("div", { class: "bar", title, role: "img", "aria-label": title },
    el("span", { class: "held", style: `left:0;width:${pct(within)}` }),
    el("span", { class: "borrowed", style: `left:${pct(nominal)};width:${pct(borrowed)}` }),
    el("span", { class: "lent", style: `left:${pct(within)};width:${pct(Math.min(lent, nominal - within))}` }),
    el("span", { class: "nominal", style: `width:${pct(nominal)}` }));
}

function resourceRows(resources) {
  return el("div", { class: "resources" }, resources.map((r) => el("div", { class: "resource" },
    el("span", { class: "fr", text: `${r.flavor} · ${r.resource}` }),
    bar(r),
    el("span", { class: "numbers", text: `${r.reservation.text} / ${r.nominal.text}` +
      (r.borrowed.value ? ` (+${r.borrowed.text} borrowed)` : "") + (r.lent && r.lent.value ? ` (${r.lent.text} lent)` : "") +
      (r.note ? ` (${r.note})` : "") }))));
}

function show(main, ...children) {
  main.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

// -- data ------------------------------------------------------------------------------------
async function api(path, params) {
  const query = new URLSearchParams(params || {});
  if (state.asOf !== null) query.set("asOf", String(state.asOf));
  const url = query.toString() ? `${path}?${query}` : path;
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  const text = await response.text();
  let body;
  try { body = JSON.parse(text); } catch (e) { body = { message: text }; }
  if (!response.ok) {
    const error = new Error(body.message || `${response.status} ${response.statusText}`);
    error.status = response.status;
    throw error;
  }
  if (body.asOf && state.asOf === null) updatePosition(body.asOf.inputOffset);
  return body;
}

function updatePosition(offset) {
  if (typeof offset !== "number" || offset < state.position) return;
  state.position = offset;
  const range = document.getElementById("asof-range");
  range.max = String(Math.max(0, offset));
  if (state.asOf === null) range.value = range.max;
}

function setStatus(text, kind) {
  const node = document.getElementById("status");
  node.textContent = text;
  node.className = `status ${kind || ""}`;
}

// -- views -----------------------------------------------------------------------------------
function pager(view, total, offset, limit, rerender) {
  const last = Math.max(0, Math.ceil(total / limit) - 1);
  const page = Math.floor(offset / limit);
  const go = (p) => { state.pages[view] = { ...(state.pages[view] || {}), offset: Math.max(0, Math.min(last, p)) * limit }; rerender(); };
  return el("div", { class: "pager" },
    el("button", { type: "button", disabled: page <= 0, onclick: () => go(page - 1) }, "‹ previous"),
    el("span", { text: total ? `${offset + 1}–${Math.min(total, offset + limit)} of ${total}` : "0 of 0" }),
    el("button", { type: "button", disabled: page >= last, onclick: () => go(page + 1) }, "next ›"));
}

function filterBox(view, placeholder, rerender) {
  const current = (state.pages[view] || {}).filter || "";
  const input = el("input", { type: "search", placeholder, value: current, "aria-label": placeholder });
  input.addEventListener("input", () => {
    state.pages[view] = { offset: 0, filter: input.value };
    rerender(true);
  });
  return input;
}

function cohortTree(cohorts, clusterQueues) {
  const byName = new Map(cohorts.map((c) => [c.name, c]));
  const cqs = new Map(clusterQueues.map((c) => [c.name, c]));
  const roots = cohorts.filter((c) => !c.parent || !byName.has(c.parent));
  const node = (cohort, depth) => el("details", { class: "cohort", open: depth < 1 || null },
    el("summary", {}, el("strong", { text: `Cohort ${cohort.name}` }),
      el("span", { class: "muted", text: ` ${cohort.clusterQueues.length} ClusterQueues, ${cohort.cohorts.length} cohorts` })),
    resourceRows(cohort.resources.map((r) => ({
      flavor: r.flavor, resource: r.resource, nominal: r.nominalQuota, reservation: r.reservation,
      borrowed: { value: 0, text: "0" },
      note: r.borrowed.value ? `${r.borrowed.text} borrowed between members` : "",
    }))),
    cohort.cohorts.map((child) => byName.has(child) ? node(byName.get(child), depth + 1) : null),
    el("ul", { class: "members" }, cohort.clusterQueues.slice(0, 50).map((name) => {
      const cq = cqs.get(name);
      return el("li", {}, cqLink(name), " ", cq ? badge(cq.status) : null,
        cq ? el("span", { class: "muted", text: ` ${cq.pending} pending, ${cq.admitted} admitted` }) : null);
    }), cohort.clusterQueues.length > 50 ? el("li", { class: "muted", text: `… and ${cohort.clusterQueues.length - 50} more (ClusterQueues tab)` }) : null));
  return el("section", {}, el("h2", { text: "Cohorts" }),
    roots.length ? roots.map((c) => node(c, 0)) : el("p", { class: "muted", text: "No cohorts." }));
}

async function renderOverview(main) {
  const data = await api("/api/overview");
  const t = data.totals;
  show(main, 
    el("section", { class: "cards" },
      [["ClusterQueues", t.clusterQueues], ["LocalQueues", t.localQueues], ["Pending", t.pending],
        ["Admitted", t.admitted], ["Holding quota", t.reserving]].map(([label, value]) =>
        el("div", { class: "card" }, el("div", { class: "value", text: String(value) }), el("div", { class: "label", text: label })))),
    cohortTree(data.cohorts, data.clusterQueues),
    el("section", {}, el("h2", { text: "ClusterQueues" }), clusterQueueTable(data.clusterQueues.slice(0, 20)),
      data.clusterQueues.length > 20 ? el("p", {}, el("a", { href: "#/clusterqueues", text: `All ${data.clusterQueues.length} ClusterQueues →` })) : null));
}

function clusterQueueTable(rows) {
  return table([
    { title: "Name", cell: (r) => cqLink(r.name) },
    { title: "Cohort", cell: (r) => r.cohort || "" },
    { title: "Status", cell: (r) => el("span", { title: r.message }, badge(r.status)) },
    { title: "Pending", cell: (r) => r.pending, class: "num" },
    { title: "Admitted", cell: (r) => r.admitted, class: "num" },
    { title: "Usage (nominal · borrowed · lent)", cell: (r) => resourceRows(r.resources) },
  ], rows, "No ClusterQueues.");
}

async function renderClusterQueues(main, keepFocus) {
  const data = await api("/api/overview");
  const view = "clusterqueues";
  const page = state.pages[view] || { offset: 0, filter: "" };
  const rows = data.clusterQueues.filter((c) => !page.filter || c.name.includes(page.filter) || (c.cohort || "").includes(page.filter));
  const offset = Math.min(page.offset || 0, Math.max(0, rows.length - 1));
  const rerender = (focus) => renderClusterQueues(main, focus);
  const filter = filterBox(view, "filter by name or cohort", rerender);
  show(main, el("h2", { text: "ClusterQueues" }), filter,
    clusterQueueTable(rows.slice(offset, offset + PAGE)), pager(view, rows.length, offset, PAGE, rerender));
  if (keepFocus) { filter.focus(); filter.setSelectionRange(filter.value.length, filter.value.length); }
}

async function renderLocalQueues(main, keepFocus) {
  const data = await api("/api/overview");
  const view = "localqueues";
  const page = state.pages[view] || { offset: 0, filter: "" };
  const rows = data.localQueues.filter((q) => !page.filter || `${q.namespace}/${q.name}`.includes(page.filter) || (q.clusterQueue || "").includes(page.filter));
  const offset = Math.min(page.offset || 0, Math.max(0, rows.length - 1));
  const rerender = (focus) => renderLocalQueues(main, focus);
  const filter = filterBox(view, "filter by namespace/name or ClusterQueue", rerender);
  show(main, el("h2", { text: "LocalQueues" }), filter, table([
    { title: "Namespace", cell: (r) => r.namespace },
    { title: "Name", cell: (r) => r.name },
    { title: "ClusterQueue", cell: (r) => cqLink(r.clusterQueue) },
    { title: "Status", cell: (r) => el("span", { title: r.reason || "" }, badge(r.status)) },
    { title: "Pending", cell: (r) => r.pending, class: "num" },
    { title: "Admitted", cell: (r) => r.admitted, class: "num" },
  ], rows.slice(offset, offset + PAGE), "No LocalQueues."), pager(view, rows.length, offset, PAGE, rerender));
  if (keepFocus) { filter.focus(); }
}

async function renderWorkloads(main, kind, params) {
  const view = kind;
  const page = state.pages[view] || { offset: 0 };
  const query = { state: kind === "admitted" ? "admitted" : "pending", offset: String(page.offset || 0), limit: String(PAGE) };
  if (params.get("clusterQueue")) query.clusterQueue = params.get("clusterQueue");
  const data = await api("/api/workloads", query);
  const rerender = () => renderWorkloads(main, kind, params);
  const columns = [
    { title: kind === "admitted" ? "" : "Position", cell: (r) => r.position ?? "", class: "num" },
    { title: "Workload", cell: (r) => workloadLink(r.namespace, r.name) },
    { title: "LocalQueue", cell: (r) => r.localQueue },
    { title: "ClusterQueue", cell: (r) => cqLink(r.clusterQueue) },
    { title: "Priority", cell: (r) => r.priority, class: "num" },
    { title: "Created", cell: (r) => r.created },
  ];
  if (kind === "admitted") {
    columns.splice(0, 1, { title: "State", cell: (r) => badge(r.state) });
    columns.push({ title: "Usage", cell: (r) => r.usage || "" });
  } else {
    columns.push({ title: "Reason", cell: (r) => el("span", { title: r.message || "" }, r.reason || "") });
    columns.push({ title: "Message", cell: (r) => r.message || "", class: "message" });
  }
  const title = `${kind === "admitted" ? "Workloads holding quota" : "Pending workloads"}` +
    (data.clusterQueue ? ` in ${data.clusterQueue}` : "");
  show(main, el("h2", { text: title }),
    data.clusterQueue ? el("p", {}, el("a", { href: `#/${kind}`, text: "all ClusterQueues" }),
      " · ", el("a", { href: `#/${kind === "admitted" ? "pending" : "admitted"}?clusterQueue=${encodeURIComponent(data.clusterQueue)}`,
        text: kind === "admitted" ? "pending here" : "holding quota here" })) : null,
    table(columns, data.items, kind === "admitted" ? "No workload holds quota." : "No pending workloads."),
    pager(view, data.total, data.offset, PAGE, rerender));
}

async function renderFlavors(main) {
  const data = await api("/api/overview");
  show(main, el("h2", { text: "ResourceFlavors" }), table([
    { title: "Name", cell: (r) => r.name },
    { title: "", cell: (r) => r.exists ? "" : badge("missing") },
    { title: "Node labels", cell: (r) => Object.entries(r.nodeLabels).map(([k, v]) => `${k}=${v}`).join(", ") },
    { title: "Reserved", cell: (r) => Object.entries(r.reservation).map(([res, v]) => `${res}=${v.text}`).join(", ") },
    { title: "Used by", cell: (r) => el("span", {}, r.clusterQueues.slice(0, 20).flatMap((n, i) => [i ? ", " : "", cqLink(n)]),
      r.clusterQueues.length > 20 ? ` … ${r.clusterQueues.length - 20} more` : "") },
  ], data.flavors, "No ResourceFlavors."));
}

function decisionRow(item) {
  const d = item.decision || {};
  const [ns, name] = (d.workload || "").split("/");
  const subject = d.workload ? workloadLink(ns, name) :
    [d.kind, d.namespace ? `${d.namespace}/${d.name}` : d.name].filter(Boolean).join(" ");
  const detail = d.clusterQueue || d.reason || d.action || "";
  return el("tr", { class: `decision ${d.type || ""}` },
    el("td", { class: "num", text: String(item.offset) }),
    el("td", {}, badge(d.type || "?")),
    el("td", {}, subject),
    el("td", { text: detail }),
    el("td", { class: "message", text: d.message || (d.preemptor ? `by ${d.preemptor}` : "") }),
    el("td", { class: "num", text: d.cause ? `${d.cause.offset}.${d.cause.index}` : "" }));
}

function decisionsTable(items) {
  return el("table", { id: "decisions" },
    el("thead", {}, el("tr", {}, ["Offset", "Decision", "About", "", "Message", "Cause"].map((t) => el("th", { text: t })))),
    el("tbody", {}, items.map(decisionRow)));
}

async function renderDecisions(main) {
  if (state.asOf !== null) {
    show(main, el("h2", { text: "Decisions" }), el("p", { class: "muted", text: "The live decision stream shows the present: press Live." }));
    return;
  }
  show(main, el("h2", { text: "Decisions, live" }), decisionsTable(state.decisions.slice(0, 200)));
}

async function renderReports(main) {
  const data = await api("/api/reports");
  show(main, el("h2", { text: "What-if reports" }),
    data.reports.length ? el("ul", {}, data.reports.map((name) => el("li", {}, el("a", { href: `/reports/${encodeURIComponent(name)}`, target: "_blank", text: name }))))
      : el("p", { class: "muted", text: "No reports: start `quotaflow serve --reports DIR` with the HTML files of `quotaflow whatif --html`." }));
}

async function renderWorkload(main, ns, name) {
  const params = {};
  if (state.asOf !== null) params.asOf = String(state.asOf);
  const response = await fetch(`/api/workload/${encodeURIComponent(ns)}/${encodeURIComponent(name)}?${new URLSearchParams(params)}`);
  const data = await response.json();
  if (!response.ok) {
    show(main, el("h2", { text: `${ns}/${name}` }), el("p", { class: "error", text: data.message }));
    return;
  }
  const s = data.state || { phase: "Deleted" };
  const facts = [["Phase", badge(s.phase)], ["LocalQueue", s.localQueue], ["ClusterQueue", cqLink(s.clusterQueue)],
    ["Priority", s.priority], ["Created", s.creationTimestamp], ["Position", s.positionInClusterQueue],
    ["Reason", s.reason], ["Message", s.message],
    ["Usage", (s.usage || []).map((u) => `${u.resource}=${u.amount} (${u.flavor})`).join(", ")]]
    .filter(([, v]) => v !== undefined && v !== null && v !== "");
  const why = data.why ? el("section", {}, el("h3", { text: "Why it waits" }),
    el("p", { text: data.why.message || "" }),
    el("details", {}, el("summary", { text: "flavors tried, what is short, who holds it (explain)" }),
      el("pre", { text: JSON.stringify(data.why, null, 2) }))) : null;
  const history = table([
    { title: "Decision", cell: (h) => badge((h.decision || {}).type || "?") },
    { title: "Offset", cell: (h) => h.decisionOffset, class: "num" },
    { title: "Cause", cell: (h) => h.cause ? `${h.cause.offset}.${h.cause.index}` : "", class: "num" },
    { title: "Event", cell: (h) => (h.event || {}).type || "" },
    { title: "Event time", cell: (h) => h.eventTime || (h.event || {}).time || "" },
    { title: "Reason", cell: (h) => (h.decision || {}).reason || (h.decision || {}).clusterQueue || "" },
    { title: "Message", cell: (h) => (h.decision || {}).message || "", class: "message" },
  ], data.history || [], "No decisions yet.");
  show(main, el("h2", { text: `Workload ${ns}/${name}` }),
    el("dl", { class: "facts" }, facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", {}, v instanceof Node ? v : String(v))])),
    why, el("section", {}, el("h3", { text: "History" }), history),
    el("section", {}, el("h3", { text: "Objects" }), (data.yaml || []).map((o) =>
      el("details", {}, el("summary", { text: `${o.event} (input offset ${o.offset}) — View YAML` }), el("pre", { class: "yaml", text: o.yaml })))));
}

// -- routing and refresh ---------------------------------------------------------------------
function parseRoute() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { view: parts[0] || "overview", parts, params: new URLSearchParams(query || "") };
}

async function render(keepFocus) {
  const route = parseRoute();
  state.route = route;
  document.querySelectorAll("#nav a").forEach((a) => a.classList.toggle("active", a.dataset.view === route.view));
  const main = document.getElementById("main");
  try {
    switch (route.view) {
      case "clusterqueues": await renderClusterQueues(main, keepFocus); break;
      case "localqueues": await renderLocalQueues(main, keepFocus); break;
      case "pending": await renderWorkloads(main, "pending", route.params); break;
      case "admitted": await renderWorkloads(main, "admitted", route.params); break;
      case "flavors": await renderFlavors(main); break;
      case "decisions": await renderDecisions(main); break;
      case "reports": await renderReports(main); break;
      case "workload": await renderWorkload(main, route.parts[1], route.parts.slice(2).join("/")); break;
      default: await renderOverview(main);
    }
    main.dataset.view = route.view;
    main.dataset.asOf = state.asOf === null ? "live" : String(state.asOf);
  } catch (error) {
    show(main, el("p", { class: "error", text: `Could not load this view: ${error.message}` }));
  }
}

function scheduleRefresh() {
  if (state.asOf !== null || state.refreshTimer !== null) return;
  // At most one refresh a second, however fast decisions arrive.
  state.refreshTimer = setTimeout(() => { state.refreshTimer = null; render(false); }, 1000);
}

function connect() {
  const source = new EventSource("/api/stream");
  source.addEventListener("open", () => setStatus("live", "live"));
  source.addEventListener("decision", (event) => {
    const item = JSON.parse(event.data);
    if (state.decisions.length && state.decisions[0].offset >= item.offset) return;  // already listed
    state.decisions.unshift(item);
    if (state.decisions.length > 500) state.decisions.length = 500;
    if (state.route && state.route.view === "decisions" && state.asOf === null) {
      const body = document.querySelector("#decisions tbody");
      if (body) body.prepend(decisionRow(item));
    }
  });
  source.addEventListener("position", (event) => {
    const p = JSON.parse(event.data);
    updatePosition(p.inputOffset);
    if (state.route && state.route.view !== "decisions") scheduleRefresh();
  });
  source.addEventListener("resync", () => scheduleRefresh());
  source.addEventListener("error", () => setStatus("reconnecting…", "down"));
}

function setAsOf(value) {
  state.asOf = value;
  document.getElementById("asof").value = value === null ? "" : String(value);
  const range = document.getElementById("asof-range");
  range.value = value === null ? range.max : String(value);
  setStatus(value === null ? "live" : `as of input offset ${value}`, value === null ? "live" : "past");
  render(false);
}

async function start() {
  document.getElementById("timetravel").addEventListener("submit", (e) => {
    e.preventDefault();
    const raw = document.getElementById("asof").value.trim();
    setAsOf(raw === "" ? null : Math.max(0, parseInt(raw, 10)));
  });
  document.getElementById("asof-range").addEventListener("change", (e) => {
    const value = parseInt(e.target.value, 10);
    setAsOf(value >= state.position ? null : value);
  });
  document.getElementById("live").addEventListener("click", () => setAsOf(null));
  window.addEventListener("hashchange", () => render(false));
  try {
    const recent = await api("/api/decisions", { limit: "200" });
    state.decisions = recent.items.slice().reverse();
  } catch (error) {
    setStatus(`no decisions: ${error.message}`, "down");
  }
  connect();
  await render(false);
}

start();
