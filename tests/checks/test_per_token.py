"""Per-token references of the multi-matrix and MoE prefill GEMMs (hqval.checks.per_token),
on real kernels on the emulator: prefill parity compares each GEMM with its decode kernel
launched token by token, and says no when the two disagree even where the oracle agrees
with the GEMM."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from hqval.backends.emu import EmuBackend
from hqval.checks.cell import CheckContext, run_cell
from hqval.manifest import KernelSpec, Manifest
from hqval.matrix import load_arches
from hqval.result import Status

from .conftest import mutant_manifest

Ctx = Callable[..., CheckContext]


@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "decode", "launches", "arch"), [
    ("gemm_mq4c_qkv_wmma_gfx12", "gemv_mq4c_qkv_r1", 12, "gfx1201"),
    # one launch per (token, rank): the routing weights one-hot isolate each slot
    ("gemm_mq4g256v2_moe_grouped_down_wmma_gfx12", "gemv_mq4g256v2_moe_down_r1", 24,
     "gfx1201"),
])
def test_prefill_parity_runs_the_decode_kernel_per_token(emu_ctx: Ctx, kernel: str,
                                                         decode: str, launches: int,
                                                         arch: str) -> None:
    ctx = emu_ctx(arch)
    row = run_cell(ctx, "prefill_parity", ctx.kernel(kernel))
    assert row.status is Status.PASS, row.message
    assert row.details["per_token_kernel"] == decode
    assert row.details["per_token_launches"] == launches
    assert f"per token through {decode}" in row.message
    assert max(row.details["per_token_errors"].values()) <= row.tolerance


def _with_decode(decode: KernelSpec, replaces: str) -> Manifest:
    """The suite's kernels with ``decode`` (a broken copy, relabelled as a real kernel) in
    place of the decode kernels of kind ``replaces`` and its format."""
    full = mutant_manifest()
    fake = dataclasses.replace(decode, mutant_of=None, name=f"{decode.name}_as_real")
    kept = [k for k in full.kernels if not k.is_mutant
            and not (k.kind == replaces and k.qt == decode.qt)]
    return Manifest(path=full.path, kernels=[*kept, fake])


@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "broken", "kind", "arch"), [
    # the oracle agrees with the GEMM; only the per-token comparison can say no
    ("gemm_mq4g256v2_gate_up_wmma_gfx11", "gemv_mut_gate_up_lane_half_r1", "gemv_gate_up",
     "gfx1100"),
    ("gemm_mq4g256v2_moe_grouped_down_wmma_gfx11", "gemv_mut_moe_down_unscaled_r1",
     "gemv_moe_down", "gfx1100"),
])
def test_a_decode_kernel_that_disagrees_fails_the_gemm(kernel: str, broken: str, kind: str,
                                                       arch: str) -> None:
    full = mutant_manifest()
    decode = next(k for k in full.kernels if k.name == broken)
    manifest = _with_decode(decode, kind)
    ctx = CheckContext(EmuBackend(arch), load_arches()[arch], manifest)
    row = run_cell(ctx, "prefill_parity", ctx.kernel(kernel))
    assert row.status is Status.FAIL, row.message
    assert "per token:" in row.message and row.details["per_token_kernel"] == decode.name + \
        "_as_real"
    assert max(row.details["errors"].values()) <= row.tolerance  # the oracle agreed


def test_without_a_decode_kernel_the_check_says_oracle_only() -> None:
    full = mutant_manifest()
    manifest = Manifest(path=full.path, kernels=[
        k for k in full.kernels if not k.is_mutant and k.kind != "gemv_qkv"])
    ctx = CheckContext(EmuBackend("gfx1100"), load_arches()["gfx1100"], manifest)
    row = run_cell(ctx, "prefill_parity", ctx.kernel("gemm_hfq4g256_qkv_wmma_gfx11"))
    assert row.status is Status.PASS, row.message
    assert "oracle only, no per-token reference: no gemv_qkv kernel for qt=6" in row.message
    assert row.details["per_token_kernel"] is None
