"""`kueue_build_info`, Kueue's labels with quotaflow's values; served by the projection and the
agent alike."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

from prometheus_client.core import GaugeMetricFamily


def _version() -> str:
    try:
        return "v" + metadata.version("quotaflow")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_info() -> GaugeMetricFamily:
    """Kueue's build_info with its labels. quotaflow is Python: `go_version` carries the Python
    version, `compiler` says whether the engine runs compiled by mypyc; the commit and build
    date come from QUOTAFLOW_GIT_COMMIT and QUOTAFLOW_BUILD_DATE when the image sets them."""
    from domain._engine_form import running_compiled

    family = GaugeMetricFamily("kueue_build_info", "Kueue build information. 1 labeled by git version, git commit, build date, go version, compiler, platform", labels=["git_version", "git_commit", "build_date", "go_version", "compiler", "platform"])
    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    family.add_metric([
        _version(),
        os.environ.get("QUOTAFLOW_GIT_COMMIT", ""),
        os.environ.get("QUOTAFLOW_BUILD_DATE", ""),
        f"python{platform.python_version()}",
        "mypyc" if running_compiled() else sys.implementation.name,
        f"{sys.platform}/{machine}",
    ], 1)
    return family
