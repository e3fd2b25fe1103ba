"""A progress line on stderr for operations that can run long (`replay`, `export`, `audit` of a
large log), drawn only where a person watches it: stderr is a terminal, and the command's own
output does not go to that terminal too (`replay` without a redirect would have its decision
lines and the progress line overwrite each other). Piped or redirected, stderr gets nothing, so
scripts and logs see exactly what they saw before.

Nothing is drawn for the first half second, so quick commands stay quiet; then the line is
redrawn in place at most five times a second, and finished with a last state and a line break.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

DELAY_S = 0.5
INTERVAL_S = 0.2


def watched(stream: TextIO, *, output: TextIO | None = None) -> bool:
    """Is `stream` a terminal, and `output` (the command's stdout, when it writes there) not one?"""
    try:
        return stream.isatty() and not (output is not None and output.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class Progress:
    def __init__(
        self,
        what: str,
        total: int | None = None,
        *,
        unit: str = "records",
        stream: TextIO | None = None,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = watched(self.stream) if enabled is None else enabled
        self.clock = clock
        self.done = 0
        self.started = clock()
        self._next = self.started + DELAY_S
        self._drawn = False

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.enabled and self.clock() >= self._next:
            self._draw()

    def line(self) -> str:
        elapsed = max(self.clock() - self.started, 1e-9)
        text = f"{self.what}: {self.done:,}"
        if self.total:
            text += f"/{self.total:,} {self.unit} ({100 * self.done // self.total}%)"
        else:
            text += f" {self.unit}"
        return f"{text}, {self.done / elapsed:,.0f}/s, {elapsed:.1f} s"

    def _draw(self) -> None:
        # \r back to the line's start, \x1b[K clears what a longer previous line left.
        self.stream.write("\r" + self.line() + "\x1b[K")
        self.stream.flush()
        self._drawn = True
        self._next = self.clock() + INTERVAL_S

    def close(self) -> None:
        if self._drawn:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
