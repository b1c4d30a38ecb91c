"""padded_offset (qt=45) on the emulator: real kernels match their own dequant, the retired
+4 payload and 132 B stride reads fail, and an undiscriminating fixture errors."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from hqval import fixtures
from hqval.checks import padded_offset
from hqval.checks.cell import CheckContext, run_cell
from hqval.result import Status

from .conftest import ARCHES
from .mutant_cases import mutants_killed_by

Ctx = Callable[..., CheckContext]
GOOD = list(zip(ARCHES, ("gemv_mq4c_r2", "gemv_mq4c_r1", "gemv_mq4c_residual_r1",
                         "gemv_mq4c_qkv_r2", "gemm_mq4c_wmma_gfx12"), strict=True))


@pytest.mark.parametrize(("arch", "kernel"), GOOD)
def test_real_qt45_kernels_pass(emu_ctx: Ctx, arch: str, kernel: str) -> None:
    ctx = emu_ctx(arch)
    row = run_cell(ctx, "padded_offset", ctx.kernel(kernel))
    assert row.status == Status.PASS, row.message
    assert row.measured is not None and row.tolerance is not None
    assert row.measured <= row.tolerance
    misses = row.details["misread_misses"]
    assert min(misses["payload_plus4"], misses["stride_132"]) > 100 * row.tolerance


def test_other_formats_are_unsupported(emu_ctx: Ctx) -> None:
    ctx = emu_ctx("gfx1100")
    row = run_cell(ctx, "padded_offset", ctx.kernel("gemv_mq4g256v2_r1"))
    assert row.status == Status.UNSUPPORTED


@pytest.mark.parametrize(("mutant", "arch"), mutants_killed_by("padded_offset"))
def test_mutants_fail(emu_ctx: Ctx, mutant: str, arch: str) -> None:
    ctx = emu_ctx(arch, mutants=True)
    row = run_cell(ctx, "padded_offset", ctx.kernel(mutant))
    assert row.status == Status.FAIL, row.message
    # Either the output is off by orders of magnitude, or a guard caught NaN/Inf first.
    assert (row.measured is not None and row.measured > 100 * padded_offset.TOLERANCE) or \
        row.message.startswith("guard: ")


def test_fixture_with_nonzero_pad_is_an_error(
    emu_ctx: Ctx, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A qt=45 blob whose pad bytes are not zero is not the padded layout: the assertions
    # before any launch must stop the check.
    real = fixtures.padded_qt45

    def dirty(M: int, K: int, seed: int) -> fixtures.Fixture:
        fx = real(M, K, seed)
        blob = fx.blob(45).copy()
        blob.reshape(M, K // 256, 136)[:, :, 4:8] = 0x11
        return fixtures.Fixture(fx.name, seed, M, K, fx.weights, {**fx.blobs, 45: blob},
                                fx.assertions)

    monkeypatch.setattr(padded_offset.fixtures, "padded_qt45", dirty)
    ctx = emu_ctx("gfx1100")
    row = run_cell(ctx, "padded_offset", ctx.kernel("gemv_mq4c_r1"))
    assert row.status == Status.ERROR and "pad bytes" in row.message


def test_fixture_where_misreads_land_close_is_an_error(
    emu_ctx: Ctx, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every group identical: a 132 B stride or a +4 payload still reads the same kind of
    # bytes, so the misreads cannot be told apart; the check must not pass.
    real = fixtures.padded_qt45

    def constant(M: int, K: int, seed: int) -> fixtures.Fixture:
        fx = real(M, K, seed)
        g = fx.blob(45).reshape(M, K // 256, 136).copy()
        g[:, :, :] = g[0, 0, :]
        g[:, :, 8:] = 0x00
        return fixtures.Fixture(fx.name, seed, M, K, fx.weights,
                                {45: g.reshape(M, -1)}, fx.assertions)

    monkeypatch.setattr(padded_offset.fixtures, "padded_qt45", constant)
    ctx = emu_ctx("gfx1100")
    row = run_cell(ctx, "padded_offset", ctx.kernel("gemv_mq4c_r1"))
    assert row.status == Status.ERROR
    assert "fewer than 16 distinct codes" in row.message or "does not discriminate" in row.message
    assert np.isfinite(padded_offset.TOLERANCE)
