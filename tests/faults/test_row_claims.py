"""Faults of class 'a row's own say of what it is evidence for': the judge reads a row's
``details`` qt, path and kind before the kernel table (to place it in a cell, to pick a
timing gate), ``mutant_of`` (a mutant's checks are kills) and ``self_test`` (set aside).
A row of a bound run saying otherwise than its kernel's entry in the run's table is
damage, exit 2, naming the row and the field."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import ARCH, Result, rows
from .test_timing import timed  # noqa: F401  (the timed run, a fixture)

Admit = Callable[..., Result]
IDENT = f"bit_identity[gemv_mq4g256v2_r1|{ARCH}|emu]"
TIMED = f"timing_hot[gemv_mq4g256v2_r1@128x1024|{ARCH}|hip]"


def _rewrite(run: Path, ident: str, change: Callable[[dict[str, Any]], None]) -> None:
    data = rows(run)
    for r in data:
        if r["identity"] == ident:
            change(r)
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))


@pytest.mark.parametrize("claim,named", [
    ({"self_test": True}, "says self_test True, but its kernel's entry"),
    ({"qt": 999, "path": "decode"}, "says qt 999, but its kernel's entry"),
    ({"qt": 44, "path": "moe_decode"}, "says path 'moe_decode', but its kernel's entry"),
    ({"mutant_of": "gemv_mq4c_r1"}, "says mutant_of 'gemv_mq4c_r1', but its kernel's entry"),
], ids=["self_test", "qt", "path", "mutant_of"])
def test_a_check_row_claiming_another_cell_is_damage(
        copy_of: Callable[[], Path], hqval: Admit, claim: dict[str, Any], named: str) -> None:
    """The qt=44 decode kernel's failing bit_identity row says it is a self-test, of
    another qt or path, or a mutant's (once: exit 2 as incomplete or untested, or exit 1
    with the row in another cell or a kernel-level finding, never naming the claim)."""
    run = copy_of()

    def change(r: dict[str, Any]) -> None:
        r["status"], r["measured"], r["message"] = "fail", 7.0, "wrong half"
        r["details"].update(claim)
    _rewrite(run, IDENT, change)
    res = hqval("admit", str(run))
    assert res.code == 2, res.err
    assert f"damaged: {run}: {IDENT}: {named}" in res.err


@pytest.mark.parametrize("claim,named", [
    ({"qt": 999}, "says qt 999, but its kernel's entry in the run's kernel table is qt 44"),
    ({"kind": "gemm"}, "says path 'prefill', but its kernel's entry in the run's kernel "
                       "table is path 'decode'"),
], ids=["qt", "kind"])
def test_a_timing_row_claiming_another_gate_is_damage(
        timed: Path, tmp_path: Path, hqval: Admit,  # noqa: F811
        claim: dict[str, Any], named: str) -> None:
    """A qt=44 timing cell whose samples say 1.5x slower (rejected, exit 1), its details
    naming another qt or kind, so the judge finds no gate for it (once: exit 0)."""
    run = tmp_path / "run"
    shutil.copytree(timed, run)

    def slower(r: dict[str, Any]) -> None:
        r["details"]["samples_b"] = [[x * 1.5 for x in s] if isinstance(s, list) else s * 1.5
                                     for s in r["details"]["samples_b"]]
    _rewrite(run, TIMED, slower)
    assert hqval("admit", str(run)).code == 1  # the control: the slower cell fails
    _rewrite(run, TIMED, lambda r: r["details"].update(claim))
    res = hqval("admit", str(run))
    assert res.code == 2, res.err
    assert f"damaged: {run}: {TIMED}: {named}" in res.err
