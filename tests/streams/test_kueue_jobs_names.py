"""Names as Kueue derives them: checked against the vectors of Kueue's own unit tests."""

from __future__ import annotations

import hashlib
import random

from streams.importers.kueue_jobs.workload_names import (
    derived_uid,
    generated_name,
    random_suffix,
    role_hash,
    workload_name,
)


def test_workload_name_matches_kueues_test_vectors() -> None:
    # pkg/controller/jobframework/workload_names_test.go
    assert workload_name("name", "uid", "Job", "batch") == "job-name-ef3a1"
    assert workload_name("name", "uid", "Job", "batch", extra="1") == "job-name-2514c"
    long = (
        "marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-sub-department-"
        "social-media-engagement-tracker-and-analytics-dashboard-v2-final-revision-by-engineering-team-lead-"
        "senior-architect-validation-checked-approved-by-legal-and-ops-dept"
    )
    got = workload_name(long, "uid", "Job", "batch")
    assert got == ("job-" + long)[:247] + "-218b8"
    assert len(got) == 253


def test_workload_name_hashes_kind_group_name_and_uid() -> None:
    digest = hashlib.sha1(b"PyTorchJob\nkubeflow.org\ntrain\n1234").hexdigest()[:5]
    assert workload_name("train", "1234", "PyTorchJob", "kubeflow.org") == f"pytorchjob-train-{digest}"
    # The same name in another kind or with another UID is another workload.
    assert workload_name("train", "1234", "TFJob", "kubeflow.org") != workload_name("train", "1234", "PyTorchJob", "kubeflow.org")
    assert workload_name("train", "1235", "PyTorchJob", "kubeflow.org") != workload_name("train", "1234", "PyTorchJob", "kubeflow.org")


def test_role_hash_matches_kueues_pod_group_vectors() -> None:
    # pkg/controller/jobs/pod/pod_controller_test.go: a pod requesting cpu 1 is role "dc85db45";
    # with memory 1Gi as well, "4ebdd4a6" (pods as the unit tests build them, without the API
    # server's defaults).
    one_cpu = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}, "limits": {}}}]}
    assert role_hash(one_cpu, as_stored=False) == "dc85db45"
    with_memory = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    assert role_hash(with_memory, as_stored=False) == "4ebdd4a6"


def test_role_hash_ignores_what_does_not_make_a_role_and_sees_what_does() -> None:
    base = {"containers": [{"name": "a", "image": "x", "command": ["sleep", "1"], "resources": {"requests": {"cpu": "1"}}}]}
    renamed = {"containers": [{"name": "b", "image": "y", "args": ["2"], "resources": {"requests": {"cpu": "1"}}}]}
    assert role_hash(base) == role_hash(renamed)
    bigger = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "2"}}}]}
    assert role_hash(base) != role_hash(bigger)
    # As stored, the API server's default tolerations and priority count: a different hash.
    assert role_hash(base) != role_hash(base, as_stored=False)


def test_generate_name_appends_five_characters_of_the_api_servers_alphabet() -> None:
    rng = random.Random(7)
    name = generated_name("sample-job-", lambda: random_suffix(rng))
    assert name.startswith("sample-job-") and len(name) == len("sample-job-") + 5
    assert set(name[-5:]) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert len(generated_name("x" * 80, lambda: "bcdfg")) == 63


def test_derived_uid_is_stable_and_depends_on_the_identity() -> None:
    a = derived_uid("batch/v1", "Job", "default", "j")
    assert a == derived_uid("batch/v1", "Job", "default", "j")
    assert a != derived_uid("batch/v1", "Job", "other", "j")
