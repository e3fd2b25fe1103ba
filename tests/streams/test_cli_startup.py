"""`quotaflow` starts without what only some commands use: loading the command line (which is all
`--help` does, and what every command pays before it runs) imports neither the engine, the read
side, asyncio, YAML nor the Kafka and rendering libraries; each command imports what it uses."""

from __future__ import annotations

import subprocess
import sys

# What a command imports only once it runs.
HEAVY = (
    "domain.engine", "domain.objects", "domain.decisions", "projections", "streams.client",
    "streams.log.kafka", "asyncio", "yaml", "aiokafka", "faust", "plotly", "selenium", "msgspec",
)


def test_loading_the_command_line_imports_no_command_s_own_dependencies() -> None:
    code = (
        "import sys\n"
        "import streams.cli.main\n"
        f"print('\\n'.join(sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in {HEAVY!r}))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], f"imported at start-up: {done.stdout.split()}"
