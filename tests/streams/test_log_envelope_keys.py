"""Record keys of input events (streams/log/envelope.py): a workload event is keyed by its
workload, a configuration event by its object, anything else by nothing."""

from __future__ import annotations

from typing import Any

import pytest

from streams.log.envelope import event_key, event_message


@pytest.mark.parametrize(
    ("event", "key"),
    [
        ({"type": "WorkloadSubmitted", "workload": {"metadata": {"namespace": "ns", "name": "w"}}}, "ns/w"),
        ({"type": "WorkloadUpdated", "workload": {"metadata": {"name": "w"}}}, "default/w"),
        ({"type": "WorkloadFinished", "namespace": "ns", "name": "w"}, "ns/w"),
        ({"type": "WorkloadDeleted", "namespace": "ns", "name": "w"}, "ns/w"),
        ({"type": "WorkloadReleased", "namespace": "ns", "name": "w"}, "ns/w"),
        ({"type": "AdmissionCheckStateChanged", "namespace": "ns", "name": "w", "check": "c", "state": "Ready"}, "ns/w"),
        ({"type": "WorkloadPodsReady", "namespace": "ns", "name": "w"}, "ns/w"),
        ({"type": "WorkloadPodsReady", "name": "w", "ready": False}, "default/w"),
        ({"type": "ConfigApplied", "object": {"kind": "ClusterQueue", "metadata": {"name": "cq"}}}, "ClusterQueue/cq"),
        ({"type": "ConfigApplied", "object": {"kind": "LocalQueue", "metadata": {"namespace": "ns", "name": "q"}}}, "LocalQueue/ns/q"),
        ({"type": "ConfigDeleted", "kind": "LocalQueue", "namespace": "ns", "name": "q"}, "LocalQueue/ns/q"),
        ({"type": "Batch", "events": [{"type": "WorkloadDeleted", "namespace": "ns", "name": "w"}]}, None),
        ({"type": "Tick"}, None),
    ],
)
def test_record_keys(event: dict[str, Any], key: str | None) -> None:
    assert event_key(event) == key
    message = event_message(event)
    assert message.key == (key.encode() if key is not None else None)
    subject = [value for name, value in message.headers if name == "ce_subject"]
    assert subject == ([key.encode()] if key is not None else [])
