"""Statistics for interleaved A/B timing: the cell ratio, bootstrap CIs, Mann-Whitney U.

Arm A is the baseline (v1), arm B the candidate (v2); every ratio is B / A, so > 1 means B
is slower (section 6's convention).  A timing cell is ``runs`` lists of per-sample times
for each arm, sample ``i`` of A and B taken back to back in ABBA order.

What counts as a regression is not decided here: the timing gate (hqval.timing.gate,
read from matrices/policy.yaml) judges the bootstrap CI computed here.  Mann-Whitney U is
reported beside it, never as the verdict: over hundreds of pooled samples it calls any
drift significant.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# A/A control: v1 timed against itself must land within 0.5% of 1.00, else the run is noisy.
# Two arms reading identical bytes differ only by noise and order effects,
# which ABBA cancels; 0.5% is a quarter of the smallest change the suite is asked to find.
AA_TOLERANCE = 0.005

FloatArray = npt.NDArray[np.float64]
Samples = Sequence[float] | FloatArray
Runs = Sequence[Samples]


def _as_samples(x: Samples, what: str) -> FloatArray:
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size == 0:
        raise ValueError(f"{what}: no samples; time at least one iteration")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: non-finite sample times; the event clock returned garbage")
    return a


def mann_whitney_u(
    a: Samples, b: Samples
) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test.  Returns ``(u, p)`` with ``u`` the statistic of ``a``
    (pairs where a > b, ties counting one half).

    ``p`` is the normal approximation with tie correction and continuity correction (what
    scipy calls ``method="asymptotic"``).  Timing cells have 100 samples per arm per run,
    far inside the approximation's range; for fewer than 8 per arm it is only indicative.
    """
    x = _as_samples(a, "mann_whitney_u a")
    y = _as_samples(b, "mann_whitney_u b")
    n1, n2 = x.size, y.size
    both = np.concatenate([x, y])
    ranks = _rankdata(both)
    r1 = float(ranks[:n1].sum())
    u1 = r1 - n1 * (n1 + 1) / 2.0
    mu = n1 * n2 / 2.0
    n = n1 + n2
    _, counts = np.unique(both, return_counts=True)
    tie_term = float((counts**3 - counts).sum()) / (n * (n - 1)) if n > 1 else 0.0
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var <= 0.0:  # every sample identical: no evidence of any difference
        return u1, 1.0
    u_big = max(u1, n1 * n2 - u1)
    z = (u_big - mu - 0.5) / math.sqrt(var)
    p = math.erfc(max(z, 0.0) / math.sqrt(2.0))
    return u1, min(1.0, p)


def _rankdata(x: FloatArray) -> FloatArray:
    """Average ranks (1-based), ties sharing the mean of their positions."""
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    ranks = np.empty(x.size, dtype=np.float64)
    # Boundaries of runs of equal values in sorted order.
    starts = np.flatnonzero(np.concatenate([[True], sorted_x[1:] != sorted_x[:-1]]))
    ends = np.concatenate([starts[1:], [x.size]])
    avg = (starts + ends + 1) / 2.0  # mean of 1-based positions start+1 .. end
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


# Fraction of each arm's samples in a run trimmed from each end before averaging: the
# interquartile mean.  See :func:`cell_ratio`.
TRIM = 0.25


def _locations(m: FloatArray) -> FloatArray:
    """:func:`location` of each row of ``m`` (one bootstrap replicate per row)."""
    s = np.sort(m, axis=1)
    k = int(s.shape[1] * TRIM)
    out: FloatArray = s[:, k:s.shape[1] - k].mean(axis=1)
    return out


def location(x: Samples, what: str = "location") -> float:
    """The interquartile mean of one arm's samples in one run: the mean of what is left
    after trimming ``TRIM`` of the samples from each end (the plain mean below 4 samples)."""
    return float(_locations(_as_samples(x, what)[None, :])[0])


def run_ratio(a: Samples, b: Samples) -> float:
    """One run's ratio: location(B) / location(A), > 1 means arm B is slower."""
    la, lb = location(a, "arm A"), location(b, "arm B")
    if la <= 0.0:
        raise ValueError("arm A's time is not positive; the event clock is broken")
    return lb / la


def _geometric_mean(ratios: Sequence[float]) -> float:
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


def cell_ratio(runs_a: Runs, runs_b: Runs) -> float:
    """A timing cell's ratio: the geometric mean over its runs of each run's
    :func:`run_ratio`.  The one definition every verdict, comparison and report uses.

    Why not the median of all samples pooled, as before (measured on the eight stored H200
    studies, reports/checkpoints/2026-12-01-h200-timing-stability-4/):

    - a run's level is shared by both arms and moves from run to run (hot 17408x5120: the
      baseline's per-run medians 21.2 to 22.1 us within one cell, its candidate alike), so
      the pooled samples of an arm are a mixture of the runs' levels, and its median sits
      wherever the mixture's gaps put it.  A ratio per run cancels the level;
    - ABBA gives each arm exactly half its samples in each order position, and in hot mode
      the two positions differ (a sample after its own arm ran about 2% faster than one
      after the other arm, at 47 MB in a 60 MB L2), so each arm's samples in a run are
      bimodal with equal weights.  A median of such a sample sits in the gap between the
      modes and a few samples move it; the interquartile mean averages both modes' centres.

    What it did to clean cells' re-run-to-re-run spread on the H200: docs/timing.md, "The
    cell ratio", and reports/checkpoints/2026-12-01-h200-timing-stability-4.
    """
    if len(runs_a) != len(runs_b) or not runs_a:
        raise ValueError("runs_a and runs_b need the same, non-zero number of runs")
    return _geometric_mean([run_ratio(a, b) for a, b in zip(runs_a, runs_b, strict=True)])


def bootstrap_ratios(
    runs_a: Runs,
    runs_b: Runs,
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> FloatArray:
    """``resamples`` bootstrap replicates of :func:`cell_ratio`.

    Samples are resampled with replacement within each run and each arm (stratified), so a
    slow run cannot migrate into another run's share; each replicate is the same statistic
    :func:`cell_ratio` computes on the samples.  The replicates themselves are what a
    comparison of two cells needs (the ratio of two cells' ratios, replicate by
    replicate); :func:`bootstrap_ratio_ci` takes their percentiles.
    """
    if resamples < 100:
        raise ValueError(f"resamples {resamples} is too few for a percentile CI; use >= 1000")
    if len(runs_a) != len(runs_b) or not runs_a:
        raise ValueError("runs_a and runs_b need the same, non-zero number of runs")
    rng = np.random.default_rng(seed)

    def replicate_locations(run: Samples, what: str) -> FloatArray:
        s = _as_samples(run, what)
        return _locations(s[rng.integers(0, s.size, size=(resamples, s.size))])

    logs = np.zeros(resamples)
    for i, (ra, rb) in enumerate(zip(runs_a, runs_b, strict=True)):
        la = replicate_locations(ra, f"arm A run {i}")
        lb = replicate_locations(rb, f"arm B run {i}")
        if np.any(la <= 0.0):
            raise ValueError("arm A's time is not positive; the event clock is broken")
        logs += np.log(lb / la)
    out: FloatArray = np.exp(logs / len(runs_a))
    return out


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (0.5 < p < 1) of Student's t with ``df`` degrees of freedom: the
    CDF integrated from the density on a fine grid (Simpson), then bisected.  Accurate to
    about 1e-6 for df >= 1 and p <= 0.9995 (tests/timing/test_stats.py checks table
    values)."""
    if not 0.5 < p < 1.0 or df < 1:
        raise ValueError(f"t quantile p={p}, df={df}: need 0.5 < p < 1 and df >= 1")
    log_c = (math.lgamma((df + 1) / 2) - math.lgamma(df / 2)
             - 0.5 * math.log(df * math.pi))

    def cdf(x: float) -> float:
        t = np.linspace(0.0, x, 4001)
        f = np.exp(log_c - (df + 1) / 2 * np.log1p(t * t / df))
        h = x / 4000
        return 0.5 + h / 3 * float(f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def percentile_ci(replicates: FloatArray, confidence: float) -> tuple[float, float]:
    """The central ``confidence`` interval of bootstrap replicates."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} must lie in (0, 1), e.g. 0.95")
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(replicates, [tail, 1.0 - tail])
    return float(lo), float(hi)


def bootstrap_ratio_ci(
    runs_a: Runs,
    runs_b: Runs,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of :func:`cell_ratio` (see :func:`bootstrap_ratios`)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} must lie in (0, 1), e.g. 0.95")
    return percentile_ci(bootstrap_ratios(runs_a, runs_b, resamples=resamples, seed=seed),
                         confidence)


@dataclass(frozen=True)
class RatioStats:
    """Statistics of one A/B cell over all its runs."""

    median_a: tuple[float, ...]  # per run
    median_b: tuple[float, ...]
    run_ratios: tuple[float, ...]  # run_ratio per run
    ratio: float  # cell_ratio: geometric mean of run_ratios
    ci_low: float
    ci_high: float
    confidence: float
    u: float
    p: float
    samples_per_arm: int

    @property
    def spread(self) -> float:
        """Max minus min of the per-run ratios: how much the runs disagree."""
        return max(self.run_ratios) - min(self.run_ratios)

    def aa_noisy(self, tolerance: float = AA_TOLERANCE) -> bool:
        """For an A/A cell: the ratio misses 1.00 by more than ``tolerance``."""
        return abs(self.ratio - 1.0) > tolerance

    def to_dict(self) -> dict[str, object]:
        return {
            "median_a": list(self.median_a),
            "median_b": list(self.median_b),
            "run_ratios": list(self.run_ratios),
            "ratio": self.ratio,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence": self.confidence,
            "mwu_u": self.u,
            "mwu_p": self.p,
            "samples_per_arm": self.samples_per_arm,
        }


def summarize(
    runs_a: Runs,
    runs_b: Runs,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> RatioStats:
    """Per-run medians and ratios, the cell ratio, its bootstrap CI and Mann-Whitney U."""
    if len(runs_a) != len(runs_b) or not runs_a:
        raise ValueError("runs_a and runs_b need the same, non-zero number of runs")
    a_runs = [_as_samples(r, f"arm A run {i}") for i, r in enumerate(runs_a)]
    b_runs = [_as_samples(r, f"arm B run {i}") for i, r in enumerate(runs_b)]
    all_a = np.concatenate(a_runs)
    all_b = np.concatenate(b_runs)
    lo, hi = bootstrap_ratio_ci(a_runs, b_runs, confidence=confidence, resamples=resamples,
                                seed=seed)
    u, p = mann_whitney_u(all_a, all_b)
    run_ratios = tuple(run_ratio(ra, rb) for ra, rb in zip(a_runs, b_runs, strict=True))
    return RatioStats(
        median_a=tuple(float(np.median(r)) for r in a_runs),
        median_b=tuple(float(np.median(r)) for r in b_runs),
        run_ratios=run_ratios,
        ratio=_geometric_mean(run_ratios),  # cell_ratio, from the run ratios just made
        ci_low=lo,
        ci_high=hi,
        confidence=confidence,
        u=u,
        p=p,
        samples_per_arm=int(all_a.size),
    )
