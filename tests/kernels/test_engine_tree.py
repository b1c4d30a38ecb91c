"""The engine-style kernel tree (tests/data/engine_tree): its manifest, its own mutants
resolved within it, and broken copies rejected with the failing check named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hqval.admission import AdmissionStatus, Cell, KernelInfo, admit, load_policy
from hqval.audit.cache import _baseline_spec
from hqval.backends.emu import EmuBackend
from hqval.checks.cell import CheckContext, run_cell
from hqval.checks.plugin import load_for_cells
from hqval.manifest import ManifestError, load_manifest, load_mutants
from hqval.matrix import load_arches
from hqval.result import Row

TREE = Path(__file__).resolve().parents[1] / "data" / "engine_tree"
ARCHES = load_arches()

pytestmark = pytest.mark.skipif(shutil.which("clang-19") is None, reason="needs clang-19")


def test_the_tree_names_formats_by_name_and_its_keys_load() -> None:
    m = load_manifest(TREE / "kernels.yaml")
    assert m.mutants == (TREE / "mutants.yaml").resolve()
    by = {k.name: k for k in m.kernels}
    assert by["ew_gemv_hfq4g256"].qt == 6 and by["ew_gemv_mq4cg256"].qt == 45
    assert by["ew_gemv_mq4g256v2_lds128"].block == 128
    assert by["ew_fused_qkv_mq4g256v2"].extra_args == (None, None, None)
    assert all(k.preinclude == ((TREE / "src" / "ew_weight_policy.inc").resolve(),)
               for k in m.kernels)


def test_the_trees_mutants_resolve_in_the_trees_manifest(tmp_path: Path) -> None:
    muts = load_mutants(TREE / "mutants.yaml")
    assert muts.real_manifest == (TREE / "kernels.yaml").resolve()
    checked, merged = load_for_cells(TREE / "mutants.yaml")
    assert checked.path == muts.path
    assert {"ew_gemv_mq4g256v2", "ew_mut_gemv_lane_half"} <= set(merged.names())
    assert "gemv_hfq4g256_r1" not in merged.names()  # the suite's kernels are not there
    spec = muts.by_name("ew_mut_gemm12_payload_base4")
    assert _baseline_spec(spec).name == "ew_gemm_hfq4g256_wmma_gfx12"
    # a baseline that is not a kernel of its real manifest is refused, naming that file
    shutil.copytree(TREE, tmp_path / "tree")
    text = (tmp_path / "tree" / "mutants.yaml").read_text()
    bad = tmp_path / "tree" / "mutants.yaml"
    bad.write_text(text.replace("baseline: ew_gemv_hfq4g256\n", "baseline: gemv_hfq4g256_r1\n",
                                1))
    with pytest.raises(ManifestError, match=r"'gemv_hfq4g256_r1' is not a kernel of .*tree/"
                                            r"kernels.yaml"):
        load_mutants(bad)


def _cells(manifest_path: Path, kernel: str, arch: str, checks: list[str]) -> list[Row]:
    m = load_manifest(manifest_path)
    ctx = CheckContext(backend=EmuBackend(arch), arch=ARCHES[arch], manifest=m)
    spec = m.by_name(kernel)
    return [run_cell(ctx, c, spec) for c in checks]


def _admission(manifest_path: Path, rows: list[Row]) -> dict[tuple[int, str, str], Cell]:
    m = load_manifest(manifest_path)
    kernels = {k.name: KernelInfo(k.qt, k.path, None, k.kind, k.requires)
               for k in m.kernels}
    adm = admit(rows, load_policy(), ARCHES, kernels=kernels)
    return {(c.qt, c.path, c.arch): c for c in adm.cells}


@pytest.mark.parametrize(("source", "old", "new", "kernel", "check"), [
    # the half select inverted: half 1's header for weights 0..127 and back
    ("ew_gemv_mq4g256v2.hip", "(boff < 64) ? h0 : h1", "(boff < 64) ? h1 : h0",
     "ew_gemv_mq4g256v2", "reference_parity"),
    # the qt=45 payload read at +4, in the zero pad
    ("ew_gemv_mq4cg256.hip", "EW_LOAD_PK(gp + 8 + boff)", "EW_LOAD_PK(gp + 4 + boff)",
     "ew_gemv_mq4cg256", "padded_offset"),
])
def test_a_broken_copy_is_rejected_with_the_failing_check_named(
        tmp_path: Path, source: str, old: str, new: str, kernel: str, check: str) -> None:
    shutil.copytree(TREE, tmp_path / "tree")
    src = tmp_path / "tree" / "src" / source
    text = src.read_text()
    assert old in text
    src.write_text(text.replace(old, new))
    manifest = tmp_path / "tree" / "kernels.yaml"
    rows = _cells(manifest, kernel, "gfx1100", [check])
    assert rows[0].status.value == "fail", rows[0].message
    qt = load_manifest(manifest).by_name(kernel).qt
    cell = _admission(manifest, rows)[(qt, "decode", "gfx1100")]
    assert cell.status is AdmissionStatus.REJECTED
    assert f"{check}[{kernel}|gfx1100|emu]" in cell.failing
    assert (kernel, "failed", f"failing: {check}") in cell.kernels
    # the unbroken tree passes the same cell
    good = _cells(TREE / "kernels.yaml", kernel, "gfx1100", [check])
    assert good[0].status.value == "pass", good[0].message


def test_an_instruction_the_emulator_lacks_leaves_the_kernel_untested(tmp_path: Path) -> None:
    """A copy whose loop also runs v_msad_u8 (no emulator semantics; its result adds 0 on
    hardware): untested on the emulator naming the instruction, never rejected."""
    from hqval.audit import audit_matrix
    from hqval.toolchain import compile_matrix

    shutil.copytree(TREE, tmp_path / "tree")
    src = tmp_path / "tree" / "src" / "ew_gemv_mq4cg256.hip"
    text = src.read_text()
    old = "        const unsigned int pk = EW_LOAD_PK(gp + 8 + boff);\n"
    assert old in text
    src.write_text(text.replace(old, old + "        acc_even += (float)__builtin_amdgcn_msad_u8("
                                "pk, pk, 0u);  // |a-b| of equal bytes: 0\n"))
    manifest = tmp_path / "tree" / "kernels.yaml"
    m = load_manifest(manifest)
    arch = ARCHES["gfx1100"]
    decode45 = [k for k in m.kernels if k.qt == 45 and k.kind == "gemv"]
    built = compile_matrix(decode45, [arch], cache_dir=tmp_path / "cache")
    rows = [c.row() for c in built]
    rows += audit_matrix([(c.spec, c.result) for c in built], arch, cache_dir=tmp_path / "cache")
    for k in decode45:
        rows += _cells(manifest, k.name, "gfx1100", ["bit_identity", "padded_offset"])
    gap = [r for r in rows if r.details.get("emulator_gap")]
    assert gap and all(r.status.value == "skipped" for r in gap)
    # both kernels of the source (plain and residual) run the instruction
    assert {r.kernel for r in gap} == {"ew_gemv_mq4cg256", "ew_gemv_mq4cg256_residual"}
    assert all(str(r.details["emulator_gap"]).startswith("v_msad_u8") for r in gap)
    cell = _admission(manifest, rows)[(45, "decode", "gfx1100")]
    assert cell.status is AdmissionStatus.UNTESTED, cell.reasons
    assert any("the emulator lacks v_msad_u8" in why for why in cell.reasons)
    own = dict((k, st) for k, st, _ in cell.kernels)
    assert own == {"ew_gemv_mq4cg256": "untested", "ew_gemv_mq4cg256_residual": "untested"}
