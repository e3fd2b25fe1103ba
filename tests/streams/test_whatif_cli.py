"""`quotaflow whatif` from the command line: the terminal report, --json, a sweep, and bad input
refused before any replay with one clear message."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import msgspec
import pytest
import yaml
from test_whatif_scenarios import one_queue_log
from typer.testing import CliRunner
from whatif_helpers import cq

from devtools.generate import write_jsonl
from streams.cli.main import app


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "recorded.jsonl"
    write_jsonl(path, [msgspec.json.encode(e) for e in one_queue_log()])
    return path


def invoke(*args: str):  # noqa: ANN201
    return CliRunner().invoke(app, ["whatif", *args])


def test_the_terminal_report_compares_the_worlds(log_file: Path) -> None:
    result = invoke(str(log_file), "--set", "clusterqueue/team-a.nominal=cpu:x2")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "What if: clusterqueue/team-a.nominal=cpu:x2 (from start)" in out
    assert "1.5m → 0.0s" in out  # team-a's longest wait, 90 s, is gone
    assert "CLUSTERQUEUE" in out and "LOCALQUEUE" in out and "COHORT" in out and "PRIORITY" in out
    assert "team-a/w2" in out  # the workload whose admission moved


def test_json_holds_both_worlds_per_group(log_file: Path) -> None:
    result = invoke(str(log_file), "--set", "clusterqueue/team-a.nominal=cpu:x2", "--json", "--bins", "5")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rec = report["recorded"]["groups"]["ClusterQueue"]["team-a"]
    new = report["whatIf"][0]["groups"]["ClusterQueue"]["team-a"]
    assert rec["timeToAdmission"]["max"] == 90 and new["timeToAdmission"]["max"] == 0
    assert len(new["usage"]["cpu"]["series"]) == 5
    assert report["whatIf"][0]["moved"]["counts"] == {"earlier": 1, "later": 0, "never": 0, "newlyAdmitted": 0}


def test_a_sweep_of_change_files_prints_one_summary_table(log_file: Path, tmp_path: Path) -> None:
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text(yaml.safe_dump(cq("team-a", 8)))
    same = tmp_path / "same.yaml"
    same.write_text(yaml.safe_dump(cq("team-a", 4)))
    result = invoke(str(log_file), "-f", str(same), "-f", str(bigger))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any(line.startswith("Sweep") for line in lines)
    rows = [line for line in lines if line.startswith(("recorded ", "same ", "bigger "))]
    assert [r.split()[0] for r in rows[:3]] == ["recorded", "same", "bigger"]
    assert "1.5m → 0.0s" in rows[2] and "→" not in rows[1]


def test_the_changed_worlds_log_can_be_written_and_replayed(log_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "whatif.jsonl"
    result = invoke(str(log_file), "--set", "clusterqueue/team-a.nominal=cpu:x2", "--write-events", str(out), "--json")
    assert result.exit_code == 0, result.output
    replayed = CliRunner().invoke(app, ["replay", str(out)])
    decisions = [json.loads(line) for line in replayed.stdout.splitlines()]
    admitted = [d["workload"] for d in decisions if d["type"] == "Admitted"]
    assert admitted == ["team-a/w1", "team-a/w2"]
    assert decisions[-1]["type"] == "Finished"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "clusterqueue/team-a.nominal=cpu:-4"], "quota"),  # a negative quota: Kueue's validation
        (["--set", "clusterqueue/nobody.nominal=cpu:x2"], "cannot change ClusterQueue/nobody: the log never applies it"),
        (["--set", "clusterqueue/team-a.nominal=gpu:x2"], "has no gpu quota"),
        (["--set", "widget/a.size=3"], "unknown kind 'widget'"),
        (["--set", "clusterqueue/team-a.nominal"], "expected KIND/NAME.FIELD=VALUE"),
        (["--set", "clusterqueue/team-a.nominal=cpu:lots"], "neither a quantity nor xFACTOR"),
        (["--at", "yesterday"], "expected an input offset"),
        (["--set", "clusterqueue/team-a.nominal=cpu:x2", "--at", "2030-01-01T00:00:00Z"], "after the log's last event"),
        (["--set", "clusterqueue/team-a.nominal=cpu:x2", "--at", "7"], "after the log's last event (offset 6"),
    ],
)
def test_an_invalid_change_is_refused_before_the_replay(log_file: Path, args: list[str], message: str) -> None:
    with mock.patch("streams.whatif.run.simulate", side_effect=AssertionError("replayed")), \
            mock.patch("streams.whatif.run.record", side_effect=AssertionError("replayed")):
        result = invoke(str(log_file), *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stderr.startswith("quotaflow whatif: ") and len(result.stderr.strip().splitlines()) == 1


def test_an_invalid_object_in_a_change_file_is_refused_with_kueues_reason(log_file: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    obj = cq("team-a", 4)
    obj["spec"]["queueingStrategy"] = "Random"
    bad.write_text(yaml.safe_dump(obj))
    result = invoke(str(log_file), "-f", str(bad))
    assert result.exit_code == 2
    assert "InvalidObject" in result.stderr and "queueingStrategy" in result.stderr
    workload = tmp_path / "workload.yaml"
    workload.write_text(yaml.safe_dump({"type": "WorkloadSubmitted", "workload": {}}))
    result = invoke(str(log_file), "-f", str(workload))
    assert result.exit_code == 2 and "configuration only" in result.stderr
    result = invoke(str(log_file), "-f", str(tmp_path / "missing.yaml"))
    assert result.exit_code == 2 and "cannot read it" in result.stderr


def test_a_log_that_cannot_be_read_is_one_clear_error(tmp_path: Path) -> None:
    result = invoke(str(tmp_path / "nope.jsonl"))
    assert result.exit_code == 1 and result.stderr == f"quotaflow whatif: cannot read {tmp_path / 'nope.jsonl'}: no such file\n"
    result = invoke("--broker", f"sqlite:///{tmp_path / 'missing.db'}")
    assert result.exit_code == 1 and "no log at" in result.stderr and len(result.stderr.splitlines()) == 1
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not a database" * 100)
    result = invoke("--broker", f"sqlite:///{corrupt}")
    assert result.exit_code == 1 and "cannot read the log" in result.stderr and len(result.stderr.splitlines()) == 1
    not_utf8 = tmp_path / "bad.yaml"
    not_utf8.write_bytes(b"\xff\xfe\x00")
    result = invoke(str(not_utf8))
    assert result.exit_code == 1 and "not UTF-8" in result.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    result = invoke(str(empty))
    assert result.exit_code == 2 and "holds no event" in result.stderr


def test_the_html_report_is_self_contained_with_its_plots(log_file: Path, tmp_path: Path) -> None:
    from html.parser import HTMLParser

    class Scripts(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[dict[str, str | None]] = []
            self.divs: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "script":
                self.tags.append(dict(attrs))
            elif tag == "div" and dict(attrs).get("id", "").startswith("plot-"):
                self.divs.append(dict(attrs)["id"])

    out = tmp_path / "report.html"
    result = invoke(str(log_file), "--set", "clusterqueue/team-a.nominal=cpu:x1,x2", "--html", str(out), "--json")
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    parsed = Scripts()
    parsed.feed(page)
    assert parsed.tags and all("src" not in t for t in parsed.tags)  # plotly's JavaScript is inline
    assert "Plotly.newPlot" in page
    # Two wait histograms (all workloads, team-a) and one usage chart (team-a, cpu)...
    assert parsed.divs == ["plot-0", "plot-1", "plot-2"]
    # ...each with the three worlds.
    assert page.count('"name":"recorded"') == 3
    assert page.count('team-a.nominal=cpu:x2"') == 3


def test_a_change_the_engine_rejects_in_context_stops_the_run_with_its_reason(log_file: Path, tmp_path: Path) -> None:
    # Each Cohort is valid alone; together they make a cycle, which the engine refuses where the
    # second is applied: known only in the replay, which stops with the engine's reason.
    cyc = tmp_path / "cycle.yaml"
    cyc.write_text(yaml.safe_dump_all([
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort", "metadata": {"name": "x"}, "spec": {"parentName": "y"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort", "metadata": {"name": "y"}, "spec": {"parentName": "x"}},
    ]))
    result = invoke(str(log_file), "-f", str(cyc))
    assert result.exit_code == 2, result.output
    assert "was rejected by the engine" in result.stderr and "cycle" in result.stderr.lower()


def test_an_events_files_decisions_stand_for_its_replay(tmp_path: Path) -> None:
    from devtools.timed_stream import recorded_log

    events = tmp_path / "recorded.jsonl"
    write_jsonl(events, [msgspec.json.encode(e) for e in recorded_log(40, seed=3)])
    replayed = CliRunner().invoke(app, ["replay", str(events)])
    decisions = tmp_path / "decisions.jsonl"
    decisions.write_text(replayed.stdout)
    args = [str(events), "--set", "clusterqueue/team-a.nominal=cpu:x2", "--json"]
    plain = invoke(*args)
    assert plain.exit_code == 0, plain.output
    # From the decisions the recorded world is read; the changed world is replayed as ever.
    from streams.whatif import run as run_module

    calls: list[bool] = []
    real = run_module.record

    def spy(records, **kw):  # noqa: ANN001, ANN003, ANN202
        calls.append(kw.get("decisions") is not None)
        return real(records, **kw)

    with mock.patch("streams.whatif.run.record", spy):
        read = invoke(*args, "--decisions", str(decisions))
    assert read.exit_code == 0, read.output
    assert calls == [True]
    assert json.loads(read.stdout) == json.loads(plain.stdout)
    # Decisions that are not this file's: one line, nothing simulated.
    partial = tmp_path / "partial.jsonl"
    partial.write_text("".join(replayed.stdout.splitlines(keepends=True)[:-3]))
    result = invoke(*args, "--decisions", str(partial))
    assert result.exit_code == 1 and "does not decide the whole events file" in result.stderr
    other = tmp_path / "other.jsonl"
    other.write_text('{"type":"Finished","workload":"a/b","cause":{"offset":99999,"index":0}}\n')
    result = invoke(*args, "--decisions", str(other))
    assert result.exit_code == 1 and "these are not its decisions" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    result = invoke("--decisions", str(decisions), "--set", "clusterqueue/team-a.nominal=cpu:x2")
    assert result.exit_code == 2 and "--decisions goes with an events file" in result.stderr
