"""hqval.report.timing: the timing rows as the views read them."""

from __future__ import annotations

from pathlib import Path

from hqval.report.timing import grouped, history, latest, swept, timing_cell, timing_cells
from hqval.result import Row, Status
from hqval.results.store import Run


def ratio_row(kernel: str, check: str = "timing_cold", status: Status = Status.PASS,
              measured: float = 1.0, tolerance: float = 1.01, message: str = "",
              **details: object) -> Row:
    d: dict[str, object] = {"stats": {"ratio": measured, "ci_low": measured - 0.01,
                                      "ci_high": measured + 0.01,
                                      "run_ratios": [measured - 0.02, measured + 0.02]}}
    d.update(details)
    return Row("timing", check, kernel, "sm_90", "cuda", status, measured=measured,
               tolerance=tolerance, message=message, details=d)


def test_cell_reads_stats_shape_mode_r_qt_and_ignores_non_finite() -> None:
    r = Row("timing", "timing_hot", "gemv_mq4c_r2@5120x17408", "sm_90", "cuda", Status.PASS,
            measured=float("nan"), tolerance=1.01,
            details={"stats": {"ratio": 1.02, "ci_low": 1.01, "ci_high": 1.03, "mwu_p": 1e-5},
                     "predicted_ratio": 1.015, "samples_a": [[1.0, 2.0, 3.0]],
                     "samples_b": [[2.0, 3.0, 4.0]]})
    t = timing_cell(r)
    assert (t.ratio, t.ci_low, t.ci_high, t.p, t.predicted) == (1.02, 1.01, 1.03, 1e-5, 1.015)
    assert (t.kernel, t.shape, t.mode, t.rows_per_block, t.qt) == (
        "gemv_mq4c_r2", "5120x17408", "hot", 2, 45)
    assert (t.median_a, t.median_b) == (2.0, 3.0)
    assert t.verdict == "pass" and not t.noisy and not t.slow


def test_run_ratios_are_recomputed_from_the_samples() -> None:
    # stored by an older statistic (the pooled median): the report shows each run's ratio
    # as the cell ratio is made of now, from the samples
    r = ratio_row("gemv_mq4c_r2@5120x17408", samples_a=[[10.0] * 8, [20.0] * 8],
                  samples_b=[[11.0] * 8, [21.0, 99.0, 21.0, 21.0, 1.0, 21.0, 21.0, 21.0]])
    t = timing_cell(r)
    assert t.run_ratios == (1.1, 1.05)  # not the stored 0.98 / 1.02
    # Must say no: without samples the stored ratios stay; a non-positive time keeps them
    assert timing_cell(ratio_row("gemv_mq4c_r2@5120x17408")).run_ratios == (0.98, 1.02)
    bad = ratio_row("gemv_mq4c_r2@5120x17408", samples_a=[[0.0] * 4], samples_b=[[1.0] * 4])
    assert timing_cell(bad).run_ratios == (0.98, 1.02)


def test_noisy_is_told_apart_from_slow() -> None:
    noisy = timing_cell(ratio_row("k@1x1", status=Status.ERROR,
                                  message="1.02; noisy run: not trusted (A/A ...)"))
    flagged = timing_cell(ratio_row("k@1x1", noisy=True))
    slow = timing_cell(ratio_row("k@1x1", status=Status.FAIL, measured=1.03))
    broken = timing_cell(ratio_row("k@1x1", status=Status.ERROR, message="launch failed"))
    assert noisy.noisy and flagged.noisy and not noisy.slow
    assert slow.slow and not slow.noisy and slow.verdict == "fail"
    assert broken.verdict == "error" and not broken.noisy  # an error is not noise
    assert timing_cell(ratio_row("k@1x1", verdict="noisy")).noisy  # a recorded verdict wins


def test_the_gate_is_the_one_applied_never_a_default() -> None:
    own = timing_cell(ratio_row("k@1x1", tolerance=1.01))
    assert (own.gate, own.gate_text) == (1.01, "ratio ≤ 1.01")
    judged = timing_cell(ratio_row("k@1x1", gate={"ratio_max": 1.05, "source": "policy.yaml",
                                                  "confidence": 0.95}))
    assert (judged.gate, judged.gate_source) == (1.05, "policy.yaml")
    assert judged.gate_text == "ratio ≤ 1.05 (95% CI)"
    aa = timing_cell(ratio_row("gemv_hfq4g256_r1@1x1", check="timing_aa_cold",
                               tolerance=0.005))
    assert aa.aa and aa.gate_text == "A/A within 1 ± 0.005"
    none = timing_cell(Row("timing", "timing_cold", "k@1x1", "sm_90", "cuda", Status.PASS,
                           measured=1.0, details={"stats": {}}))
    assert none.gate is None and none.gate_text == "no gate recorded"


def test_why_noisy_is_a_sentence_from_the_evidence() -> None:
    aa = timing_cell(ratio_row("gemv_hfq4g256_r1@1x1", check="timing_aa_cold",
                               status=Status.ERROR, measured=1.0051, tolerance=0.005,
                               message="A/A 1.0051; noisy after 3 tries",
                               tries=[0.9924, 1.0064, 1.0051]))
    why = aa.why_noisy()
    assert "(qt=6 against itself) measured 1.0051, outside 1 ± 0.005" in why
    assert "after 3 tries (0.9924, 1.0064, 1.0051)" in why
    assert "runs' own ratios spread from 0.9851 to 1.0251" in why
    assert "[" not in why


def _run(path: str, date: str, rows: list[Row]) -> Run:
    return Run(Path(path), {"date": date, "device": "H200"}, rows)


def test_grouped_by_mode_r_shape_with_the_aa_control_first() -> None:
    rows = [ratio_row("gemv_mq4c_r2@5120x5120"), ratio_row("gemv_mq4c_r1@17408x5120"),
            ratio_row("gemv_mq4c_r1@5120x5120"),
            ratio_row("gemv_hfq4g256_r1@5120x5120", check="timing_aa_cold"),
            ratio_row("gemv_mq4c_r1@5120x5120", check="timing_hot")]
    cells = timing_cells([_run("a", "2026-11-29", rows)])
    assert [(label, [c.row.identity.split("[")[0] + c.kernel for c in cs])
            for label, cs in grouped(cells)] == [
        ("cold · R=1 · 5120x5120", ["timing_aa_coldgemv_hfq4g256_r1", "timing_coldgemv_mq4c_r1"]),
        ("cold · R=1 · 17408x5120", ["timing_coldgemv_mq4c_r1"]),
        ("cold · R=2 · 5120x5120", ["timing_coldgemv_mq4c_r2"]),
        ("hot · R=1 · 5120x5120", ["timing_hotgemv_mq4c_r1"])]
    assert swept(cells)
    assert not swept(timing_cells([_run("a", "d", rows[1:3])]))


def test_history_needs_the_same_cell_in_two_runs() -> None:
    one = [ratio_row("gemv_mq4c_r1@5120x5120", measured=1.00)]
    two = [ratio_row("gemv_mq4c_r1@5120x5120", measured=1.03),
           ratio_row("gemv_mq4c_r2@5120x5120")]
    cells = timing_cells([_run("b", "2026-11-30", two), _run("a", "2026-11-29", one)])
    h = history(cells)
    assert list(h) == ["timing_cold[gemv_mq4c_r1@5120x5120|sm_90|cuda]"]
    assert [c.ratio for c in h["timing_cold[gemv_mq4c_r1@5120x5120|sm_90|cuda]"]] == [1.0, 1.03]
    assert history(timing_cells([_run("a", "2026-11-29", one)])) == {}
    assert sorted(c.ratio or 0 for c in latest(cells)) == [1.0, 1.03]  # newest per cell
