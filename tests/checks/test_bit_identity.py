"""bit_identity on the emulator: qt=44/45 kernels equal their v1 baseline bit for bit on
every RDNA generation; wrong header decodes differ; the fixture's own proof is enforced."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hqval import fixtures
from hqval.checks import bit_identity
from hqval.checks.cell import CheckContext, run_cell
from hqval.result import Row, Status

from .conftest import ARCHES
from .mutant_cases import mutants_killed_by

Ctx = Callable[..., CheckContext]
GOOD = list(zip(ARCHES, ("gemv_mq4c_r1", "gemv_mq4g256v2_qkv_r1", "gemm_mq4g256v2_wmma_gfx11",
                         "gemv_mq4g256v2_residual_r2", "gemm_mq4c_wmma_gfx12"), strict=True))


@pytest.mark.parametrize(("arch", "kernel"), GOOD)
def test_real_kernels_are_bit_identical_to_v1(emu_ctx: Ctx, arch: str, kernel: str) -> None:
    ctx = emu_ctx(arch)
    row = run_cell(ctx, "bit_identity", ctx.kernel(kernel))
    assert row.status == Status.PASS, row.message
    assert row.measured == 0.0 and row.tolerance == 0.0
    assert row.details["differing_words"] == 0
    assert row.details["baseline"] == ctx.kernel(kernel).baseline


def test_v1_kernels_and_inapplicable_arches_are_unsupported(emu_ctx: Ctx) -> None:
    ctx = emu_ctx("gfx1030")
    assert run_cell(ctx, "bit_identity", ctx.kernel("gemv_hfq4g256_r1")).status == \
        Status.UNSUPPORTED
    assert run_cell(ctx, "bit_identity", ctx.kernel("gemm_mq4g256v2_wmma_gfx11")).status == \
        Status.UNSUPPORTED


@pytest.mark.parametrize(("mutant", "arch"), mutants_killed_by("bit_identity"))
def test_mutants_fail(emu_ctx: Ctx, mutant: str, arch: str) -> None:
    ctx = emu_ctx(arch, mutants=True)
    row = run_cell(ctx, "bit_identity", ctx.kernel(mutant))
    assert row.status == Status.FAIL, row.message
    assert row.measured is not None and row.measured > 0


def test_fixture_that_is_not_bit_identical_is_an_error(
    emu_ctx: Ctx, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Disjoint halves instead of equal halves: qt=44 and v1 bytes no longer decode alike,
    # the fixture's own assertions fail, and the check must refuse to judge.
    def not_equal(M: int, K: int, seed: int) -> fixtures.Fixture:
        fx = fixtures.disjoint_halves(M, K, seed)
        broken = fixtures.Assertion("decode_qt6_equals_qt44", False, "disjoint halves")
        return fixtures.Fixture(fx.name, seed, M, K, fx.weights, fx.blobs,
                                (*fx.assertions, broken))

    monkeypatch.setattr(bit_identity.fixtures, "equal_halves", not_equal)
    ctx = emu_ctx("gfx1100")
    row = run_cell(ctx, "bit_identity", ctx.kernel("gemv_mq4g256v2_r1"))
    assert row.status == Status.ERROR and "does not hold" in row.message


def test_fixture_whose_misreads_do_not_move_the_output_is_an_error(
    emu_ctx: Ctx, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bit_identity, "DISCRIMINATION_FLOOR", float("inf"))
    ctx = emu_ctx("gfx1100")
    row = run_cell(ctx, "bit_identity", ctx.kernel("gemv_mq4g256v2_r1"))
    assert row.status == Status.ERROR and "does not discriminate" in row.message


def _tree_cell(tmp_path: Path) -> Callable[[str], Row]:
    """A copy of the engine-style tree under ``tmp_path`` (``tmp_path / "tree"``, to edit)
    and its bit_identity cell of a kernel on gfx1030, the manifest read anew each time."""
    import shutil

    from hqval.backends.emu import EmuBackend
    from hqval.manifest import load_manifest
    from hqval.matrix import load_arches

    tree = Path(__file__).resolve().parents[1] / "data" / "engine_tree"
    shutil.copytree(tree, tmp_path / "tree")
    arch = load_arches()["gfx1030"]

    def cell(kernel: str) -> Row:
        m = load_manifest(tmp_path / "tree" / "kernels.yaml")
        ctx = CheckContext(backend=EmuBackend(arch.name), arch=arch, manifest=m)
        return run_cell(ctx, "bit_identity", m.by_name(kernel))
    return cell


def test_a_baseline_that_fails_its_own_parity_is_no_verdict(tmp_path: Path) -> None:
    """The engine-style tree with its v1 baseline broken (the zero read as the scale, as
    the engine's gfx11 v1 residual WMMA GEMM writes its tile in the wrong C layout): the
    difference says nothing about the v2 kernel, so its bit_identity is an error reaching
    no verdict, naming the baseline's failing reference parity, where it was the v2
    kernel's FAIL; against the intact baseline a broken v2 still fails, without that
    note."""
    cell = _tree_cell(tmp_path)

    v1 = tmp_path / "tree" / "src" / "ew_gemv_hfq4g256.hip"
    good = v1.read_text()
    old = "__uint_as_float(EW_LOAD_HDR(gp));"
    assert old in good
    v1.write_text(good.replace(old, "__uint_as_float(EW_LOAD_HDR(gp + 4));", 1))
    bad_base = cell("ew_gemv_mq4g256v2")
    assert bad_base.status is Status.ERROR, bad_base.message
    assert bad_base.message.startswith("no verdict: the baseline ew_gemv_hfq4g256 itself "
                                       "fails its reference_parity"), bad_base.message
    assert bad_base.details["baseline_fails"]["check"] == "reference_parity"
    v1.write_text(good)
    v2 = tmp_path / "tree" / "src" / "ew_gemv_mq4g256v2.hip"
    v2.write_text(v2.read_text().replace("EW_LOAD_PK(gp + 8 + boff)",
                                         "EW_LOAD_PK(gp + 4 + boff)"))
    bad_v2 = cell("ew_gemv_mq4g256v2")
    assert bad_v2.status is Status.FAIL and "itself fails" not in bad_v2.message


def test_a_baseline_whose_launch_breaks_a_guard_is_no_verdict(tmp_path: Path) -> None:
    """The v1 baseline reads below its matrix (the engine's gfx12 v1 grouped GEMM read
    expert_weight_ptrs[-1]): its launch breaks a guard, which is the baseline's behaviour,
    so the v2 kernel's bit_identity is an error reaching no verdict, naming the baseline,
    where it was the v2 kernel's FAIL ('guard: memory fault ...').  A v2 kernel whose own
    launch breaks the guard still fails."""
    cell = _tree_cell(tmp_path)

    below = "const float sc = __uint_as_float(EW_LOAD_HDR(gp - 64));"
    v1 = tmp_path / "tree" / "src" / "ew_gemv_hfq4g256.hip"
    good = v1.read_text()
    old = "const float sc = __uint_as_float(EW_LOAD_HDR(gp));"
    assert old in good
    v1.write_text(good.replace(old, below, 1))
    row = cell("ew_gemv_mq4g256v2")
    assert row.status is Status.ERROR, row.message
    assert row.message.startswith("no verdict: the baseline ew_gemv_hfq4g256 failed on its "
                                  "own launch (guard: memory fault"), row.message
    assert row.details["baseline_fails"]["status"] == "fail"
    # the v2 kernel reading below its own matrix is its failure
    v1.write_text(good)
    v2 = tmp_path / "tree" / "src" / "ew_gemv_mq4g256v2.hip"
    text = v2.read_text()
    old2 = "EW_LOAD_PK(gp + 8 + boff)"
    assert old2 in text
    v2.write_text(text.replace(old2, "EW_LOAD_PK(gp - 64 + boff)"))
    own = cell("ew_gemv_mq4g256v2")
    assert own.status is Status.FAIL and own.message.startswith("guard: memory fault"), \
        own.message
