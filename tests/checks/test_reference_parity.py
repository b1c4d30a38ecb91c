"""reference_parity on the emulator: real kernels pass on every RDNA generation, a fixture
that does not discriminate is an error (never a pass), wrong kernels fail."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hqval import fixtures
from hqval.checks import reference_parity
from hqval.checks.cell import CheckContext, run_cell
from hqval.result import Status

from .conftest import ARCHES

Ctx = Callable[..., CheckContext]
# One representative per arch keeps the emulator time modest; together they cover plain,
# residual and fused-QKV decode for qt=6/44/45 at R=1/2/4.
GOOD = list(zip(ARCHES, ("gemv_mq4g256v2_r1", "gemv_mq4c_residual_r2", "gemv_hfq4g256_qkv_r2",
                         "gemv_mq4g256v2_residual_r1", "gemv_mq4c_r4"), strict=True))


@pytest.mark.parametrize(("arch", "kernel"), GOOD)
def test_real_kernels_pass(emu_ctx: Ctx, arch: str, kernel: str) -> None:
    ctx = emu_ctx(arch)
    row = run_cell(ctx, "reference_parity", ctx.kernel(kernel))
    assert row.status == Status.PASS, row.message
    assert row.measured is not None and row.measured <= reference_parity.TOLERANCE
    assert row.tolerance == 1e-4 and row.derivation and row.seed == 0
    # The proof of discrimination travels with the verdict.
    misses = row.details["misread_misses"]["disjoint_halves"]
    if ctx.kernel(kernel).qt == 44:
        assert misses["one_header_for_both_halves"] > 0.5


def test_gemm_is_not_judged_here(emu_ctx: Ctx) -> None:
    ctx = emu_ctx("gfx1100")
    row = run_cell(ctx, "reference_parity", ctx.kernel("gemm_mq4g256v2_wmma_gfx11"))
    assert row.status == Status.UNSUPPORTED


def test_non_discriminating_fixture_is_an_error(
    emu_ctx: Ctx, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Equal halves in place of disjoint halves: one header for both halves reads the same
    # numbers, so the fixture proves nothing about the half select.  The check must say so.
    monkeypatch.setattr(reference_parity.fixtures, "disjoint_halves", fixtures.equal_halves)
    ctx = emu_ctx("gfx1100")
    row = run_cell(ctx, "reference_parity", ctx.kernel("gemv_mq4g256v2_r1"))
    assert row.status == Status.ERROR
    assert "does not discriminate" in row.message and "one_header_for_both_halves" in row.message


def test_wrong_format_kernel_fails(emu_ctx: Ctx) -> None:
    # The v1 kernel fed qt=44 bytes reads fp16 pairs as f32: a real wrong kernel for the
    # format, which the check must fail by far more than the tolerance.
    ctx = emu_ctx("gfx1030")
    v1 = ctx.kernel("gemv_hfq4g256_r1")
    from dataclasses import replace

    wrong = replace(v1, qt=44, name="gemv_hfq4g256_r1")
    row = reference_parity.check(ctx, wrong)
    assert row.status == Status.FAIL or (row.status == Status.ERROR and "guard" in row.message)
