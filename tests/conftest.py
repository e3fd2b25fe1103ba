"""Project-wide fixtures. Keep this file thin: put fixture logic in helper
modules next to it and import the fixtures here."""

import os
from collections.abc import Iterator

import pytest
from exclusive import pytest_runtest_protocol
from hypothesis import HealthCheck, settings
from kafka_fixtures import kafka_bootstrap, kafka_topic, kafka_topic_factory

# (Whichever import loads domain first, domain/__init__.py chooses the engine's form then.)
from domain._engine_form import pure_python_requested, running_compiled

__all__ = ["kafka_bootstrap", "kafka_topic", "kafka_topic_factory", "pytest_runtest_protocol"]

# CI replays the same examples on every run, so a red run is reproducible and a run lands or
# not on the code alone; local runs keep exploring new examples (and remember failures). No
# deadline and no too-slow health check in CI: tests share the cores with parallel workers
# (`make test` runs pytest-xdist), so an example's wall time says nothing about the code.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "internal_error_expected: the test makes the engine fail on purpose (InternalError allowed)"
    )
    if os.environ.get("QUOTAFLOW_REQUIRE_COMPILED") == "1" and not (running_compiled() or pure_python_requested()):
        pytest.exit("QUOTAFLOW_REQUIRE_COMPILED=1 but domain/ runs interpreted: the mypyc build "
                    "(deploy/compile.py) failed or did not run", returncode=4)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that patch domain functions cannot see calls between compiled modules: where the
    engine is compiled they run on its sources, in one run of their own
    (tests/domain/test_compiled.py), instead of here."""
    if not running_compiled():
        return
    moved = [item for item in items if item.get_closest_marker("pure_python")]
    if moved:
        items[:] = [item for item in items if not item.get_closest_marker("pure_python")]
        config.hook.pytest_deselected(items=moved)


@pytest.fixture(autouse=True)
def no_internal_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """An InternalError decision is a bug in the engine: any test whose engine makes one fails,
    even where the test only looks at other decisions. (Replays in a subprocess are covered by
    their exact expected output instead.)"""
    from domain.decisions import INTERNAL_ERRORS

    before = INTERNAL_ERRORS.count
    yield
    made = INTERNAL_ERRORS.count - before
    if made and request.node.get_closest_marker("internal_error_expected") is None:
        pytest.fail(f"the engine made {made} InternalError decision(s) in this test")
