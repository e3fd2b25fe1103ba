"""Write commands against a live agent: what they print, what they append, their exit codes."""

from __future__ import annotations

import json

from cli_harness import Live, workload


def input_events(env: Live) -> list[dict]:
    watched = env.cli("watch", "--json", "--no-follow")  # decisions; inputs are read below
    assert watched.returncode == 0, watched.stderr
    return env.inputs()


def test_wait_prints_the_decision_of_an_accepted_submission(live: Live) -> None:
    done = live.cli("submit", "-f", str(live.write("wl.yaml", workload("job-1"))), "--wait", "--timeout", "30")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("workload/team-a/job-1 submitted (offset 3)")
    assert any("Admitted" in line and "team-a/job-1" in line and "@3.0" in line for line in lines[1:]), done.stdout


def test_wait_on_a_rejected_event_exits_1_with_the_reason(live: Live) -> None:
    done = live.cli("finish", "default/does-not-exist", "--wait", "--timeout", "30")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Rejected" in done.stdout and "default/does-not-exist" in done.stdout
    assert "rejected: UnknownWorkload" in done.stderr


def test_wait_without_an_agent_times_out_with_exit_3(logs: Live) -> None:
    done = logs.cli("finish", "team-a/x", "--wait", "--timeout", "1")
    assert done.returncode == 3
    assert "no agent decided offset 3 within 1 s; is `quotaflow agent` running?" in done.stderr
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "g"}}
    config = logs.cli("apply", "-f", str(logs.write("g.yaml", flavor)), "--wait", "--timeout", "1")
    assert config.returncode == 3
    assert "not known whether the agent accepted offset 4" in config.stderr


def test_no_wait_only_prints_the_offset(logs: Live) -> None:
    done = logs.cli("finish", "default/does-not-exist", "--no-wait")
    assert done.returncode == 0
    assert done.stdout == "workload/default/does-not-exist finished (offset 3)\n"


def test_namespace_slash_name_and_dash_n_name_the_same_workload(live: Live) -> None:
    assert live.cli("submit", "-f", str(live.write("wl.yaml", workload("a"), workload("b"))), "--no-wait").returncode == 0
    slash = live.cli("delete", "workload", "team-a/a", "--wait")
    assert slash.returncode == 0, slash.stderr
    assert slash.stdout.startswith("workload/team-a/a deleted")
    assert "Deleted" in slash.stdout
    dash_n = live.cli("delete", "wl", "b", "-n", "team-a", "--wait")
    assert dash_n.returncode == 0, dash_n.stderr
    assert dash_n.stdout.startswith("workload/team-a/b deleted")
    both = live.cli("finish", "team-a/b", "-n", "other", "--no-wait")
    assert both.returncode == 2 and "names namespace 'team-a' but -n says 'other'" in both.stderr
    events = input_events(live)
    assert {"type": "WorkloadDeleted", "namespace": "team-a", "name": "a"} in events
    assert {"type": "WorkloadDeleted", "namespace": "team-a", "name": "b"} in events


def test_release_and_check_append_their_events_and_show_the_decision(live: Live) -> None:
    released = live.cli("release", "team-a/nobody", "--wait")
    assert released.returncode == 1  # an unknown workload is rejected
    assert "Rejected" in released.stdout
    checked = live.cli("check", "team-a/nobody", "prov", "Ready", "--message", "ok", "--wait")
    assert checked.stdout.startswith("workload/team-a/nobody check prov Ready")
    events = input_events(live)
    assert {"type": "WorkloadReleased", "namespace": "team-a", "name": "nobody"} in events
    assert {
        "type": "AdmissionCheckStateChanged", "namespace": "team-a", "name": "nobody", "check": "prov", "state": "Ready", "message": "ok",
    } in events
    bad = live.cli("check", "team-a/nobody", "prov", "Maybe", "--no-wait")
    assert bad.returncode == 2


def test_ready_reports_pods_ready_or_lost_and_shows_the_decision(live: Live) -> None:
    done = live.cli("submit", "-f", str(live.write("wl.yaml", workload("runs"))), "--wait", "--timeout", "30")
    assert done.returncode == 0, done.stderr
    ready = live.cli("ready", "team-a/runs", "--wait")
    assert ready.returncode == 0, ready.stderr
    assert ready.stdout.startswith("workload/team-a/runs pods ready")
    assert "Applied" in ready.stdout
    lost = live.cli("ready", "runs", "-n", "team-a", "--lost", "--no-wait")
    assert lost.returncode == 0, lost.stderr
    nobody = live.cli("ready", "team-a/nobody", "--wait")
    assert nobody.returncode == 1 and "Rejected" in nobody.stdout
    events = input_events(live)
    assert {"type": "WorkloadPodsReady", "namespace": "team-a", "name": "runs"} in events
    assert {"type": "WorkloadPodsReady", "namespace": "team-a", "name": "runs", "ready": False} in events


def test_apply_a_directory_recursively_and_refuse_empty_input(live: Live) -> None:
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    live.write("dir/sub/one.yml", {**flavor, "metadata": {"name": "f1"}})
    (live.tmp / "dir" / "two.json").write_text(json.dumps({**flavor, "metadata": {"name": "f2"}}))
    (live.tmp / "dir" / "notes.txt").write_text("not an object")
    done = live.cli("apply", "-f", str(live.tmp / "dir"), "--no-wait")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["resourceflavor/f1 applied (offset 3)", "resourceflavor/f2 applied (offset 4)"]
    (live.tmp / "empty").mkdir()
    (live.tmp / "empty.yaml").write_text("")
    for path in (live.tmp / "empty", live.tmp / "empty.yaml"):
        refused = live.cli("apply", "-f", str(path))
        assert refused.returncode == 2
        assert f"no objects in {path}" in refused.stderr


def test_wait_on_configuration_is_honest_about_what_it_knows(live: Live) -> None:
    # The agent decides the queues' workload first: then it is known to be caught up.
    assert live.cli("finish", "team-a/nobody", "--wait").returncode == 1
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "g"}}
    done = live.cli("apply", "-f", str(live.write("g.yaml", flavor)), "--wait", "--timeout", "10")
    assert done.returncode == 0, done.stderr
    assert "Applied" in done.stdout and "ResourceFlavor g created" in done.stdout, done.stdout
    bad = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "bad"}, "spec": {"resourceGroups": "x"}}
    rejected = live.cli("apply", "-f", str(live.write("bad.yaml", bad)), "--wait", "--timeout", "20")
    assert rejected.returncode == 1, rejected.stdout + rejected.stderr
    assert "Rejected" in rejected.stdout


def test_version() -> None:
    import subprocess
    import sys
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "streams.cli.main", "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout == f"quotaflow {version('quotaflow')}\n"


def test_stop_and_resume_queues_and_workloads_and_set_priority(live: Live) -> None:
    stopped = live.cli("stop", "clusterqueue", "team-a-cq", "--keep-already-running", "--no-wait")
    assert stopped.returncode == 0, stopped.stderr
    drained = live.cli("stop", "lq", "team-a/team-a", "--no-wait")
    assert drained.returncode == 0, drained.stderr
    resumed = live.cli("resume", "cq", "team-a-cq", "--no-wait")
    assert resumed.returncode == 0, resumed.stderr
    assert live.cli("submit", "-f", str(live.write("wl.yaml", workload("job-9"))), "--wait").returncode == 0
    off = live.cli("stop", "workload", "team-a/job-9", "--wait")
    assert off.returncode == 0, off.stdout + off.stderr
    assert off.stdout.startswith("workload/team-a/job-9 active=false")
    assert "team-a/job-9" in off.stdout.splitlines()[1]  # the agent's decision about it
    prio = live.cli("set", "priority", "job-9", "7", "-n", "team-a", "--no-wait")
    assert prio.returncode == 0, prio.stderr
    missing = live.cli("stop", "workload", "team-a/never", "--no-wait")
    assert missing.returncode == 1 and "was never applied or submitted" in missing.stderr

    events = input_events(live)
    policies = [e["object"].get("spec", {}).get("stopPolicy") for e in events if e.get("type") == "ConfigApplied"]
    assert policies[-3:] == ["Hold", "HoldAndDrain", "None"]
    lq = [e["object"] for e in events if e.get("type") == "ConfigApplied" and e["object"]["kind"] == "LocalQueue"][-1]
    assert lq["metadata"] == {"name": "team-a", "namespace": "team-a"} and lq["spec"]["clusterQueue"] == "team-a-cq"
    updates = [e["workload"]["spec"] for e in events if e.get("type") == "WorkloadUpdated"]
    assert [u.get("active") for u in updates] == [False, False]
    assert updates[-1]["priority"] == 7 and updates[-1]["queueName"] == "team-a"


def test_piped_output_is_never_cut_even_with_80_columns(live: Live) -> None:
    long = "a-workload-name-long-enough-to-overflow-an-eighty-column-terminal-line-on-its-own"
    assert live.cli("submit", "-f", str(live.write("wl.yaml", workload(long, cpu="100m"))), "--wait").returncode == 0
    for env in ({}, {"COLUMNS": "80"}):
        watched = live.cli("watch", "--no-follow", env=env)
        assert watched.returncode == 0, watched.stderr
        admitted = [line for line in watched.stdout.splitlines() if "Admitted" in line and long in line]
        assert len(admitted) == 1, watched.stdout
        assert f"team-a/{long}" in admitted[0] and "cpu=100m" in admitted[0]
        explained = live.cli("explain", f"team-a/{long}", env=env)
        assert explained.returncode == 0, explained.stderr
        assert f"Workload team-a/{long}" in explained.stdout
        status = live.cli("status", env=env)
        assert status.returncode == 0, status.stderr
        assert "1Gi" in status.stdout and "1073741824" not in status.stdout


def test_pending_says_when_it_shows_only_part_of_the_queue(live: Live) -> None:
    big = [workload(f"big-{i}", cpu="3") for i in range(4)]  # one fits in 4 cpus, three wait
    assert live.cli("submit", "-f", str(live.write("big.yaml", *big)), "--wait").returncode == 0
    part = live.cli("pending", "team-a-cq", "--limit", "2")
    assert part.returncode == 0, part.stderr
    assert "showing positions 0..1 of 3 pending workloads; --offset 2 or --all for the rest" in part.stderr
    assert part.stdout.count("big-") == 2
    every = live.cli("pending", "team-a-cq", "--all")
    assert every.returncode == 0 and every.stderr == ""
    assert every.stdout.count("big-") == 3


def test_on_a_terminal_workload_commands_wait_and_configuration_commands_do_not(logs: Live) -> None:
    import os
    import pty
    import subprocess
    import sys

    from agent_harness import agent_env

    def on_a_terminal(*args: str) -> tuple[int, str]:
        leader, follower = pty.openpty()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "streams.cli.main", *args, "--broker", logs.url],
                stdout=follower, stderr=subprocess.PIPE, text=True, timeout=60, check=False, env=agent_env(logs.topics),
            )
        finally:
            os.close(follower)
            os.close(leader)
        return done.returncode, done.stderr

    code, err = on_a_terminal("finish", "team-a/x", "--timeout", "1")  # no agent runs
    assert code == 3 and "no agent decided offset 3 within 1 s" in err
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "g"}}
    code, err = on_a_terminal("apply", "-f", str(logs.write("g.yaml", flavor)), "--timeout", "1")
    assert code == 0 and err == ""


def test_the_help_of_wait_gives_each_commands_own_default() -> None:
    import typer.main

    from streams.cli.main import app

    def wait_help(*path: str) -> str:
        command = typer.main.get_command(app)
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        return next(p.help for p in command.params if p.name == "wait")

    on_a_terminal = "(default: wait when stdout is a terminal)"
    for workload_command in (("submit",), ("finish",), ("stop", "workload"), ("resume", "workload"), ("set", "priority")):
        assert wait_help(*workload_command).endswith(on_a_terminal), workload_command
    for configuration_command in (("apply",), ("stop", "clusterqueue"), ("resume", "localqueue")):
        text = wait_help(*configuration_command)
        assert "a configuration change waits only when asked" in text and on_a_terminal not in text, configuration_command
    assert "for a workload, wait when stdout is a terminal; for a configuration object, only when asked" in wait_help("delete")
