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
    # gfx1201 decodes 2 rows per block (gemv_rows_default): the r2 fused QKV GEMV
    ("gemm_mq4c_qkv_wmma_gfx12", "gemv_mq4c_qkv_r2", 12, "gfx1201"),
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


def test_a_decode_kernel_of_the_same_abi_under_a_tree_name_serves_per_token() -> None:
    """A tree declaring the suite's fused gate/up decode ABI under a name of its own
    (docs/engine-tree.md's ew_gate_up): the gate/up GEMM's per-token reference finds that
    kernel by its ABI, not by the kind's name; a signature of another ABI (another grid) is
    no match (oracle only, saying why), and a broken copy under the renamed ABI fails the
    GEMM's parity though the oracle agrees with the GEMM."""
    from hqval.signature import builtin

    full = mutant_manifest()
    sig = builtin()["gemv_gate_up"]
    renamed = dataclasses.replace(sig, name="ew_gate_up", where="tree:1")
    other = dataclasses.replace(sig, name="ew_gate_up_one_block", where="tree:2",
                                grid=(sig.grid[1], sig.grid[1], sig.grid[2]))

    def context(decode: str, tree_sig: object) -> CheckContext:
        dec = next(k for k in full.kernels if k.name == decode)
        fake = dataclasses.replace(dec, kind=tree_sig.name, sig=tree_sig,  # type: ignore[attr-defined]
                                   mutant_of=None, name=f"{decode}_tree")
        kept = [k for k in full.kernels if not k.is_mutant
                and not (k.kind == "gemv_gate_up" and k.qt == 44)]
        return CheckContext(EmuBackend("gfx1100"), load_arches()["gfx1100"],
                            Manifest(path=full.path, kernels=[*kept, fake]))

    gemm = "gemm_mq4g256v2_gate_up_wmma_gfx11"
    ctx = context("gemv_mq4g256v2_gate_up_r1", renamed)
    row = run_cell(ctx, "prefill_parity", ctx.kernel(gemm))
    assert row.status is Status.PASS, row.message
    assert row.details["per_token_kernel"] == "gemv_mq4g256v2_gate_up_r1_tree"
    ctx = context("gemv_mq4g256v2_gate_up_r1", other)
    row = run_cell(ctx, "prefill_parity", ctx.kernel(gemm))
    assert row.details["per_token_kernel"] is None and "oracle only" in row.message
    ctx = context("gemv_mut_gate_up_swapped_r1", renamed)
    row = run_cell(ctx, "prefill_parity", ctx.kernel(gemm))
    assert row.status is Status.FAIL and "per-token reference" in row.message, row.message
