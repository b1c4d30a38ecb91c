"""Faults of class 'rows checked against themselves', second round: a pass whose measured
value or tolerance was removed, a negative tolerance, a mutant said killed with no killer
(or with killers its cells contradict), an audit whose every rule was rewritten to
'unsupported', and a row holding a field no hqval row holds.  Exit 2, naming the row."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import ARCH, Result, rows

Admit = Callable[..., Result]
PARITY = f"reference_parity[gemv_mq4g256v2_r1|{ARCH}|emu]"
MUTANT = f"mutant[gemv_mut_lane_half_r1|{ARCH}|emu]"


def _rewrite(run: Path, pick: Callable[[dict[str, Any]], bool],
             change: Callable[[dict[str, Any]], Any]) -> None:
    data = rows(run)
    hit = [r for r in data if pick(r)]
    assert hit
    for r in hit:
        change(r)
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))


@pytest.mark.parametrize("fields,named", [
    ({"measured": None}, "passes against tolerance 0.0001 without the measured value"),
    ({"measured": None, "tolerance": -1.0}, "has a negative tolerance -1"),
    ({"tolerance": None, "measured": 0.9}, "passes with measured 0.9 but no tolerance"),
], ids=["measured-removed", "negative-tolerance", "tolerance-removed"])
def test_a_pass_with_its_numbers_removed_is_exit_2(
        copy_of: Callable[[], Path], hqval: Admit, fields: dict[str, Any], named: str) -> None:
    """(before: each admitted, exit 0; only a pass beyond its tolerance was caught)"""
    run = copy_of()
    _rewrite(run, lambda r: r["identity"] == PARITY, lambda r: r.update(fields))
    res = hqval("admit", str(run))
    assert res.code == 2 and f"{PARITY}: {named}" in res.err


@pytest.mark.parametrize("change,named", [
    (lambda r: r["details"].pop("killed_by"), "names no killer"),
    (lambda r: r["details"].update(killed_by=[]), "names no killer"),
    (lambda r: r["details"]["cells"].update(reference_parity="pass"),
     "its cells do not say that check failed"),
    (lambda r: r.update(measured=3.0), "counts 3 killers but names 1"),
], ids=["no-killer", "empty-killers", "killer-passed", "count"])
def test_a_killed_mutant_without_a_killer_is_exit_2(
        copy_of: Callable[[], Path], hqval: Admit, change: Callable[[dict[str, Any]], Any],
        named: str) -> None:
    """A mutant verdict ``pass`` (killed) is a claim that a named check failed on it
    (before: a killed mutant with no killer admitted, exit 0)."""
    run = copy_of()
    _rewrite(run, lambda r: r["identity"] == MUTANT, change)
    res = hqval("admit", str(run))
    assert res.code == 2 and f"{MUTANT}: " in res.err and named in res.err


def test_an_audit_with_every_rule_unsupported_is_exit_2(copy_of: Callable[[], Path],
                                                        hqval: Admit) -> None:
    """Every audit row of the compiled qt=44 kernel rewritten to 'unsupported': the no-spill
    and VGPR budget rules judge every AMD object, so no verdict at all is no audit (before:
    the rows' presence was enough, exit 0)."""
    run = copy_of()
    _rewrite(run, lambda r: r["kind"] == "audit" and r["kernel"] == "gemv_mq4g256v2_r1",
             lambda r: r.update(status="unsupported", measured=None, tolerance=None))
    res = hqval("admit", str(run))
    assert res.code == 2
    assert "an ISA audit verdict of gemv_mq4g256v2_r1 (every rule says unsupported)" \
        in res.out + res.err


@pytest.mark.parametrize("extra", [{"verdict": "fail"}, {"failing": True}],
                         ids=["verdict", "failing"])
def test_a_row_with_a_field_no_row_holds_is_exit_2(copy_of: Callable[[], Path],
                                                   hqval: Admit, extra: dict[str, Any]) -> None:
    """(before: unknown fields were dropped on reading, exit 0)"""
    run = copy_of()
    _rewrite(run, lambda r: r["identity"] == PARITY, lambda r: r.update(extra))
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"({PARITY}) has field(s) no hqval row holds: {next(iter(extra))!r}" in res.err
