"""`quotaflow submit -f` with Kueue's job kinds, and commands naming a workload by its job."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import yaml
from cli_harness import Live

from streams.importers.kueue_jobs import JobsRefused, Naming

QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}


def job(name: str, cpu: str = "1", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "labels": dict(QUEUE), **meta},
        "spec": {"parallelism": 1, "template": {"spec": {"containers": [
            {"name": "c", "image": "busybox", "command": ["sleep", "1"], "resources": {"requests": {"cpu": cpu}}}],
            "restartPolicy": "Never"}}},
    }


def test_submit_converts_jobs_and_publishes_their_workloads(logs: Live) -> None:
    pytorch = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
               "metadata": {"name": "pt", "namespace": "team-a", "labels": dict(QUEUE)},
               "spec": {"pytorchReplicaSpecs": {"Master": {"template": job("x")["spec"]["template"]},
                                                "Worker": {"replicas": 2, "template": job("x")["spec"]["template"]}}}}
    (logs.tmp / "jobs").mkdir()
    logs.write("jobs/a.yaml", job("train"), pytorch)
    logs.write("jobs/sub/b.yaml", {**job("gen"), "metadata": {"generateName": "gen-", "namespace": "team-a", "labels": dict(QUEUE)}})
    done = logs.cli("submit", "-f", str(logs.tmp / "jobs"), "--no-wait")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("workload/team-a/job-train-") and lines[0].endswith("submitted (job/team-a/train) (offset 3)")
    assert "(pytorchjob/team-a/pt)" in lines[1]
    assert "(job/team-a/gen-" in lines[2]
    submitted = [e["workload"] for e in logs.inputs() if e["type"] == "WorkloadSubmitted"]
    assert [[(p["name"], p["count"]) for p in w["spec"]["podSets"]] for w in submitted] == [
        [("main", 1)], [("master", 1), ("worker", 2)], [("main", 1)]]
    assert submitted[0]["metadata"]["ownerReferences"][0]["name"] == "train"


def test_bad_input_is_refused_before_anything_is_published(logs: Live) -> None:
    before = len(logs.inputs())
    no_queue = job("unmanaged")
    del no_queue["metadata"]["labels"]
    unknown = {"apiVersion": "example.com/v1", "kind": "Frobnicator", "metadata": {"name": "f"}}
    path = logs.write("bad.yaml", job("fine"), no_queue, unknown)
    done = logs.cli("submit", "-f", str(path), "--no-wait")
    assert done.returncode == 2
    errors = done.stderr.splitlines()
    assert errors[0] == (
        f"quotaflow submit: {path}#2: job/team-a/unmanaged: metadata.labels[kueue.x-k8s.io/queue-name]: "
        "Required value: without a queue name Kueue does not manage this job (it would run at once, outside any "
        "quota; Kueue's manageJobsWithoutQueueName is off by default and defaulting to a LocalQueue named "
        '"default" is not modelled)'
    )
    assert errors[1].startswith(f"quotaflow submit: {path}#3: frobnicator/default/f: kind \"Frobnicator\"")
    assert errors[2] == "quotaflow submit: nothing was submitted: 2 of 3 objects refused"
    malformed = logs.tmp / "malformed.yaml"
    malformed.write_text("apiVersion: batch/v1\nkind: Job\nmetadata: {name: [unclosed\n")
    broken = logs.cli("submit", "-f", str(malformed), "--no-wait")
    assert broken.returncode == 2 and "is not valid YAML" in broken.stderr
    assert len(logs.inputs()) == before


def test_dry_run_prints_the_workloads_and_publishes_nothing(logs: Live) -> None:
    before = len(logs.inputs())
    done = logs.cli("submit", "-f", str(logs.write("j.yaml", job("dry"))), "--dry-run")
    assert done.returncode == 0, done.stderr
    [wl] = list(yaml.safe_load_all(done.stdout))
    assert wl["kind"] == "Workload" and wl["metadata"]["ownerReferences"][0]["name"] == "dry"
    assert len(logs.inputs()) == before


def test_a_job_names_its_workload_in_history_explain_and_finish(live: Live) -> None:
    assert live.cli("submit", "-f", str(live.write("j.yaml", job("sample-job"))), "--wait", "--timeout", "30").returncode == 0
    history = live.cli("history", "job/team-a/sample-job", "--json")
    assert history.returncode == 0, history.stderr
    key = json.loads(history.stdout)["workload"]
    assert key.startswith("team-a/job-sample-job-")
    assert json.loads(history.stdout)["state"]["phase"] == "Admitted"
    explained = live.cli("explain", "job/sample-job", "--json")  # KIND/NAME takes the default namespace
    assert explained.returncode == 1 and "no workload in the input log is owned by Job default/sample-job" in explained.stderr
    finished = live.cli("finish", "job/sample-job", "-n", "team-a", "--wait", "--timeout", "30")
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.startswith(f"workload/{key} finished")
    assert live.cli("history", f"workload/{key}").returncode == 0


def test_the_typed_client_submits_jobs_or_refuses_them_all(logs: Live) -> None:
    from streams.client import Client

    async def go() -> tuple[list[int], str, list[str]]:
        async with Client(logs.url) as qf:
            qf.topics = logs.topics
            offsets = await qf.submit_jobs([job("c1"), job("c2")], naming=Naming(suffix=lambda: "bcdfg", now=lambda: 0.0))
            bad = job("c3")
            del bad["metadata"]["labels"]
            try:
                await qf.submit_jobs([job("c4"), bad])
                refusal = ""
            except JobsRefused as exc:
                refusal = str(exc)
            return offsets, refusal, await qf.workloads_owned_by("Job", "team-a", "c2")

    offsets, refusal, owned = asyncio.run(go())
    assert len(offsets) == 2 and offsets[1] == offsets[0] + 1
    assert "manifest 2: job/team-a/c3" in refusal and "Kueue does not manage" in refusal
    assert len(owned) == 1 and owned[0].startswith("job-c2-")
    names = [e["workload"]["metadata"]["name"] for e in logs.inputs() if e["type"] == "WorkloadSubmitted"]
    assert len(names) == 2  # nothing of the refused batch
