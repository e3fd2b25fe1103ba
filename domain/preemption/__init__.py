"""Preemption, shaped like Kueue's pkg/scheduler/preemption.

- `policy.py`: who may preempt whom and as which variant (the ClusterQueue's preemption spec).
- `classical.py`: the classical search, over its named candidate groups.
- `reading.py`, `victims.py`, `fit.py`: what the search reads, takes and asks of the quota tree.
- `minimize.py`: giving back the victims the preemptor fits without.
- `shared_cohort.py`: a speed-up, one reading of a flat cohort shared by a nomination's searches.
- `tree_epochs.py`: each cohort tree's changes in a pass, under which answers are kept in it.
- `fair_sharing_strategies.py`: fair-sharing preemption.
- `messages.py`: the preempted workload's message.

Each ClusterQueue's workloads in Kueue's candidate order (what the searches read) are state the
admissions and evictions keep: domain/candidate_index.py, below this package. The package reads
the state and the shares (domain/fair_sharing.py) and is read by the scheduler, never the other
way round (pyproject.toml's import contracts).
"""
