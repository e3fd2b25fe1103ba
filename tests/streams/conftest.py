"""Fixtures for tests/streams: `logs` and `live` (the CLI against a live agent) from cli_harness."""

from cli_harness import live, logs  # noqa: F401
