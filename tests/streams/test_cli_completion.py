"""Shell completion: the script `--show-completion` prints, and the answers it gets from the CLI."""

from __future__ import annotations

import os
import subprocess
import sys


def quotaflow(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streams.cli.main", *args], capture_output=True, text=True,
                          timeout=60, check=False, env={**os.environ, **env})


def completions(line: str) -> list[str]:
    """What bash's completion function gets for the command line `line` (cursor at its end)."""
    words = line.split(" ")
    done = quotaflow(_QUOTAFLOW_COMPLETE="complete_bash", COMP_WORDS=line, COMP_CWORD=str(len(words) - 1))
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_help_offers_completion_and_the_script_calls_quotaflow_back() -> None:
    assert "--install-completion" in quotaflow("--help").stdout
    script = quotaflow("--show-completion", "bash", _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    assert script.returncode == 0, script.stderr
    assert "_QUOTAFLOW_COMPLETE=complete_bash" in script.stdout
    assert "complete -o default -F _quotaflow_completion quotaflow" in script.stdout
    zsh = quotaflow("--show-completion", "zsh", _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    assert zsh.returncode == 0 and "#compdef quotaflow" in zsh.stdout


def test_commands_kinds_and_options_complete() -> None:
    assert completions("quotaflow li") == ["list"]
    assert completions("quotaflow stop ") == ["clusterqueue", "localqueue", "workload"]
    assert completions("quotaflow list ") == ["clusterqueues", "localqueues", "workloads", "resourceflavors", "cohorts"]
    assert "--all-namespaces" in completions("quotaflow list workloads --all")
