"""Kueue's scheduler performance suite (test/performance/scheduler) run against quotaflow.

`python -m bench.kueue_perf --help`; see bench/kueue_perf/README.md.
"""
