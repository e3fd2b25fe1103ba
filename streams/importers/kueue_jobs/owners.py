"""Which workloads belong to a job, read from what Kueue records on a Workload: its
`metadata.ownerReferences` (the job as controller, or every pod of a pod group, or the
StatefulSet/LeaderWorkerSet as owner). Two kinds own their workloads through an object the
conversion generated: a CronJob through the Job it started (`<cronjob>-<minutes>`), a Deployment
through its pods (`<deployment>-<template hash>-<suffix>`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def owned_by(workload: Mapping[str, Any], kind: str, namespace: str, name: str) -> bool:
    meta = workload.get("metadata")
    if not isinstance(meta, Mapping) or (meta.get("namespace") or "default") != namespace:
        return False
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return False
    for ref in refs:
        if not isinstance(ref, Mapping):
            continue
        owner_kind, owner_name = ref.get("kind"), ref.get("name")
        if not isinstance(owner_name, str):
            continue
        if owner_kind == kind and owner_name == name:
            return True
        if kind == "CronJob" and owner_kind == "Job" and re.fullmatch(rf"{re.escape(name)}-\d+", owner_name):
            return True
        if kind == "Deployment" and owner_kind == "Pod" and re.fullmatch(
            rf"{re.escape(name)}-[a-z0-9]+-[a-z0-9]{{5}}", owner_name
        ):
            return True
    return False
