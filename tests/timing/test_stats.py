"""Statistics against synthetic sample streams with a known injected difference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hqval.timing import stats


def _stream(rng: np.random.Generator, n: int, base: float, slowdown: float = 1.0) -> np.ndarray:
    """Kernel times in microseconds: 1% log-normal jitter plus 3% outliers up to 30% slower
    (preemption, clock dips), the shape event timings have on a real device."""
    t = base * slowdown * rng.lognormal(0.0, 0.01, size=n)
    outliers = rng.random(n) < 0.03
    t[outliers] *= 1.0 + rng.uniform(0.05, 0.3, size=int(outliers.sum()))
    return t


def _cell(seed: int, slowdown: float, runs: int = 3, n: int = 100) -> stats.RatioStats:
    rng = np.random.default_rng(seed)
    a = [_stream(rng, n, 50.0) for _ in range(runs)]
    b = [_stream(rng, n, 50.0, slowdown) for _ in range(runs)]
    return stats.summarize(a, b, resamples=1000, seed=seed)


def test_two_percent_slowdown_is_detected() -> None:
    for seed in range(5):
        s = _cell(seed, 1.02)
        assert s.ci_low > 1.01, s
        assert 1.01 < s.ratio < 1.03
        assert s.p < 1e-6
        assert all(1.0 < r < 1.04 for r in s.run_ratios)


def test_two_percent_speedup_is_detected_as_below_one() -> None:
    s = _cell(11, 1 / 1.02)
    assert s.ci_high < 0.99


def test_aa_stream_is_not_a_change_and_not_noisy() -> None:
    for seed in range(5):
        s = _cell(100 + seed, 1.0)
        assert s.ci_low < 1.0 < s.ci_high or abs(s.ratio - 1.0) < 0.003, s
        assert not s.aa_noisy(), s
        assert abs(s.ratio - 1.0) < stats.AA_TOLERANCE


def test_aa_false_positive_rate_near_alpha() -> None:
    # Under the null the two-sided test rejects at about alpha; 200 cells bound the rate.
    rng = np.random.default_rng(7)
    rejections = 0
    trials = 200
    for _ in range(trials):
        a = _stream(rng, 300, 50.0)
        b = _stream(rng, 300, 50.0)
        _, p = stats.mann_whitney_u(a, b)
        rejections += p < 0.05
    assert rejections / trials < 0.10


def test_aa_ci_covers_one_most_of_the_time() -> None:
    cells = [_cell(1000 + seed, 1.0) for seed in range(20)]
    covered = sum(c.ci_low <= 1.0 <= c.ci_high for c in cells)
    assert covered >= 17  # nominal 95%: 19 of 20; allow two misses


def test_noisy_aa_is_flagged() -> None:
    # An order effect of 1% between two identical arms (what ABBA exists to cancel).
    s = _cell(3, 1.01)
    assert s.aa_noisy()


def test_mann_whitney_matches_hand_computation() -> None:
    # Disjoint samples 1..5 vs 6..10: U1 = 0, mu = 12.5, sigma^2 = 25*11/12,
    # z = (25 - 12.5 - 0.5) / sigma = 2.5067, two-sided p = erfc(z / sqrt 2) = 0.012186.
    u, p = stats.mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert u == 0.0
    assert p == pytest.approx(math.erfc(12.0 / math.sqrt(25 * 11 / 12) / math.sqrt(2)))
    assert p == pytest.approx(0.012186, abs=1e-6)
    u2, p2 = stats.mann_whitney_u([6, 7, 8, 9, 10], [1, 2, 3, 4, 5])
    assert u2 == 25.0 and p2 == pytest.approx(p)


def test_mann_whitney_ties_and_identical() -> None:
    u, p = stats.mann_whitney_u([1.0, 1.0, 1.0], [1.0, 1.0, 1.0])
    assert u == 4.5 and p == 1.0
    # Tie correction shrinks the variance: [1,2,2] vs [2,3,3]: ranks 1,3,3 | 3,5.5,5.5.
    u, _ = stats.mann_whitney_u([1, 2, 2], [2, 3, 3])
    assert u == pytest.approx(7.0 - 6.0)


def test_bad_samples_are_rejected_with_a_reason() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        stats.mann_whitney_u([1.0, float("nan")], [1.0, 2.0])
    with pytest.raises(ValueError, match="no samples"):
        stats.cell_ratio([[]], [[1.0]])
    with pytest.raises(ValueError, match="not positive"):
        stats.cell_ratio([[0.0, 0.0]], [[1.0, 1.0]])
    with pytest.raises(ValueError, match="same, non-zero number of runs"):
        stats.summarize([[1.0]], [[1.0], [2.0]])
    with pytest.raises(ValueError, match="confidence"):
        stats.bootstrap_ratio_ci([[1.0]], [[1.0]], confidence=95)


def test_cell_ratio_is_the_geometric_mean_of_run_ratios_of_interquartile_means() -> None:
    # 8 samples: the interquartile mean drops the 2 lowest and 2 highest.
    a = [[1.0, 9.0, 4.0, 5.0, 4.0, 0.0, 5.0, 100.0], [2.0] * 8]
    b = [[4.4] * 8, [2.2, 0.1, 2.2, 9.0, 2.2, 10.0, 2.2, 0.2]]
    assert stats.location(a[0]) == pytest.approx(4.5)
    assert stats.run_ratio(a[1], b[1]) == pytest.approx(1.1)
    assert stats.cell_ratio(a, b) == pytest.approx(math.sqrt(4.4 / 4.5 * 1.1))
    # Replicates are the same statistic: constant runs leave nothing to resample.
    reps = stats.bootstrap_ratios([[2.0] * 4, [3.0] * 4], [[2.1] * 4, [3.3] * 4],
                                  resamples=200)
    assert np.allclose(reps, math.sqrt(1.05 * 1.1))


def _abba_hot(rng: np.random.Generator, levels: list[float], slowdown: float,
              n: int = 100) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Hot mode as the H200 measured it at 17408x5120: each run at its own level, both
    arms alike; each arm's samples alternate between its two ABBA positions, the one
    after the other arm 2.3% slower (A after the other arm at odd i, B at even i)."""
    a, b = [], []
    for level in levels:
        pos = np.arange(n) % 2
        a.append(level * (1 + 0.023 * pos) * rng.lognormal(0, 0.004, n))
        b.append(level * slowdown * (1 + 0.023 * (1 - pos)) * rng.lognormal(0, 0.004, n))
    return a, b


def test_cell_ratio_cancels_run_levels_and_abba_position_modes() -> None:
    rng = np.random.default_rng(5)
    levels = ([21.2, 22.1, 21.4], [22.2, 21.5, 22.0], [21.7, 21.1, 21.9])
    clean = [stats.cell_ratio(*_abba_hot(rng, lv, 1.0)) for lv in levels for _ in range(5)]
    assert max(abs(r - 1.0) for r in clean) < 0.002
    # Must say no: a 3% slower candidate is outside change_max 1% by its whole CI.
    a, b = _abba_hot(rng, levels[0], 1.03)
    lo, hi = stats.bootstrap_ratio_ci(a, b, resamples=1000)
    assert lo > 1.01 and hi < 1.04


def test_to_dict_is_flat_and_complete() -> None:
    d = _cell(1, 1.02).to_dict()
    assert set(d) >= {"ratio", "ci_low", "ci_high", "mwu_u", "mwu_p", "run_ratios"}
    assert len(d["run_ratios"]) == 3  # type: ignore[arg-type]


def test_t_quantile_matches_the_table_and_refuses_bad_input() -> None:
    # two-sided 95% and 99% points of Student's t (any statistics table)
    for df, want in ((1, 12.7062), (2, 4.3027), (3, 3.1824), (9, 2.2622), (30, 2.0423)):
        assert stats.t_quantile(0.975, df) == pytest.approx(want, abs=1e-4)
    assert stats.t_quantile(0.995, 4) == pytest.approx(4.6041, abs=1e-4)
    assert stats.t_quantile(0.975, 10_000) == pytest.approx(1.96, abs=1e-3)  # the normal's
    for p, df in ((0.5, 3), (1.0, 3), (0.975, 0)):
        with pytest.raises(ValueError, match="t quantile"):
            stats.t_quantile(p, df)
