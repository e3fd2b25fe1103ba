"""devtools/kueue_examples.py: one table row per example file, with submit's verdict."""

from __future__ import annotations

from pathlib import Path

import yaml

from devtools.kueue_examples import main

JOB = {"apiVersion": "batch/v1", "kind": "Job",
       "metadata": {"generateName": "sample-job-", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
       "spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}}
QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "user-queue"}, "spec": {"clusterQueue": "cq"}}


def test_table_says_accepted_refused_or_no_job_for_each_file(tmp_path: Path, capsys) -> None:
    examples = tmp_path / "site" / "static" / "examples"
    (examples / "jobs").mkdir(parents=True)
    (examples / "jobs" / "job.yaml").write_text(yaml.safe_dump(JOB))
    unmanaged = {**JOB, "metadata": {"name": "plain"}}
    (examples / "jobs" / "plain.yaml").write_text(yaml.safe_dump(unmanaged))
    (examples / "setup.yaml").write_text(yaml.safe_dump(QUEUE))
    (examples / "mixed.yaml").write_text(yaml.safe_dump_all([QUEUE, JOB]))
    (examples / "notes.md").write_text("not a manifest")
    assert main(["--kueue-repo", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[:2] == ["| File | Kinds | `submit -f` | Pod sets, or why not |", "|---|---|---|---|"]
    assert rows[2:] == [
        "| jobs/job.yaml | Job | accepted | Job → main×2 |",
        rows[3],
        "| mixed.yaml | LocalQueue, Job | refused | LocalQueue: configuration, for `quotaflow apply -f`; the rest alone is accepted: Job → main×2 |",
        "| setup.yaml | LocalQueue | no job | configuration only: `quotaflow apply -f` |",
    ]
    assert rows[3].startswith("| jobs/plain.yaml | Job | refused | job/default/plain: metadata.labels[kueue.x-k8s.io/queue-name]: Required value")


def test_a_missing_examples_directory_is_an_error(tmp_path: Path) -> None:
    assert main(["--kueue-repo", str(tmp_path)]) == 2
