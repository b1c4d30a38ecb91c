"""hqval's own progress display, fed by the steps' callbacks (``hqval.run.context.Progress``),
and the compact table a run closes with.

On a terminal: one line per step, redrawn in place, with cells done out of expected over
every arch (each cell counted once, however often it is reported), the counts by outcome
(a mutant's expected failure is a kill, not a failure; a check that does not apply to a
cell is n/a, never "unsupported"), elapsed time and, once enough cells are done for the
rate to mean something, an ETA.  Off a terminal (CI logs): one line per step when it
finishes.

Not a library's progress bar (rich was considered): the display is this one small class
that knows a kill from a failure, a cell identity such as ``bit_identity[k|gfx1100|emu]``
is text to print, where rich would read its brackets as markup, and lab machines need
nothing installed beyond the suite's own dependencies.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from hqval.admission import Admission

_ORDER = ("pass", "kill", "fail", "error", "survived", "skipped", "n/a", "unsupported")
# An ETA from the first few cells (a cache hit, a warm-up) is noise: it is shown once this
# share of the expected cells, and at least ETA_MIN_CELLS of them, are done, and
# ETA_MIN_SECONDS have passed.
ETA_MIN_SHARE = 0.05
ETA_MIN_CELLS = 5
ETA_MIN_SECONDS = 2.0


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
        self._seen: set[str] = set()
        self.t0 = self._now()
        self._drawn = 0.0

    # -- the Progress protocol
    def start(self, step: str, expected: int) -> None:
        self.step, self.expected = step, expected
        self.counts = Counter()
        self._seen = set()
        self.t0 = self._now()
        self._drawn = 0.0
        if self.tty:
            self._draw(force=True)

    def cell(self, identity: str, status: str) -> None:
        if identity in self._seen:  # reported as it finished and again when written
            return
        self._seen.add(identity)
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
        if 0 < done < total and done >= max(ETA_MIN_CELLS, ETA_MIN_SHARE * total) \
                and elapsed >= ETA_MIN_SECONDS:
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


def status_table(adm: Admission, width: int = 100) -> str:
    """The admission matrix for a terminal: a row per arch and format, a column per path,
    each cell's status in a word ("-" where the policy has no such cell); the reasons are
    in the report and ``hqval admit``.
    Paths that do not fit ``width`` go to a further table below (the arch and format
    columns repeated), so no status is ever cut off."""
    paths: dict[str, None] = {}
    for c in adm.cells:
        paths.setdefault(c.path, None)
    if not paths:
        return "no admission cells (the policy covers RDNA gfx arches; none ran)"
    at = {(c.arch, c.qt, c.path): str(c.status) for c in adm.cells}
    keys = sorted({(c.arch, c.qt) for c in adm.cells})
    left = [[a, f"qt={qt}"] for a, qt in keys]
    lw = [max(len("arch"), *(len(r[0]) for r in left)), max(len("qt"), *(len(r[1]) for r in left))]
    # "-": the policy has no such cell (qt=45 has no MoE path)
    cols = [(p, [at.get((a, qt, p), "-") for a, qt in keys]) for p in paths]
    widths = {p: max(len(p), *(len(v) for v in vals)) for p, vals in cols}
    chunks: list[list[tuple[str, list[str]]]] = [[]]
    used = lw[0] + 2 + lw[1]
    for col in cols:
        need = 2 + widths[col[0]]
        if chunks[-1] and used + need > width:
            chunks.append([])
            used = lw[0] + 2 + lw[1]
        chunks[-1].append(col)
        used += need
    lines: list[str] = []
    for chunk in chunks:
        if lines:
            lines.append("")
        ws = [*lw, *(widths[p] for p, _ in chunk)]
        lines.append(_line(["arch", "qt", *(p for p, _ in chunk)], ws))
        lines.append(_line(["-" * w for w in ws], ws))
        lines += [_line([*left[i], *(vals[i] for _, vals in chunk)], ws)
                  for i in range(len(keys))]
    counts = Counter(str(c.status) for c in adm.cells)
    lines.append(", ".join(f"{n} {s}" for s, n in counts.most_common()))
    return "\n".join(lines)


def _line(values: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()
