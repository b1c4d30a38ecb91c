"""hqval's own progress display, fed by the steps' callbacks (``hqval.run.context.Progress``).

On a terminal: one line per step, redrawn in place, with cells done out of expected over
every arch, the counts by outcome (a mutant's expected failure is a kill, not a failure),
elapsed time and an ETA.  Off a terminal (CI logs): one line per step when it finishes.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO

_ORDER = ("pass", "kill", "fail", "error", "survived", "skipped", "unsupported")


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 60}:{s % 60:02d}"


class Display:
    """Progress on ``stream`` (default stderr): live bars on a TTY, quiet lines otherwise."""

    def __init__(self, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._now = time.monotonic
        self.step = ""
        self.expected = 0
        self.counts: Counter[str] = Counter()
        self.t0 = self._now()
        self._drawn = 0.0

    # -- the Progress protocol
    def start(self, step: str, expected: int) -> None:
        self.step, self.expected = step, expected
        self.counts = Counter()
        self.t0 = self._now()
        self._drawn = 0.0
        if self.tty:
            self._draw(force=True)

    def cell(self, identity: str, status: str) -> None:
        self.counts[status] += 1
        if self.tty:
            self._draw()

    def finish(self, step: str, summary: str) -> None:
        line = f"{step:<8} {summary}"
        if self.tty:
            self.stream.write("\r\x1b[2K" + line + "\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def note(self, line: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K")
        self.stream.write(line + "\n")
        self.stream.flush()

    # -- drawing
    def line(self) -> str:
        """The current step's progress line: bar, done/expected, outcomes, elapsed, ETA."""
        done = sum(self.counts.values())
        total = max(self.expected, done)
        width = 24
        fill = int(width * done / total) if total else 0
        elapsed = self._now() - self.t0
        eta = ""
        if 0 < done < total:
            eta = f" ETA {_clock(elapsed / done * (total - done))}"
        outcomes = " ".join(f"{self.counts[k]} {k}" for k in _ORDER if self.counts[k])
        outcomes += "".join(f" {n} {k}" for k, n in sorted(self.counts.items())
                            if k not in _ORDER)
        return (f"{self.step:<8} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}"
                f" {_clock(elapsed)}{eta}" + (f"  {outcomes}" if outcomes else ""))

    def _draw(self, force: bool = False) -> None:
        now = self._now()
        if not force and now - self._drawn < 0.1:
            return
        self._drawn = now
        self.stream.write("\r\x1b[2K" + self.line()[:160])
        self.stream.flush()


class Silent:
    """No output (library use, tests)."""

    def start(self, step: str, expected: int) -> None:
        pass

    def cell(self, identity: str, status: str) -> None:
        pass

    def finish(self, step: str, summary: str) -> None:
        pass

    def note(self, line: str) -> None:
        pass
