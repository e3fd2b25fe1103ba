"""Kueue's scheduler performance scenario (test/performance/scheduler) as a simulation: its
generator configs (`config`, `configs/`), the arrivals they make (`generator`), the executor that
runs and finishes admitted workloads (`executor`), how simultaneous changes are batched
(`batching`), the recorder of Kueue's metrics (`recorder`), and a run in virtual time over the
in-process engine (`virtual`). The benchmark bench/kueue_perf measures it; tests use it as a
realistic workload.
"""
