"""A timing cell's ratio over nights, and where it stepped.

asv finds steps in a benchmark's history by fitting a piecewise-constant function to it
with a robust (L1) cost and a penalty per step, solved exactly by dynamic programming
(``asv.step_detect``).  This is the same idea, written for hqval's nights:

- each night is the cell's v2/v1 ratio (its own interleaved baseline: drift cancels) with
  its CI;
- a night's noise is the larger of its CI (as a standard error) and the night-to-night
  scatter of the series (1.4826 x MAD of successive differences / sqrt 2, robust to the
  step itself), so a CI that understates run-to-run variation cannot make noise a step;
- the fit minimises sum |x - level| / noise + ``penalty`` per step.  A level must hold for
  at least two nights -- one noisy night cannot become a step of its own, so it cannot be
  a regression -- except the last night, which may start a level alone: that step is
  reported ``confirmed: False`` until a second night agrees;
- a step is a regression when the new level over the old exceeds the gate's
  ``change_max``; it is reported at the first night of the new level.  A step back to a
  level the cell held before (within ``change_max``) is reported ``recurring`` and is not
  a regression: the cell flaps between states (seen on the H200 in hot mode at
  17408x5120, where both arms' weights together exceed the L2).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PENALTY = 4.0  # per step, in units of a night's noise
Z95 = 1.959964


@dataclass(frozen=True)
class Night:
    label: str
    ratio: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Step:
    night: str  # first night of the new level
    index: int
    before: float
    after: float
    regression: bool
    confirmed: bool
    recurring: bool = False  # back to a level held before: flapping, not a regression


@dataclass(frozen=True)
class Fit:
    nights: tuple[Night, ...]
    levels: tuple[float, ...]  # fitted level per night
    steps: tuple[Step, ...]
    noise: tuple[float, ...]

    @property
    def regressions(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.regression)


def night_noise(nights: Sequence[Night]) -> list[float]:
    x = np.array([n.ratio for n in nights])
    scatter = 0.0
    if len(x) >= 3:
        d = np.diff(x)
        scatter = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2.0)
    return [max((n.ci_high - n.ci_low) / (2 * Z95), scatter, 1e-6) for n in nights]


def detect(nights: Sequence[Night], *, tolerance: float, penalty: float = PENALTY) -> Fit:
    """Fit levels to ``nights`` (oldest first) and report the steps between them."""
    n = len(nights)
    if n == 0:
        return Fit((), (), (), ())
    x = np.array([v.ratio for v in nights])
    w = 1.0 / np.array(night_noise(nights))

    def seg_cost(a: int, b: int) -> tuple[float, float]:  # nights [a, b)
        level = _weighted_median(x[a:b], w[a:b])
        return float(np.sum(np.abs(x[a:b] - level) * w[a:b])), level

    best = [math.inf] * (n + 1)
    back = [0] * (n + 1)
    best[0] = -penalty  # the first level costs no step
    for b in range(1, n + 1):
        for a in range(b):
            length = b - a
            if length < 2 and not (b == n and a > 0) and n >= 2:
                continue  # a one-night level only as the last night
            c = best[a] + penalty + seg_cost(a, b)[0]
            if c < best[b]:
                best[b], back[b] = c, a
    bounds = []
    b = n
    while b > 0:
        a = back[b]
        bounds.append((a, b))
        b = a
    bounds.reverse()
    levels: list[float] = []
    for a, b in bounds:
        levels += [seg_cost(a, b)[1]] * (b - a)
    steps = []
    seen: list[float] = []  # levels before the one a step leaves
    for (a0, _), (a1, b1) in itertools.pairwise(bounds):
        before, after = levels[a0], levels[a1]
        # a step back to a level the cell held before is the cell flapping between states
        # (a bimodal cell), not a new regression
        recurring = any(abs(after / lv - 1.0) < tolerance - 1.0 for lv in seen)
        steps.append(Step(nights[a1].label, a1, before, after,
                          regression=after / before > tolerance and not recurring,
                          confirmed=b1 - a1 >= 2, recurring=recurring))
        seen.append(before)
    return Fit(tuple(nights), tuple(levels), tuple(steps), tuple(night_noise(nights)))


def _weighted_median(x: np.ndarray, w: np.ndarray) -> float:
    order = np.argsort(x)
    cw = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cw, cw[-1] / 2.0)])


def history_svg(fit: Fit, title: str, *, tolerance: float | None = None,
                width: int = 640, height: int = 240) -> str:
    """The nights (ratio and CI), the fitted levels and the steps, as a standalone SVG."""
    from xml.sax.saxutils import escape

    if not fit.nights:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="40">'
                f'<text x="4" y="20">{escape(title)}: no nights</text></svg>')
    left, right, top, bottom = 60, 12, 28, 36
    lo = min(min(n.ci_low for n in fit.nights), min(fit.levels))
    hi = max(max(n.ci_high for n in fit.nights), max(fit.levels))
    pad = (hi - lo) * 0.1 or 0.005
    lo, hi = lo - pad, hi + pad
    n = len(fit.nights)

    def px(i: float) -> float:
        return left + (width - left - right) * (i + 0.5) / n

    def py(v: float) -> float:
        return top + (height - top - bottom) * (hi - v) / (hi - lo)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<title>{escape(title)}</title>',
             f'<text x="{left}" y="16" font-size="12">{escape(title)}</text>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#888"/>']
    for v in np.linspace(lo, hi, 5):
        parts.append(f'<text x="{left - 4}" y="{py(v) + 4:.1f}" text-anchor="end">{v:.3f}</text>')
    for i, night in enumerate(fit.nights):
        x = px(i)
        parts.append(f'<line x1="{x:.1f}" y1="{py(night.ci_low):.1f}" x2="{x:.1f}" '
                     f'y2="{py(night.ci_high):.1f}" stroke="#4a78b5"/>')
        parts.append(f'<circle cx="{x:.1f}" cy="{py(night.ratio):.1f}" r="2.5" fill="#4a78b5"/>')
        if n <= 40:
            parts.append(f'<text x="{x:.1f}" y="{height - bottom + 14}" text-anchor="middle">'
                         f'{escape(night.label)}</text>')
    i = 0
    while i < n:
        j = i
        while j + 1 < n and fit.levels[j + 1] == fit.levels[i]:
            j += 1
        parts.append(f'<line x1="{px(i) - 4:.1f}" y1="{py(fit.levels[i]):.1f}" '
                     f'x2="{px(j) + 4:.1f}" y2="{py(fit.levels[i]):.1f}" stroke="#222" '
                     'stroke-width="2"/>')
        i = j + 1
    for s in fit.steps:
        color = "#c0392b" if s.regression else "#27ae60" if s.after < s.before else "#888"
        x = px(s.index) - 0.5 * (px(1) - px(0))
        dash = "" if s.confirmed else ' stroke-dasharray="4 3"'
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - bottom}" '
                     f'stroke="{color}"{dash}/>')
        parts.append(f'<text x="{x + 3:.1f}" y="{top + 10}" fill="{color}">step '
                     f'{s.after / s.before - 1:+.2%} at {escape(s.night)}</text>')
    if tolerance is not None and fit.levels:
        base = fit.levels[0] * tolerance
        if lo < base < hi:
            parts.append(f'<line x1="{left}" y1="{py(base):.1f}" x2="{width - right}" '
                         f'y2="{py(base):.1f}" stroke="#c0392b" stroke-dasharray="2 4"/>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class CellHistory:
    identity: str
    tolerance: float
    fit: Fit

    @property
    def slug(self) -> str:
        import re

        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.identity).strip("_")

    def to_json(self) -> dict[str, object]:
        return {"identity": self.identity, "change_max": self.tolerance,
                "nights": [{"night": n.label, "ratio": n.ratio, "ci_low": n.ci_low,
                            "ci_high": n.ci_high, "level": lv}
                           for n, lv in zip(self.fit.nights, self.fit.levels, strict=True)],
                "steps": [{"night": s.night, "before": s.before, "after": s.after,
                           "regression": s.regression, "confirmed": s.confirmed,
                           "recurring": s.recurring}
                          for s in self.fit.steps]}


def cell_histories(runs: Sequence[object], policy: object, *,
                   select: str | None = None, strict: bool = True) -> list[CellHistory]:
    """Every gated timing cell of ``runs`` (loaded ``hqval.results.store.Run``, oldest
    first) re-judged under ``policy`` (an ``hqval.admission.Policy``), one night per run
    that holds it (labelled by the run's date, else its directory name).  ``strict``: a
    run the judge cannot vouch for raises ``hqval.admission.DamagedRun`` (the report, no
    gate, plots it anyway)."""
    from hqval.admission import Policy, applied_gate, judge_run, undamaged
    from hqval.results.store import Run
    from hqval.timing.gate import is_gated

    assert isinstance(policy, Policy)
    loaded = [r for r in runs if isinstance(r, Run)]
    series: dict[str, list[Night]] = {}
    tol: dict[str, float] = {}
    for run in loaded:
        label = run.path.name or str(run.path)
        judged = judge_run(run, policy)
        for r in (undamaged(judged) if strict else judged).rows:
            v = r.details.get("verdict")
            if not is_gated(r) or not isinstance(v, dict) or r.details.get("untrusted"):
                continue
            if select and select not in r.identity:
                continue
            g = applied_gate(r)
            tol[r.identity] = g.change_max if g is not None else 1.01
            series.setdefault(r.identity, []).append(
                Night(label, float(v["ratio"]), float(v["ci_low"]), float(v["ci_high"])))
    return [CellHistory(i, tol[i], detect(n, tolerance=tol[i]))
            for i, n in sorted(series.items())]
