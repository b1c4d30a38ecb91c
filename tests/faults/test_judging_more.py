"""Faults of class 'one judged run', second round: every timing verdict is recomputed
from its stored samples in ``judge``, the A/A control's and the timing mutants' included,
and a row whose A/A control is not trusted is an error whatever it stored.  These run
``judge`` on a run as ``hqval run`` records it on hardware (no process: each takes
milliseconds)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from hqval.admission import judge, load_policy
from hqval.matrix import load_arches
from hqval.result import Row, Status
from tests.admission.runs import bound_run

ARCHES = load_arches()
POLICY = load_policy()
A = "gfx1100"
SHAPE = "4096x4096"
TABLE = {"gemv44": {"qt": 44, "kind": "gemv", "requires": "any"},
         "gemv6": {"qt": 6, "kind": "gemv", "requires": "any"}}


def _samples(scale: float, seed: int) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [list(map(float, 20.0 * scale * (1 + 0.002 * rng.standard_normal(60))))
            for _ in range(3)]


def _timing(check: str, kernel: str, b_over_a: float, status: Status = Status.PASS,
            **details: Any) -> Row:
    d = {"mode": "hot", "shape": SHAPE, "samples_a": _samples(1.0, 1),
         "samples_b": _samples(b_over_a, 2), **details}
    return Row("timing", check, kernel, A, "hip", status, measured=b_over_a, details=d)


def _judge(rows: list[Row]) -> Any:
    return judge([bound_run(rows, TABLE, [A])], POLICY, arches=ARCHES)


def _run(aa: float = 1.0, cand: float = 1.0, **kw: Any) -> Any:
    return _judge(_rows(aa, cand, **kw))


def _rows(aa: float = 1.0, cand: float = 1.0, *, aa_status: Status = Status.PASS,
          cand_status: Status = Status.PASS, extra: tuple[Row, ...] = (),
          **aa_details: Any) -> list[Row]:
    return [Row("compile", "compile", "gemv44", A, "toolchain", Status.PASS),
            Row("audit", "audit_no_spill", "gemv44", A, "isa", Status.PASS, measured=0.0,
                tolerance=0.0),
            Row("check", "bit_identity", "gemv44", A, "hip", Status.PASS, measured=0.0,
                tolerance=0.0),
            Row("check", "reference_parity", "gemv44", A, "hip", Status.PASS, measured=1e-6,
                tolerance=1e-4),
            _timing("timing_aa_hot", f"gemv6@{SHAPE}", aa, aa_status, rows_per_block=1,
                    **aa_details),
            _timing("timing_hot", f"gemv44@{SHAPE}", cand, cand_status, qt=44, kind="gemv",
                    rows_per_block=1),
            *extra]


def _row(j: Any, check: str, kernel: str = "") -> Row:
    return next(r for r in j.runs[0].rows if r.check == check
                and (not kernel or r.kernel.startswith(kernel)))


def test_a_clean_timed_run_keeps_its_verdicts() -> None:
    """The control: an A/A within 0.5% of 1.00 and a candidate at 1.00 pass."""
    j = _run(aa=1.001)
    assert _row(j, "timing_aa_hot").status is Status.PASS
    assert _row(j, "timing_hot").status is Status.PASS
    assert not j.admission.damage


@pytest.mark.parametrize("how", ["status-pass", "tolerance-widened"])
def test_a_noisy_control_stored_as_a_pass_is_recomputed(how: str) -> None:
    """The A/A control's samples say 1.10 (noisy), its row says pass (and, second case,
    its tolerance was widened to 1.0 and its measured value set to 1.0); the candidate
    rows were stripped of their ``untrusted`` mark.  Once: the control's stored verdict
    stood and the candidate's pass admitted the cell."""
    extra = {"tolerance": 1.0, "measured": 1.0} if how == "tolerance-widened" else {}
    j = _judge([dataclasses.replace(r, **extra) if r.check == "timing_aa_hot" else r
                for r in _rows(aa=1.10)])
    aa, cand = _row(j, "timing_aa_hot"), _row(j, "timing_hot")
    assert aa.status is Status.ERROR and aa.tolerance == 0.005
    assert aa.measured is not None and abs(aa.measured - 1.10) < 0.01
    assert cand.status is Status.ERROR and "noisy run" in str(cand.details["untrusted"])
    assert j.exit_code != 0


def test_a_control_whose_queue_drained_is_not_trusted() -> None:
    """The host outran the queue filler during the A/A (``queue_drained``), the row says
    pass: not trusted, and nor are its candidates."""
    j = _run(aa=1.0, queue_drained=[False, True, False])
    assert _row(j, "timing_aa_hot").status is Status.ERROR
    assert _row(j, "timing_hot").status is Status.ERROR
    assert j.exit_code != 0


def test_a_control_stored_as_an_error_whose_samples_are_clean_is_recomputed() -> None:
    """The other way: the verdict is the samples', not the row's."""
    j = _run(aa=1.0, aa_status=Status.ERROR)
    assert _row(j, "timing_aa_hot").status is Status.PASS


@pytest.mark.parametrize("stored,ratio,want", [
    (Status.PASS, 1.0, Status.FAIL),  # says killed, its samples say it went through
    (Status.FAIL, 1.08, Status.PASS),  # says survived, its samples flag it
], ids=["killed-but-unslowed", "survived-but-slowed"])
def test_a_timing_mutants_verdict_is_recomputed_from_its_samples(
        stored: Status, ratio: float, want: Status) -> None:
    """A timing mutant against its unslowed twin: once its stored status was believed."""
    mut = _timing("timing_mutant_hot", f"gemv44+slow@{SHAPE}", ratio, stored, qt=44,
                  kind="gemv", mutant_of="gemv44", twin="gemv44")
    j = _run(extra=(mut,))
    assert _row(j, "timing_mutant_hot").status is want


def test_a_timing_mutant_of_a_noisy_run_is_an_error() -> None:
    mut = _timing("timing_mutant_hot", f"gemv44+slow@{SHAPE}", 1.08, qt=44, kind="gemv",
                  mutant_of="gemv44", twin="gemv44")
    j = _run(aa=1.10, extra=(mut,))
    assert _row(j, "timing_mutant_hot").status is Status.ERROR


@pytest.mark.parametrize("bad", [float("nan"), 0.0, -20.0, float("inf")],
                         ids=["nan", "zero", "negative", "inf"])
@pytest.mark.parametrize("check", ["timing_aa_hot", "timing_hot"])
def test_samples_that_are_no_times_are_damage(bad: float, check: str) -> None:
    """A sample no event clock gives (NaN, 0, negative, Inf) in a control or a candidate:
    the run is damaged, exit 2, naming the row (never a verdict computed from it)."""
    rows = []
    for r in _rows():
        if r.check == check:
            a = [list(run) for run in r.details["samples_a"]]
            a[1][3] = bad
            r = dataclasses.replace(r, details={**r.details, "samples_a": a})
        rows.append(r)
    j = _judge(rows)
    assert j.exit_code == 2
    assert any(check in d and "not a positive time" in d for d in j.admission.damage)
