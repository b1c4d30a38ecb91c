"""Faults of class 'a run bound to its evidence': the envelope names the run (``run_id``)
and the code object of every (kernel, arch) it compiled (``objects``); admission accepts
a row only when the envelope vouches for it.  A row of another run, arch, backend or code
object, an envelope without a gating key, and a resume over edited sources are damage:
exit 2, naming the row or the file."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import (
    ARCH,
    BIT_IDENTITY,
    Result,
    append_rows,
    as_another_run,
    edit_envelope,
    fail_bit_identity,
    hqval_process,
    rewrite_each,
    rows,
    run_args,
)

Admit = Callable[..., Result]
IDENT = BIT_IDENTITY  # the cell fail_bit_identity fails


def _row(run: Path, ident: str) -> dict[str, Any]:
    return dict(next(r for r in rows(run) if r["identity"] == ident))


@pytest.mark.parametrize("field,value,named", [
    ("arch", "gfx1100", "arch gfx1100 is not one of the run's (gfx1010)"),
    ("backend", "hip", "backend hip is not the run's (emu) on gfx1010"),
])
def test_a_row_of_another_arch_or_backend_is_damage(
        copy_of: Callable[[], Path], hqval: Admit, field: str, value: str, named: str) -> None:
    """A passing row of the run's own kernel, stamped with its run id, on an arch or
    backend the run did not use (once: hip rows appended to an emu run came out
    measured)."""
    run = copy_of()
    row = {**_row(run, IDENT), field: value}
    row.pop("identity")
    append_rows(run, row)
    res = hqval("admit", str(run))
    assert res.code == 2
    ident = f"bit_identity[gemv_mq4g256v2_r1|{row['arch']}|{row['backend']}]"
    assert f"damaged: {run}: {ident}: {named}" in res.err


def test_rows_of_another_run_are_damage(copy_of: Callable[[], Path], hqval: Admit) -> None:
    """Every row of one kernel replaced by another run's (its run id): damage, naming the
    rows and both ids."""
    run = copy_of()
    rewrite_each(run, lambda r: r.update(run_id="0" * 32) if r["kernel"] == "gemv_mq4c_r1"
                 else None)
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"padded_offset[gemv_mq4c_r1|{ARCH}|emu]: written by run {'0' * 32}" in res.err


@pytest.mark.parametrize("kind,ident", [
    ("check", IDENT),
    ("audit", f"audit_no_spill[gemv_mq4g256v2_r1|{ARCH}|isa]"),
    ("compile", f"compile[gemv_mq4g256v2_r1|{ARCH}|toolchain]"),
])
def test_a_row_judging_another_code_object_is_damage(
        copy_of: Callable[[], Path], hqval: Admit, kind: str, ident: str) -> None:
    """A row naming a code object other than the one the run compiled for its (kernel,
    arch) (once: a swapped object admitted a broken tree)."""
    run = copy_of()
    assert _row(run, ident)["object_sha256"], kind
    rewrite_each(run, lambda r: r.update(object_sha256="f" * 64) if r["identity"] == ident
                 else None)
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"{ident}: judged code object ffffffffffff, not the one the run compiled" in res.err


def test_a_passing_audit_row_without_its_object_is_damage(copy_of: Callable[[], Path],
                                                          hqval: Admit) -> None:
    run = copy_of()
    ident = f"audit_no_spill[gemv_mq4c_r1|{ARCH}|isa]"
    rewrite_each(run, lambda r: r.update(object_sha256=None) if r["identity"] == ident else None)
    res = hqval("admit", str(run))
    assert res.code == 2 and f"{ident}: passes without naming the code object" in res.err


def test_a_second_run_never_excuses_the_first(copy_of: Callable[[], Path],
                                              hqval: Admit) -> None:
    """Run A fails; run B's manifest marks the same kernel names ``production: false``.
    Each run is judged with its own kernel table, so ``admit A B`` still fails (once: B's
    table excused A's failure, exit 0).  (B's manifest is moved away first, as if B were
    made from another one: a table its own manifest contradicts is damage.)"""
    a, b = copy_of(), as_another_run(copy_of())
    fail_bit_identity(a)
    edit_envelope(b, lambda e: [e.update(manifest=str(b / "moved-away.yaml")),
                            *(k.update(production=False) for k in e["kernels"].values())])
    assert hqval("admit", str(a)).code == 1
    for order in ((a, b), (b, a)):
        res = hqval("admit", *map(str, order), "--json", str(a.parent / "adm.json"))
        assert res.code == 1, order
        cells = json.loads((a.parent / "adm.json").read_text())["cells"]
        decode = next(c for c in cells if (c["qt"], c["path"]) == (44, "decode"))
        assert decode["status"] == "rejected" and IDENT in decode["failing"], order


@pytest.mark.parametrize("damage,named", [
    (lambda e: e.pop("steps"), "has no steps"),
    (lambda e: e.pop("expected_cells"), "has no expected_cells"),
    (lambda e: e.pop("run_id"), "has no run_id"),
    (lambda e: e.pop("objects"), "has no objects"),
    (lambda e: e.update(schema_version=1), "says schema_version 1, but the run names itself"),
    (lambda e: e.update(schema_version=2), "says schema_version 2, but the run names itself"),
    (lambda e: e.update(schema_version=True), "schema_version True is not an integer"),
], ids=["no-steps", "no-expected-cells", "no-run-id", "no-objects", "schema-1", "schema-2",
        "schema-true"])
def test_an_envelope_without_a_gating_key_is_damage(
        copy_of: Callable[[], Path], hqval: Admit, damage: Callable[[dict[str, Any]], Any],
        named: str) -> None:
    """The keys gating depends on are required (once: deleting ``steps`` or setting
    ``schema_version`` to 1 or true switched the expected-cells check off, and a removed
    row went unnoticed)."""
    run = copy_of()
    edit_envelope(run, damage)
    res = hqval("admit", str(run))
    assert res.code == 2
    assert named in res.err


def test_resume_after_editing_a_header_is_refused(tree: Path, golden: Path,
                                                  tmp_path: Path) -> None:
    """A complete run resumed after one of its included headers changed: refused before
    anything runs, naming the header (once: exit 0, the audit judged the old object and
    the checks the new one)."""
    mine = tmp_path / "tree"
    shutil.copytree(tree.parent, mine)
    run = tmp_path / "run"
    shutil.copytree(golden, run)
    header = mine / "include" / "hq4_header.h"
    header.write_text(header.read_text() + "\n// an edit after the run\n")
    before = (run / "rows.jsonl").read_bytes()
    res = hqval_process(run_args(mine / "kernels.yaml", run, "--resume"))
    assert res.code == 2
    assert f"{header} changed since the run compiled it" in res.err
    assert (run / "rows.jsonl").read_bytes() == before


PARITY = f"reference_parity[gemv_mq4g256v2_r1|{ARCH}|emu]"


@pytest.mark.parametrize("field,value,named", [
    ("tolerance", 1e9, f"{PARITY}: states tolerance 1e+09, which reference_parity never "
     "compares with (its tolerances: 0.0001)"),
    ("tolerance", 1e-3, f"{PARITY}: states tolerance 0.001, which reference_parity never "
     "compares with"),
    ("seed", 1, f"{PARITY}: ran with seed 1, not the run's (0)"),
])
def test_a_row_stating_another_tolerance_or_seed_is_damage(
        copy_of: Callable[[], Path], hqval: Admit, field: str, value: object, named: str
) -> None:
    """A passing row with its tolerance raised (still above its measured value, so the row
    agrees with itself) or its fixture seed changed: the row is not what this run's check
    wrote, whose tolerance is the check's own and whose seed is the run's."""
    run = copy_of()
    rewrite_each(run, lambda r: r.update({field: value}) if r["identity"] == PARITY else None)
    res = hqval("admit", str(run))
    assert res.code == 2
    assert named in res.err


@pytest.mark.parametrize(("rule", "tolerance", "named"), [
    ("no_spill", 8.0, "states tolerance 8, but rule no_spill always compares with 0"),
    ("v2_valu_delta", 1e6, "states tolerance 1e+06, but rule v2_valu_delta always compares "
     "with 3"),
])
def test_an_audit_row_stating_another_fixed_bound_is_damage(
        copy_of: Callable[[], Path], hqval: Admit, rule: str, tolerance: float, named: str
) -> None:
    """An audit pass whose rule has one fixed bound (no spill at all; the design note's +3
    VALU per group-row) stating a looser one, its measured value within it: not a row the
    rule wrote (once: admitted)."""
    run = copy_of()
    ident = f"audit_{rule}[gemv_mq4g256v2_r1|{ARCH}|isa]"
    assert any(r["identity"] == ident and r["status"] == "pass" for r in rows(run))
    rewrite_each(run, lambda r: r.update(tolerance=tolerance, measured=tolerance / 2)
                 if r["identity"] == ident else None)
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"{ident}: {named}" in res.err


VGPR = f"audit_vgpr_budget[gemv_mq4g256v2_r1|{ARCH}|isa]"
BUDGET_32 = (f"but rule vgpr_budget compares with 256 on {ARCH} for block 32: min(256, 1024 "
             "VGPRs / 1 waves per SIMD for launch bounds 32)")


def _vgprs(run: Path) -> float:
    return float(_row(run, VGPR)["measured"])


@pytest.mark.parametrize("edit,named", [
    (lambda run, r: r.update(tolerance=512.0), lambda run: f"states tolerance 512, {BUDGET_32}"),
    (lambda run, r: r.update(tolerance=_vgprs(run)),
     lambda run: f"states tolerance {_vgprs(run):g}, {BUDGET_32}"),
    (lambda run, r: r.update(tolerance=512.0, measured=300.0),
     lambda run: f"states tolerance 512, {BUDGET_32}"),
], ids=["looser", "tighter", "vgprs-beyond"])
def test_a_vgpr_budget_row_stating_another_budget_is_damage(
        copy_of: Callable[[], Path], hqval: Admit, edit: Callable[[Path, dict[str, Any]], None],
        named: Callable[[Path], str]) -> None:
    """The VGPR budget pass of a 32-thread kernel on gfx1010 (256: the whole 1024-VGPR
    file of one wave per SIMD, capped at 256) stating 512, or its own VGPR count (a
    tighter budget, still agreeing with itself), or 512 with 300 VGPRs: the judge
    re-derives the budget from the arch and the kernel table's block
    (``audit.occupancy.vgpr_budget``) and none of these is a row the rule wrote (once:
    admitted, exit 0)."""
    run = copy_of()
    assert _row(run, VGPR)["status"] == "pass" and _row(run, VGPR)["tolerance"] == 256.0
    said = named(run)
    rewrite_each(run, lambda r: edit(run, r) if r["identity"] == VGPR else None)
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"damaged: {run}: {VGPR}: {said}" in res.err


@pytest.mark.parametrize("edit,named", [
    (lambda k: k.update(block=1024),
     "states tolerance 256, but rule vgpr_budget compares with 64 on gfx1010 for block 1024"),
    (lambda k: k.pop("block"),
     "its kernel's entry in the run's kernel table has no block (None is not a multiple of "
     "32 from 32 to 1024): the VGPR budget rule vgpr_budget compares with cannot be "
     "re-derived"),
], ids=["block-1024", "no-block"])
def test_a_vgpr_budget_row_of_another_block_is_damage(
        copy_of: Callable[[], Path], hqval: Admit, edit: Callable[[dict[str, Any]], Any],
        named: str) -> None:
    """The kernel's block edited in the envelope's kernel table to 1024 (its rows' budget
    would be 64) or taken out of it (every run that audits records it): its genuine
    VGPR budget row is not one the table vouches for (the row is named before the table
    is checked against the manifest)."""
    run = copy_of()
    edit_envelope(run, lambda env: edit(env["kernels"]["gemv_mq4g256v2_r1"]))
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"damaged: {run}: {VGPR}: {named}" in res.err


def test_an_envelope_whose_backend_contradicts_its_table_is_damage(
        copy_of: Callable[[], Path], hqval: Admit) -> None:
    """The envelope's backend summary says hip while its per-arch table (which binds the
    rows) says emu: the report and summary would show hardware evidence (once: admitted)."""
    run = copy_of()
    edit_envelope(run, lambda e: e.update(backend="hip"))
    res = hqval("admit", str(run))
    assert res.code == 2
    assert ("envelope.json backend is 'hip', but its backends table says 'emu': the "
            "envelope is damaged") in res.err


def test_an_expected_audit_cell_removed_with_its_row_is_damage(
        copy_of: Callable[[], Path], hqval: Admit) -> None:
    """One audit rule's cell of one kernel removed from the envelope's expected cells (and
    its count) together with its row: no check requires that row, so only the kernel table
    the manifest confirms can tell that the run owed it."""
    run = copy_of()
    victim = f"audit_payload_offset[gemv_mq4g256v2_r1|{ARCH}|isa]"

    def drop(env: dict[str, Any]) -> None:
        env["expected_cells"]["audit"].remove(victim)
        env["expected"]["audit"] -= 1
    edit_envelope(run, drop)
    kept = [r for r in rows(run) if r["identity"] != victim]
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    res = hqval("admit", str(run))
    assert res.code == 2
    assert (f"envelope.json expected_cells lacks 1 cell(s) its manifest's kernels imply "
            f"({victim})") in res.err
