"""An exception inside the engine becomes an InternalError decision for its record only."""

from __future__ import annotations

import pytest

from domain import decisions
from domain.decisions import Admitted, InternalError, Rejected
from domain.engine import Engine

SETUP = [
    b'{"type":"ConfigApplied","object":{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"f"}}}',
    b'{"type":"ConfigApplied","object":{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},"spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"f","resources":[{"name":"cpu","nominalQuota":4}]}]}]}}}',
    b'{"type":"ConfigApplied","object":{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"namespace":"default","name":"lq"},"spec":{"clusterQueue":"cq"}}}',
]
SUBMIT = b'{"type":"WorkloadSubmitted","workload":{"metadata":{"name":"%s"},"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"requests":{"cpu":"1"}}]}}}'


class Flaky(Engine):
    """Fails on the event at `bad_offset`, as a bug in a handler would."""

    def __init__(self, bad_offset: int) -> None:
        super().__init__()
        self.bad_offset = bad_offset

    def _apply(self, event, offset, out):  # type: ignore[no-untyped-def]
        if offset == self.bad_offset:
            raise KeyError(f"boom at {object()!r}")
        return super()._apply(event, offset, out)


@pytest.mark.pure_python
@pytest.mark.internal_error_expected
def test_an_exception_is_an_internal_error_and_later_events_still_apply() -> None:
    engine = Flaky(bad_offset=3)
    for offset, event in enumerate(SETUP):
        engine.apply(event, offset)
    before = decisions.INTERNAL_ERRORS.count
    failed = engine.apply(SUBMIT % b"a", 3)
    assert decisions.INTERNAL_ERRORS.count == before + 1
    assert len(failed) == 1 and isinstance(failed[0], InternalError)
    assert failed[0].error == "KeyError" and failed[0].cause.offset == 3
    assert "0x?" in failed[0].message and "0x7" not in failed[0].message  # no memory addresses
    assert not isinstance(failed[0], Rejected)
    later = engine.apply(SUBMIT % b"b", 4)
    assert [type(d) for d in later] == [Admitted]
    assert decisions.decode(decisions.encode(failed[0])) == failed[0]
