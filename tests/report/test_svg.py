"""hqval.report.svg: each plot is valid SVG whose marks say what the rows say."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from hqval.report.svg import (
    distribution_plot,
    heatmap,
    history_plot,
    margin_matrix,
    sweep_plot,
    timing_plot,
)
from hqval.report.timing import TimingCell, history, timing_cell
from hqval.result import Row, Status

NS = "{http://www.w3.org/2000/svg}"
LONG = "gemv_mq4g256v2_residual_qkv_fused_r8_variant_with_a_very_long_name"


def cell(kernel: str, ratio: float, status: Status = Status.PASS, message: str = "",
         check: str = "timing_cold", tolerance: float = 1.01, **details: object) -> TimingCell:
    d: dict[str, object] = {"stats": {"ci_low": ratio - 0.005, "ci_high": ratio + 0.005,
                                      "run_ratios": [ratio, ratio]},
                            "samples_a": [[10.0, 10.1, 10.2], [10.0, 10.3, 10.1]],
                            "samples_b": [[11.0, 11.1, 11.2], [11.0, 11.3, 11.1]],
                            "median_us_a": 10.1, "median_us_b": 11.1}
    d.update(details)
    return timing_cell(Row("timing", check, kernel, "sm_90", "cuda", status, measured=ratio,
                           tolerance=tolerance, message=message, details=d), "night-1", "H200")


def marks(svg: str, cls: str) -> list[ET.Element]:
    return [e for e in ET.fromstring(svg).iter() if cls in (e.get("class") or "").split()]


def test_timing_plot_tells_pass_slow_and_noisy_apart_and_draws_each_rows_gate() -> None:
    cells = [cell("gemv_mq4c_r1@4096x5120", 1.0),
             cell("gemv_mq4g256v2_r1@4096x5120", 1.03, Status.FAIL),
             cell(f"{LONG}@4096x5120", 1.02, Status.ERROR, "noisy run: not trusted")]
    svg = timing_plot(cells)
    (ok,), (slow,), (noisy,) = (marks(svg, v) for v in ("pass", "fail", "noisy"))
    assert ok.get("fill") == "#1f6fb2" and slow.get("fill") == "#c0392b"
    assert noisy.get("fill") == "#fff" and noisy.get("stroke-dasharray")  # hollow, dashed
    gates = marks(svg, "gate")
    assert len(gates) == 3 and len({g.get("x1") for g in gates}) == 1  # each row's 1.01
    assert float(slow.get("cx", "0")) > float(gates[0].get("x1", "0")) > float(
        ok.get("cx", "0"))
    assert not marks(svg, "admission-gate")  # none applied: none drawn
    assert "gate 1.05" not in svg
    # full identities in hover titles, nothing cut
    titles = [t.text or "" for t in ET.fromstring(svg).iter(f"{NS}title")]
    assert any(t.startswith(f"timing_cold[{LONG}@4096x5120|sm_90|cuda]") for t in titles)
    assert "cold · R=1 · 4096x5120" in svg  # the group header
    with_gate = timing_plot(cells, admission_gate=1.05)
    assert len(marks(with_gate, "admission-gate")) == 1 and "admission gate 1.05" in with_gate


def test_timing_plot_empty_without_numbers() -> None:
    assert timing_plot([]) == ""


def test_distribution_plot_shows_both_arms_per_run() -> None:
    c = cell("gemv_mq4c_r1@4096x5120", 1.1)
    svg = distribution_plot(c)
    assert len(marks(svg, "arm-A")) == 2 and len(marks(svg, "arm-B")) == 2
    assert "median 10.100 us" in svg and "median 11.100 us" in svg
    assert distribution_plot(cell("k@1x1", 1.0, samples_a=[], samples_b=[])) == ""


def test_heatmap_marks_slow_cells_and_hatches_noisy_ones() -> None:
    cells = [cell("gemv_mq4c_r1@4096x5120", 1.0), cell("gemv_mq4c_r1@5120x5120", 1.06,
                                                         Status.FAIL),
             cell("gemv_mq4c_r2@4096x5120", 1.02, Status.ERROR, "noisy run: not trusted"),
             cell("gemv_mq4c_r1@4096x5120", 1.0, check="timing_hot")]
    svg = heatmap(cells, "qt=45", "h45")
    rects = marks(svg, "hm")
    assert len(rects) == 4
    (slow,) = marks(svg, "fail")
    (noisy,) = [r for r in rects if "noisy" in (r.get("class") or "")]
    assert slow.get("stroke") == "#c0392b"
    assert noisy.get("fill") == "url(#h45)" and "noisy" in svg
    assert "H200 R=1" in svg and "H200 R=2" in svg  # a row per device and R
    assert heatmap([cell("gemv_hfq4g256_r1@1x1", 1.0, check="timing_aa_cold")], "t", "h") == ""


def test_sweep_plot_draws_a_line_per_format() -> None:
    cells = [cell(f"gemv_mq4c_r{r}@4096x5120", 1.0) for r in (1, 2, 4)]
    svg = sweep_plot(cells)
    paths = [p for p in ET.fromstring(svg).iter(f"{NS}path") if p.get("fill") == "none"]
    assert len(paths) == 2  # qt=6 (arm A) and qt=45 (arm B)
    assert "R=1" in svg and "R=4" in svg


def test_history_plot_one_panel_per_cell_seen_twice() -> None:
    a, b = cell("gemv_mq4c_r1@4096x5120", 1.0), cell("gemv_mq4c_r1@4096x5120", 1.04,
                                                     Status.FAIL)
    b = TimingCell(**{**b.__dict__, "run_label": "night-2"})
    svg = history_plot(history([a, b]))
    assert len(marks(svg, "pass")) == 1 and len(marks(svg, "fail")) == 1
    assert history_plot({}) == ""


def test_margin_matrix_colours_by_margin_and_calls_zero_exact() -> None:
    rows = [Row("check", "p", "ok", "gfx1100", "emu", Status.PASS, measured=1e-7,
                tolerance=1e-4),
            Row("check", "p", "ok", "gfx1201", "emu", Status.PASS, measured=1e-6,
                tolerance=1e-4),
            Row("check", "p", "bad", "gfx1100", "emu", Status.FAIL, measured=0.5,
                tolerance=1e-4),
            Row("check", "bit_identity", "ok", "gfx1100", "emu", Status.PASS, measured=0.0,
                tolerance=0.0),
            Row("check", "bit_identity", "bad", "gfx1100", "emu", Status.FAIL, measured=3.0,
                tolerance=0.0)]
    svg = margin_matrix(rows)
    cells = {(r.find(f"{NS}title").text or "").split(":")[0]: r  # type: ignore[union-attr]
             for r in marks(svg, "mg")}
    assert cells["bad p"].get("fill") == "#c0392b"
    assert cells["bad bit_identity"].get("fill") == "#c0392b"  # any bit off an exact check
    assert cells["ok bit_identity"].get("fill") == "#fff" and "exact" in svg
    assert cells["ok p"].get("fill") not in ("#c0392b", "#fff")
    # worst over arches, with every arch in the hover text
    assert "worst 0.01 of the tolerance (gfx1201 emu: 1e-06" in svg
    assert math.isfinite(float(cells["ok p"].get("x", "nan")))


def test_margin_matrix_skips_rows_without_a_bound() -> None:
    assert margin_matrix([Row("check", "p", "k", "a", "emu", Status.PASS)]) == ""


def _texts(svg: str, cls: str) -> list[str]:
    return [e.text or "" for e in marks(svg, cls) if e.tag == f"{NS}text"]


def test_a_long_forest_plot_has_its_axis_at_the_top_and_the_bottom() -> None:
    cells = [cell(f"gemv_mq4c_r1@{m}x5120", 1.0 + 0.001 * i)
             for i, m in enumerate(range(1024, 1024 * 60, 1024))]
    svg = timing_plot(cells)
    top, bottom = _texts(svg, "top"), _texts(svg, "bottom")
    assert len(top) >= 3 and top == bottom
    ys = {float(e.get("y", "0")) for e in marks(svg, "top")}
    height = float(ET.fromstring(svg).get("height", "0"))
    assert max(ys) < 40 < height - 40  # one above the first row, one below the last
    # and on every group's band, so a reader in the middle has one in sight
    assert len(_texts(svg, "band")) >= len(cells) * 2


def _night(c: TimingCell, night: str) -> TimingCell:
    return TimingCell(**{**c.__dict__, "run_label": night})


def test_history_panels_share_one_scale_with_the_gate_drawn() -> None:
    """A quiet cell (+-0.2%) and one that moved to 1.04: both panels on one scale, so the
    quiet one is flat next to its gate, not zoomed until its noise looks like a trend."""
    quiet = [_night(cell("gemv_mq4c_r1@4096x5120", r, tolerance=1.05), f"night-{i}")
             for i, r in enumerate((0.998, 1.002, 0.999))]
    moved = [_night(cell("gemv_mq4c_r1@5120x5120", r, tolerance=1.05), f"night-{i}")
             for i, r in enumerate((1.0, 1.02, 1.04))]
    svg = history_plot(history([*quiet, *moved]))
    root = ET.fromstring(svg)
    ticks = [e.text for e in root.iter(f"{NS}text") if e.get("text-anchor") == "end"]
    assert len(ticks) % 2 == 0 and ticks[:len(ticks) // 2] == ticks[len(ticks) // 2:]
    gates = marks(svg, "gate")
    assert len(gates) == 2 and len({g.get("y1") for g in gates}) == 1  # 1.05, the same y
    # the quiet cell's dots span a small part of the panel: its 0.4% is drawn as 0.4%
    dots = [float(e.get("cy", "0")) for e in marks(svg, "pass")]
    spread_quiet, spread_moved = max(dots[:3]) - min(dots[:3]), max(dots[3:]) - min(dots[3:])
    assert spread_quiet * 5 < spread_moved


def test_one_broken_cell_does_not_squash_every_history_panel_flat() -> None:
    """Fifty quiet cells and one at 1.45: the shared scale is set by the gates and the
    bulk of the ratios; the outlier is an arrow at the edge with its value in its title."""
    cells = [_night(cell(f"gemv_mq4c_r1@{m}x5120", r, tolerance=1.05), f"night-{i}")
             for m in range(1024, 1024 * 51, 1024)
             for i, r in enumerate((0.999, 1.001))]
    cells += [_night(cell("gemv_mq4c_r1@9x9", r, tolerance=1.05), f"night-{i}")
              for i, r in enumerate((1.0, 1.45))]
    from hqval.report.svg import history_range

    lo, hi = history_range(history(cells))
    assert 1.05 < hi < 1.1 and lo > 0.95
    (clipped,) = marks(history_plot(history(cells)), "clipped")
    assert "1.4500" in (clipped.find(f"{NS}title").text or "")  # type: ignore[union-attr]
