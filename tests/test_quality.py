"""Quality table: metric definitions on hand-checkable data, the section 5 direction on the
measured sets, and a direction check that can fail."""

from __future__ import annotations

import dataclasses

import numpy as np

from hqval import quality
from hqval.formats import by_qt
from hqval.result import Status


def test_metrics_match_their_definitions() -> None:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((8, 512)) * 0.011).astype(np.float32)
    fmt = by_qt(44)
    q = quality.measure(fmt, w, "t")
    err = fmt.roundtrip(w).astype(np.float64) - w
    thr = np.quantile(np.abs(w), 0.99)
    assert np.isclose(q.mse, (err**2).mean(), rtol=1e-12)
    assert np.isclose(q.tail_mse, (err[np.abs(w) >= thr] ** 2).mean(), rtol=1e-12)
    assert q.tail_threshold == thr and q.n_weights == w.size and q.group_bytes == 136
    assert q.bits_per_weight == 8 * 136 / 256


def test_max_rel_is_zero_for_f32_headers_and_small_for_fp16() -> None:
    w = (np.random.default_rng(1).standard_normal((16, 1024)) * 0.011).astype(np.float32)
    v1 = quality.measure(by_qt(13), w, "t")
    v2 = quality.measure(by_qt(44), w, "t")
    assert v1.max_rel < 1e-6  # the extremes are grid points up to f32 rounding
    # fp16 header: the extreme is z + 15*st with z, st each off by <= 2^-11 relative, and
    # |z|, 15*st <= 2 |w_max| for a group whose extreme is w_max: <= 3 * 2^-11.
    assert 0 < v2.max_rel <= 3 * 2.0**-11


def test_section5_direction_holds_on_both_sets() -> None:
    table = quality.quality_table(quality.default_datasets(M=64, K=4096))
    rows = quality.direction_rows(table)
    assert len(rows) == 8  # 2 claims x 2 metrics x 2 datasets
    assert all(r.status is Status.PASS for r in rows), [r.message for r in rows]
    by = {(q.dataset, q.qt): q for q in table}
    # the note's -16.2% MSE at 136 B: same sign and size on the synthetic set
    ratio = by[("synthetic", 44)].mse / by[("synthetic", 13)].mse
    assert 0.78 < ratio < 0.88


def test_direction_check_can_fail() -> None:
    table = quality.quality_table({"t": quality.default_datasets(M=8, K=512, real=False)[
        "synthetic"]}, [by_qt(13), by_qt(44)])
    swapped = [dataclasses.replace(q, mse=q.mse * (10 if q.qt == 44 else 1)) for q in table]
    rows = quality.direction_rows(swapped)
    assert [r.status for r in rows if r.check == "section5_mse"] == [Status.FAIL]


def test_table_renders_every_format() -> None:
    table = quality.quality_table({"t": quality.default_datasets(M=4, K=512, real=False)[
        "synthetic"]})
    text = quality.format_table(table)
    for name in ("hfq4g256", "mq4g256", "mq4g256v2", "mq4cg256", "mq4cg256c", "mq4_k"):
        assert f"| {name} |" in text
    assert all(r.to_dict()["details"]["format"] for r in quality.table_rows(table))


def test_bench_reports_a_real_measurement() -> None:
    res = quality.bench_codec(qt=44, M=32, K=512, repeats=2)
    assert res["total_s"] > 0 and len(res["all_total_s"]) == 2
    assert res["total_s"] == min(res["all_total_s"])
