"""Preemption, shaped like Kueue's pkg/scheduler/preemption.

- `policy.py`: who may preempt whom and as which variant (the ClusterQueue's preemption spec).
- `candidates.py`: each ClusterQueue's workloads, kept in Kueue's candidate order.
- `classical.py`: the classical search, over its named candidate groups.
- `reading.py`, `victims.py`, `fit.py`: what the search reads, takes and asks of the quota tree.
- `minimize.py`: giving back the victims the preemptor fits without.
- `shared_cohort.py`: a speed-up, one reading of a flat cohort shared by a nomination's searches.
- `fair_sharing_strategies.py`: fair-sharing preemption.
- `messages.py`: the preempted workload's message.
"""
