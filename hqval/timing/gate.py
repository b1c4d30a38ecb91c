"""The timing gate: one definition, read from ``matrices/policy.yaml``, used by every step.

A gate belongs to a (format, path, cache mode) of the policy::

    timing:
      required: true
      hot:  {ratio_max: 1.05, change_max: 1.01, confidence: 0.95}
      cold: {ratio_max: 1.05, change_max: 1.01, confidence: 0.95}
      max_runs: 12     # budget: an inconclusive cell is re-measured up to this many runs
      noisy: blocks    # or `passes`: whether a cell that stayed inconclusive blocks admission

``ratio_max`` bounds a cell's v2/v1 ratio within one run (against its own interleaved qt=6
baseline).  ``change_max`` bounds how much that ratio may grow between runs (``hqval
compare``, ``hqval history``) and how much slower a timing mutant must be than its
unslowed twin to be flagged.  Both are judged on the bootstrap CI at ``confidence``:

- fail when the whole CI lies above the tolerance,
- pass when the whole CI lies below it,
- otherwise inconclusive: the bench re-measures with more runs, up to ``max_runs``, and a
  cell still inconclusive is ``noisy`` -- neither pass nor fail; ``noisy`` says whether
  it blocks.

Raw samples and analysis are kept apart (as asv does): a timing row stores its per-run
samples; the verdict is recomputed from them with the policy in force whenever a run is
loaded (``hqval admit``, ``compare``, ``report``), so a policy change applies to old runs.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hqval.result import Row, Status
from hqval.timing import stats

MODES = ("hot", "cold")
GATE_KEYS = ("ratio_max", "change_max", "confidence")
TIMING_KEYS = ("required", "max_runs", "noisy", *MODES)
# Bootstrap replicates behind every verdict (percentile CI); fixed so a re-judged row gives
# the same CI it gave when measured.
RESAMPLES = 2000


class GateError(ValueError):
    """A policy's timing section does not follow the schema; the message names key and fix."""


class Verdict(enum.StrEnum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"  # the CI straddles the tolerance; more runs may settle it
    NOISY = "noisy"  # still inconclusive after the run budget: neither pass nor fail


@dataclass(frozen=True)
class Gate:
    """The timing gate of one (format, path, mode)."""

    ratio_max: float
    change_max: float
    confidence: float = 0.95
    max_runs: int = 12
    noisy_blocks: bool = True
    source: str = ""  # where it was read: "matrices/policy.yaml formats.X.paths.decode.timing.cold"

    def describe(self) -> str:
        return (f"ratio <= {self.ratio_max:g} and change <= {self.change_max:g} at "
                f"{self.confidence:.0%} confidence; inconclusive re-measured up to "
                f"{self.max_runs} runs, then noisy ({'blocks' if self.noisy_blocks else 'passes'})"
                + (f" [{self.source}]" if self.source else ""))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Gate:
        return cls(float(d["ratio_max"]), float(d["change_max"]), float(d["confidence"]),
                   int(d["max_runs"]), bool(d["noisy_blocks"]), str(d.get("source", "")))


@dataclass(frozen=True)
class TimingPolicy:
    """A path's ``timing`` section: the gate per cache mode, and whether timing is required."""

    gates: Mapping[str, Gate]
    required: bool = True

    def gate(self, mode: str) -> Gate:
        try:
            return self.gates[mode]
        except KeyError:
            raise GateError(f"no timing gate for mode {mode!r}; the policy defines "
                            f"{sorted(self.gates)}") from None


def parse_timing(data: Any, where: str) -> TimingPolicy | None:
    """Parse a path's ``timing`` mapping (``where`` names it in errors); None if absent."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise GateError(f"{where}: expected a mapping with {', '.join(TIMING_KEYS)}")
    unknown = set(data) - set(TIMING_KEYS)
    if unknown:
        hint = ("; the gate is now per mode: hot: {ratio_max: ..}, cold: {ratio_max: ..}"
                if "max_ratio" in unknown else "")
        raise GateError(f"{where}: unknown key(s) {sorted(unknown)}{hint}")
    required = data.get("required", True)
    if not isinstance(required, bool):
        raise GateError(f"{where}.required: true or false")
    max_runs = data.get("max_runs", 12)
    if not isinstance(max_runs, int) or isinstance(max_runs, bool) or max_runs < 1:
        raise GateError(f"{where}.max_runs: a positive integer (runs per cell at most)")
    noisy = data.get("noisy", "blocks")
    if noisy not in ("blocks", "passes"):
        raise GateError(f"{where}.noisy: {noisy!r}; use 'blocks' or 'passes'")
    gates: dict[str, Gate] = {}
    for mode in MODES:
        g = data.get(mode)
        mw = f"{where}.{mode}"
        if g is None:
            raise GateError(f"{mw}: missing; give {{ratio_max, change_max, confidence}} for "
                            f"each mode ({', '.join(MODES)})")
        if not isinstance(g, dict) or set(g) != set(GATE_KEYS):
            raise GateError(f"{mw}: give exactly {', '.join(GATE_KEYS)}")
        for key in ("ratio_max", "change_max"):
            v = g[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 1.0:
                raise GateError(f"{mw}.{key}: a ratio >= 1.0 (e.g. 1.05 for 5%)")
        c = g["confidence"]
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.5 <= c < 1.0:
            raise GateError(f"{mw}.confidence: a probability in [0.5, 1), e.g. 0.95")
        gates[mode] = Gate(float(g["ratio_max"]), float(g["change_max"]), float(c), max_runs,
                           noisy == "blocks", mw)
    return TimingPolicy(gates, required)


# ---------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class TimingVerdict:
    """A cell judged against one tolerance of a gate."""

    verdict: Verdict
    ratio: float
    ci_low: float
    ci_high: float
    tolerance: float
    confidence: float
    runs: int
    samples_per_arm: int

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2.0

    def describe(self) -> str:
        return (f"{self.ratio:.4f} [{self.ci_low:.4f}, {self.ci_high:.4f}] vs "
                f"{self.tolerance:g}: {self.verdict}")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["verdict"] = str(self.verdict)
        return d


def judge(ratio: float, ci_low: float, ci_high: float, tolerance: float) -> Verdict:
    """The gate's rule on one CI: whole CI above -> fail, whole CI below -> pass."""
    if ci_low > tolerance:
        return Verdict.FAIL
    if ci_high < tolerance:
        return Verdict.PASS
    return Verdict.INCONCLUSIVE


def verdict(
    samples_a: stats.Runs,
    samples_b: stats.Runs,
    gate: Gate,
    *,
    tolerance: float | None = None,
    final: bool = True,
    seed: int = 0,
) -> TimingVerdict:
    """Judge arm B against arm A (per-run sample lists, B/A > 1 = B slower) on ``gate``.

    ``tolerance`` defaults to ``gate.ratio_max``; pass ``gate.change_max`` to judge a
    change (a timing mutant against its unslowed twin).  ``final``: an inconclusive CI is
    reported ``noisy`` (no more runs will come); otherwise ``inconclusive``.
    """
    tol = gate.ratio_max if tolerance is None else tolerance
    reps = stats.bootstrap_ratios(samples_a, samples_b, resamples=RESAMPLES, seed=seed)
    lo, hi = stats.percentile_ci(reps, gate.confidence)
    ratio = stats.cell_ratio(samples_a, samples_b)
    v = judge(ratio, lo, hi, tol)
    if v is Verdict.INCONCLUSIVE and final:
        v = Verdict.NOISY
    n = sum(len(r) for r in samples_a)
    return TimingVerdict(v, ratio, lo, hi, tol, gate.confidence, len(samples_a), n)


def row_status(v: Verdict, gate: Gate) -> Status:
    """The row status of a final verdict: noisy fails closed when the policy says it blocks
    (ERROR) and is otherwise SKIPPED (not a pass: no verdict was reached)."""
    if v is Verdict.PASS:
        return Status.PASS
    if v is Verdict.FAIL:
        return Status.FAIL
    return Status.ERROR if gate.noisy_blocks else Status.SKIPPED


def measure_until_settled(
    measure: Callable[[int], tuple[list[list[float]], list[list[float]]]],
    gate: Gate,
    first_runs: int,
    *,
    tolerance: float | None = None,
    seed: int = 0,
) -> tuple[list[list[float]], list[list[float]], TimingVerdict]:
    """Time ``first_runs`` runs, then, while the verdict is inconclusive, ``first_runs``
    more at a time until ``gate.max_runs`` (the budget); return all samples and the final
    verdict.  ``measure(n)`` times ``n`` runs and returns (runs_a, runs_b)."""
    step = max(1, min(first_runs, gate.max_runs))
    runs_a, runs_b = measure(step)
    while True:
        more = min(step, gate.max_runs - len(runs_a))
        v = verdict(runs_a, runs_b, gate, tolerance=tolerance, final=more <= 0, seed=seed)
        if v.verdict is not Verdict.INCONCLUSIVE:
            return runs_a, runs_b, v
        a, b = measure(more)
        runs_a, runs_b = runs_a + a, runs_b + b


# ---------------------------------------------------------------------------- stored rows


def _is_number(value: Any) -> bool:
    """A sample as the bench writes one: a JSON number (never a boolean or text)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _runs(samples: Any) -> list[list[float]] | None:
    """Per-run sample lists from a row's details (None when absent or empty, or when any
    sample is no number: ``samples_problem`` names it)."""
    if not isinstance(samples, list) or not samples:
        return None
    if all(_is_number(s) for s in samples):
        return [[float(s) for s in samples]]
    if all(isinstance(s, list) and s and all(_is_number(v) for v in s) for s in samples):
        return [[float(v) for v in s] for s in samples]
    return None


def stored_samples(row: Row) -> tuple[list[list[float]], list[list[float]]] | None:
    """(runs_a, runs_b) of a timing row, or None when it stored none (or unpaired ones)."""
    a, b = _runs(row.details.get("samples_a")), _runs(row.details.get("samples_b"))
    if a is None or b is None or len(a) != len(b):
        return None
    return a, b


def is_gated(row: Row) -> bool:
    """A v2-family-vs-baseline timing cell (not an A/A control, not a device baseline)."""
    return (row.kind == "timing" and row.check in ("timing_hot", "timing_cold")
            and "samples_a" in row.details)


def rejudge(row: Row, gate: Gate) -> Row:
    """The row with its verdict recomputed from its stored samples under ``gate``.

    A row whose run was not trusted (noisy A/A control, drained queue: recorded as
    ``untrusted``) stays an error: samples of an untrusted run prove nothing either way.
    A row without stored samples is returned unchanged.
    """
    if not is_gated(row):
        return row
    pair = stored_samples(row)
    if pair is None or samples_problem(row):
        return row  # (samples that are no times are damage: ``hqval.admission`` names it)
    v = verdict(*pair, gate, seed=row.seed or 0)
    details = {**row.details, "gate": gate.to_dict(), "verdict": v.to_dict()}
    untrusted = row.details.get("untrusted")
    status = Status.ERROR if untrusted else row_status(v.verdict, gate)
    why = f"not trusted ({untrusted})" if untrusted else str(v.verdict)
    head = row.message.split("; gate ", 1)[0]
    return dataclasses.replace(
        row, status=status, measured=v.ratio, tolerance=gate.ratio_max,
        derivation=gate_derivation(gate), details=details,
        message=f"{head}; gate {v.describe()}; {why}")


def gate_derivation(gate: Gate) -> str:
    return (f"v2/v1 against its interleaved qt=6 baseline: fail when the {gate.confidence:.0%} "
            f"bootstrap CI lies above {gate.ratio_max:g}, pass when below, otherwise "
            f"re-measured up to {gate.max_runs} runs, then noisy ({gate.source or 'policy'})")


GateFor = Callable[[Row], "Gate | None"]


AA_CHECKS = ("timing_aa_hot", "timing_aa_cold")
MUTANT_CHECKS = ("timing_mutant_hot", "timing_mutant_cold")


def _shape_problem(arm: str, samples: Any) -> str:
    """Why a stored arm is not the bench's list of runs of numbers, or "" (absent and
    empty arms are the caller's: a verdict without its samples)."""
    if samples is None or (isinstance(samples, list) and not samples):
        return ""
    if not isinstance(samples, list):
        return f"{arm} is {type(samples).__name__}, not a list of runs of times"
    if all(_is_number(s) for s in samples):
        return ""
    for i, run in enumerate(samples):
        if not isinstance(run, list) or not run:
            return f"{arm} run {i} is {run!r:.40}, not a list of times"
        bad = [v for v in run if not _is_number(v)]
        if bad:
            return f"{arm} run {i} holds {bad[0]!r:.40}, not a positive time (a JSON number)"
    return ""


def samples_problem(row: Row) -> str:
    """Why a timing row's stored samples are no times at all, or "": every sample a finite
    positive number (an event clock never gives another, and the bench writes each as a
    JSON number), and the two arms paired as the bench pairs them (ABBA: every run times
    A and B alike, so each run of samples_a holds as many samples as the same run of
    samples_b)."""
    for arm in ("samples_a", "samples_b"):
        why = _shape_problem(arm, row.details.get(arm))
        if why:
            return why
    for arm in ("samples_a", "samples_b"):
        runs = _runs(row.details.get(arm))
        if runs is None:
            continue
        for i, run in enumerate(runs):
            bad = next((v for v in run if not (math.isfinite(v) and v > 0)), None)
            if bad is not None:
                return f"{arm} run {i} holds {bad!r}, not a positive time"
    a, b = _runs(row.details.get("samples_a")), _runs(row.details.get("samples_b"))
    if a is not None and b is not None:
        if len(a) != len(b):
            return (f"samples_a holds {len(a)} run(s), samples_b {len(b)}: the arms are "
                    "unpaired (every run times both)")
        for i, (ra, rb) in enumerate(zip(a, b, strict=True)):
            if len(ra) != len(rb):
                return (f"run {i} holds {len(ra)} sample(s) of A and {len(rb)} of B: the "
                        "arms are unpaired (ABBA times both alike)")
    return ""



def _group(row: Row, r_of: Mapping[tuple[str, str, str], Any]) -> tuple[Any, ...]:
    """The A/A control a timing row rests on: (arch, backend, mode, shape, rows per
    block).  A timing mutant's R is its twin's (the candidate row of the twin's cell)."""
    d = row.details
    r = d.get("rows_per_block")
    if r is None and isinstance(d.get("twin"), str) and "@" in row.kernel:
        r = r_of.get((row.arch, row.backend, f"{d['twin']}@{row.kernel.split('@', 1)[1]}"))
    return (row.arch, row.backend, d.get("mode"), d.get("shape"), r)


def rejudge_control(row: Row) -> Row:
    """An A/A control with its verdict recomputed from its stored samples: pass only when
    the cell ratio lies within ``stats.AA_TOLERANCE`` of 1.00 and the host never outran
    the queue filler (never the row's own status or tolerance).  A row without usable
    samples is returned unchanged (``hqval.admission`` names it as damage)."""
    pair = stored_samples(row)
    if pair is None or row.details.get("infrastructure") or samples_problem(row):
        return row
    try:
        ratio = stats.cell_ratio(*pair)
    except ValueError:
        return row
    drained = row.details.get("queue_drained")
    was_drained = isinstance(drained, list) and any(bool(x) for x in drained)
    noisy = abs(ratio - 1.0) > stats.AA_TOLERANCE
    head = row.message.split("; recomputed", 1)[0]
    why = ("; noisy" if noisy else "") + ("; host outran the queue filler" if was_drained
                                          else "")
    return dataclasses.replace(
        row, status=Status.ERROR if noisy or was_drained else Status.PASS, measured=ratio,
        tolerance=stats.AA_TOLERANCE,
        message=f"{head}; recomputed from its samples: A/A {ratio:.4f} within "
                f"{stats.AA_TOLERANCE:g} of 1.00: {'no' if noisy else 'yes'}{why}")


def mutant_status(v: Verdict, gate: Gate, untrusted: str | None) -> tuple[Status, str]:
    """A timing mutant's row status and why, from the gate's verdict on its slowdown:
    flagged = killed (PASS), let through = survived (FAIL), inconclusive = the gate's
    noisy; an untrusted run's mutant is an error, as its candidates are."""
    if untrusted:
        return Status.ERROR, f"not trusted ({untrusted})"
    if v is Verdict.FAIL:
        return Status.PASS, "killed: the gate flags it"
    if v is Verdict.PASS:
        return Status.FAIL, "survived: the gate lets it through"
    return row_status(v, gate), "noisy: neither flagged nor let through"


def rejudge_mutant(row: Row, gate: Gate) -> Row:
    """A timing mutant against its unslowed twin, recomputed from the stored samples on
    ``gate.change_max``: flagged (the whole CI above it) is killed, PASS; let through
    (the whole CI below) survived, FAIL; otherwise the gate's noisy.  An untrusted run's
    mutant is an error, as its candidates are."""
    pair = stored_samples(row)
    if pair is None or samples_problem(row):
        return row
    v = verdict(*pair, gate, tolerance=gate.change_max, seed=row.seed or 0)
    untrusted = row.details.get("untrusted")
    drained = row.details.get("queue_drained")
    if not untrusted and isinstance(drained, list) and any(bool(x) for x in drained):
        untrusted = "host outran the queue filler"
    status, why = mutant_status(v.verdict, gate, untrusted)
    details = {**row.details, "gate": gate.to_dict(), "verdict": v.to_dict(),
               **({"untrusted": untrusted} if untrusted else {})}
    return dataclasses.replace(
        row, status=status, measured=v.ratio, tolerance=gate.change_max, details=details,
        message=(f"true slowdown {v.ratio - 1:+.2%} [{v.ci_low - 1:+.2%}, "
                 f"{v.ci_high - 1:+.2%}]; {why}"))


def rejudge_rows(rows: Sequence[Row], gate_for: GateFor) -> list[Row]:
    """Every timing verdict recomputed from its stored samples: each A/A control
    (``rejudge_control``), then every gated row and timing mutant under the gate
    ``gate_for`` finds for it, a row whose A/A control is not trusted (noisy, or the
    queue drained) marked ``untrusted`` whatever it stored (rows without a gate keep
    their stored verdict, unless untrusted: then an error)."""
    r_of = {(r.arch, r.backend, r.kernel): r.details.get("rows_per_block")
            for r in rows if is_gated(r)}
    controls = {r.identity: rejudge_control(r) for r in rows
                if r.kind == "timing" and r.check in AA_CHECKS}
    distrust: dict[tuple[Any, ...], str] = {}
    for c in controls.values():
        if c.status is not Status.PASS and stored_samples(c) is not None:
            distrust.setdefault(_group(c, r_of), f"noisy run: {c.message}")
    out = []
    for r in rows:
        if r.identity in controls and r.kind == "timing" and r.check in AA_CHECKS:
            out.append(controls[r.identity])
            continue
        sampled = is_gated(r) or (r.kind == "timing" and r.check in MUTANT_CHECKS)
        why = distrust.get(_group(r, r_of)) if sampled else None
        if why and not r.details.get("untrusted"):
            r = dataclasses.replace(r, details={**r.details, "untrusted": why})
        g = gate_for(r) if sampled else None
        if g is not None and is_gated(r):
            out.append(rejudge(r, g))
        elif g is not None:
            out.append(rejudge_mutant(r, g))
        elif sampled and r.details.get("untrusted") and r.status is not Status.ERROR:
            out.append(dataclasses.replace(
                r, status=Status.ERROR,
                message=f"{r.message}; not trusted ({r.details['untrusted']})"))
        else:
            out.append(r)
    return out
