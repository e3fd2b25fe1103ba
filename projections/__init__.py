"""Projections: the views users look at, folded from the logs, and proofs of the decisions.

- `fold`    -- `Projection`: one fold over the input log and the decision log merged by cause
               offset (input event N, then the decisions it caused). Configuration from
               ConfigApplied/ConfigDeleted (the engine's own parsers), workloads from
               WorkloadSubmitted/Updated (parse_workload), quota held from the decisions, pending
               order as the engine and Kueue keep it. Never runs the scheduler.
- `view_model` -- what the fold keeps per workload, per pending queue and per ClusterQueue.
- `statistics` -- wait-time histograms and counters for the metrics, in Kueue's buckets.
- `workload_decoding` -- the fold's fast reading of workload events and accepted Workloads.
- `follower` -- `Follower` / `rebuild`: feeds a projection from the logs (Kafka or SQLite) up to
               the *decided watermark* (the agent's own progress rule), live or one-shot, with
               `as_of` for time travel.
- `views`   -- JSON views in Kueue's shapes: ClusterQueue / LocalQueue status, cohorts (who
               lends to whom), the visibility API's pending positions, a workload's history.
- `metrics` -- Prometheus collector with Kueue's metric names and labels, one registry per
               projection.
- `server`  -- the HTTP API (aiohttp) over a live projection: `quotaflow serve`.
- `audit`   -- replays the input log through a fresh engine, compares every recorded decision
               byte for byte: `quotaflow audit`.
- `explain` -- history plus "why pending" from a rebuilt engine, read-only: `quotaflow explain`.

The CLI commands and their tables live in `streams/cli/` (`view_commands.py`, `render.py`); the rebuild benchmark in
`bench/projection_bench.py`.
"""
