"""fallback on the emulator: where the arch lacks the WMMA generation (qt=45 on gfx11,
everything on gfx10) prefill goes to per-token decode and matches the oracle; arches that
have the generation are not fallback cells; a manifest that admits a GEMM there fails."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from hqval.checks import fallback
from hqval.checks.cell import CheckContext, run_cell
from hqval.manifest import Manifest
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
