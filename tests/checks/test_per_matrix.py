"""The per-matrix checks on real kernels on the emulator: fused projections, the MoE
indexed GEMV and grouped GEMM pass, and deliberately broken copies are caught (a wrong
expert by the poisoned unselected experts, swapped matrices, a wrong half)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hqval.backends.emu import EmuBackend
from hqval.checks.cell import CheckContext, run_cell
from hqval.manifest import KERNELS_DIR, load_manifest
from hqval.matrix import load_arches
from hqval.result import Row, Status

Ctx = Callable[..., CheckContext]


@pytest.mark.parametrize(("check", "kernel", "arch"), [
    ("reference_parity", "gemv_mq4g256v2_gate_up_r1", "gfx1100"),
    ("bit_identity", "gemv_mq4g256v2_moe_gate_up_r1", "gfx1201"),
    ("bit_identity", "gemv_mq4g256v2_moe_down_r1", "gfx1030"),
    ("prefill_parity", "gemm_mq4g256v2_moe_grouped_wmma_gfx11", "gfx1100"),
    ("fallback", "gemm_mq4g256v2_qkvza_wmma_gfx12", "gfx1030"),
])
def test_real_kernels_pass(emu_ctx: Ctx, check: str, kernel: str, arch: str) -> None:
    ctx = emu_ctx(arch)
    row = run_cell(ctx, check, ctx.kernel(kernel))
    assert row.status is Status.PASS, row.message


@pytest.mark.parametrize(("check", "mutant", "arch", "says"), [
    ("reference_parity", "gemv_mut_moe_wrong_expert_r1", "gfx1100", "vs tolerance"),
    ("prefill_parity", "gemm_mut_moe_wrong_expert_wmma_gfx11", "gfx1100", "non-finite"),
    ("reference_parity", "gemv_mut_gate_up_swapped_r1", "gfx1100", "A_gate"),
    ("prefill_parity", "gemm_mut_gate_up_lane_half_wmma_gfx12", "gfx1201", "vs tolerance"),
    ("bit_identity", "gemv_mut_moe_down_unscaled_r1", "gfx1030", "differ from"),
])
def test_broken_kernels_fail(emu_ctx: Ctx, check: str, mutant: str, arch: str,
                             says: str) -> None:
    ctx = emu_ctx(arch, mutants=True)
    row = run_cell(ctx, check, ctx.kernel(mutant))
    assert row.status is Status.FAIL and says in row.message, row.message


def test_a_tree_signature_drives_the_launch(tmp_path: Path) -> None:
    """An engine-style tree describes the fused gate/up ABI with a signature of its own
    and no adapter: the suite launches the kernel from that description alone."""
    sig = (KERNELS_DIR.parent / "matrices" / "signatures.yaml").read_text()
    body = sig[sig.index("  gemv_gate_up:\n"):sig.index("  gemv_qkvza:\n")]
    (tmp_path / "kernels.yaml").write_text(
        "schema: 2\nallow_outside_tree: true\n"
        f"include_dirs: [{KERNELS_DIR / 'include'}]\nsignatures:\n"
        + body.replace("gemv_gate_up:", "ew_gate_up:")
        + f"kernels:\n  - name: ew_gate_up\n    source: {KERNELS_DIR / 'fused_hfq4g256.hip'}\n"
        "    symbol: gemv_mq4g256v2_gate_up_r1\n    qt: 44\n    kind: ew_gate_up\n"
        "    requires: any\n")
    manifest = load_manifest(tmp_path / "kernels.yaml")
    ctx = CheckContext(EmuBackend("gfx1100"), load_arches()["gfx1100"], manifest)
    row = run_cell(ctx, "reference_parity", manifest.kernels[0])
    assert row.status is Status.PASS and row.details["signature"] == "ew_gate_up", row.message


def test_bit_identity_of_a_rank_sum_is_order_free() -> None:
    """An MoE down output sums its ranks atomically, in whatever order the blocks finish on
    hardware: bit identity runs one launch per rank with one-hot routing weights, where the
    other ranks add exactly 0 and every order gives the same bits (here: two orders of
    real f32 sums, which do differ with the real weights)."""
    import numpy as np

    from hqval.checks import oracle
    from hqval.checks.per_matrix import _order_free
    from hqval.signature import builtin

    sig = builtin()["gemv_moe_down"]
    case = oracle.Case(dims={"M": 4, "K": 256, "E": 4, "k_top": 2},
                       host={"topk_weights": np.array([0.7, 1.3], np.float32)})
    cases = _order_free(sig, case)
    assert [c.host["topk_weights"].tolist() for c in cases] == [[1.0, 0.0], [0.0, 1.0]]
    rng = np.random.default_rng(5)
    r, v0, v1 = (rng.standard_normal(4096).astype(np.float32) for _ in range(3))
    w0, w1 = np.float32(0.7), np.float32(1.3)
    assert np.any((r + w0 * v0) + w1 * v1 != (r + w1 * v1) + w0 * v0)  # the order shows
    for a, b in ((np.float32(1), np.float32(0)), (np.float32(0), np.float32(1))):
        first = ((r + a * v0) + b * v1).view(np.uint32)
        second = ((r + b * v1) + a * v0).view(np.uint32)
        assert np.array_equal(first, second)


def test_an_activation_row_per_routed_slot() -> None:
    """An MoE down GEMV reading one activation row per (token, rank) slot, [N][k_top][K],
    writing one output row per slot (a tree signature, tests/data/engine_tree/
    moe_expanded.yaml): the oracle gives slot (t, r) the product of its expert with row
    (t, r); the kernel passes and matches its v1 sibling bit for bit, and its copy that
    reads rank 0's row for every rank fails."""
    tree = Path(__file__).resolve().parents[1] / "data" / "engine_tree" / "moe_expanded.yaml"
    manifest = load_manifest(tree)
    ctx = CheckContext(EmuBackend("gfx1100"), load_arches()["gfx1100"], manifest)
    for check in ("reference_parity", "bit_identity"):
        row = run_cell(ctx, check, ctx.kernel("ew_moe_down_expanded_mq4g256v2"))
        assert row.status is Status.PASS, row.message
    assert row.details["dims"]["N"] > 1  # several tokens: grid.z and the token's rows
    bad = run_cell(ctx, "reference_parity", ctx.kernel("ew_mut_moe_down_expanded_rank0_x"))
    assert bad.status is Status.FAIL and "expert_outputs" in bad.message, bad.message


# what says when or how fast a cell ran, not what it found
_VOLATILE = ("seconds", "wall_s", "elapsed", "wave_instructions_per_s", "launches_run_on",
             "same_code_as")


def _found(row: Row) -> dict[str, object]:
    d = row.to_dict()
    d["details"] = {k: v for k, v in d["details"].items() if k not in _VOLATILE}
    return d


@pytest.mark.parametrize(("check", "kernel", "arch"), [
    ("reference_parity", "gemv_mq4g256v2_gate_up_r1", "gfx1100"),
    ("bit_identity", "gemv_mq4g256v2_moe_down_r1", "gfx1030"),  # one launch per rank
    ("padded_offset", "gemv_mq4c_qkvza_r1", "gfx1201"),
    ("prefill_parity", "gemm_mq4g256v2_moe_grouped_wmma_gfx11", "gfx1100"),  # per token
    ("fallback", "gemm_mq4g256v2_qkvza_wmma_gfx12", "gfx1030"),
])
def test_the_oracle_memo_changes_no_row(emu_ctx: Ctx, check: str, kernel: str,
                                        arch: str) -> None:
    """A cell on a frozen, memoised case (as the plugin runs cells) says what it says on
    a fresh one, the first time and when every result comes from the memo."""
    from hqval.checks import oracle

    ctx = emu_ctx(arch)
    fresh = run_cell(ctx, check, ctx.kernel(kernel))
    assert fresh.status is Status.PASS, fresh.message
    with oracle.memoised():
        first = run_cell(ctx, check, ctx.kernel(kernel))
        again = run_cell(ctx, check, ctx.kernel(kernel))
    assert _found(first) == _found(fresh)
    assert _found(again) == _found(fresh)
