"""Compare two runs cell by cell: drift-cancelled timing changes and status flips.

Absolute event times drift between runs of the same build on the same device (the A/A
control itself moves), and a Mann-Whitney test over hundreds of pooled samples calls any
such drift significant.  So
the compared quantity of a timing cell is its **ratio to its own interleaved baseline in
each run** (v2/v1, where drift cancels), with its bootstrap CI:

- ``change = ratio_new / ratio_base``, its CI from the two cells' bootstrap replicates
  (replicate by replicate), judged on the gate's ``change_max`` (hqval.timing.gate, from
  matrices/policy.yaml): **worse** when the whole CI lies above ``change_max``, **better**
  when it lies below ``1 / change_max``, **unchanged** when it lies between, otherwise
  **noisy**.  Statuses do not gate this: a cell that failed in both runs but got much
  slower is still worse.
- A change in **absolute** time (the candidate's fastest per-run median) is flagged
  only beyond the measured **run-to-run** noise floor, which takes at least 3 history
  runs holding the cell: the larger of how far two clean runs can differ given the
  cell's spread over them (``_history_floor``: Student's t x sqrt 2 x their standard
  deviation) and the sum of both runs' **baseline spreads** (how far the same baseline
  kernel's absolute time wandered between the cells of each run: both arms of the A/A
  control and the baseline arm of every cell of that mode and shape,
  ``baseline_spreads``).  Two runs alone do not measure it: the baseline spreads are one
  run's wander between its cells, while the device's speed also moves between runs
  (measured: docs/timing.md, "Comparing runs").  So without history the absolute time is
  shown, not judged.  Not the A/A control's move
  between the runs either: when every kernel got slower, the baseline with them, that
  move *is* the change.  Never a pooled-sample test alone.  And only between runs timed
  on **one device**: the floors measure one GPU's wander, not how far two GPUs of the
  same kind differ (docs/timing.md), so absolute time is judged only
  when both runs name the same device (``device_identity``: the GPU's UUID, or the
  emulator) or the caller says they are one (``same_device``); otherwise the ratio alone
  judges.
- Status flips (a cell ok in one run and failed or errored in the other, after both runs
  are re-judged under the same gate), cells missing from the new run and new cells are
  sections of their own, as asv prints them.

Parity rows (checks, audits, mutants) have statuses only: their flips and absences.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hqval import markdown as md
from hqval.result import Row, Status
from hqval.timing import stats
from hqval.timing.gate import RESAMPLES, Gate, is_gated, rejudge, stored_samples


class Section(enum.StrEnum):
    WORSE = "worse"
    BETTER = "better"
    NOISY = "noisy"
    MISSING = "missing"  # ok in the base run, absent from the new one
    FLIPPED = "status flips"
    NEW = "new"  # only in the new run
    UNCHANGED = "unchanged"


ORDER = (Section.WORSE, Section.BETTER, Section.NOISY, Section.MISSING, Section.FLIPPED,
         Section.NEW, Section.UNCHANGED)


@dataclass(frozen=True)
class Ratio:
    value: float
    low: float
    high: float

    def text(self) -> str:
        return f"{self.value:.4f} [{self.low:.4f}, {self.high:.4f}]"


@dataclass(frozen=True)
class Change:
    identity: str
    kind: str  # "timing" | "parity"
    section: Section
    base: str  # status (and ratio) in the base run
    new: str
    regression: bool = False
    ratio_base: Ratio | None = None
    ratio_new: Ratio | None = None
    change: Ratio | None = None  # ratio_new / ratio_base
    absolute: float | None = None  # candidate median new / base
    noise_floor: float | None = None  # relative, for the absolute change
    tolerance: float | None = None  # the gate's change_max
    note: str = ""

    @property
    def is_regression(self) -> bool:
        return self.regression


@dataclass(frozen=True)
class Comparison:
    base_label: str
    new_label: str
    changes: tuple[Change, ...]
    gates: tuple[str, ...] = field(default=())  # the gates that judged the timing cells
    same_device: bool | None = True  # both runs on one device: absolute time judged

    @property
    def regressions(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.regression)

    def section(self, s: Section) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.section is s)

    def notable(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.section is not Section.UNCHANGED)


GateFor = Callable[[Row], Gate | None]


def _status_text(r: Row) -> str:
    if r.measured is None or not math.isfinite(r.measured):
        return str(r.status)
    return f"{r.status} ({r.measured:.4g})"


@dataclass(frozen=True)
class _Cell:
    """A timing cell's samples and bootstrap replicates of its ratio."""

    row: Row
    runs_a: list[list[float]]
    runs_b: list[list[float]]
    reps: np.ndarray
    ratio: float  # stats.cell_ratio of the samples

    def ci(self, confidence: float) -> Ratio:
        lo, hi = stats.percentile_ci(self.reps, confidence)
        return Ratio(self.ratio, lo, hi)


def _cell(row: Row, seed: int) -> _Cell | None:
    pair = stored_samples(row)
    if pair is None:
        return None
    a, b = pair
    return _Cell(row, a, b, stats.bootstrap_ratios(a, b, resamples=RESAMPLES, seed=seed),
                 stats.cell_ratio(a, b))


def is_timing_mutant(r: Row) -> bool:
    """A timing mutant's own cell (``hqval bench --timing-mutants``: the kernel slowed on
    purpose, against the baseline), not a kernel's."""
    return bool(r.details.get("mutant_of"))


def control_key(r: Row) -> tuple[str, str, str, str]:
    return (str(r.details.get("mode")), str(r.details.get("shape")), r.arch, r.backend)


def controls_of(rows: Iterable[Row]) -> dict[tuple[str, str, str, str], Row]:
    """The A/A control of each (mode, shape, arch, backend) group of a run."""
    return {control_key(r): r for r in rows
            if r.kind == "timing" and r.check.startswith("timing_aa_")
            and stored_samples(r) is not None}


def _abs_time(runs: Sequence[Sequence[float]]) -> float:
    """A cell's absolute time: the fastest of its per-run medians.  Not the pooled median:
    on the H200 each run sat at one of two levels, both arms alike, so a pooled median
    moved with the count of slow runs while the ratio did not (docs/timing.md); the
    fastest run's median is the fast level whenever one run reached it, and a real
    slowdown moves every run."""
    return min(float(np.median(np.asarray(r, dtype=np.float64))) for r in runs)


BandKey = tuple[str, str, str, str, str]  # mode, shape, arch, backend, baseline kernel


def _baseline_of(r: Row) -> str | None:
    """The baseline kernel a timing row's first arm timed: the A/A control's own kernel,
    a gated cell's ``baseline``; None for other rows (a timing mutant's first arm is its
    unslowed twin, not the baseline)."""
    if r.kind != "timing":
        return None
    if r.check.startswith("timing_aa_"):
        return r.kernel.split("@")[0]
    if is_gated(r):
        b = r.details.get("baseline")
        return str(b) if b else None
    return None


def band_key(r: Row) -> BandKey | None:
    b = _baseline_of(r)
    return None if b is None else (*control_key(r), b)


def baseline_times(rows: Iterable[Row]) -> dict[BandKey, list[tuple[str, float]]]:
    """Per (mode, shape, arch, backend, baseline kernel) of one run: the baseline kernel's
    absolute time (fastest per-run median) in every cell that timed it, as (cell, time):
    both arms of the A/A control and the first arm of every gated cell."""
    out: dict[BandKey, list[tuple[str, float]]] = {}
    for r in rows:
        key = band_key(r)
        p = stored_samples(r) if key is not None else None
        if key is None or p is None:
            continue
        arms = (p[0], p[1]) if r.check.startswith("timing_aa_") else (p[0],)
        out.setdefault(key, []).extend((r.identity, _abs_time(a)) for a in arms)
    return out


def baseline_spreads(rows: Iterable[Row]) -> dict[BandKey, float]:
    """The measured between-cell drift of one run: per band key, how far the same
    baseline kernel's absolute time spread over the cells of the run (max / min - 1).
    Measured only where at least two cells timed it (one cell's two arms are interleaved
    and would not see the drift between cells)."""
    out = {}
    for key, times in baseline_times(rows).items():
        if len({c for c, _ in times}) >= 2:
            ts = [t for _, t in times]
            out[key] = max(ts) / min(ts) - 1.0
    return out


def device_identity(envelope: Mapping[str, Any]) -> str | None:
    """The device a run was timed on, where its envelope says: the GPU's UUID as the
    backend recorded it (``runtime.uuid``, or nvidia-smi's ``runtime.smi.uuid``), the
    simulated timing device or the emulator; None when the run does not record one (runs before
    the UUID was recorded)."""
    runtime = envelope.get("runtime")
    runtime = runtime if isinstance(runtime, Mapping) else {}
    for key in ("uuid", "smi.uuid"):
        v = runtime.get(key)
        if isinstance(v, str) and v.strip():
            return v.strip()
    if envelope.get("simulated") is True or runtime.get("simulated") == "true":
        return "simulated timing device"  # hqval.timing.simulate: one model, everywhere
    if "emulator" in runtime:
        return f"{runtime['emulator']} {runtime.get('arch', '')}".strip()
    return None


def same_device(*envelopes: Mapping[str, Any]) -> bool | None:
    """True when every envelope names one and the same device, False when two name
    different devices, None otherwise (some do not say)."""
    ids = [device_identity(e) for e in envelopes]
    known = {i for i in ids if i is not None}
    if len(known) > 1:
        return False
    return True if known and None not in ids else None


def _aa_error(control: Row | None, cache: CellCache | None = None) -> float | None:
    """How far the run's A/A control (one kernel against a copy of itself) missed 1.00:
    what an interleaved ratio can be off in that run and group beyond the compared cells'
    own sampling error (which their bootstrap already carries).  Not plus the A/A's own
    CI half-width, as it was: that is the A/A cell's sampling error, counted again on top
    of the cells' own, which made the change's CI far wider than its confidence says
    (the figures: reports/checkpoints/2026-12-01-h200-timing-stability-3)."""
    if cache is not None and control is not None:
        key = ("aa", id(control))
        if key not in cache:
            cache[key] = _aa_error(control)
        return cache[key]  # type: ignore[no-any-return]
    p = stored_samples(control) if control is not None else None
    if p is None:
        return None
    return abs(stats.cell_ratio(p[0], p[1]) - 1.0)


def _history_floor(identity: str, history: Sequence[Mapping[str, Row]],
                   confidence: float) -> tuple[float, int, float] | None:
    """The run-to-run noise floor of the cell's absolute time from >= 3 history runs that
    hold it: how far two clean runs' times can differ at ``confidence``, from the spread
    the history measured.  With s the standard deviation of log time over the n history
    runs, two new runs differ by a normal variable of sd sqrt(2) sigma, bounded at
    ``confidence`` by t(n - 1) x sqrt(2) x s (Student's t: n runs estimate sigma):
    floor = exp(that) - 1.  Not the history's range, as it was: three runs' range is
    about 1.7 sigma, while two clean runs differ by more than that 23% of the time, and
    it let clean pairs through as worse (reports/checkpoints/
    2026-12-01-h200-timing-stability-4, q-procs/).
    Returns (floor, n, s), or None under 3 runs."""
    times = []
    for run in history:
        r = run.get(identity)
        p = stored_samples(r) if r is not None else None
        if p is not None:
            times.append(_abs_time(p[1]))
    if len(times) < 3:
        return None
    sd = float(np.std(np.log(times), ddof=1))
    t = stats.t_quantile((1.0 + confidence) / 2.0, len(times) - 1)
    return math.expm1(t * math.sqrt(2.0) * sd), len(times), sd


CellCache = dict[object, Any]


def _cached_cell(row: Row, seed: int, cache: CellCache | None) -> _Cell | None:
    if cache is None:
        return _cell(row, seed)
    key = id(row)
    if key not in cache:
        cache[key] = _cell(row, seed)
    cell: _Cell | None = cache[key]
    return cell


def compare_timing(
    base: Row, new: Row, gate: Gate | None, *,
    control_base: Row | None = None, control_new: Row | None = None,
    spread_base: float | None = None, spread_new: float | None = None,
    history: Sequence[Mapping[str, Row]] = (), same_device: bool | None = None,
    seed: int = 0, cache: CellCache | None = None,
) -> Change:
    """One timing cell present in both runs (see the module docstring).  ``control_*``:
    each run's A/A control of the cell's group (its error widens the ratio's CI);
    ``spread_*``: each run's baseline spread for the cell (``baseline_spreads``), the
    absolute time's noise floor without history.  ``same_device``: whether both runs
    were timed on one device (``same_device(envelope, envelope)``); absolute time is
    judged only when True.  ``cache`` (keyed by ``id(row)``; the
    caller keeps the rows alive) reuses bootstrap replicates when one run is compared
    with many."""
    ident = new.identity
    flip = base.status.ok and not new.status.ok
    texts = (_status_text(base), _status_text(new))
    # one seed per row, not per position: a row compared as base and as new replicates alike
    cb, cn = _cached_cell(base, seed, cache), _cached_cell(new, seed, cache)
    if cb is None or cn is None:
        section = Section.FLIPPED if base.status.ok != new.status.ok else Section.UNCHANGED
        return Change(ident, "timing", section, *texts, regression=flip,
                      note="no stored samples: statuses compared only")
    if gate is None:
        stored = new.details.get("gate") or base.details.get("gate")
        gate = Gate.from_dict(stored) if isinstance(stored, dict) else None
    if gate is None:
        return Change(ident, "timing", Section.NOISY, *texts, regression=flip,
                      note="no timing gate for this cell in the policy: change not judged")
    conf, tol = gate.confidence, gate.change_max
    rb, rn = cb.ci(conf), cn.ci(conf)
    q = cn.reps / cb.reps
    lo, hi = stats.percentile_ci(q, conf)
    notes: list[str] = []
    # The bootstrap CI covers the sampling error within each run only.  How far an
    # interleaved ratio can be off in a run beyond that is what the run's A/A control
    # measured (two copies of one kernel, the same cache and clock dynamics): widen the
    # change's CI by both runs' A/A errors (in quadrature).
    e_b, e_n = _aa_error(control_base, cache), _aa_error(control_new, cache)
    widen = math.hypot(e_b or 0.0, e_n or 0.0)
    if widen > 0.0:
        lo, hi = lo / (1.0 + widen), hi * (1.0 + widen)
        notes.append(f"CI widened by the A/A error {widen:.2%}")
    change = Ratio(rn.value / rb.value, lo, hi)
    if lo > tol:
        section = Section.WORSE
    elif hi < 1.0 / tol:
        section = Section.BETTER
    elif lo >= 1.0 / tol and hi <= tol:
        section = Section.UNCHANGED
    else:
        section = Section.NOISY

    absolute = _abs_time(cn.runs_b) / _abs_time(cb.runs_b)
    floor: float | None = None
    # the history is read only where absolute time can be judged at all (one device)
    hist = _history_floor(ident, history, conf) if same_device is True else None
    if hist is not None:
        hist_floor, n_hist, sd_hist = hist
        # the history measures the run-to-run noise (_history_floor); the two runs'
        # baseline spreads (their wander between cells) count too, and the larger is the
        # floor: on the H200, one process a re-run, three runs' range alone let 6 of 190
        # clean pairs through as worse
        floor = hist_floor
        notes.append(f"history floor {hist_floor:.2%} (t x sqrt 2 x sd {sd_hist:.2%} over "
                     f"{n_hist} runs)")
        if spread_base is not None and spread_new is not None:
            floor = max(floor, spread_base + spread_new)
            notes.append(f"baseline spread {spread_base:.2%} (base) + {spread_new:.2%} (new)")
    if same_device is not True:
        # the floors measure one GPU's wander; two GPUs of one kind differ beyond them
        floor = None
        notes.append("absolute time not judged: " + (
            "the runs were timed on different devices; the ratio judges the change"
            if same_device is False else
            "the runs do not both name their device (a GPU UUID); the ratio judges the "
            "change (hqval compare --same-device if they were one GPU)"))
    elif floor is None:
        notes.append("absolute time not judged: two runs do not measure how far the "
                     "device's speed moves between runs; give 3 history runs holding the "
                     "cell (--history); the ratio judges the change")
    if floor is not None and abs(absolute - 1.0) > floor + (tol - 1.0):
        if section in (Section.UNCHANGED, Section.NOISY, Section.BETTER) and absolute > 1.0:
            section = Section.WORSE
            notes.insert(0, f"absolute time {absolute - 1:+.2%} beyond the noise floor "
                            f"{floor:.2%} + {tol - 1:.0%}")
        elif section in (Section.UNCHANGED, Section.NOISY) and absolute < 1.0:
            section = Section.BETTER
            notes.insert(0, f"absolute time {absolute - 1:+.2%} beyond the noise floor")
    untrusted = new.details.get("untrusted") or base.details.get("untrusted")
    if untrusted:
        # a run whose A/A control stayed noisy proves nothing either way about the cell:
        # noisy here (admission still fails it closed), never a regression
        return Change(ident, "timing", Section.NOISY, *texts, regression=False,
                      ratio_base=rb, ratio_new=rn, change=change, absolute=absolute,
                      noise_floor=floor, tolerance=tol,
                      note="; ".join([f"run not trusted ({untrusted})", *notes]))
    if flip and section is not Section.WORSE:
        notes.insert(0, f"status {base.status} -> {new.status}")
        section = Section.FLIPPED
    elif base.status.ok != new.status.ok:
        notes.insert(0, f"status {base.status} -> {new.status}")
    regression = section is Section.WORSE or flip
    return Change(ident, "timing", section, *texts, regression=regression, ratio_base=rb,
                  ratio_new=rn, change=change, absolute=absolute, noise_floor=floor,
                  tolerance=tol, note="; ".join(notes))


def compare_rows(
    base: Iterable[Row], new: Iterable[Row], base_label: str = "base", new_label: str = "new",
    *, gate_for: GateFor | None = None, history: Sequence[Iterable[Row]] = (),
    same_device: bool | None = None, cache: CellCache | None = None,
) -> Comparison:
    """Every cell of ``base`` against ``new``.  ``gate_for`` finds each timing row's gate
    (``hqval.admission.gate_for_row``; default: the gate the row stored); both runs' timing
    rows are re-judged under it first.  ``history``: earlier runs' rows, for the absolute
    noise floor (used when at least 3 hold the cell).  ``same_device``: both runs were
    timed on one device (see ``compare_timing``); absolute time is judged only then."""

    def judged(rows: Iterable[Row]) -> dict[str, Row]:
        out = {}
        for r in rows:
            g = gate_for(r) if gate_for is not None and is_gated(r) else None
            out[r.identity] = rejudge(r, g) if g is not None else r
        return out

    base_by, new_by = judged(base), judged(new)
    ctrl_b, ctrl_n = controls_of(base_by.values()), controls_of(new_by.values())
    spread_b, spread_n = baseline_spreads(base_by.values()), baseline_spreads(new_by.values())
    hist = [{r.identity: r for r in run} for run in history]
    gates: set[str] = set()
    changes: list[Change] = []
    for ident, b in base_by.items():
        kind = "timing" if b.kind == "timing" else "parity"
        n = new_by.get(ident)
        if n is None:
            if b.status is Status.PASS:
                # a kernel's cell that vanished is a regression; a device ceiling (copy,
                # read floor, torch.mv), an A/A control or a timing mutant is not a kernel
                cell = kind != "timing" or (is_gated(b) and not is_timing_mutant(b))
                changes.append(Change(ident, kind, Section.MISSING, _status_text(b), "absent",
                                      regression=cell,
                                      note="cell passed in the base run and has no row now"
                                      + ("" if cell else " (not a kernel cell)")))
            continue
        if b.kind == "timing" and n.kind == "timing" and is_gated(b) and is_gated(n):
            g = gate_for(n) if gate_for is not None else None
            if g is not None:
                gates.add(g.describe())
            key = control_key(n)
            bk = band_key(n)
            c = compare_timing(
                b, n, g, control_base=ctrl_b.get(key), control_new=ctrl_n.get(key),
                spread_base=spread_b.get(bk) if bk is not None else None,
                spread_new=spread_n.get(bk) if bk is not None else None,
                history=hist, same_device=same_device, cache=cache)
            if is_timing_mutant(b) or is_timing_mutant(n):
                # a timing mutant is slowed on purpose to measure how sharp the gate is:
                # its cell's changes (a +5% mutant flapping at ratio_max, say) are listed,
                # never a kernel's regression
                c = dataclasses.replace(c, regression=False,
                                        note="; ".join(x for x in ("timing mutant (not a "
                                                                   "kernel)", c.note) if x))
            changes.append(c)
            continue
        if b.status.ok != n.status.ok:
            # a timing mutant's kill verdict says how sharp the gate is, not whether a
            # kernel regressed: its flips are listed, never counted as regressions
            # -- and an A/A control's flip says the run is not trusted (its cells are
            # then noisy), not that anything regressed
            mutant = b.check.startswith("timing_mutant_")
            control = b.check.startswith("timing_aa_")
            changes.append(Change(ident, kind,
                                  Section.NOISY if control else Section.FLIPPED,
                                  _status_text(b), _status_text(n),
                                  regression=b.status.ok and not (mutant or control),
                                  note=("timing mutant: " if mutant else
                                        "A/A control: " if control else "")
                                  + (n.message if b.status.ok else "fixed")))
        else:
            changes.append(Change(ident, kind, Section.UNCHANGED, _status_text(b),
                                  _status_text(n)))
    for ident, n in new_by.items():
        if ident not in base_by:
            changes.append(Change(ident, "timing" if n.kind == "timing" else "parity",
                                  Section.NEW, "absent", _status_text(n)))
    rank = {s: i for i, s in enumerate(ORDER)}
    changes.sort(key=lambda c: (rank[c.section], not c.regression, c.identity))
    return Comparison(base_label, new_label, tuple(changes), tuple(sorted(gates)),
                      same_device)


def _num(s: str) -> md.Markdown:
    """A number (with its CI) this module formatted: digits, signs, %, brackets only."""
    assert all(ch in "0123456789.+-%[], " for ch in s), s
    return md.Markdown(s.replace("[", "\\[").replace("]", "\\]"))


def to_markdown(cmp: Comparison, *, all_cells: bool = False) -> str:
    """asv-style sections for a review comment: worse, better, noisy, missing, status
    flips, new (and unchanged with ``all_cells``); every identity and note escaped."""
    n_reg = len(cmp.regressions)
    lines = [
        f"### hqval compare: {md.code(cmp.base_label)} -> {md.code(cmp.new_label)}",
        "",
        f"{n_reg} regression(s) among {len(cmp.changes)} cell(s) compared.  Timing: each "
        "cell's v2/v1 ratio to its own interleaved baseline, run against run (drift "
        "cancels); absolute time only beyond the measured noise floor.",
    ]
    for g in cmp.gates:
        lines.append(f"Gate: {md.text(g)}")
    timing = [c for c in cmp.changes if c.kind == "timing" and c.absolute is not None]
    if cmp.same_device is not True and timing:
        lines.append("Absolute time not judged: " + (
            "the runs were timed on different devices (GPU UUIDs); "
            if cmp.same_device is False else
            "the runs do not both record their device (a GPU UUID); `--same-device` if "
            "they were one GPU; ") + "the ratios judge every timing cell.")
    elif timing and all(c.noise_floor is None for c in timing):
        lines.append("Absolute time not judged: two runs do not measure how far the "
                     "device's speed moves between runs; `--history` with 3 earlier runs "
                     "judges it.  The ratios judge every timing cell.")
    lines.append("")
    shown = [s for s in ORDER if s is not Section.UNCHANGED or all_cells]
    any_shown = False
    for s in shown:
        cells = cmp.section(s)
        if not cells:
            continue
        any_shown = True
        lines += [f"#### {s} ({len(cells)})", ""]
        lines.append(md.table(
            ["cell", "base", "new", "change [CI]", "absolute", "noise floor", "note"],
            [[md.code(c.identity),
              _num(c.ratio_base.text()) if c.ratio_base else c.base,
              _num(c.ratio_new.text()) if c.ratio_new else c.new,
              _num(f"{c.change.value - 1:+.2%} [{c.change.low - 1:+.2%}, "
                   f"{c.change.high - 1:+.2%}]") if c.change else "",
              "" if c.absolute is None else _num(f"{c.absolute - 1:+.2%}"),
              "" if c.noise_floor is None else _num(f"{c.noise_floor:.2%}"),
              ("REGRESSION; " if c.regression else "") + c.note] for c in cells]))
        lines.append("")
    if not any_shown:
        lines.append("No changes.")
    unchanged = len(cmp.section(Section.UNCHANGED))
    if unchanged and not all_cells:
        lines.append(f"{unchanged} cell(s) unchanged (`--all` lists them).")
    return "\n".join(lines).rstrip("\n") + "\n"
