"""Drift-cancelled comparison: the ratio to the in-run baseline, the absolute time's
measured noise floor (3 history runs and each run's baseline spread), asv-style sections,
escaping."""

from __future__ import annotations

from typing import Any

import numpy as np

from hqval.result import Row, Status
from hqval.results.compare import Section, compare_rows, to_markdown
from hqval.timing.gate import Gate

GATE = Gate(ratio_max=1.05, change_max=1.01, confidence=0.95, source="test")


def _check(kernel: str, status: Status) -> Row:
    return Row("check", "reference_parity", kernel, "gfx1100", "emu", status, measured=1e-6)


def _runs(rng: np.random.Generator, scale: float, jitter: float = 0.004) -> list[list[float]]:
    # event times: 20 us with jitter and a few slow outliers, like a real clock
    out = []
    for _ in range(3):
        t = 20.0 * scale * rng.lognormal(0.0, jitter, 100)
        t[rng.integers(0, 100, 2)] *= 1.3
        out.append([float(v) for v in t])
    return out


def _cell(seed: int, ratio: float, drift: float = 1.0, status: Status = Status.PASS,
          kernel: str = "gemv_mq4g256v2_r8@17408x5120", **extra: Any) -> Row:
    """A timing cell: the baseline arm at ``drift`` (the run's clock), the candidate at
    ``drift * ratio``, interleaved."""
    rng = np.random.default_rng(seed)
    return Row("timing", "timing_cold", kernel, "sm_90", "cuda", status, measured=ratio,
               details={"mode": "cold", "shape": "17408x5120", "qt": 44, "kind": "gemv",
                        "baseline": "gemv_hfq4g256_r8",
                        "samples_a": _runs(rng, drift), "samples_b": _runs(rng, drift * ratio),
                        "gate": GATE.to_dict(), **extra})


def _aa(seed: int, drift: float = 1.0, error: float = 1.0, jitter: float = 0.004) -> Row:
    rng = np.random.default_rng(seed)
    return Row("timing", "timing_aa_cold", "gemv_hfq4g256_r8@17408x5120", "sm_90", "cuda",
               Status.PASS, measured=error,
               details={"mode": "cold", "shape": "17408x5120",
                        "samples_a": _runs(rng, drift, jitter),
                        "samples_b": _runs(rng, drift * error, jitter)})


def _steady() -> list[list[Row]]:
    """Three history runs in which the cell held steady (a spread of about 0.1%)."""
    return [[_cell(10 + i, 1.0)] for i in range(3)]


def _one(base: list[Row], new: list[Row], same_device: bool | None = True,
         history: list[list[Row]] | None = None) -> Any:
    """Compare; ``history`` defaults to three steady runs (what judges absolute time)."""
    cmp = compare_rows(base, new, same_device=same_device,
                       history=_steady() if history is None else history)
    return next(c for c in cmp.changes if c.identity.startswith("timing_cold[")), cmp


def test_drift_within_the_runs_own_baseline_spread_is_not_a_regression() -> None:
    # every kernel of the second run is 2.5% slower, and each run's baseline wandered 1%
    # between its own cells (A/A control and the cell's baseline arm): within the floor
    # (1% + 1% + change_max, above the steady history's), so unchanged, although a
    # pooled-sample test of the candidate's times would call it significant
    c, cmp = _one([_aa(1, drift=1.01), _cell(2, 1.0)],
                  [_aa(3, drift=1.015), _cell(4, 1.0, drift=1.025)])
    assert c.section is Section.UNCHANGED, c
    assert c.absolute is not None and c.absolute > 1.02
    assert c.noise_floor is not None and c.noise_floor > 0.018
    assert "baseline spread" in c.note and cmp.regressions == ()


def test_a_uniform_slowdown_of_every_kernel_is_worse() -> None:
    # the same 2.5% (and 3%) on every kernel, the baseline and the A/A control included,
    # in runs whose baseline held steady between cells, after a steady history: beyond
    # the floor, worse.  The A/A control's move between the runs is this change itself,
    # so it is no floor
    for slow in (1.025, 1.03):
        c, cmp = _one([_aa(1), _cell(2, 1.0)], [_aa(3, drift=slow), _cell(4, 1.0, drift=slow)])
        assert c.section is Section.WORSE and "absolute time" in c.note, c
        assert c.change is not None and abs(c.change.value - 1.0) < 0.005  # ratio unmoved
        assert c.noise_floor is not None and c.noise_floor < 0.005
        assert cmp.regressions == (c,)


def test_two_runs_alone_do_not_judge_absolute_time() -> None:
    # the same uniform 3% between two runs with no history: two runs do not measure how
    # far the device's speed moves between runs (on one H200 a clean cell's absolute time
    # ranged up to 1.9% over 20 re-runs), so it is shown, not judged; the ratio judges
    c, cmp = _one([_aa(1), _cell(2, 1.0)], [_aa(3, drift=1.03), _cell(4, 1.0, drift=1.03)],
                  history=[])
    assert c.section is Section.UNCHANGED and not cmp.regressions, c
    assert c.absolute is not None and c.absolute > 1.025 and c.noise_floor is None
    assert "two runs do not measure" in c.note
    assert "--history" in to_markdown(cmp)
    # two history runs are not three: still not judged
    c, cmp = _one([_aa(1), _cell(2, 1.0)], [_aa(3, drift=1.03), _cell(4, 1.0, drift=1.03)],
                  history=_steady()[:2])
    assert c.noise_floor is None and not cmp.regressions
    # a slower ratio is worse without any history
    c, cmp = _one([_aa(1), _cell(2, 1.0)], [_aa(3), _cell(4, 1.03)], history=[])
    assert c.section is Section.WORSE and cmp.regressions == (c,)


def test_a_three_percent_slower_ratio_is_worse_even_when_both_runs_failed() -> None:
    base = _cell(2, 1.06, status=Status.FAIL)
    new = _cell(4, 1.06 * 1.03, status=Status.FAIL)
    c, cmp = _one([_aa(1), base], [_aa(3), new])
    assert c.section is Section.WORSE and c.regression
    assert c.change is not None and c.change.low > 1.01
    assert cmp.regressions == (c,)


def test_faster_is_better_not_a_regression() -> None:
    c, cmp = _one([_aa(1), _cell(2, 1.0)], [_aa(3), _cell(4, 0.97)])
    assert c.section is Section.BETTER and not cmp.regressions


def test_a_noisy_aa_widens_the_change_so_a_small_shift_is_noisy_not_worse() -> None:
    # +1.6% on the ratio: worse with clean controls ...
    c, _ = _one([_aa(1), _cell(2, 1.0)], [_aa(3), _cell(4, 1.016)])
    assert c.section is Section.WORSE, c
    # ... but the runs' A/A controls missed 1.00 by 0.8%: that much error is measured
    c, cmp = _one([_aa(1, error=1.008), _cell(2, 1.0)], [_aa(3, error=0.992), _cell(4, 1.016)])
    assert c.section is Section.NOISY and not cmp.regressions
    assert "A/A error" in c.note


def test_an_aa_that_hit_1_widens_nothing_however_wide_its_own_ci() -> None:
    # A/A controls centred on 1.00 but with a wide CI of their own (a jittery clock): the
    # A/A's sampling error is its own, not the cells' (theirs is in their bootstrap), so
    # a +2.5% ratio change is worse; counting the A/A's half-width too called it noisy
    from hqval.results.compare import _aa_error

    ctl = [_aa(2, jitter=0.05), _aa(8, jitter=0.05)]  # missed 1.00 by 0.36%, 0.24%
    assert all((e := _aa_error(c)) is not None and e < 0.004 for c in ctl)  # CI +-1.3%
    c, cmp = _one([ctl[0], _cell(2, 1.0)], [ctl[1], _cell(4, 1.025)])
    assert c.section is Section.WORSE and cmp.regressions, c
    assert c.change is not None and c.change.low > 1.01


def test_a_baseline_that_wandered_between_cells_raises_the_floor() -> None:
    # in the new run the baseline kernel measured 1.00 in the A/A control and 1.05 in the
    # cell: the run itself shows its absolute times 5% apart, so the cell's +5% absolute
    # move is within the measured floor (the ratio, unmoved, is what judges it) ...
    base = [_aa(1), _cell(2, 1.0)]
    c, cmp = _one(base, [_aa(3), _cell(4, 1.0, drift=1.05)])
    assert c.section is Section.UNCHANGED and not cmp.regressions, c
    assert c.noise_floor is not None and c.noise_floor > 0.045
    # ... while the same cell with the A/A control moved along is beyond it
    c, cmp = _one(base, [_aa(3, drift=1.05), _cell(4, 1.0, drift=1.05)])
    assert c.section is Section.WORSE and cmp.regressions


def test_without_a_measured_spread_the_history_alone_sets_the_floor() -> None:
    # no A/A control and one cell: the baseline was timed in one cell of each run, so no
    # between-cell spread is measured; the steady history's spread is the floor, and
    # +5% is beyond it
    c, cmp = _one([_cell(2, 1.0)], [_cell(4, 1.0, drift=1.05)])
    assert c.noise_floor is not None and c.noise_floor < 0.005
    assert "baseline spread" not in c.note and "history floor" in c.note
    assert c.section is Section.WORSE and cmp.regressions


def test_the_baseline_spread_counts_the_baseline_only() -> None:
    from hqval.results.compare import baseline_spreads

    # a timing mutant's first arm is its unslowed twin, not the baseline: not counted
    twin = Row("timing", "timing_mutant_cold", "gemv_mq4g256v2_r8+chain8@17408x5120",
               "sm_90", "cuda", Status.PASS, measured=1.03,
               details={"mode": "cold", "shape": "17408x5120",
                        "samples_a": _runs(np.random.default_rng(9), 1.2),
                        "samples_b": _runs(np.random.default_rng(8), 1.2)})
    (spread,) = baseline_spreads([_aa(1), _cell(2, 1.0), twin]).values()
    assert spread < 0.005
    (spread,) = baseline_spreads([_aa(1), _cell(2, 1.0, drift=1.02)]).values()
    assert 0.015 < spread < 0.025


def test_history_sets_the_absolute_noise_floor() -> None:
    # every kernel 5% slower: not judged between the two runs alone ...
    base, new = [_aa(1), _cell(2, 1.0)], [_aa(3, drift=1.05), _cell(4, 1.0, drift=1.05)]
    c, _ = _one(base, new, history=[])
    assert c.section is Section.UNCHANGED and c.noise_floor is None
    # ... within the spread of 3 history runs whose cell moved 6%
    hist = [[_cell(10 + i, 1.0, drift=d)] for i, d in enumerate((1.0, 1.06, 1.02))]
    cmp = compare_rows(base, new, history=hist, same_device=True)
    c = next(c for c in cmp.changes if c.identity.startswith("timing_cold["))
    # (sd 2.95% over 3 runs: two clean runs may differ by t(2) x sqrt 2 x 2.95% = 19.7%)
    assert c.section is Section.UNCHANGED and "history floor 19.69%" in c.note
    assert not cmp.regressions
    # steady history: the 5% is beyond it, worse
    hist = [[_cell(10 + i, 1.0)] for i in range(3)]
    cmp = compare_rows(base, new, history=hist, same_device=True)
    c = next(c for c in cmp.changes if c.identity.startswith("timing_cold["))
    assert c.section is Section.WORSE and cmp.regressions


def test_the_history_floor_bounds_two_clean_runs_not_the_historys_range() -> None:
    from hqval.results.compare import _history_floor

    # three history runs 0.3% apart (range 0.6%): two clean runs can differ by more than
    # that; at 95% by t(2) x sqrt 2 x sd = 4.30 x 1.41 x 0.3% = 1.8%
    hist = [{r.identity: r for r in [_cell(10 + i, 1.0, drift=d)]}
            for i, d in enumerate((1.0, 1.003, 1.006))]
    ident = _cell(1, 1.0).identity
    got = _history_floor(ident, hist, 0.95)
    assert got is not None
    floor, n, sd = got
    assert n == 3 and 0.002 < sd < 0.004 and 0.012 < floor < 0.025
    # more runs of the same spread give a tighter bound (t(9) = 2.26 < t(2) = 4.30)
    hist10 = [{r.identity: r for r in [_cell(20 + i, 1.0, drift=1.0 + 0.003 * (i % 3))]}
              for i in range(10)]
    got10 = _history_floor(ident, hist10, 0.95)
    assert got10 is not None and got10[0] < floor
    # a clean pair 2% apart (steady baselines) is within 1.8% + change_max: not worse ...
    base, new = [_aa(1), _cell(2, 1.0)], [_aa(3, drift=1.02), _cell(4, 1.0, drift=1.02)]
    history = [[_cell(10 + i, 1.0, drift=d)] for i, d in enumerate((1.0, 1.003, 1.006))]
    c, cmp = _one(base, new, history=history)
    assert c.section is Section.UNCHANGED and not cmp.regressions, c
    # ... must say no: every kernel 5% slower is beyond it
    c, cmp = _one(base, [_aa(3, drift=1.05), _cell(4, 1.0, drift=1.05)], history=history)
    assert c.section is Section.WORSE and cmp.regressions


def test_a_steady_history_does_not_narrow_the_runs_own_baseline_spread() -> None:
    # three steady history runs (a range of ~0.1%), but each compared run's baseline
    # wandered 1% between its own cells: the floor is the larger, the runs' 2%, so the
    # cell's +2.5% is not worse
    hist = [[_cell(10 + i, 1.0)] for i in range(3)]
    cmp = compare_rows([_aa(1, drift=1.01), _cell(2, 1.0)],
                       [_aa(3, drift=1.015), _cell(4, 1.0, drift=1.025)], history=hist,
                       same_device=True)
    c = next(c for c in cmp.changes if c.identity.startswith("timing_cold["))
    assert c.section is Section.UNCHANGED and not cmp.regressions, c
    assert c.noise_floor is not None and c.noise_floor > 0.018


def test_untrusted_run_is_noisy_not_a_regression() -> None:
    c, cmp = _one([_aa(1), _cell(2, 1.0)],
                  [_aa(3), _cell(4, 1.05, status=Status.ERROR, untrusted="noisy A/A")])
    assert c.section is Section.NOISY and not cmp.regressions


def test_the_policy_gate_rejudges_both_runs_first() -> None:
    # stored as pass; a policy with ratio_max 1.01 fails the new cell (ratio 1.03): a
    # status flip pass -> fail is a regression, found from the samples alone
    strict = Gate(ratio_max=1.02, change_max=1.01)
    cmp = compare_rows([_cell(2, 1.0)], [_cell(4, 1.03)], gate_for=lambda r: strict)
    (c,) = cmp.changes
    assert c.regression and c.base.startswith("pass") and c.new.startswith("fail")


def test_rows_without_samples_compare_statuses_only() -> None:
    base = Row("timing", "timing_cold", "k@1x256", "gfx1100", "hip", Status.PASS,
               measured=1.0, details={"mode": "cold"})
    new = Row("timing", "timing_cold", "k@1x256", "gfx1100", "hip", Status.PASS,
              measured=1.5, details={"mode": "cold"})
    (c,) = compare_rows([base], [new]).changes
    assert c.section is Section.UNCHANGED and not c.regression


def test_parity_flips_missing_and_new() -> None:
    base = [_check("a", Status.PASS), _check("b", Status.FAIL), _check("c", Status.PASS)]
    new = [_check("a", Status.ERROR), _check("b", Status.PASS), _check("d", Status.PASS)]
    cmp = compare_rows(base, new, "main", "pr")
    got = {c.identity.split("|")[0]: (c.section, c.regression) for c in cmp.changes}
    assert got == {"reference_parity[a": (Section.FLIPPED, True),
                   "reference_parity[b": (Section.FLIPPED, False),
                   "reference_parity[c": (Section.MISSING, True),
                   "reference_parity[d": (Section.NEW, False)}
    md = to_markdown(cmp)
    assert md.startswith("### hqval compare: `main` -> `pr`")
    assert "2 regression(s)" in md
    assert md.index("#### missing") < md.index("#### status flips") < md.index("#### new")


def test_markdown_says_no_changes() -> None:
    rows = [_check("a", Status.PASS)]
    assert "No changes." in to_markdown(compare_rows(rows, rows))


def test_markdown_escapes_identities_labels_and_notes() -> None:
    from ..conftest import live_markup, table_cells  # type: ignore[import-not-found]

    evil = "k|`x` <b>[a](https://evil.example)</b>"
    base = [_check(evil, Status.PASS), _aa(1), _cell(2, 1.0, kernel=evil + "@17408x5120")]
    new = [Row("check", "reference_parity", evil, "gfx1100", "emu", Status.FAIL,
               measured=1.0, message=f"note | {evil}"),
           _aa(3), _cell(4, 1.04, kernel=evil + "@17408x5120")]
    md = to_markdown(compare_rows(base, new, f"main {evil}", "pr"))
    assert "#### worse" in md and "#### status flips" in md
    assert live_markup(md) == []
    rows = [line for line in md.splitlines() if line.startswith("|")]
    assert len(rows) >= 6 and {table_cells(line) for line in rows} == {7}


def test_a_vanished_kernel_cell_is_a_regression_a_vanished_ceiling_is_not() -> None:
    ceiling = Row("timing", "torch_mv_bf16_cold", "torch.mv@17408x5120", "sm_90", "cuda",
                  Status.PASS, measured=48.9, details={"mode": "cold"})
    cmp = compare_rows([ceiling, _cell(2, 1.0)], [])
    got = {c.identity.split("[")[0]: c.regression for c in cmp.changes}
    assert got == {"torch_mv_bf16_cold": False, "timing_cold": True}
    assert all(c.section is Section.MISSING for c in cmp.changes)


def _two_level(seed: int, levels: tuple[float, ...], ratio: float = 1.0) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [[float(v) for v in 30.0 * lv * ratio * rng.lognormal(0.0, 0.003, 100)]
            for lv in levels]


def _rows_two_level(seed: int, levels: tuple[float, ...], cell_levels: tuple[float, ...],
                    cand: float = 1.0) -> list[Row]:
    aa = Row("timing", "timing_aa_cold", "gemv_hfq4g256_r8@17408x5120", "sm_90", "cuda",
             Status.PASS, measured=1.0,
             details={"mode": "cold", "shape": "17408x5120",
                      "samples_a": _two_level(seed, levels),
                      "samples_b": _two_level(seed + 1, levels)})
    cell = Row("timing", "timing_cold", "gemv_mq4g256v2_r8@17408x5120", "sm_90", "cuda",
               Status.PASS, measured=cand,
               details={"mode": "cold", "shape": "17408x5120", "qt": 44, "kind": "gemv",
                        "baseline": "gemv_hfq4g256_r8",
                        "samples_a": _two_level(seed + 2, cell_levels),
                        "samples_b": _two_level(seed + 3, cell_levels, cand),
                        "gate": GATE.to_dict()})
    return [aa, cell]


def test_runs_at_two_levels_move_a_pooled_absolute_time_without_a_regression() -> None:
    # every run sits at one of two levels 2.3% apart, both arms alike (the H200 at hot
    # 27648x5120): the base's cell has one slow run of three, the new one two
    lo, hi = 1.0, 1.023
    base = _rows_two_level(10, (lo, hi, lo), (lo, hi, lo))
    new = _rows_two_level(20, (lo, hi, lo), (hi, lo, hi))
    c, cmp = _one(base, new)
    # the pooled median moved 1.4% on the H200; the fastest run's median does not move
    assert c.absolute is not None and abs(c.absolute - 1.0) < 0.005
    assert c.section is not Section.WORSE and not cmp.regressions, c
    # the same runs with the candidate 5% slower than its baseline: still worse
    c, cmp = _one(base, _rows_two_level(20, (lo, hi, lo), (hi, lo, hi), cand=1.05))
    assert c.section is Section.WORSE and cmp.regressions


def test_steady_runs_keep_the_absolute_floor_tight() -> None:
    # steady runs: a 3% slowdown of every kernel (A/A control and both arms of the cell)
    # is beyond the floor: worse
    base = _rows_two_level(30, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0))
    new = _rows_two_level(40, (1.03, 1.03, 1.03), (1.03, 1.03, 1.03))
    c, cmp = _one(base, new)
    assert c.section is Section.WORSE and "absolute time" in c.note and cmp.regressions
    assert c.noise_floor is not None and c.noise_floor < 0.005


def test_absolute_time_is_judged_between_runs_on_one_device_only() -> None:
    # every kernel 3% slower: on one GPU that is beyond the floor (worse); between two GPUs
    # of one kind, or runs that do not say which GPU, the floors (one GPU's wander) do not
    # bound it, so the absolute time is not judged and the unmoved ratio says unchanged
    base = [_aa(1), _cell(2, 1.0)]
    new = [_aa(3, drift=1.03), _cell(4, 1.0, drift=1.03)]
    c, cmp = _one(base, new, same_device=True)
    assert c.section is Section.WORSE and cmp.regressions
    for same, why in ((False, "different devices"), (None, "do not both name their device")):
        c, cmp = _one(base, new, same_device=same)
        assert c.section is Section.UNCHANGED and not cmp.regressions, c
        assert c.noise_floor is None and why in c.note
    # a slower ratio is worse whichever devices timed it
    c, cmp = _one(base, [_aa(3), _cell(4, 1.03)], same_device=None)
    assert c.section is Section.WORSE and cmp.regressions


def test_device_identity_is_the_recorded_gpu_uuid() -> None:
    from hqval.results.compare import device_identity, same_device

    a = {"runtime": {"uuid": "GPU-aaaa"}}
    a_smi = {"runtime": {"smi.uuid": "GPU-aaaa"}}
    b = {"runtime": {"uuid": "GPU-bbbb", "smi.uuid": "GPU-bbbb"}}
    old = {"runtime": {"device": "NVIDIA H200", "smi.name": "NVIDIA H200"}}  # no UUID
    assert device_identity(a) == device_identity(a_smi) == "GPU-aaaa"
    assert device_identity(old) is None and device_identity({}) is None
    assert device_identity({"runtime": {"simulated": "true"}}) == "simulated timing device"
    assert device_identity({"runtime": {"emulator": "hqval.emu 0.1", "arch": "gfx1100"}}) \
        == "hqval.emu 0.1 gfx1100"
    assert same_device(a, a_smi) is True
    assert same_device(a, b) is False
    assert same_device(a, old) is None and same_device(old, old) is None
    assert same_device(a, a, b) is False  # a baseline set on two GPUs
    assert same_device(a, old, b) is False  # two named GPUs differ, whatever the rest say


def test_a_timing_mutants_own_cell_is_listed_never_a_regression() -> None:
    # `hqval bench --timing-mutants`: a +5% mutant's cell against qt=6 sits at ratio_max,
    # so its verdict flaps pass <-> noisy between clean re-runs; an instrument, not a
    # kernel (on the H200 studies' raw runs this flagged 48-79 of 190 clean pairs)
    def mutant(seed: int, ratio: float, status: Status) -> Row:
        r = _cell(seed, ratio, status=status,
                  kernel="gemv_mq4g256v2_r8+chain32@17408x5120",
                  mutant_of="gemv_mq4g256v2_r8")
        return r

    base = [_aa(1), _cell(2, 1.0), mutant(5, 1.045, Status.PASS)]
    new = [_aa(3), _cell(4, 1.0), mutant(6, 1.05, Status.ERROR)]
    cmp = compare_rows(base, new, same_device=True)
    m = next(c for c in cmp.changes if "+chain32" in c.identity)
    assert not m.regression and "timing mutant" in m.note and not cmp.regressions
    # ... nor when it is missing from the new run
    cmp = compare_rows(base, new[:2], same_device=True)
    assert not cmp.regressions
    # must say no: the same flip of a kernel's own cell is a regression
    cmp = compare_rows([_aa(1), _cell(2, 1.0)], [_aa(3), _cell(4, 1.0, status=Status.ERROR)],
                       same_device=True)
    assert len(cmp.regressions) == 1
