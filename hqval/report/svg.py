"""Inline SVG plots for the HTML report: no plotting library, no external assets."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from hqval.report.data import TimingCell, anchor
from hqval.result import Row

ROW_H = 18
LEFT = 330
WIDTH = 820


def _axis(x0: float, x1: float, px0: float, px1: float) -> tuple[float, float]:
    scale = (px1 - px0) / (x1 - x0) if x1 > x0 else 1.0
    return scale, px0 - x0 * scale


def timing_plot(cells: Sequence[TimingCell], max_ratio: float | None = None) -> str:
    """v2/v1 ratio per cell: dot = measured, bar = CI, hollow diamond = cost-model
    prediction; dashed line at 1.0 (parity) and at the policy's gate."""
    cells = [c for c in cells if c.ratio is not None or c.predicted is not None]
    if not cells:
        return ""
    vals: list[float] = [1.0]
    for c in cells:
        vals += [v for v in (c.ratio, c.ci_low, c.ci_high, c.predicted) if v is not None]
    if max_ratio:
        vals.append(max_ratio)
    lo, hi = min(vals), max(vals)
    pad = max(0.01, (hi - lo) * 0.1)
    lo, hi = lo - pad, hi + pad
    h = ROW_H * len(cells) + 40
    k, b = _axis(lo, hi, LEFT, WIDTH - 20)

    def x(v: float) -> float:
        return k * v + b

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{WIDTH}" '
           f'height="{h}" viewBox="0 0 {WIDTH} {h}" role="img" '
           'aria-label="v2/v1 timing ratio per cell">']
    for v, label in ((1.0, "1.00"), (max_ratio, f"gate {max_ratio}")):
        if v is None:
            continue
        out.append(f'<line x1="{x(v):.1f}" y1="8" x2="{x(v):.1f}" y2="{h - 24}" '
                   'stroke="#888" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x(v):.1f}" y="{h - 10}" font-size="10" '
                   f'text-anchor="middle">{escape(label)}</text>')
    for i, c in enumerate(cells):
        y = 16 + i * ROW_H
        ident = c.row.identity
        out.append(f'<a href="#{anchor(ident)}"><text x="4" y="{y + 4}" font-size="11">'
                   f'{escape(ident[:52])}</text></a>')
        if c.ci_low is not None and c.ci_high is not None:
            out.append(f'<line x1="{x(c.ci_low):.1f}" y1="{y}" x2="{x(c.ci_high):.1f}" '
                       f'y2="{y}" stroke="#333" stroke-width="2"/>')
        if c.ratio is not None:
            failed = not c.row.status.ok or bool(max_ratio and c.ratio > max_ratio)
            colour = "#c0392b" if failed else "#1f6fb2"
            out.append(f'<circle cx="{x(c.ratio):.1f}" cy="{y}" r="4" fill="{colour}">'
                       f'<title>{escape(ident)}: {c.ratio:.4f}</title></circle>')
        if c.predicted is not None:
            px = x(c.predicted)
            out.append(f'<path d="M{px:.1f} {y - 5} l5 5 l-5 5 l-5 -5 z" fill="none" '
                       f'stroke="#e67e22"><title>predicted {c.predicted:.4f}</title></path>')
    out.append("</svg>")
    return "".join(out)


def margin_plot(rows: Sequence[Row]) -> str:
    """Each check's measured error against its tolerance, log scale: how far inside (or
    outside) its bound every cell landed.  Exact (zero-error) cells sit at the left edge."""
    pts = [r for r in rows if r.measured is not None and r.tolerance
           and math.isfinite(r.measured) and r.tolerance > 0]
    if not pts:
        return ""
    ratios = [max(r.measured or 0.0, 1e-12) / (r.tolerance or 1.0) for r in pts]
    lo = math.floor(math.log10(min(min(ratios), 0.1)))
    hi = math.ceil(math.log10(max(max(ratios), 10.0)))
    h = 80
    k, b = _axis(lo, hi, 40, WIDTH - 20)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{WIDTH}" '
           f'height="{h}" viewBox="0 0 {WIDTH} {h}" role="img" '
           'aria-label="measured error over tolerance per check">']
    for e in range(lo, hi + 1):
        px = k * e + b
        out.append(f'<line x1="{px:.1f}" y1="10" x2="{px:.1f}" y2="50" stroke="#ddd"/>'
                   f'<text x="{px:.1f}" y="64" font-size="10" text-anchor="middle">'
                   f'1e{e}</text>')
    px1 = k * 0 + b
    out.append(f'<line x1="{px1:.1f}" y1="6" x2="{px1:.1f}" y2="54" stroke="#c0392b" '
               'stroke-dasharray="4 3"/><text x="{:.1f}" y="76" font-size="10" '
               'text-anchor="middle">measured = tolerance</text>'.format(px1))
    for r, q in zip(pts, ratios, strict=True):
        px = k * math.log10(q) + b
        colour = "#c0392b" if q > 1 else "#27ae60"
        out.append(f'<a href="#{anchor(r.identity)}"><circle cx="{px:.1f}" cy="30" r="3.5" '
                   f'fill="{colour}" fill-opacity="0.6"><title>{escape(r.identity)}: '
                   f'{r.measured:.3g} / {r.tolerance:.3g}</title></circle></a>')
    out.append("</svg>")
    return "".join(out)
