"""``hqval.admission.evidence``: what the envelope vouches for, rows against themselves,
and the arches a kernel is built for."""

from __future__ import annotations

import dataclasses
import math

import pytest

from hqval.admission import KernelInfo, kernel_table
from hqval.admission.evidence import binding_damage, envelope_damage, self_contradiction
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
    obj = Row("audit", "audit_no_spill", "k", "gfx1100", "isa", Status.PASS, run_id=RUN_ID,
              object_sha256="c" * 64)
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
    stray = Row("check", "bit_identity", "k7", "gfx1100", "emu", Status.PASS, run_id=RUN_ID)
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
