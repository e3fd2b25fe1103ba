"""The imperative shell around the engine, one subpackage per role.

- `log/`       the logs (input, decisions, snapshots): interface, Kafka and SQLite backends
- `agent/`     the admission agent: the exactly-once loop, its process shell, the engine's host
- `client.py`  the typed Python client for producers and consumers
- `importers/` other schedulers' configurations as contract events
- `cli/`       the `quotaflow` command line and its rendering
- `settings.py` defaults every role shares (ports, topics, environment variable names)
"""
