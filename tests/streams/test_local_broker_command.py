"""The local broker's JVM command line (no broker is started here)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from devtools import local_broker
from devtools.local_broker import BROKER_JVM_OPTS, JVM_OPTS_ENV, MAIN_CLASS, broker_command

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="needs `java` on PATH")


def _command(tmp_path: Path) -> list[str]:
    return broker_command(tmp_path / "libs", tmp_path, "512m", tmp_path / "server.properties")


def test_the_broker_runs_with_regions_that_fit_a_batch_and_c1_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JVM_OPTS_ENV, raising=False)
    cmd = _command(tmp_path)
    assert "-XX:G1HeapRegionSize=4m" in cmd and "-XX:TieredStopAtLevel=1" in cmd
    # JVM options must precede the class path and the main class to be options at all.
    cp = cmd.index("-cp")
    assert all(cmd.index(o) < cp for o in BROKER_JVM_OPTS)
    assert cmd[-2:] == [MAIN_CLASS, str(tmp_path / "server.properties")]


def test_user_jvm_options_come_after_ours_so_they_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JVM_OPTS_ENV, "-XX:TieredStopAtLevel=4  -Dx='a b'")
    cmd = _command(tmp_path)
    ours, theirs = cmd.index("-XX:TieredStopAtLevel=1"), cmd.index("-XX:TieredStopAtLevel=4")
    assert ours < theirs < cmd.index("-cp")
    assert "-Dx=a b" in cmd  # split as a shell would


def test_the_storage_formatter_does_not_take_the_broker_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # It runs with a 256m heap: a user's -Xms larger than that would stop it from starting.
    monkeypatch.setenv(JVM_OPTS_ENV, "-Xms1g")
    fmt = local_broker._java_cmd(tmp_path, tmp_path, "256m", ["kafka.tools.StorageTool"])
    assert "-Xms1g" not in fmt
