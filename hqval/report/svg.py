"""Inline SVG plots for the HTML report (and files beside checkpoint.md).

Hand-written rather than drawn with a plotting library: every mark carries the full cell
identity as a hover ``<title>`` and links to its table row (``#r-...``), marks carry CSS
classes by verdict (``pass``, ``fail``, ``noisy``) that the page and its tests read, the
output is a few KB of plain text per plot with no embedded fonts, and the report keeps
needing nothing beyond jinja2 on the lab and CI machines.  (matplotlib's SVG backend would
give none of the links or titles without post-processing its output, and embeds glyphs as
paths.)  See docs/ARCHITECTURE.md, "Report plots".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING

from hqval.formats import HFQ4G256_QT as V1_QT
from hqval.report.data import anchor
from hqval.report.numbers import fmt_p
from hqval.report.timing import TimingCell, format_name
from hqval.result import Row

if TYPE_CHECKING:
    from hqval.timing.history import Fit

ROW_H = 18
WIDTH = 820
FONT = 'font-family="system-ui, sans-serif"'

# One colour per verdict; a noisy cell is hollow and dashed, a slow one solid red.
COLOUR = {"pass": "#1f6fb2", "fail": "#c0392b", "noisy": "#7d3c98", "error": "#222",
          "skipped": "#888", "unsupported": "#888"}


def _axis(x0: float, x1: float, px0: float, px1: float) -> tuple[float, float]:
    scale = (px1 - px0) / (x1 - x0) if x1 > x0 else 1.0
    return scale, px0 - x0 * scale


def _open(width: float, height: float, label: str, cls: str = "plot") -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="{cls}" width="{width:.0f}" '
            f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
            f'aria-label="{escape(label)}" {FONT}>')


def _text(x: float, y: float, s: str, size: int = 11, anchor_: str = "start",
          extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor_}"'
            f'{" " + extra if extra else ""}>{escape(s)}</text>')


def _dot(x: float, y: float, verdict: str, title: str, r: float = 4.5) -> str:
    colour = COLOUR.get(verdict, "#222")
    if verdict == "noisy":
        body = (f'<circle class="mark noisy" cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="#fff" '
                f'stroke="{colour}" stroke-width="2" stroke-dasharray="2 1.5">')
    elif verdict in ("error",):
        body = (f'<path class="mark error" d="M{x - r:.1f} {y - r:.1f}l{2 * r} {2 * r}'
                f'm0 {-2 * r}l{-2 * r} {2 * r}" stroke="{colour}" stroke-width="2">')
        return body + f"<title>{escape(title)}</title></path>"
    else:
        body = f'<circle class="mark {verdict}" cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{colour}">'
    return body + f"<title>{escape(title)}</title></circle>"


def _ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw), default=raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def _tick_labels(lo: float, hi: float, n: int = 6) -> list[tuple[float, str]]:
    """Ticks with as many decimals as their step needs (1.0025, not 1 three times)."""
    ts = _ticks(lo, hi, n)
    step = ts[1] - ts[0] if len(ts) > 1 else abs(ts[0]) or 1.0
    decimals = max(0, math.ceil(round(-math.log10(step), 9))) if step < 1 else 0
    scaled = step * 10 ** decimals
    if abs(scaled - round(scaled)) > 1e-6:  # a 2.5 step needs one digit more
        decimals += 1
    return [(t, f"{t:.{decimals}f}") for t in ts]


def _cell_title(c: TimingCell) -> str:
    ci = f" CI [{c.ci_low:.4f}, {c.ci_high:.4f}]" if c.ci_low is not None and \
        c.ci_high is not None else ""
    p = f" p{'' if fmt_p(c.p).startswith('<') else '='}{fmt_p(c.p)}" if c.p is not None else ""
    ratio = f"{c.ratio:.4f}" if c.ratio is not None else "no ratio"
    return (f"{c.row.identity} ({c.run_label}): {ratio}{ci}{p}; {c.verdict}; gate "
            f"{c.gate_text} ({c.gate_source})")


# ---------------------------------------------------------------- v2/v1 forest, grouped

def timing_plot(cells: Sequence[TimingCell], admission_gate: float | None = None) -> str:
    """v2/v1 ratio per cell, grouped by mode, R and shape: dot = measured (solid blue pass,
    solid red slower than its gate, hollow dashed purple noisy: not trusted either way),
    bar = CI, red tick = the gate that decided the row (A/A: the shaded band), hollow
    diamond = cost-model prediction.  ``admission_gate`` (the policy's, when these rows
    are admission evidence) is drawn as one dashed line."""
    cells = [c for c in cells if c.ratio is not None or c.predicted is not None]
    if not cells:
        return ""
    from hqval.report.timing import grouped

    groups = grouped(cells)
    # the axis spans the ratios, predictions and gates; a CI wider than that (a noisy
    # cell's) is clipped at the edge, so one wild interval cannot squash every dot
    vals: list[float] = [1.0]
    for c in cells:
        vals += [v for v in (c.ratio, c.predicted) if v is not None]
        if c.gate is not None:
            vals += [1 + c.gate, 1 - c.gate] if c.aa else [c.gate]
    if admission_gate:
        vals.append(admission_gate)
    lo, hi = min(vals), max(vals)
    pad = max(0.005, (hi - lo) * 0.06)
    lo, hi = lo - pad, hi + pad
    runs = sorted({c.run_label for c in cells})

    def row_label(c: TimingCell) -> str:
        return c.label + (f"  (run {runs.index(c.run_label) + 1})" if len(runs) > 1 else "")

    label_w = min(440, 12 + 6.3 * max(len(row_label(c)) for c in cells))
    left = label_w + 10
    top = 44  # the admission gate's label, then the top axis, above the first group
    h = top + ROW_H * (len(cells) + len(groups)) + 30
    k, b = _axis(lo, hi, left, WIDTH - 16)

    def x(v: float) -> float:
        return k * v + b

    ticks = _tick_labels(lo, hi)
    out = [_open(WIDTH, h, "v2/v1 timing ratio per cell, grouped by mode, R and shape")]
    # the ratio axis at the top and the bottom (a long plot is read far from either end)
    for t, tl in ticks:
        out.append(f'<line x1="{x(t):.1f}" y1="{top - 14}" x2="{x(t):.1f}" y2="{h - 26}" '
                   'stroke="#eee"/>' + _text(x(t), top - 18, tl, 10, "middle",
                                             'class="axis top"')
                   + _text(x(t), h - 12, tl, 10, "middle", 'class="axis bottom"'))
    out.append(f'<line x1="{x(1):.1f}" y1="{top - 14}" x2="{x(1):.1f}" y2="{h - 26}" '
               'stroke="#888"/>')
    if admission_gate:
        out.append(f'<line class="admission-gate" x1="{x(admission_gate):.1f}" '
                   f'y1="{top - 14}" x2="{x(admission_gate):.1f}" y2="{h - 26}" '
                   'stroke="#c0392b" stroke-dasharray="5 3"/>'
                   + _text(x(admission_gate), 12, f"admission gate {admission_gate:g}", 10,
                           "middle"))
    y = top
    for label, members in groups:
        out.append(f'<rect x="0" y="{y - 12}" width="{WIDTH}" height="{ROW_H}" fill="#f3f3f3"/>'
                   + _text(4, y + 1, label, 11, extra='font-weight="600"'))
        # and on every group's band, grey, where it does not run into the label
        out += [_text(x(t), y + 1, tl, 9, "middle", 'fill="#999" class="axis band"')
                for t, tl in ticks if x(t) > 10 + 6.6 * len(label) + 20]
        y += ROW_H
        for c in members:
            title = _cell_title(c)
            out.append(f'<a href="#{anchor(c.row.identity)}">'
                       + _text(14, y + 4, row_label(c), 11).replace(
                           "</text>", f"<title>{escape(title)}</title></text>") + "</a>")
            if c.gate is not None:
                if c.aa:
                    out.append(f'<rect class="gate" x="{x(1 - c.gate):.1f}" y="{y - 7}" '
                               f'width="{x(1 + c.gate) - x(1 - c.gate):.1f}" height="14" '
                               f'fill="#27ae60" fill-opacity="0.15"><title>A/A gate: within '
                               f'1 ± {c.gate:g}</title></rect>')
                else:
                    out.append(f'<line class="gate" x1="{x(c.gate):.1f}" y1="{y - 7}" '
                               f'x2="{x(c.gate):.1f}" y2="{y + 7}" stroke="#c0392b" '
                               f'stroke-width="2"><title>gate applied: {escape(c.gate_text)} '
                               f'({escape(c.gate_source)})</title></line>')
            if c.ci_low is not None and c.ci_high is not None:
                x0, x1 = x(max(c.ci_low, lo)), x(min(c.ci_high, hi))
                out.append(f'<line x1="{x0:.1f}" y1="{y}" x2="{x1:.1f}" y2="{y}" stroke="#333" '
                           f'stroke-width="2"/>')
            if c.predicted is not None:
                px = x(c.predicted)
                out.append(f'<path d="M{px:.1f} {y - 5} l5 5 l-5 5 l-5 -5 z" fill="none" '
                           f'stroke="#e67e22"><title>predicted {c.predicted:.4f}</title></path>')
            if c.ratio is not None:
                out.append(_dot(x(c.ratio), y, c.verdict, title))
            y += ROW_H
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------- sample distributions

def distribution_plot(c: TimingCell, width: int = 420) -> str:
    """A and B samples of one cell side by side, per run: back-to-back histograms on one
    microsecond axis (A above the run's line, B below), median ticks.  A noisy cell shows
    its runs shifted against each other, or A and B apart in an A/A control."""
    runs = max(len(c.samples_a), len(c.samples_b))
    flat = [v for r in (*c.samples_a, *c.samples_b) for v in r]
    if not runs or not flat:
        return ""
    lo, hi = min(flat), max(flat)
    if hi <= lo:
        hi = lo + 1e-9
    bins = 32
    bw = (hi - lo) / bins
    lane = 46
    h = 24 + runs * lane + 22
    left = 58
    k, b = _axis(lo, hi, left, width - 8)
    a_name = f"qt={V1_QT}" if not c.aa else f"qt={V1_QT} (A)"
    b_name = format_name(c.qt) if not c.aa else f"qt={V1_QT} (B)"
    out = [_open(width, h, f"sample distributions of {c.row.identity}", "plot dist"),
           f"<title>{escape(c.row.identity)} ({c.run_label}): A = {a_name}, "
           f"B = {b_name}, {runs} run(s)</title>",
           _text(left, 12, f"A {a_name}", 10, extra='fill="#1f6fb2"'),
           _text(left + 120, 12, f"B {b_name}", 10, extra='fill="#d35400"')]

    def hist(samples: Sequence[float]) -> list[int]:
        counts = [0] * bins
        for v in samples:
            counts[min(bins - 1, int((v - lo) / bw))] += 1
        return counts

    for i in range(runs):
        base = 24 + i * lane + lane / 2
        out.append(_text(4, base + 4, f"run {i + 1}", 10))
        if c.run_ratios and i < len(c.run_ratios):
            out.append(_text(4, base + 15, f"{c.run_ratios[i]:.4f}", 9,
                             extra='fill="#555"'))
        out.append(f'<line x1="{left}" y1="{base:.1f}" x2="{width - 8}" y2="{base:.1f}" '
                   'stroke="#bbb"/>')
        for arm, samples, colour, sign in (("A", c.samples_a, "#1f6fb2", -1),
                                           ("B", c.samples_b, "#d35400", 1)):
            if i >= len(samples) or not samples[i]:
                continue
            counts = hist(samples[i])
            peak = max(counts) or 1
            pts = [f"M{k * lo + b:.1f} {base:.1f}"]
            for j, n in enumerate(counts):
                x0, x1 = k * (lo + j * bw) + b, k * (lo + (j + 1) * bw) + b
                yv = base + sign * (lane / 2 - 3) * n / peak
                pts.append(f"L{x0:.1f} {yv:.1f}L{x1:.1f} {yv:.1f}")
            pts.append(f"L{k * hi + b:.1f} {base:.1f}Z")
            srt = sorted(samples[i])
            med = srt[len(srt) // 2]
            q1, q3 = srt[len(srt) // 4], srt[3 * len(srt) // 4]
            out.append(f'<path class="arm-{arm}" d="{"".join(pts)}" fill="{colour}" '
                       f'fill-opacity="0.45" stroke="{colour}"><title>run {i + 1} {arm}: '
                       f'n={len(srt)}, median {med:.3f} us, IQR {q1:.3f}-{q3:.3f} us, '
                       f'min {srt[0]:.3f}, max {srt[-1]:.3f}</title></path>')
            mx = k * med + b
            out.append(f'<line x1="{mx:.1f}" y1="{base:.1f}" x2="{mx:.1f}" '
                       f'y2="{base + sign * (lane / 2 - 2):.1f}" stroke="#000" '
                       'stroke-width="1.5"/>')
    for t, tl in _tick_labels(lo, hi, 5):
        out.append(_text(k * t + b, h - 6, tl, 9, "middle"))
    out.append(_text(width - 8, h - 6, "us", 9, "end"))
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------- heatmap per format

def _ratio_fill(r: float) -> str:
    """Diverging: blue faster than the v1 baseline, white parity, red slower (saturates
    at +-15%)."""
    t = max(-1.0, min(1.0, math.log(r) / math.log(1.15)))
    if t >= 0:
        g = int(255 - 175 * t)
        return f"rgb(255,{g},{g})"
    g = int(255 + 140 * t)
    return f"rgb({g},{int(255 + 90 * t)},255)"


def heatmap(cells: Sequence[TimingCell], title: str, hatch_id: str) -> str:
    """v2/v1 ratio of one format: a row per device and R, a column per mode and shape.
    Red outline: slower than its gate; hatched grey: noisy (not trusted)."""
    cells = [c for c in cells if not c.aa and c.ratio is not None]
    if not cells:
        return ""
    rows = sorted({(c.device, c.rows_per_block or 0) for c in cells})
    cols = sorted({(c.mode, c.shape) for c in cells},
                  key=lambda mc: (mc[0] != "hot", [int(x) for x in mc[1].split("x")
                                                   if x.isdigit()]))
    at = {(c.device, c.rows_per_block or 0, c.mode, c.shape): c for c in cells}
    cw, ch = 74, 26
    left = 12 + 6.4 * max(len(f"{d} R={r}") for d, r in rows)
    top = 58
    # wide enough for its title and legend too, not only the grid
    width = max(left + cw * len(cols) + 10, 12 + 7.2 * len(title), left + 470)
    h = top + ch * len(rows) + 34
    out = [_open(width, h, title, "plot heatmap"),
           f'<defs><pattern id="{hatch_id}" width="6" height="6" patternUnits="userSpaceOnUse"'
           ' patternTransform="rotate(45)"><rect width="6" height="6" fill="#ddd"/>'
           '<line x1="0" y1="0" x2="0" y2="6" stroke="#999" stroke-width="2"/></pattern></defs>',
           _text(4, 14, title, 12, extra='font-weight="600"')]
    modes = [m for m in dict.fromkeys(m for m, _ in cols)]
    for m in modes:
        idx = [i for i, (mm, _) in enumerate(cols) if mm == m]
        out.append(_text(left + cw * (idx[0] + len(idx) / 2), 32, m, 11, "middle",
                         'font-weight="600"'))
    for i, (_, shape) in enumerate(cols):
        out.append(_text(left + cw * i + cw / 2, top - 8, shape, 10, "middle"))
    for j, (dev, r) in enumerate(rows):
        y = top + ch * j
        out.append(_text(4, y + ch / 2 + 4, f"{dev} R={r}", 10))
        for i, (m, shape) in enumerate(cols):
            c = at.get((dev, r, m, shape))
            x0 = left + cw * i
            if c is None:
                out.append(f'<rect x="{x0}" y="{y}" width="{cw - 2}" height="{ch - 2}" '
                           'fill="#fafafa" stroke="#eee"/>')
                continue
            assert c.ratio is not None
            fill = f"url(#{hatch_id})" if c.noisy else _ratio_fill(c.ratio)
            stroke = ' stroke="#c0392b" stroke-width="2.5"' if c.slow else ' stroke="#fff"'
            label = "noisy" if c.noisy else f"{c.ratio:.3f}"
            out.append(f'<a href="#{anchor(c.row.identity)}"><rect class="hm {c.verdict}" '
                       f'x="{x0}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="{fill}"'
                       f'{stroke}><title>{escape(_cell_title(c))}</title></rect>'
                       + _text(x0 + cw / 2 - 1, y + ch / 2 + 3, label, 10, "middle",
                               'pointer-events="none"') + "</a>")
    ly = h - 14
    for i, (rv, text) in enumerate(((0.90, "0.90"), (1.0, "1.00"), (1.05, "1.05"),
                                    (1.15, "1.15"))):
        out.append(f'<rect x="{left + i * 60}" y="{ly - 9}" width="14" height="12" '
                   f'fill="{_ratio_fill(rv)}" stroke="#ccc"/>' + _text(left + i * 60 + 18, ly,
                                                                      text, 10))
    out.append(f'<rect x="{left + 250}" y="{ly - 9}" width="14" height="12" '
               f'fill="url(#{hatch_id})"/>' + _text(left + 268, ly, "noisy", 10)
               + f'<rect x="{left + 320}" y="{ly - 9}" width="14" height="12" fill="#fff" '
               'stroke="#c0392b" stroke-width="2.5"/>' + _text(left + 338, ly,
                                                               "slower than its gate", 10))
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------- rows-per-block sweep

def sweep_plot(cells: Sequence[TimingCell]) -> str:
    """Median time against rows per block R, one small chart per mode and shape: a line
    for the v1 baseline (arm A) and one per candidate format (arm B).  Lower is faster."""
    cand = [c for c in cells if not c.aa and c.rows_per_block and c.median_b is not None]
    panels = sorted({(c.mode, c.shape) for c in cand},
                    key=lambda mc: (mc[0] != "hot", [int(x) for x in mc[1].split("x")
                                                     if x.isdigit()]))
    if not panels:
        return ""
    pw, ph, per_row = 264, 170, 5
    n_rows = math.ceil(len(panels) / per_row)
    width, h = pw * min(per_row, len(panels)), ph * n_rows + 26
    palette = {V1_QT: "#1f6fb2", 44: "#d35400", 45: "#27ae60"}
    out = [_open(width, h, "median time against rows per block", "plot sweep")]
    legend = sorted({c.qt or 0 for c in cand} | {V1_QT})
    for i, q in enumerate(legend):
        out.append(f'<line x1="{8 + i * 150}" y1="12" x2="{28 + i * 150}" y2="12" '
                   f'stroke="{palette.get(q, "#555")}" stroke-width="2"/>'
                   + _text(32 + i * 150, 16, format_name(q) + (" (A)" if q == V1_QT else " (B)"),
                           10))
    for n, (mode, shape) in enumerate(panels):
        ox, oy = pw * (n % per_row), 26 + ph * (n // per_row)
        mine = [c for c in cand if (c.mode, c.shape) == (mode, shape)]
        lines: dict[int, dict[int, tuple[float, TimingCell]]] = {}
        for c in mine:
            assert c.rows_per_block is not None and c.median_b is not None
            lines.setdefault(c.qt or 0, {})[c.rows_per_block] = (c.median_b, c)
            if c.median_a is not None:
                lines.setdefault(V1_QT, {}).setdefault(c.rows_per_block, (c.median_a, c))
        rs = sorted({r for pts in lines.values() for r in pts})
        ys = [v for pts in lines.values() for v, _ in pts.values()]
        lo, hi = min(ys), max(ys)
        pad = max((hi - lo) * 0.1, hi * 0.01)
        lo, hi = lo - pad, hi + pad
        x0, x1, y0, y1 = ox + 46, ox + pw - 12, oy + ph - 30, oy + 22
        out.append(f'<rect x="{ox + 2}" y="{oy + 2}" width="{pw - 6}" height="{ph - 6}" '
                   'fill="none" stroke="#e5e5e5"/>'
                   + _text(ox + pw / 2, oy + 14, f"{mode} · {shape}", 11, "middle",
                           'font-weight="600"'))

        def px(r: int, rs: list[int] = rs, x0: float = x0, x1: float = x1) -> float:
            return x0 + (x1 - x0) * (rs.index(r) / max(1, len(rs) - 1))

        def py(v: float, lo: float = lo, hi: float = hi, y0: float = y0,
               y1: float = y1) -> float:
            return y0 + (y1 - y0) * (v - lo) / (hi - lo)

        for r in rs:
            out.append(_text(px(r), y0 + 14, f"R={r}", 9, "middle"))
        for t, tl in _tick_labels(lo, hi, 4):
            out.append(f'<line x1="{x0}" y1="{py(t):.1f}" x2="{x1}" y2="{py(t):.1f}" '
                       'stroke="#f0f0f0"/>' + _text(x0 - 4, py(t) + 3, tl, 9, "end"))
        out.append(_text(ox + 8, oy + 30, "us", 9))
        for q, pts in sorted(lines.items()):
            colour = palette.get(q, "#555")
            order = sorted(pts)
            path = "".join(f"{'M' if i == 0 else 'L'}{px(r):.1f} {py(pts[r][0]):.1f}"
                           for i, r in enumerate(order))
            out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="1.8"/>')
            for r in order:
                v, c = pts[r]
                arm = f"A (qt={V1_QT})" if q == V1_QT else "B"
                verdict = "pass" if q == V1_QT else c.verdict
                title = (f"{mode} {shape} R={r} {format_name(q)} arm {arm}: {v:.2f} us"
                         + ("" if q == V1_QT else f"; {_cell_title(c)}"))
                if verdict in ("noisy", "fail"):
                    out.append(_dot(px(r), py(v), verdict, title, 3.5))
                else:
                    out.append(f'<a href="#{anchor(c.row.identity)}"><circle cx="{px(r):.1f}" '
                               f'cy="{py(v):.1f}" r="3" fill="{colour}"><title>'
                               f'{escape(title)}</title></circle></a>')
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------- history across runs

def history_range(history: Mapping[str, Sequence[TimingCell]]) -> tuple[float, float]:
    """The one ratio scale every history panel shares: 1.00, every gate drawn (each
    candidate's ratio gate, each A/A control's band) and the nights' ratios from the 2nd
    to the 98th percentile, padded.  A panel zoomed to its own cell's +-0.5% makes
    run-to-run noise look like a trend; on one scale a wiggle is as large as it is, next
    to the gate it would have to cross.  The few ratios beyond the percentiles (a cell
    that broke, or one slowed on purpose) would squash every other panel flat: they are
    drawn at the scale's edge as an arrow with their value, and so are the ends of CIs
    wider than the scale."""
    vals = [1.0]
    ratios: list[float] = []
    for cs in history.values():
        for c in cs:
            if c.ratio is not None:
                ratios.append(c.ratio)
            if c.gate is not None:
                vals += [1 + c.gate, 1 - c.gate] if c.aa else [c.gate]
    if ratios:
        ratios.sort()
        k = int(0.02 * (len(ratios) - 1))
        vals += [ratios[k], ratios[len(ratios) - 1 - k]]
    lo, hi = min(vals), max(vals)
    pad = max(0.004, (hi - lo) * 0.08)
    return lo - pad, hi + pad


def history_plot(history: dict[str, list[TimingCell]],
                 fits: Mapping[str, Fit] | None = None) -> str:
    """v2/v1 ratio of each cell seen in several runs (nights or machines), oldest to
    newest (one x position per run, the same in every panel), with CI bars and each
    night's verdict, every panel on one ratio scale (``history_range``) with the gate
    drawn as a dashed line (a tick per night where the nights' gates differ).  ``fits`` (identity ->
    hqval.timing.history's step fit over the cell's gated, trusted nights, the same data
    ``hqval history`` reads) adds the fitted levels as a green step line and a triangle at
    each step: red for a regression, grey for a recurring or unconfirmed one."""
    if not history:
        return ""
    fits = fits or {}
    pw, ph, per_row = 270, 120, 5
    items = list(history.items())
    # one x position per run across every panel, so the panels line up night by night
    runs = sorted({c.run_label for cs in history.values() for c in cs})
    n_rows = math.ceil(len(items) / per_row)
    width, h = pw * min(per_row, len(items)), ph * n_rows + 8
    out = [_open(width, h, "ratio history per cell across runs", "plot history")]
    lo, hi = history_range(history)
    for n, (ident, cs) in enumerate(items):
        ox, oy = pw * (n % per_row), 4 + ph * (n // per_row)
        x0, x1, y0, y1 = ox + 40, ox + pw - 12, oy + ph - 16, oy + 30
        c0 = cs[-1]
        out.append(f'<rect x="{ox + 2}" y="{oy}" width="{pw - 6}" height="{ph - 4}" '
                   'fill="none" stroke="#e5e5e5"/>'
                   + f'<a href="#{anchor(ident)}">'
                   + _text(ox + 6, oy + 12, c0.label, 10, extra='font-weight="600"').replace(
                       "</text>", f"<title>{escape(ident)}</title></text>") + "</a>"
                   + _text(ox + 6, oy + 24, c0.group_label, 9, extra='fill="#555"'))

        def px(i: int, cs: list[TimingCell] = cs, x0: float = x0, x1: float = x1) -> float:
            j, n_ = runs.index(cs[i].run_label), len(runs)
            return x0 + (x1 - x0) * (j / max(1, n_ - 1)) if n_ > 1 else (x0 + x1) / 2

        def py(v: float, lo: float = lo, hi: float = hi, y0: float = y0,
               y1: float = y1) -> float:
            return y0 + (y1 - y0) * (v - lo) / (hi - lo)

        for t, tl in _tick_labels(lo, hi, 3):
            out.append(_text(x0 - 4, py(t) + 3, tl, 8, "end"))
        out.append(f'<line x1="{x0}" y1="{py(1):.1f}" x2="{x1}" y2="{py(1):.1f}" '
                   'stroke="#aaa"/>')
        gates = {c.gate for c in cs if c.gate is not None}
        one_gate = len(gates) == 1
        if one_gate:
            (g,) = gates
            if cs[0].aa:
                out.append(f'<rect class="gate band" x="{x0}" y="{py(1 + g):.1f}" '
                           f'width="{x1 - x0}" height="{py(1 - g) - py(1 + g):.1f}" '
                           'fill="#27ae60" fill-opacity="0.12"><title>A/A gate: within '
                           f'1 ± {g:g}</title></rect>')
            else:
                out.append(f'<line class="gate" x1="{x0}" y1="{py(g):.1f}" x2="{x1}" '
                           f'y2="{py(g):.1f}" stroke="#c0392b" stroke-dasharray="4 3">'
                           f'<title>gate {g:g}</title></line>')
        pts = [(i, c) for i, c in enumerate(cs) if c.ratio is not None]
        path = "".join(f"{'M' if j == 0 else 'L'}{px(i):.1f} "
                       f"{py(min(max(c.ratio or 1.0, lo), hi)):.1f}"
                       for j, (i, c) in enumerate(pts))
        out.append(f'<path d="{path}" fill="none" stroke="#555" stroke-width="1.2"/>')
        for i, c in pts:
            assert c.ratio is not None
            if c.ci_low is not None and c.ci_high is not None:
                lo_ci, hi_ci = max(c.ci_low, lo), min(c.ci_high, hi)
                out.append(f'<line x1="{px(i):.1f}" y1="{py(lo_ci):.1f}" x2="{px(i):.1f}" '
                           f'y2="{py(hi_ci):.1f}" stroke="#333"/>')
            if c.gate is not None and not c.aa and not one_gate:
                out.append(f'<line x1="{px(i) - 6:.1f}" y1="{py(c.gate):.1f}" '
                           f'x2="{px(i) + 6:.1f}" y2="{py(c.gate):.1f}" stroke="#c0392b" '
                           'stroke-dasharray="2 2"/>')
            if lo <= c.ratio <= hi:
                out.append(_dot(px(i), py(c.ratio), c.verdict, _cell_title(c), 3.5))
            else:  # beyond the shared scale: an arrow at its edge, the value in its title
                up = c.ratio > hi
                ey = py(hi if up else lo)
                out.append(f'<path class="mark clipped {c.verdict}" d="M{px(i):.1f} '
                           f'{ey + (-2 if up else 2):.1f}l5 {8 if up else -8}h-10z" '
                           f'fill="{COLOUR.get(c.verdict, "#222")}"><title>'
                           f'{escape(_cell_title(c))} (beyond the scale)</title></path>')
        fit = fits.get(ident)
        # the fit's nights are the cell's gated, trusted nights, in the same order
        fitted = [i for i, c in enumerate(cs) if isinstance(c.row.details.get("verdict"), dict)
                  and not c.row.details.get("untrusted")]
        if fit is not None and len(fitted) == len(fit.levels) and fitted:
            lv = [min(max(v, lo), hi) for v in fit.levels]
            # a step function: along the old level to the night of the step, then up/down
            path = f"M{px(fitted[0]):.1f} {py(lv[0]):.1f}" + "".join(
                f"H{px(i):.1f}V{py(lv[j]):.1f}" for j, i in enumerate(fitted) if j)
            out.append(f'<path class="fit" d="{path}" fill="none" stroke="#27ae60" '
                       'stroke-width="1.5" stroke-dasharray="4 2"/>')
            for st in fit.steps:
                if not 0 <= st.index < len(fitted):
                    continue
                sx, sy = px(fitted[st.index]), py(lv[st.index])
                kind = "regression" if st.regression else (
                    "recurring" if st.recurring else "step")
                colour = "#c0392b" if st.regression and st.confirmed else "#888"
                out.append(f'<path class="step {kind}" d="M{sx:.1f} {sy - 9:.1f}l5 -8h-10z" '
                           f'fill="{colour}"><title>step {st.before:.4f} -&gt; {st.after:.4f} at '
                           f'{escape(st.night)}: {kind}'
                           f'{"" if st.confirmed else " (one night: unconfirmed)"}</title></path>')
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------- check margins

def margin_matrix(rows: Sequence[Row]) -> str:
    """measured / tolerance per check (column) and kernel (row), the worst over arches:
    green far inside the bound, yellow near it, red beyond it (log scale); exact (0) is
    white with "exact".  Hover: every arch's value."""
    pts = [r for r in rows if r.measured is not None and r.tolerance is not None
           and math.isfinite(r.measured) and r.tolerance >= 0]
    if not pts:
        return ""
    checks = sorted({r.check for r in pts})
    kernels = sorted({r.kernel for r in pts})
    worst: dict[tuple[str, str], list[Row]] = {}
    for r in pts:
        worst.setdefault((r.kernel, r.check), []).append(r)
    cw, ch = 112, 20
    left = 12 + 6.6 * max(len(k) for k in kernels)
    top = 40
    width = left + cw * len(checks) + 8
    h = top + ch * len(kernels) + 30
    out = [_open(width, h, "measured error over tolerance per check and kernel",
                 "plot margins")]
    for i, c in enumerate(checks):
        out.append(_text(left + cw * i + cw / 2, top - 8, c, 10, "middle", 'font-weight="600"'))
    for j, k in enumerate(kernels):
        y = top + ch * j
        out.append(_text(4, y + ch / 2 + 4, k, 10))
        for i, c in enumerate(checks):
            rs = worst.get((k, c))
            x0 = left + cw * i
            if not rs:
                continue
            # an exact check (tolerance 0) is 0 when exact and beyond its bound otherwise
            qs = [(r, (r.measured or 0.0) / r.tolerance if r.tolerance else
                   (0.0 if not r.measured else math.inf)) for r in rs]
            r_w, q = max(qs, key=lambda t: t[1])
            if q <= 0:
                fill, label = "#fff", "exact"
            else:
                t = max(0.0, min(1.0, (math.log10(q) + 6) / 6))  # 1e-6 .. 1
                fill = "#c0392b" if q > 1 else (
                    f"rgb({int(40 + 215 * t)},{int(170 + 40 * (1 - t))},{int(90 * (1 - t))})")
                label = f"{q:.2g}"
            detail = "; ".join(f"{r.arch} {r.backend}: {r.measured:.3g} / {r.tolerance:.3g}"
                               for r, _ in sorted(qs, key=lambda t: -t[1]))
            out.append(f'<a href="#{anchor(r_w.identity)}"><rect class="mg" x="{x0}" y="{y}" '
                       f'width="{cw - 2}" height="{ch - 2}" fill="{fill}" stroke="#ddd">'
                       f'<title>{escape(k)} {escape(c)}: worst {q:.3g} of the tolerance '
                       f'({escape(detail)})</title></rect>'
                       + _text(x0 + cw / 2, y + ch / 2 + 3, label, 10, "middle",
                               'pointer-events="none"') + "</a>")
    ly = h - 10
    for i, (q, text) in enumerate(((0.0, "exact"), (1e-5, "1e-5"), (1e-3, "1e-3"),
                                   (0.1, "0.1"), (2.0, "> 1: fails"))):
        t = max(0.0, min(1.0, (math.log10(q) + 6) / 6)) if q > 0 else 0
        fill = "#fff" if q == 0 else ("#c0392b" if q > 1 else
                                      f"rgb({int(40 + 215 * t)},{int(170 + 40 * (1 - t))},"
                                      f"{int(90 * (1 - t))})")
        out.append(f'<rect x="{left + i * 80}" y="{ly - 9}" width="14" height="12" '
                   f'fill="{fill}" stroke="#ccc"/>' + _text(left + i * 80 + 18, ly, text, 10))
    out.append("</svg>")
    return "".join(out)
