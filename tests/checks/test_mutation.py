"""Kill-matrix verdicts: killed only by a failing cell, never by an error; unsupported
where the mutant is not built; expected killers reported."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hqval.checks.cell import CHECKS, CheckContext, run_cell
from hqval.checks.mutation import Built, expected_hit, killers, matrix_text, real_failures, verdicts
from hqval.manifest import load_mutants
from hqval.result import Row, Status

MUTANT = load_mutants(None).kernels[0]


def _row(check: str, status: Status, kernel: str = MUTANT.name, arch: str = "gfx1100") -> Row:
    return Row(kind="check", check=check, kernel=kernel, arch=arch, backend="emu", status=status)


def test_a_failing_cell_kills_an_error_does_not() -> None:
    built = {(MUTANT.name, "gfx1100"): Built(True), (MUTANT.name, "gfx1030"): Built(True),
             (MUTANT.name, "gfx1201"): Built(False, "requires wmma_gfx11")}
    rows = [_row("bit_identity", Status.PASS), _row("reference_parity", Status.FAIL),
            _row("reference_parity", Status.ERROR, arch="gfx1030"),
            _row("bit_identity", Status.PASS, arch="gfx1030")]
    v = {r.arch: r for r in verdicts([MUTANT], ["gfx1100", "gfx1030", "gfx1201"], "emu",
                                     built, rows)}
    assert v["gfx1100"].status == Status.PASS
    assert v["gfx1100"].details["killed_by"] == ["reference_parity"]
    assert v["gfx1030"].status == Status.FAIL and "SURVIVED" in v["gfx1030"].message
    assert v["gfx1030"].details["errors"] == ["reference_parity"]
    assert v["gfx1201"].status == Status.UNSUPPORTED
    assert v["gfx1100"].identity == f"mutant[{MUTANT.name}|gfx1100|emu]"
    text = matrix_text(list(v.values()), rows)
    assert "SURVIVED" in text and "killed" in text and "unsupported" in text
    assert "not built" not in text  # the report says unsupported: one word for it


def test_isa_only_mutant_is_not_applicable_off_amd_but_survives_on_amd() -> None:
    isa_only = next(m for m in load_mutants(None).kernels
                    if m.expected_killer == "audit_header_scalar")
    built = {(isa_only.name, a): Built(True) for a in ("sm_90", "gfx1100")}
    rows = [_row("reference_parity", Status.PASS, kernel=isa_only.name, arch=a)
            for a in ("sm_90", "gfx1100")]
    v = {r.arch: r for r in verdicts([isa_only], ["sm_90", "gfx1100"], "cuda", built, rows)}
    assert v["sm_90"].status == Status.UNSUPPORTED
    assert "no ISA audit" in v["sm_90"].message
    # On an AMD arch the same evidence (no audit row failed) is a survivor, never excused.
    assert v["gfx1100"].status == Status.FAIL and "SURVIVED" in v["gfx1100"].message
    # A numeric mutant is never excused on sm_XX.
    numeric = next(m for m in load_mutants(None).kernels
                   if not m.expected_killer.startswith("audit"))
    built = {(numeric.name, "sm_90"): Built(True)}
    rows = [_row("reference_parity", Status.PASS, kernel=numeric.name, arch="sm_90")]
    (row,) = verdicts([numeric], ["sm_90"], "cuda", built, rows)
    assert row.status == Status.FAIL


def test_expected_killer_spellings() -> None:
    assert expected_hit("audit_header_scalar", ["audit_header_scalar"])
    assert expected_hit("header_scalar", ["audit_header_scalar"])
    assert expected_hit("audit:header_scalar", ["audit_header_scalar"])
    assert expected_hit("bit_identity", ["bit_identity", "reference_parity"])
    assert not expected_hit("padded_offset", ["bit_identity"])


def test_killers_and_real_failures() -> None:
    rows = [_row("a", Status.FAIL), _row("b", Status.ERROR), _row("c", Status.UNSUPPORTED)]
    assert killers(rows) == ["a"]
    assert [r.check for r in real_failures(rows)] == ["a", "b"]


def _mutants_for(arch: str) -> list[str]:
    from hqval.matrix import load_arches

    a = load_arches()[arch]
    return [m.name for m in load_mutants(None).kernels if m.applies_to(a)]


@pytest.mark.parametrize("mutant", _mutants_for("gfx1201"))
def test_every_mutant_is_killed_on_rdna4(emu_ctx: Callable[..., CheckContext],
                                         mutant: str) -> None:
    """Each mutant built for gfx1201 is failed by a check or, for the ones with the right
    numbers (vector header load, extra work), by the ISA audit rule named for it."""
    from hqval.audit import audit_matrix
    from hqval.toolchain import compile_kernel

    ctx = emu_ctx("gfx1201", mutants=True)
    spec = ctx.kernel(mutant)
    rows = [run_cell(ctx, check, spec) for check in CHECKS]
    if spec.expected_killer.startswith("audit_"):
        rows += audit_matrix([(spec, compile_kernel(spec, "gfx1201"))], ctx.arch)
    found = killers(rows)
    assert found, {r.check: (str(r.status), r.message) for r in rows}
    assert expected_hit(spec.expected_killer, found), found


def test_a_mutant_the_emulator_cannot_run_is_untested_not_a_survivor() -> None:
    m = load_mutants().kernels[0]
    gap = Row("check", "reference_parity", m.name, "gfx1201", "emu", Status.SKIPPED,
              message="untested", details={"emulator_gap": "v_msad_u8"})
    passed = Row("check", "bit_identity", m.name, "gfx1201", "emu", Status.PASS)
    built = {(m.name, "gfx1201"): Built(True, "")}
    (v,) = verdicts([m], ["gfx1201"], "emu", built, [gap, passed])
    assert v.status is Status.SKIPPED and "the emulator lacks v_msad_u8" in v.message
    # with no gap the same passing cells are a survivor
    (s,) = verdicts([m], ["gfx1201"], "emu", built, [passed])
    assert s.status is Status.FAIL and "SURVIVED" in s.message


def test_a_rule_the_real_kernel_fails_too_is_no_kill() -> None:
    """A mutant whose only failing rule also fails its real kernel (``mutant_of``) on the
    arch survives: that failure says nothing about the mutation.  Failing on another arch,
    or another rule, the real kernel's row does not excuse it."""
    built = {(MUTANT.name, a): Built(True) for a in ("gfx1100", "gfx1030")}
    rows = [_row("audit_no_spill", Status.FAIL), _row("audit_no_spill", Status.FAIL,
                                                      arch="gfx1030")]
    real = [_row("audit_no_spill", Status.FAIL, kernel=str(MUTANT.mutant_of))]
    v = {r.arch: r for r in verdicts([MUTANT], ["gfx1100", "gfx1030"], "emu", built, rows,
                                     real)}
    assert v["gfx1100"].status == Status.FAIL and "no kill" in v["gfx1100"].message
    assert v["gfx1100"].details["fails_real_kernel_too"] == ["audit_no_spill"]
    assert v["gfx1030"].status == Status.PASS  # the real kernel passes it there
    other = [_row("audit_no_spill", Status.FAIL, kernel="some_other_kernel")]
    (kill,) = verdicts([MUTANT], ["gfx1100"], "emu", built, rows[:1], other)
    assert kill.status == Status.PASS


def test_failures_of_production_false_kernels_are_listed_not_gating(tmp_path: Path) -> None:
    from dataclasses import replace

    from hqval.checks.mutation import gating
    from hqval.manifest import load_manifest

    real = load_manifest()
    a, b = real.kernels[0], real.kernels[1]
    real = replace(real, kernels=[a, replace(b, production=False), *real.kernels[2:]])
    rows = [_row("reference_parity", Status.FAIL, kernel=a.name),
            _row("reference_parity", Status.FAIL, kernel=b.name),
            _row("bit_identity", Status.PASS, kernel=b.name)]
    gate, listed = gating(rows, real)
    assert [r.kernel for r in gate] == [a.name]
    assert [r.kernel for r in listed] == [b.name]


def test_mutants_resolve_in_the_manifest_given(tmp_path: Path) -> None:
    """A mutants file naming no ``manifest:`` resolves its baselines and mutant_of in the
    manifest a command was given (--manifest), not in the suite's kernels.yaml; one that
    names another manifest than the one given is refused."""
    import shutil

    from hqval.checks.plugin import load_for_cells
    from hqval.manifest import ManifestError

    tree = Path(__file__).resolve().parents[1] / "data" / "engine_tree"
    shutil.copytree(tree, tmp_path / "tree")
    muts = tmp_path / "tree" / "mutants.yaml"
    muts.write_text(muts.read_text().replace("manifest: kernels.yaml\n", ""))
    with pytest.raises(ManifestError, match="is not a kernel of"):
        load_mutants(muts)  # the suite's kernels.yaml has no ew_* kernels
    real = tmp_path / "tree" / "kernels.yaml"
    m = load_mutants(muts, real=real)
    assert m.real_manifest == real.resolve()
    _, merged = load_for_cells(muts, real)
    assert "ew_gemv_mq4g256v2" in merged.names()
    named = tmp_path / "tree" / "named.yaml"
    named.write_text("manifest: kernels.yaml\n" + muts.read_text())
    other = tmp_path / "other.yaml"
    shutil.copy(real, other)
    with pytest.raises(ManifestError, match="was given"):
        load_mutants(named, real=other)
