"""`quotaflow launch`: a reference downstream consumer of the decision log.

It runs admitted workloads on this machine as local processes, one process group per pod, and
closes the loop the eviction lifecycle needs (CONTRACT.md): it stops preempted and evicted
workloads and sends `WorkloadReleased` once their pods are gone, and sends `WorkloadFinished`
when a workload's pods have all exited. It survives its own SIGKILL without starting a workload
twice or losing a release or a finish.

- `decisions` the decisions it acts on, read with the read side's fold, applied to its state
- `state`     its durable state: its position in the decision log, its runs and pod processes
- `loop`      the reconciler: processes made to match the state; publishing releases and finishes
- `pods`      what to run for an admission: pods from the Workload's templates, QUOTAFLOW_* env
- `processes` pod processes: start, identify (pid + start time), signal and watch a group
- `pod_shim`  the per-pod supervisor script that records a pod's outcome for a restarted launcher
"""
