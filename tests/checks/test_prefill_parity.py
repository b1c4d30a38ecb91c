"""prefill_parity on the emulator: WMMA GEMMs (gfx11 base/BT/residual, gfx12) against the
oracle and per-token GEMV launches; wrong output mappings and dropped residuals fail."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from hqval.checks import prefill_parity
from hqval.checks.cell import CheckContext, run_cell
from hqval.result import Status

from .mutant_cases import mutants_killed_by

Ctx = Callable[..., CheckContext]
GOOD = [("gfx1100", "gemm_mq4g256v2_wmma_gfx11_bt4"), ("gfx1151", "gemm_hfq4g256_wmma_gfx11"),
        ("gfx1100", "gemm_mq4g256v2_wmma_gfx11_residual"), ("gfx1201", "gemm_mq4c_wmma_gfx12")]


@pytest.mark.parametrize(("arch", "kernel"), GOOD)
def test_real_gemms_pass_for_every_n(emu_ctx: Ctx, arch: str, kernel: str) -> None:
    ctx = emu_ctx(arch)
    row = run_cell(ctx, "prefill_parity", ctx.kernel(kernel))
    assert row.status == Status.PASS, row.message
    by_n = row.details["by_n"]
    assert sorted(map(int, by_n)) == sorted(ctx.shape.prefill_n)
    assert {1, 8, 12, 16, 32} <= set(map(int, by_n))
    assert any(int(n) % 16 for n in by_n if int(n) > 16)  # a ragged N
    for errs in by_n.values():
        assert errs["oracle"] <= prefill_parity.TOLERANCE
        assert errs["per_token"] <= prefill_parity.TOLERANCE


def test_gemv_and_missing_wmma_are_unsupported(emu_ctx: Ctx) -> None:
    ctx = emu_ctx("gfx1030")
    for name in ("gemv_mq4g256v2_r1", "gemm_mq4g256v2_wmma_gfx11"):
        assert run_cell(ctx, "prefill_parity", ctx.kernel(name)).status == Status.UNSUPPORTED


@pytest.mark.parametrize(("mutant", "arch"), mutants_killed_by("prefill_parity"))
def test_mutants_fail(emu_ctx: Ctx, mutant: str, arch: str) -> None:
    ctx = emu_ctx(arch, mutants=True)
    row = run_cell(ctx, "prefill_parity", ctx.kernel(mutant))
    assert row.status == Status.FAIL, row.message


def test_mapping_misses_see_transposes_and_shifts() -> None:
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((32, 20))
    m = prefill_parity.mapping_misses(ref)
    assert min(m.values()) > prefill_parity.MAPPING_FLOOR
    # Identical rows would hide a row shift: such a fixture must not pass the proof.
    flat = np.tile(rng.standard_normal((32, 1)), (1, 20))
    assert prefill_parity.mapping_misses(flat)["row_shift"] == 0.0


def test_non_discriminating_fixture_is_an_error(
    emu_ctx: Ctx, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every weight row the same: a shifted output row reads the same numbers.
    real = prefill_parity.fixtures.gaussian

    def same_rows(M: int, K: int, seed: int, **kw: object) -> object:
        fx = real(M, K, seed, qts=(44,))
        blob = np.repeat(fx.blob(44)[:1], M, axis=0)
        return prefill_parity.fixtures.Fixture(fx.name, seed, M, K, fx.weights, {44: blob},
                                               fx.assertions)

    monkeypatch.setattr(prefill_parity.fixtures, "gaussian", same_rows)
    ctx = emu_ctx("gfx1100")
    row = run_cell(ctx, "prefill_parity", ctx.kernel("gemm_mq4g256v2_wmma_gfx11"))
    assert row.status == Status.ERROR and "row_shift" in row.message
