"""``hqval.admission.evidence``: what the envelope vouches for, rows against themselves,
and the arches a kernel is built for."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from hqval.admission import KernelInfo, kernel_table
from hqval.admission.evidence import binding_damage, envelope_damage, self_contradiction
from hqval.manifest import KernelSpec
from hqval.matrix import load_arches
from hqval.result import Row, Status

from .runs import RUN_ID, bound_run

ARCHES = load_arches()


def _check(status: Status = Status.PASS, measured: float | None = 1e-7,
           tolerance: float | None = 1e-4, **kw: object) -> Row:
    return Row("check", "reference_parity", "k", "gfx1100", "emu", status, measured=measured,
               tolerance=tolerance, run_id=RUN_ID, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("row,why", [
    (_check(measured=0.9), "passes with measured 0.9 beyond its tolerance 0.0001"),
    (_check(measured=math.nan), "passes with measured nan"),
    (_check(tolerance=math.inf), "passes with tolerance inf"),
    (Row("timing", "timing_hot", "k@1x256", "gfx1100", "hip", Status.PASS, measured=1.5),
     "a timing verdict without its paired samples (samples_a, samples_b)"),
])
def test_rows_contradicting_their_status(row: Row, why: str) -> None:
    assert self_contradiction(row) == why


def test_rows_agreeing_with_their_status() -> None:
    """The controls: a pass within its bound, a fail beyond it, a fail within it (failed
    for another reason: a guard), a timing row with its samples."""
    assert self_contradiction(_check()) == ""
    assert self_contradiction(_check(Status.FAIL, measured=0.9)) == ""
    assert self_contradiction(_check(Status.FAIL)) == ""
    timed = Row("timing", "timing_hot", "k@1x256", "gfx1100", "hip", Status.PASS,
                details={"samples_a": [[1.0, 1.1]], "samples_b": [[1.0, 1.2]]})
    assert self_contradiction(timed) == ""


def test_a_row_of_another_run_arch_or_object_is_named() -> None:
    run = bound_run([dataclasses.replace(_check(), object_sha256="a" * 64)],
                    {"k": {"qt": 44, "kind": "gemv"}}, ["gfx1100"],
                    objects={"k|gfx1100": "a" * 64})
    assert binding_damage(run.envelope, run.rows, 3) == []
    other = Row("check", "bit_identity", "k", "gfx1100", "emu", Status.PASS, run_id="b" * 32)
    arch = Row("check", "bit_identity", "k", "gfx1201", "emu", Status.PASS, run_id=RUN_ID)
    # (no_spill's pass states its bound: one without it is damage of its own)
    obj = Row("audit", "audit_no_spill", "k", "gfx1100", "isa", Status.PASS, measured=0.0,
              tolerance=0.0, run_id=RUN_ID, object_sha256="c" * 64)
    bare = Row("audit", "audit_vgpr", "k", "gfx1100", "isa", Status.PASS, run_id=RUN_ID)
    out = binding_damage(run.envelope, [*run.rows, other, arch, obj, bare], 3)
    assert out == [
        f"bit_identity[k|gfx1100|emu]: written by run {'b' * 32}, not this run ({RUN_ID})",
        "bit_identity[k|gfx1201|emu]: arch gfx1201 is not one of the run's (gfx1100)",
        "audit_no_spill[k|gfx1100|isa]: judged code object cccccccccccc, not the one the run "
        "compiled (aaaaaaaaaaaa)",
        "audit_vgpr[k|gfx1100|isa]: passes without naming the code object it judged",
    ]


def test_gating_keys_of_a_current_run() -> None:
    run = bound_run([_check()], {"k": {"qt": 44, "kind": "gemv"}}, ["gfx1100"])
    assert envelope_damage(run.envelope, run.rows, 3) == []
    for key in ("steps", "expected_cells", "objects", "run_id", "kernels"):
        env = {k: v for k, v in run.envelope.items() if k != key}
        assert envelope_damage(env, run.rows, 3), key
    assert envelope_damage({**run.envelope, "schema_version": True}, run.rows, 3)
    # an older run's rows cannot be vouched for; a current run claiming an older schema is
    # damaged
    assert "before rows were bound" in envelope_damage(
        {"schema_version": 3, "kernels": {}}, [Row("check", "c", "k", "a", "emu",
                                                    Status.PASS)], 2)[0]
    assert "its schema_version is damaged" in envelope_damage(run.envelope, run.rows, 1)[0]


def test_built_for_decides_where_a_kernel_owes_evidence() -> None:
    """A kernel limited to gfx1100 (the manifest's ``arches``) owes nothing on gfx1151;
    a run that did not record it falls back on ``requires``."""
    table = kernel_table([{"kernels": {
        "only": {"qt": 44, "kind": "gemv", "requires": "any", "built_for": ["gfx1100"]},
        "old": {"qt": 44, "kind": "gemv", "requires": "any"}}}])
    assert table["only"].applies_to(ARCHES["gfx1100"]) is True
    assert table["only"].applies_to(ARCHES["gfx1151"]) is False
    assert table["old"].applies_to(ARCHES["gfx1151"]) is True
    assert KernelInfo(44, "decode").applies_to(ARCHES["gfx1151"]) is None


def test_an_unexpected_row_among_many_is_named_once_the_expected_cells_are_read_once() -> None:
    """``binding_damage`` reads the envelope's expected cells once for all rows: a passing
    row no step expected is still damage, a failing one is not, and the expected rows
    around them are clean."""
    ok = [Row("check", "reference_parity", f"k{i}", "gfx1100", "emu", Status.PASS,
              measured=1e-7, tolerance=1e-4) for i in range(50)]
    kernels = {f"k{i}": {"qt": 44, "kind": "gemv"} for i in range(51)}
    run = bound_run(ok, kernels, ["gfx1100"])
    assert binding_damage(run.envelope, run.rows, 3) == []
    stray = Row("check", "bit_identity", "k7", "gfx1100", "emu", Status.PASS, run_id=RUN_ID,
                seed=0)
    failed = dataclasses.replace(stray, kernel="k8", status=Status.FAIL)
    out = binding_damage(run.envelope, [*run.rows, stray, failed], 3)
    assert out == ["bit_identity[k7|gfx1100|emu]: a cell the run never expected (it is none "
                   "of the envelope's expected cells)"]


def test_a_skipped_compile_row_is_damage_unless_it_is_the_compilers_gap() -> None:
    """The compile row hqval writes where clang lacks a target builtin the source calls
    (skipped, naming the builtin its own error quotes) is consistent; a skipped compile
    row without that gap, or whose gap its compiler error does not name, is damage."""
    from hqval.manifest import load_manifest
    from hqval.toolchain import CompileCell, CompileResult

    spec = load_manifest().kernels[0]
    error = ("k.hip:110:5: error: use of undeclared identifier "
             "'__builtin_amdgcn_s_prefetch_data'")
    gap = CompileCell(spec, "gfx1201", CompileResult(False, None, error, False, 0.1)).row()
    assert gap.status is Status.SKIPPED and self_contradiction(gap) == ""
    own = CompileCell(spec, "gfx1201", CompileResult(
        False, None, "k.hip:3:1: error: use of undeclared identifier 'ew_next'", False,
        0.1)).row()
    assert own.status is Status.FAIL  # the kernel's own failure, never a gap
    for forged in (dataclasses.replace(own, status=Status.SKIPPED),
                   dataclasses.replace(gap, message="untested: trust me"),
                   dataclasses.replace(gap, details={**gap.details,
                                                     "toolchain_gap": "__builtin_other"})):
        assert "never skipped" in self_contradiction(forged)


# ------------------------------------------------------------------ the audit's own bounds

needs_clang = pytest.mark.skipif(
    not (shutil.which("clang-19") and shutil.which("llvm-objdump-19")),
    reason="needs clang-19 and llvm-objdump-19 (apt-get install clang-19 llvm-19)")

PRELUDE = Path(__file__).resolve().parents[2] / "kernels" / "include"
# one kernel with the launch bounds BOUNDS: a 1024-thread kernel's VGPR budget is 64 on
# gfx1010 (16 waves per SIMD), a 32-thread kernel's is 256
WIDE = """\
#include "hqval_prelude.h"
HQ_GLOBAL void BOUNDS wide(const unsigned char* W, const float* x, float* y, int M, int K) {
    y[hq_lane()] = x[(K + hq_lane()) % M] * static_cast<float>(W[hq_lane() % 16]);
}
"""


def _wide(tmp: Path, bounds: str, block: int) -> KernelSpec:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "wide.hip").write_text(WIDE.replace("BOUNDS", bounds))
    return KernelSpec(name="wide", source=tmp / "wide.hip", symbol="wide", qt=44, kind="gemv",
                      include_dirs=(PRELUDE,), block=block)


def _audited(spec: KernelSpec, arch: str, cache: Path) -> tuple[dict[str, Row], str]:
    """The real audit of ``spec``'s real code object on ``arch``: its rows by rule, each
    naming the object, and the object's sha256."""
    from hqval.audit import analyze, audit_kernel
    from hqval.toolchain import compile_kernel, file_sha256

    res = compile_kernel(spec, arch, cache)
    assert res.code_object is not None, res.message
    sha = file_sha256(res.code_object)
    code = analyze(res.code_object, arch)[spec.symbol]
    return {r.check.removeprefix("audit_"): dataclasses.replace(r, object_sha256=sha)
            for r in audit_kernel(spec, ARCHES[arch], code)}, sha


def _bound_damage(spec: KernelSpec, arch: str, sha: str, row: Row,
                  entry: dict[str, Any] | None = None, **kw: Any) -> list[str]:
    """What ``binding_damage`` says of ``row`` in a run of ``spec`` on ``arch`` whose kernel
    table is the one ``hqval run`` records (``hqval.manifest.kernel_table``), or ``entry``
    in its place."""
    from hqval.manifest import kernel_table as recorded

    table = {spec.name: entry if entry is not None else recorded([spec])[spec.name]}
    run = bound_run([row], table, [arch], objects={f"{spec.name}|{arch}": sha})
    return binding_damage(run.envelope, run.rows, 3, **kw)


@needs_clang
def test_a_vgpr_budget_row_states_the_budget_of_its_arch_and_block(
        tmp_path: Path, code_cache: Path) -> None:
    """The rule's own rows (a suite kernel of block 32; a 1024-thread kernel) pass on
    gfx1010 and gfx1100 and are vouched for; the same rows stating a looser budget, a
    tighter one, or a loose one with VGPRs beyond the real budget are damage naming the
    bound re-derived from the arch and the kernel table's block (once: admitted)."""
    from hqval.manifest import load_manifest

    gemv = load_manifest().by_name("gemv_mq4g256v2_r1")
    wide = _wide(tmp_path, "HQ_LAUNCH_BOUNDS(1024)", 1024)
    for spec, arch, budget, deriv in [
            (gemv, "gfx1010", 256, "min(256, 1024 VGPRs / 1 waves per SIMD for launch bounds "
                                   "32)"),
            (gemv, "gfx1100", 256, "min(256, 1536 VGPRs / 1 waves per SIMD for launch bounds "
                                   "32)"),
            (wide, "gfx1010", 64, "min(256, 1024 VGPRs / 16 waves per SIMD for launch bounds "
                                  "1024)"),
            (wide, "gfx1100", 96, "min(256, 1536 VGPRs / 16 waves per SIMD for launch bounds "
                                  "1024)")]:
        rows, sha = _audited(spec, arch, code_cache)
        real = rows["vgpr_budget"]
        assert real.status is Status.PASS and real.tolerance == budget, real.message
        assert real.measured is not None and real.measured < budget
        assert _bound_damage(spec, arch, sha, real) == []
        said = (f"but rule vgpr_budget compares with {budget} on {arch} for block "
                f"{spec.block}: {deriv}")
        looser = dataclasses.replace(real, tolerance=512.0)
        tighter = dataclasses.replace(real, tolerance=real.measured)
        beyond = dataclasses.replace(real, tolerance=512.0, measured=budget + 44.0)
        for forged in (looser, tighter, beyond):
            assert _bound_damage(spec, arch, sha, forged) == [
                f"{real.identity}: states tolerance {forged.tolerance:g}, {said}"], forged
        # the budget stated, the VGPRs beyond it: the row contradicts itself
        over = dataclasses.replace(real, measured=budget + 1.0)
        assert _bound_damage(spec, arch, sha, over) == [
            f"{real.identity}: passes with measured {budget + 1} beyond its tolerance {budget}"]
        assert _bound_damage(spec, arch, sha, dataclasses.replace(real, tolerance=None)) == [
            f"{real.identity}: passes without the bound rule vgpr_budget compares with (its "
            "tolerance)"]


@needs_clang
def test_a_vgpr_budget_row_whose_block_or_arch_cannot_be_re_derived_is_damage(
        code_cache: Path) -> None:
    """The genuine row of a 32-thread kernel, its kernel's entry edited: block 1024 makes
    its budget 64, not the 256 it states; no block, or an arch this hqval does not know,
    leaves nothing to re-derive it from (every run that audits records its kernels'
    block), so the row is not vouched for either."""
    from hqval.manifest import kernel_table as recorded
    from hqval.manifest import load_manifest

    spec = load_manifest().by_name("gemv_mq4g256v2_r1")
    rows, sha = _audited(spec, "gfx1010", code_cache)
    real = rows["vgpr_budget"]
    entry = recorded([spec])[spec.name]
    assert entry["block"] == 32
    assert _bound_damage(spec, "gfx1010", sha, real, {**entry, "block": 1024}) == [
        f"{real.identity}: states tolerance 256, but rule vgpr_budget compares with 64 on "
        "gfx1010 for block 1024: min(256, 1024 VGPRs / 16 waves per SIMD for launch bounds "
        "1024)"]
    for block in (None, 0, "32", True, 48):
        edited = {k: v for k, v in entry.items() if k != "block" or block is not None}
        if block is not None:
            edited["block"] = block
        assert _bound_damage(spec, "gfx1010", sha, real, edited) == [
            f"{real.identity}: its kernel's entry in the run's kernel table has no block "
            f"({block!r} is not a multiple of 32 from 32 to 1024): the VGPR budget rule "
            "vgpr_budget compares with cannot be re-derived (damaged)"], block
    others = {n: a for n, a in ARCHES.items() if n != "gfx1010"}
    assert _bound_damage(spec, "gfx1010", sha, real, known_arches=others) == [
        f"{real.identity}: arch gfx1010 is none of this hqval's arches (matrices/arches."
        "yaml): the VGPR budget rule vgpr_budget compares with cannot be re-derived"]
    # the other rules need no block: the fixed bound of no_spill is vouched for without it
    assert _bound_damage(spec, "gfx1010", sha, rows["no_spill"],
                         {k: v for k, v in entry.items() if k != "block"}) == []


@needs_clang
def test_a_failing_vgpr_budget_row_states_the_budget_of_its_own_launch_bounds(
        tmp_path: Path, code_cache: Path) -> None:
    """A kernel of block 32 built without launch bounds (1024): the rule fails it and
    compares its VGPRs with the 1024-thread budget (64 on gfx1010), not block 32's 256.
    That row is vouched for (the run fails, exit 1, not damaged); stating 256 it is not."""
    spec = _wide(tmp_path, "", 32)
    rows, sha = _audited(spec, "gfx1010", code_cache)
    real = rows["vgpr_budget"]
    assert real.status is Status.FAIL and "launch bounds 1024 != block 32" in real.message
    assert real.tolerance == 64.0
    assert _bound_damage(spec, "gfx1010", sha, real) == []
    assert _bound_damage(spec, "gfx1010", sha, dataclasses.replace(real, tolerance=256.0)) == [
        f"{real.identity}: states tolerance 256, but rule vgpr_budget compares with 64 on "
        "gfx1010 for the launch bounds 1024 of wave32 it states: min(256, 1024 VGPRs / 16 "
        "waves per SIMD for launch bounds 1024)"]


@needs_clang
def test_a_fixed_bound_pass_without_its_bound_is_damage(code_cache: Path) -> None:
    """no_spill's real pass states its bound 0; the same pass stating none (its measured
    value no longer compared with anything) is not a row the rule wrote."""
    from hqval.manifest import load_manifest

    spec = load_manifest().by_name("gemv_mq4g256v2_r1")
    rows, sha = _audited(spec, "gfx1010", code_cache)
    real = rows["no_spill"]
    assert real.status is Status.PASS and real.tolerance == 0.0
    assert _bound_damage(spec, "gfx1010", sha, real) == []
    forged = dataclasses.replace(real, tolerance=None, measured=12.0)
    assert _bound_damage(spec, "gfx1010", sha, forged) == [
        f"{real.identity}: passes without the bound rule no_spill compares with (its "
        "tolerance)"]
