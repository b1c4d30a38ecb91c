from __future__ import annotations

import xml.etree.ElementTree as ET

from hqval.report.data import timing_cell
from hqval.report.svg import margin_plot, timing_plot
from hqval.result import Row, Status

NS = "{http://www.w3.org/2000/svg}"


def _t(kernel: str, ratio: float, lo: float, hi: float, pred: float) -> Row:
    return Row("timing", "ratio", kernel, "gfx1030", "hip", Status.PASS, measured=ratio,
               details={"ci_low": lo, "ci_high": hi, "predicted_ratio": pred})


def test_timing_plot_is_valid_svg_with_marks_in_order() -> None:
    cells = [timing_cell(_t("a", 1.0, 0.99, 1.01, 1.0)),
             timing_cell(_t("b", 1.16, 1.12, 1.18, 1.02))]
    svg = timing_plot(cells, max_ratio=1.05)
    root = ET.fromstring(svg)
    dots = root.findall(f".//{NS}circle")
    assert len(dots) == 2
    xa, xb = (float(d.get("cx", "0")) for d in dots)
    assert xb > xa  # 1.16 plots right of 1.00
    assert dots[1].get("fill") == "#c0392b"  # above the gate: red
    assert dots[0].get("fill") == "#1f6fb2"
    assert len(root.findall(f".//{NS}path")) == 2  # one prediction diamond each
    assert "gate 1.05" in svg


def test_timing_plot_marks_a_failed_gate_red_below_the_policy_bound() -> None:
    r = Row("timing", "timing_cold", "k@4096x5120", "sm_90", "cuda", Status.FAIL,
            measured=1.04, details={"stats": {"ci_low": 1.03, "ci_high": 1.05}})
    (dot,) = ET.fromstring(timing_plot([timing_cell(r)], max_ratio=1.05)).findall(
        f".//{NS}circle")
    assert dot.get("fill") == "#c0392b"


def test_timing_plot_empty_without_numbers() -> None:
    assert timing_plot([]) == ""


def test_margin_plot_places_failures_right_of_the_bound() -> None:
    rows = [Row("check", "p", "ok", "gfx1100", "emu", Status.PASS, measured=1e-7,
                tolerance=1e-4),
            Row("check", "p", "bad", "gfx1100", "emu", Status.FAIL, measured=0.5,
                tolerance=1e-4)]
    root = ET.fromstring(margin_plot(rows))
    ok, bad = root.findall(f".//{NS}circle")
    assert float(bad.get("cx", "0")) > float(ok.get("cx", "0"))
    assert ok.get("fill") == "#27ae60" and bad.get("fill") == "#c0392b"


def test_margin_plot_skips_rows_without_a_bound() -> None:
    assert margin_plot([Row("check", "p", "k", "a", "emu", Status.PASS)]) == ""
