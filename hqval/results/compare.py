"""Compare two runs cell by cell: parity regressions and significant timing changes.

A parity regression is a cell that passed in the base run and fails (or errors, or has
vanished) in the new one.  A timing change needs both a real size and significance, as
asv does: the medians differ by at least ``THRESHOLD`` and a Mann-Whitney U test of the
two sample sets gives p < ``ALPHA``.  The strict alpha (0.002, not 0.05) is because a
nightly comparison tests hundreds of cells: at 0.05 a clean run would flag several by chance.

Timing rows carry their per-sample times in ``details``: ``samples_b`` (the candidate
kernel's event times, flat or one list per run) and ``samples_a`` (its v1 baseline); a
row without samples is compared by its median only and never called significant.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hqval import markdown as md
from hqval.result import Row, Status

THRESHOLD = 0.01
ALPHA = 0.002


class Verdict(enum.StrEnum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    FIXED = "fixed"
    UNCHANGED = "unchanged"
    NEW = "new"  # only in the new run
    MISSING = "missing"  # passed in the base run, absent from the new one


@dataclass(frozen=True)
class Change:
    identity: str
    kind: str  # "parity" | "timing"
    verdict: Verdict
    base: str
    new: str
    change: float | None = None  # relative timing change, new/base - 1
    p: float | None = None
    note: str = ""

    @property
    def is_regression(self) -> bool:
        return self.verdict in (Verdict.REGRESSED, Verdict.MISSING)


@dataclass(frozen=True)
class Comparison:
    base_label: str
    new_label: str
    changes: tuple[Change, ...]

    @property
    def regressions(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.is_regression)

    def notable(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.verdict is not Verdict.UNCHANGED)


def _flat(samples: Any) -> list[float]:
    if samples is None:
        return []
    out: list[float] = []
    for s in samples:
        if isinstance(s, (list, tuple)):
            out.extend(float(v) for v in s)
        else:
            out.append(float(s))
    return [v for v in out if math.isfinite(v)]


def _median(v: Sequence[float]) -> float:
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _status_text(r: Row) -> str:
    if r.measured is None:
        return str(r.status)
    return f"{r.status} ({r.measured:.3g})"


def compare_timing(base: Row, new: Row) -> Change:
    from hqval.timing.stats import mann_whitney_u

    a = _flat(base.details.get("samples_b"))
    b = _flat(new.details.get("samples_b"))
    if a and b:
        mb, mn = _median(a), _median(b)
    elif base.measured is not None and new.measured is not None:
        mb, mn = base.measured, new.measured
    else:
        return Change(new.identity, "timing", Verdict.UNCHANGED, "-", "-",
                      note="no samples and no measured value to compare")
    if not (mb > 0 and math.isfinite(mb) and math.isfinite(mn)):
        return Change(new.identity, "timing", Verdict.UNCHANGED, f"{mb:.4g}", f"{mn:.4g}",
                      note="base median is not a positive time")
    change = mn / mb - 1.0
    if not (a and b):
        return Change(new.identity, "timing", Verdict.UNCHANGED, f"{mb:.4g}", f"{mn:.4g}",
                      change, None, "no per-sample times: significance unknown, not flagged")
    _, p = mann_whitney_u(a, b)
    if abs(change) >= THRESHOLD and p < ALPHA:
        verdict = Verdict.REGRESSED if change > 0 else Verdict.IMPROVED
    else:
        verdict = Verdict.UNCHANGED
    return Change(new.identity, "timing", verdict, f"{mb:.4g}", f"{mn:.4g}", change, p)


def compare_rows(
    base: Iterable[Row], new: Iterable[Row], base_label: str = "base", new_label: str = "new"
) -> Comparison:
    base_by = {r.identity: r for r in base}
    new_by = {r.identity: r for r in new}
    changes: list[Change] = []
    for ident, b in base_by.items():
        n = new_by.get(ident)
        if n is None:
            if b.status is Status.PASS:
                changes.append(Change(ident, b.kind if b.kind == "timing" else "parity",
                                      Verdict.MISSING, _status_text(b), "absent",
                                      note="cell passed in the base run and has no row now"))
            continue
        if b.kind == "timing" and n.kind == "timing" and b.status.ok and n.status.ok:
            changes.append(compare_timing(b, n))
            continue
        if b.status.ok and not n.status.ok:
            verdict = Verdict.REGRESSED
        elif not b.status.ok and n.status.ok:
            verdict = Verdict.FIXED
        else:
            verdict = Verdict.UNCHANGED
        changes.append(Change(ident, "timing" if n.kind == "timing" else "parity", verdict,
                              _status_text(b), _status_text(n), note=n.message))
    for ident, n in new_by.items():
        if ident not in base_by:
            changes.append(Change(ident, "timing" if n.kind == "timing" else "parity",
                                  Verdict.NEW, "absent", _status_text(n)))
    order = {Verdict.REGRESSED: 0, Verdict.MISSING: 1, Verdict.IMPROVED: 2, Verdict.FIXED: 3,
             Verdict.NEW: 4, Verdict.UNCHANGED: 5}
    changes.sort(key=lambda c: (order[c.verdict], c.identity))
    return Comparison(base_label, new_label, tuple(changes))


def to_markdown(cmp: Comparison, *, all_cells: bool = False) -> str:
    """A markdown table for a review comment: regressions first, unchanged cells hidden
    unless ``all_cells``."""
    shown = cmp.changes if all_cells else cmp.notable()
    n_reg = len(cmp.regressions)
    lines = [
        f"### hqval compare: {md.code(cmp.base_label)} -> {md.code(cmp.new_label)}",
        "",
        f"{n_reg} regression(s) among {len(cmp.changes)} cell(s) compared "
        f"(timing: change >= {THRESHOLD:.0%} and Mann-Whitney p < {ALPHA}).",
        "",
    ]
    if not shown:
        lines.append("No changes.")
        return "\n".join(lines) + "\n"
    lines.append(md.table(
        ["verdict", "cell", "kind", "base", "new", "change", "p", "note"],
        [[c.verdict, md.code(c.identity), c.kind, c.base, c.new,
          "" if c.change is None else f"{c.change:+.2%}", "" if c.p is None else f"{c.p:.2g}",
          c.note] for c in shown]))
    return "\n".join(lines) + "\n"
