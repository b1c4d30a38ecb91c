"""Faults of class 'rows checked against themselves', third round: a check measures an
error or a count of differing outputs, never a negative number; a pass that says it
measured one compared nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Result, rows

Admit = Callable[..., Result]


@pytest.mark.parametrize("check,value", [("reference_parity", -5.0), ("bit_identity", -3.0)],
                         ids=["negative-error", "negative-count"])
def test_a_pass_with_a_negative_measured_value_is_damage(
        copy_of: Callable[[], Path], hqval: Admit, check: str, value: float) -> None:
    """The qt=44 kernel's passing check given measured -5 (an error) or -3 (differing
    outputs): below any tolerance, so once admitted (exit 0)."""
    run = copy_of()
    rs = rows(run)
    for r in rs:
        if r["kernel"] == "gemv_mq4g256v2_r1" and r["check"] == check:
            r["measured"] = value
        r.pop("identity", None)
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    res = hqval("admit", str(run))
    assert res.code == 2 and "an error or a count is never negative" in res.err


def test_a_kill_the_killers_own_row_denies_is_damage(
        copy_of: Callable[[], Path], hqval: Admit) -> None:
    """A mutant's failing reference_parity cell rewritten to pass, its verdict left
    saying reference_parity killed it (once: exit 0, the verdict believed over the row it
    is made from)."""
    run = copy_of()
    rs = rows(run)
    verdict = next(r for r in rs if r["kind"] == "mutant" and r["status"] == "pass"
                   and r["details"]["killed_by"] == ["reference_parity"])
    for r in rs:
        if (r["kind"], r["check"], r["kernel"]) == ("check", "reference_parity",
                                                    verdict["kernel"]):
            r.update(status="pass", measured=0.0)
        r.pop("identity", None)
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    res = hqval("admit", str(run))
    assert res.code == 2
    assert (f"says reference_parity killed the mutant, but the run's row "
            f"reference_parity[{verdict['kernel']}|") in res.err
