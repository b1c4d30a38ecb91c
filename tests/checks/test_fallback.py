"""fallback on the emulator: where the arch lacks the WMMA generation (qt=45 on gfx11,
everything on gfx10) prefill goes to per-token decode and matches the oracle; arches that
have the generation are not fallback cells; a manifest that admits a GEMM there fails."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from hqval.checks import fallback
from hqval.checks.cell import CheckContext, run_cell
from hqval.manifest import KernelSpec, Manifest
from hqval.result import Status

Ctx = Callable[..., CheckContext]


@pytest.mark.parametrize(("arch", "kernel"), [
    ("gfx1100", "gemm_mq4c_wmma_gfx12"), ("gfx1151", "gemm_mq4c_wmma_gfx12_residual"),
    ("gfx1010", "gemm_mq4g256v2_wmma_gfx11"), ("gfx1030", "gemm_hfq4g256_wmma_gfx12"),
])
def test_missing_wmma_falls_back_to_decode_and_matches(emu_ctx: Ctx, arch: str,
                                                       kernel: str) -> None:
    ctx = emu_ctx(arch)
    row = run_cell(ctx, "fallback", ctx.kernel(kernel))
    assert row.status == Status.PASS, row.message
    assert row.details["route"] == "per_token_gemv"
    decode = ctx.kernel(row.details["decode_kernel"])
    assert decode.kind == "gemv" and decode.qt == ctx.kernel(kernel).qt
    assert row.measured is not None and row.measured <= fallback.TOLERANCE


@pytest.mark.parametrize(("arch", "kernel"), [
    ("gfx1100", "gemm_mq4g256v2_wmma_gfx11"), ("gfx1201", "gemm_mq4c_wmma_gfx12"),
    ("gfx1201", "gemm_mq4g256v2_wmma_gfx11"), ("gfx1100", "gemv_mq4c_r1"),
])
def test_arches_with_the_generation_are_not_fallback_cells(emu_ctx: Ctx, arch: str,
                                                           kernel: str) -> None:
    ctx = emu_ctx(arch)
    assert run_cell(ctx, "fallback", ctx.kernel(kernel)).status == Status.UNSUPPORTED


def test_manifest_admitting_qt45_gemm_on_gfx11_fails(emu_ctx: Ctx) -> None:
    # An external tree that claims its qt=45 WMMA GEMM runs on gfx11: the design note
    # says it must not, and the cell fails before anything runs.
    ctx = emu_ctx("gfx1100")
    claimed = dataclasses.replace(ctx.kernel("gemm_mq4c_wmma_gfx12"), requires="wmma_gfx11")
    row = fallback.check(ctx, claimed)
    assert row.status == Status.FAIL and "lacks the WMMA generation" in row.message


def test_no_decode_kernel_to_fall_back_to_is_an_error(emu_ctx: Ctx) -> None:
    base = emu_ctx("gfx1030")
    only_gemms = Manifest(path=base.manifest.path,
                          kernels=[k for k in base.manifest.kernels if k.kind == "gemm"])
    ctx = CheckContext(backend=base.backend, arch=base.arch, manifest=only_gemms)
    row = run_cell(ctx, "fallback", ctx.kernel("gemm_mq4g256v2_wmma_gfx11"))
    assert row.status == Status.ERROR and "no decode GEMV" in row.message


def test_non_discriminating_fixture_is_an_error(
    emu_ctx: Ctx, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fallback.fixtures, "disjoint_halves", fallback.fixtures.equal_halves)
    ctx = emu_ctx("gfx1010")
    row = run_cell(ctx, "fallback", ctx.kernel("gemm_mq4g256v2_wmma_gfx11"))
    assert row.status == Status.ERROR and "does not discriminate" in row.message


def test_a_residual_gemm_falls_back_to_the_residual_decode(emu_ctx: Ctx) -> None:
    ctx = emu_ctx("gfx1030")
    row = run_cell(ctx, "fallback", ctx.kernel("gemm_mq4g256v2_wmma_gfx11_residual"))
    assert row.status == Status.PASS, row.message
    decode = ctx.kernel(row.details["decode_kernel"])
    assert decode.residual and decode.qt == 44 and decode.kind == "gemv"
    assert row.details["misread_misses"]["residual_dropped"] >= fallback.DISCRIMINATION_FLOOR


def _residual_gemvs_replaced(ctx: CheckContext, make: Callable[[KernelSpec], KernelSpec]
                             ) -> CheckContext:
    kernels = [make(k) if k.kind == "gemv" and k.residual else k for k in ctx.manifest.kernels]
    return CheckContext(backend=ctx.backend, arch=ctx.arch,
                        manifest=Manifest(path=ctx.manifest.path, kernels=kernels))


def test_a_residual_decode_that_overwrites_y_fails_the_residual_gemms_fallback(
    emu_ctx: Ctx,
) -> None:
    # Every residual GEMV entry replaced by its plain sibling's code (same ABI, writes y
    # without reading it): the plain GEMV still matches its own oracle, so a fallback that
    # ran the plain GEMV for the residual GEMM (and added nothing) would pass.
    base = emu_ctx("gfx1030")
    plain = {(k.qt, k.rows_per_block): k for k in base.manifest.kernels
             if k.kind == "gemv" and not k.residual and not k.is_mutant}
    ctx = _residual_gemvs_replaced(base, lambda k: dataclasses.replace(
        plain[(k.qt, k.rows_per_block)], name=k.name, residual=True,
        baseline=k.baseline, mutant_of=k.mutant_of))
    row = run_cell(ctx, "fallback", ctx.kernel("gemm_mq4g256v2_wmma_gfx11_residual"))
    assert row.status == Status.FAIL, row.message
    assert ctx.kernel(row.details["decode_kernel"]).residual
    assert row.measured is not None and row.measured >= fallback.DISCRIMINATION_FLOOR
    # the plain GEMM's fallback is untouched: it runs the plain GEMV and passes
    plain_row = run_cell(ctx, "fallback", ctx.kernel("gemm_mq4g256v2_wmma_gfx11"))
    assert plain_row.status == Status.PASS, plain_row.message


def test_no_residual_decode_to_fall_back_to_is_an_error(emu_ctx: Ctx) -> None:
    base = emu_ctx("gfx1030")
    ctx = CheckContext(backend=base.backend, arch=base.arch, manifest=Manifest(
        path=base.manifest.path,
        kernels=[k for k in base.manifest.kernels if not (k.kind == "gemv" and k.residual)]))
    row = run_cell(ctx, "fallback", ctx.kernel("gemm_mq4g256v2_wmma_gfx11_residual"))
    assert row.status == Status.ERROR and "no residual (y +=) decode GEMV" in row.message
