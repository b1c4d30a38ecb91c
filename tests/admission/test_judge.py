"""``hqval.admission.judge``: every run judged with its own kernel table, then combined."""

from __future__ import annotations

import dataclasses

from hqval.admission import AdmissionStatus, judge, load_policy
from hqval.matrix import load_arches
from hqval.result import Row, Status

from .runs import bound_run

ARCHES = load_arches()
TABLE = {"gemv44": {"qt": 44, "kind": "gemv", "requires": "any"}}
POLICY = load_policy()


def _rows(status: Status = Status.PASS) -> list[Row]:
    a = "gfx1100"
    rows = [Row("compile", "compile", "gemv44", a, "toolchain", Status.PASS),
            Row("audit", "audit_no_spill", "gemv44", a, "isa", Status.PASS, measured=0.0,
                tolerance=0.0)]
    rows += [Row("check", c, "gemv44", a, "emu", status if c == "bit_identity" else Status.PASS)
             for c in ("bit_identity", "reference_parity")]
    return rows


def _cell(j: object) -> AdmissionStatus:
    adm = j.admission  # type: ignore[attr-defined]
    return next(c.status for c in adm.cells if (c.qt, c.path) == (44, "decode"))


def test_one_clean_run_is_emulated_and_exit_0() -> None:
    """(The other paths have no kernel in this table: untested, owing nothing.)"""
    j = judge([bound_run(_rows(), TABLE, ["gfx1100"])], POLICY, arches=ARCHES)
    assert _cell(j) is AdmissionStatus.EMULATED and not j.admission.damage
    assert j.exit_code == 0 and len(j.runs) == 1 and len(j.rows) == len(j.runs[0].rows)
    skipped = [dataclasses.replace(r, status=Status.SKIPPED) if r.kind == "check" else r
               for r in _rows()]
    j = judge([bound_run(skipped, TABLE, ["gfx1100"])], POLICY, arches=ARCHES)
    assert _cell(j) is AdmissionStatus.COMPILED and j.exit_code == 2


def test_a_second_runs_table_never_excuses_the_first() -> None:
    """Each run keeps its own kernel table: B marking gemv44 ``production: false`` says
    nothing about A's gemv44."""
    a = bound_run(_rows(Status.FAIL), TABLE, ["gfx1100"], "a")
    b = bound_run(_rows(), {"gemv44": {**TABLE["gemv44"], "production": False}},
                  ["gfx1100"], "b")
    for order in ((a, b), (b, a)):
        j = judge(order, POLICY, arches=ARCHES)
        assert _cell(j) is AdmissionStatus.REJECTED and j.exit_code == 1
    assert judge([b], POLICY, arches=ARCHES).exit_code == 2  # b alone holds no evidence


def test_combined_cells_take_the_furthest_proof_once_no_run_rejects() -> None:
    """An emulator run and a run without checks of the same arch: the emulated one
    stands; a rejection in either wins."""
    emu = bound_run(_rows(), TABLE, ["gfx1100"], "emu")
    compiled = bound_run([dataclasses.replace(r, status=Status.SKIPPED) if r.kind == "check"
                          else r for r in _rows()], TABLE, ["gfx1100"], "compiled")
    j = judge([compiled, emu], POLICY, arches=ARCHES)
    cell = next(c for c in j.admission.cells if (c.qt, c.path) == (44, "decode"))
    assert cell.status is AdmissionStatus.EMULATED
    assert all(r.startswith("emu: ") for r in cell.reasons)


def test_damage_of_any_run_is_exit_2_naming_the_run_and_row() -> None:
    run = bound_run(_rows(), TABLE, ["gfx1100"], "r")
    stray = dataclasses.replace(run.rows[2], arch="gfx1201")
    run = dataclasses.replace(run, rows=[*run.rows, stray])
    j = judge([run], POLICY, arches=ARCHES)
    assert j.exit_code == 2
    assert j.admission.damage == (
        "r: bit_identity[gemv44|gfx1201|emu]: arch gfx1201 is not one of the run's (gfx1100)",)
