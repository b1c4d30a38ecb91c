"""The timing gate: parsed once from the policy, CI rules, re-measurement budget, re-judging
stored rows under a changed policy."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from hqval.result import Row, Status
from hqval.timing import gate as g

POLICY = Path(__file__).resolve().parents[2] / "matrices" / "policy.yaml"


def _runs(rng: np.random.Generator, slowdown: float, runs: int = 3, n: int = 100,
          jitter: float = 0.01) -> tuple[list[list[float]], list[list[float]]]:
    a = [list(50.0 * rng.lognormal(0.0, jitter, n)) for _ in range(runs)]
    b = [list(50.0 * slowdown * rng.lognormal(0.0, jitter, n)) for _ in range(runs)]
    return a, b


GATE = g.Gate(ratio_max=1.05, change_max=1.01, confidence=0.95, max_runs=12,
              noisy_blocks=True, source="test")


def _timing_section() -> dict[str, Any]:
    data = yaml.safe_load(POLICY.read_text())
    return copy.deepcopy(data["formats"]["mq4g256v2"]["paths"]["decode"]["timing"])


def test_policy_gate_parses_per_mode() -> None:
    tp = g.parse_timing(_timing_section(), "decode.timing")
    assert tp is not None and tp.required
    for mode in g.MODES:
        gt = tp.gate(mode)
        assert gt.ratio_max == 1.05 and gt.change_max == 1.01 and gt.confidence == 0.95
        assert gt.noisy_blocks and gt.max_runs == 12
        assert gt.source == f"decode.timing.{mode}"


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda t: t.update(max_ratio=1.05), "per mode"),
    (lambda t: t.pop("cold"), "cold: missing"),
    (lambda t: t["hot"].update(ratio_max=0.9), "ratio_max: a ratio >= 1.0"),
    (lambda t: t["hot"].update(confidence=1.5), "confidence"),
    (lambda t: t["hot"].pop("change_max"), "exactly"),
    (lambda t: t.update(noisy="maybe"), "noisy"),
    (lambda t: t.update(max_runs=0), "max_runs"),
])
def test_bad_timing_sections_are_refused(edit: Any, needle: str) -> None:
    t = _timing_section()
    t["hot"] = dict(t["hot"])
    edit(t)
    with pytest.raises(g.GateError, match=needle):
        g.parse_timing(t, "decode.timing")


def test_whole_ci_above_fails_below_passes_straddling_is_noisy() -> None:
    rng = np.random.default_rng(1)
    assert g.verdict(*_runs(rng, 1.10), GATE).verdict is g.Verdict.FAIL
    assert g.verdict(*_runs(rng, 1.00), GATE).verdict is g.Verdict.PASS
    # true ratio right at the tolerance: the CI straddles it
    v = g.verdict(*_runs(rng, 1.05), GATE)
    assert v.verdict is g.Verdict.NOISY and v.ci_low < 1.05 < v.ci_high
    assert g.verdict(*_runs(rng, 1.05), GATE, final=False).verdict is g.Verdict.INCONCLUSIVE


def test_change_tolerance_flags_a_three_percent_slowdown_not_a_clean_pair() -> None:
    rng = np.random.default_rng(2)
    assert g.verdict(*_runs(rng, 1.03), GATE, tolerance=GATE.change_max).verdict is g.Verdict.FAIL
    assert g.verdict(*_runs(rng, 1.00), GATE, tolerance=GATE.change_max).verdict is g.Verdict.PASS


def test_remeasure_stops_at_the_budget_and_reports_noisy() -> None:
    rng = np.random.default_rng(3)
    calls: list[int] = []

    def measure(n: int) -> tuple[list[list[float]], list[list[float]]]:
        calls.append(n)
        return _runs(rng, 1.05, runs=n, jitter=0.05)  # wide: never settles

    a, b, v = g.measure_until_settled(measure, GATE, 3)
    assert v.verdict is g.Verdict.NOISY
    assert len(a) == len(b) == GATE.max_runs == sum(calls) and calls == [3, 3, 3, 3]


def test_remeasure_settles_a_cell_that_more_runs_decide() -> None:
    rng = np.random.default_rng(4)
    calls: list[int] = []

    def measure(n: int) -> tuple[list[list[float]], list[list[float]]]:
        calls.append(n)
        return _runs(rng, 1.03, runs=n, n=10, jitter=0.04)

    _, _, v = g.measure_until_settled(measure, GATE, 1)
    assert v.verdict is g.Verdict.PASS and len(calls) > 1


def test_noisy_blocks_or_passes_as_the_policy_says() -> None:
    assert g.row_status(g.Verdict.NOISY, GATE) is Status.ERROR
    lenient = g.Gate(1.05, 1.01, noisy_blocks=False)
    assert g.row_status(g.Verdict.NOISY, lenient) is Status.SKIPPED
    assert g.row_status(g.Verdict.FAIL, lenient) is Status.FAIL


def _row(slowdown: float, seed: int = 5, **details: Any) -> Row:
    a, b = _runs(np.random.default_rng(seed), slowdown)
    return Row(kind="timing", check="timing_cold", kernel="gemv_mq4g256v2_r8@17408x5120",
               arch="sm_90", backend="cuda", status=Status.PASS, measured=slowdown,
               message="stored", details={"mode": "cold", "qt": 44, "kind": "gemv",
                                          "samples_a": a, "samples_b": b, **details})


def test_a_policy_change_applies_to_stored_rows() -> None:
    row = _row(1.03)
    assert g.rejudge(row, GATE).status is Status.PASS
    strict = g.Gate(ratio_max=1.01, change_max=1.005)
    judged = g.rejudge(row, strict)
    assert judged.status is Status.FAIL and judged.tolerance == 1.01
    assert judged.details["verdict"]["verdict"] == "fail"
    assert judged.details["gate"]["ratio_max"] == 1.01
    # the samples are untouched: analysis is recomputed, raw data kept
    assert judged.details["samples_a"] == row.details["samples_a"]


def test_untrusted_run_stays_an_error_and_rows_without_samples_are_left_alone() -> None:
    assert g.rejudge(_row(1.0, untrusted="noisy A/A"), GATE).status is Status.ERROR
    bare = Row(kind="timing", check="timing_cold", kernel="k@1x256", arch="sm_90",
               backend="cuda", status=Status.PASS, measured=1.2, details={"mode": "cold"})
    assert g.rejudge(bare, GATE) is bare


def test_rejudge_rows_uses_the_lookup_per_row() -> None:
    rows = [_row(1.03), _row(1.0, seed=6)]
    out = g.rejudge_rows(rows, lambda r: g.Gate(1.01, 1.01) if r is rows[0] else None)
    assert out[0].status is Status.FAIL and out[1] is rows[1]


def test_gate_round_trips_through_a_row() -> None:
    assert g.Gate.from_dict(GATE.to_dict()) == GATE
