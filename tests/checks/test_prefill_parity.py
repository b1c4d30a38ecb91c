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
    # a residual GEMM is compared with the residual decode GEMV, run with the residual
    token = ctx.kernel(row.details["per_token_kernel"])
    assert token.residual == ctx.kernel(kernel).residual
    assert row.details["per_token_residual"] == ("kernel" if token.residual else None)


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


# ---- the tolerance covers both WMMA summation orders

def _wmma_exact_sum_round_once(X16: np.ndarray, w16: np.ndarray) -> np.ndarray:
    """hqval.emu's WMMA: per 16-wide k step, the 16 exact products summed (f64: exact to
    2^-49, far below an f32 rounding) and added to the f32 accumulator with one rounding."""
    acc = np.zeros((X16.shape[0], w16.shape[0]), np.float32)
    for k0 in range(0, X16.shape[1], 16):
        blk = X16[:, k0:k0 + 16].astype(np.float64) @ w16[:, k0:k0 + 16].astype(np.float64).T
        acc = (acc.astype(np.float64) + blk).astype(np.float32)
    return acc


def _wmma_sequential_f32(X16: np.ndarray, w16: np.ndarray) -> np.ndarray:
    """The other emulator's WMMA: each f16 x f16 product (exact in f32) added in turn in f32."""
    acc = np.zeros((X16.shape[0], w16.shape[0]), np.float32)
    x32, w32 = X16.astype(np.float32), w16.astype(np.float32)
    for k in range(X16.shape[1]):
        acc = acc + np.outer(x32[:, k], w32[:, k])
    return acc


def _f16_accumulator(X16: np.ndarray, w16: np.ndarray) -> np.ndarray:
    """A WMMA that accumulated in f16 (a kernel bug class): must land outside the bound."""
    acc = np.zeros((X16.shape[0], w16.shape[0]), np.float16)
    for k0 in range(0, X16.shape[1], 16):
        blk = X16[:, k0:k0 + 16].astype(np.float64) @ w16[:, k0:k0 + 16].astype(np.float64).T
        acc = (acc.astype(np.float64) + blk).astype(np.float16)
    return acc.astype(np.float32)


def test_both_summation_orders_stay_inside_the_bound_at_k4096_n32() -> None:
    from hqval import fixtures
    from hqval.checks import inputs
    from hqval.emu.runner import gemv_lane_order
    from hqval.formats import by_qt

    M, K, N, qt = 64, 4096, 32, 44
    fmt = by_qt(qt)
    blob = inputs.fixture_blob(fixtures.gaussian(M, K, 0, qts=(qt,)), qt)
    w = fmt.decode(blob, K)
    X = inputs.token_batch(N, K, 0)
    ref = inputs.oracle(fmt, blob, K, X, None)
    per_token = np.stack([gemv_lane_order(w, X[n].astype(np.float32)) for n in range(N)])
    bounds = prefill_parity.error_bound(w, X, float(np.max(np.abs(ref))))
    assert set(bounds) == {"exact_sum_round_once", "sequential_f32"}
    assert max(bounds.values()) <= prefill_parity.TOLERANCE
    w16 = w.astype(np.float16)  # the kernel's f16 weights
    models = {"exact_sum_round_once": _wmma_exact_sum_round_once(X, w16),
              "sequential_f32": _wmma_sequential_f32(X, w16)}
    for order, Y in models.items():
        e_oracle = inputs.worst_rel(Y, ref)
        e_tokens = inputs.worst_rel(Y, per_token)
        assert e_oracle <= bounds[order] and e_tokens <= bounds[order], (order, e_oracle)
    # the two orders do differ (so the test is not comparing one model with itself)
    assert np.count_nonzero(models["exact_sum_round_once"] != models["sequential_f32"]) > 0
    # an f16 accumulator misses by more than the tolerance: the bound is not vacuous
    assert inputs.worst_rel(_f16_accumulator(X, w16), ref) > prefill_parity.TOLERANCE


def test_a_tolerance_below_the_bound_is_an_error(emu_ctx: Ctx,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefill_parity, "TOLERANCE", 1e-5)
    ctx = emu_ctx("gfx1100")
    row = run_cell(ctx, "prefill_parity", ctx.kernel("gemm_mq4g256v2_wmma_gfx11"))
    assert row.status == Status.ERROR and "summation order" in row.message
