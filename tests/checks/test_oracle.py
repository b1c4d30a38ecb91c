"""The composed oracle: inputs from argument roles, ops against hand-written numpy, and
misreadings that must each move the result (numpy only, no kernel)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from hqval import fixtures
from hqval.checks import inputs, oracle
from hqval.checks.cell import EMU_SIZES
from hqval.formats import by_qt
from hqval.manifest import KernelSpec
from hqval.signature import builtin


def _spec(kind: str, qt: int = 44, **kw: object) -> KernelSpec:
    return KernelSpec(name="k", source=Path("k.hip"), symbol="k", qt=qt, kind=kind, **kw)  # type: ignore[arg-type]


def _fx(m: int, k: int, s: int) -> fixtures.Fixture:
    return fixtures.disjoint_halves(m, k, s)


def test_moe_decode_poisons_unselected_experts_and_routes_by_rank() -> None:
    sig = builtin()["gemv_moe_gate_up"]
    spec = _spec("gemv_moe_gate_up")
    dims = oracle.dims_for(sig, spec, EMU_SIZES)
    assert dims["M"] % 2 == 0 and dims["E"] > dims["k_top"]
    case = oracle.build_case(sig, spec, dims, 3, _fx)
    topk = case.host["topk_indices"]
    blobs = case.blobs["expert_ptrs"]
    assert all((blobs[e] is None) == (e not in topk) for e in range(dims["E"]))
    assert blobs[dims["E"] - 1] is None  # the last expert is never routed to
    fmt = by_qt(44)
    K = dims["K"]
    ref = oracle.evaluate(sig, fmt, case, oracle.decode_all(fmt, case, K))
    mi = dims["M"] // 2
    x = case.host["x"].astype(np.float64)
    for r, e in enumerate(topk):
        w = fmt.decode(blobs[e], K).astype(np.float64)  # type: ignore[arg-type]
        assert np.allclose(ref["y_gate"][r], w[:mi] @ x)
        assert np.allclose(ref["y_up"][r], w[mi:] @ x)
    table = case.values(sig)["expert_ptrs"]
    poison = [t for t in table.entries if np.all(t == 0xFF)]  # type: ignore[union-attr]
    assert len(poison) == dims["E"] - dims["k_top"]
    misses = oracle.misses(sig, fmt, case, ref)
    assert misses["topk_indices:rank_reads_another_expert"] > 0.05
    assert misses["expert_ptrs:payload_plus4"] > 0.01
    assert misses["expert_ptrs:halves_swapped"] > 0.01


def test_moe_down_sums_scaled_ranks_into_the_residual() -> None:
    sig = builtin()["gemv_moe_down"]
    spec = _spec("gemv_moe_down")
    case = oracle.build_case(sig, spec, oracle.dims_for(sig, spec, EMU_SIZES), 1, _fx)
    fmt = by_qt(44)
    K = case.dims["K"]
    ref = oracle.evaluate(sig, fmt, case, oracle.decode_all(fmt, case, K))
    want = case.residual["x_residual"].astype(np.float64)  # type: ignore[union-attr]
    for r, e in enumerate(case.host["topk_indices"]):
        w = fmt.decode(case.blobs["expert_ptrs"][e], K).astype(np.float64)  # type: ignore[arg-type]
        want = want + float(case.host["topk_weights"][r]) * (w @ case.host["rot_batch"][r])
    assert np.allclose(ref["x_residual"], want)


def test_grouped_gemm_tiles_padding_and_the_unused_tile() -> None:
    sig = builtin()["gemm_moe_grouped"]
    spec = _spec("gemm_moe_grouped", requires="wmma_gfx11")
    fmt = by_qt(44)
    case = oracle.build_case(sig, spec, oracle.dims_for(sig, spec, EMU_SIZES), 2,
                             lambda m, k, s: fixtures.gaussian(m, k, s, qts=(44,)))
    tiles, slots = case.host["expert_tile_ids"], case.host["sorted_slot_index"]
    assert case.dims["P"] == slots.size == 16 * tiles.size and tiles[-1] == -1
    routed = np.sort(slots[slots >= 0])
    assert np.array_equal(routed, np.arange(case.dims["N"] * case.dims["k_top"]))
    K = case.dims["K"]
    ref = oracle.evaluate(sig, fmt, case, oracle.decode_all(fmt, case, K))["Y_grouped"]
    mask = case.untouched["Y_grouped"]
    assert mask[-16:].all() and not mask[:-16].any()
    assert np.all(ref[slots < 0][~mask[slots < 0]] == 0)  # padding slots are written 0
    p = int(np.flatnonzero(slots >= 0)[0])
    e, f = int(tiles[p // 16]), int(slots[p])
    w = fmt.decode(case.blobs["expert_weight_ptrs"][e], K).astype(np.float64)  # type: ignore[arg-type]
    assert np.allclose(ref[p], w @ case.host["X_src"][f // case.dims["k_top"]].astype(np.float64))
    # a kernel that writes the unused tile is caught, whatever it writes there
    got = ref.copy()
    got[mask] = 0.0
    assert oracle.worst({"Y_grouped": got}, {"Y_grouped": ref}, untouched=case.untouched)[0] \
        == float("inf")
    assert oracle.worst({"Y_grouped": ref.astype(np.float32)}, {"Y_grouped": ref},
                        untouched=case.untouched)[0] < 1e-6
    misses = oracle.misses(sig, fmt, case, {"Y_grouped": ref})
    assert misses["expert_tile_ids:tile_reads_another_expert"] > 0.2
    assert misses["Y_grouped:slot_without_row_divisor"] > 0.2


def test_swapped_matrices_of_a_fused_projection_miss() -> None:
    sig = builtin()["gemv_qkvza"]
    spec = _spec("gemv_qkvza")
    fmt = by_qt(44)
    case = oracle.build_case(sig, spec, oracle.dims_for(sig, spec, EMU_SIZES), 0, _fx)
    rows = [case.dims[n] for n in ("Mqkv", "Mz", "Mb", "Ma")]
    assert len(set(rows)) == 4
    ref = oracle.evaluate(sig, fmt, case, oracle.decode_all(fmt, case, case.dims["K"]))
    misses = oracle.misses(sig, fmt, case, ref)
    swapped = {k: v for k, v in misses.items() if k.startswith("swapped:")}
    assert len(swapped) == 6 and min(swapped.values()) > 0.1
    inputs.require_discriminating(misses, 1e-2, "qkvza fixture",
                                  {k: 0.0 for k in misses if "scale_zero" in k})


DISJOINT = oracle.NamedFixture("disjoint_halves")


def _gate_up_case(seed: int = 0, qt: int = 44, fixture: oracle.FixtureFn = DISJOINT,
                  ) -> oracle.Case:
    sig = builtin()["gemv_gate_up"]
    spec = _spec("gemv_gate_up", qt=qt)
    return oracle.build_case(sig, spec, oracle.dims_for(sig, spec, EMU_SIZES), seed, fixture)


def test_the_memo_is_off_by_default_every_case_is_fresh_and_the_callers() -> None:
    a, b = _gate_up_case(), _gate_up_case()
    assert a is not b and a.memo is None
    a.host["x"][0] = 99.0  # a case built without the memo is the caller's to change
    assert b.host["x"][0] != 99.0
    sig, fmt = builtin()["gemv_gate_up"], by_qt(44)
    assert oracle.reference(sig, fmt, b) is not oracle.reference(sig, fmt, b)


def test_memoised_cases_are_one_frozen_case_per_inputs_and_refuse_changes() -> None:
    sig, fmt = builtin()["gemv_gate_up"], by_qt(44)
    fresh = _gate_up_case()
    fresh_ref = oracle.evaluate(sig, fmt, fresh, oracle.decode_all(fmt, fresh, fresh.dims["K"]))
    fresh_misses = oracle.misses(sig, fmt, fresh, fresh_ref)
    with oracle.memoised():
        case = _gate_up_case()
        assert _gate_up_case() is case  # equal inputs: the same case
        assert _gate_up_case(seed=1) is not case  # any input apart: another
        assert _gate_up_case(qt=45) is not case
        assert _gate_up_case(fixture=oracle.NamedFixture("equal_halves")) is not case
        # a fixture that cannot be compared is built anew, frozen all the same
        other = _gate_up_case(fixture=_fx)
        assert other is not _gate_up_case(fixture=_fx) and other.memo is not None
        with pytest.raises(ValueError, match="read-only"):
            case.host["x"][0] = 99.0
        with pytest.raises(ValueError, match="read-only"):
            case.blobs["A_gate"][0][0, 0] = 0  # type: ignore[index]
        with pytest.raises(ValueError, match="read-only"):
            case.init["y_gate"][:] = 0.0
        with pytest.raises(TypeError):
            case.host["x"] = np.zeros(3)  # type: ignore[index]
        with pytest.raises(TypeError):
            case.dims["K"] = 256  # type: ignore[index]
        with pytest.raises(dataclasses.FrozenInstanceError):
            case.host = {}  # type: ignore[misc]
        # the derived results: the same numbers as without the memo, computed once
        ref = oracle.reference(sig, fmt, case)
        assert oracle.reference(sig, fmt, case) is ref
        assert ref.keys() == fresh_ref.keys()
        assert all(np.array_equal(ref[k], fresh_ref[k]) for k in ref)
        with pytest.raises(ValueError, match="read-only"):
            ref["y_gate"][0] = 0.0
        with pytest.raises(TypeError):
            ref["y_gate"] = np.zeros(3)  # type: ignore[index]
        got = oracle.misses(sig, fmt, case, ref)
        assert got == fresh_misses
        got.clear()  # the dict is the caller's: the kept one is untouched
        assert oracle.misses(sig, fmt, case, ref) == fresh_misses
        # another metric is another result; a reference not the kept one is recomputed
        assert oracle.misses(sig, fmt, case, ref, inputs.rel_rms) != fresh_misses
        assert oracle.misses(sig, fmt, case, dict(ref)) == fresh_misses
        dec = oracle.decode_all(fmt, case, case.dims["K"])
        assert dec["A_up"][0] is oracle.decode_all(fmt, case, case.dims["K"])["A_up"][0]
        with pytest.raises(ValueError, match="read-only"):
            dec["A_up"][0][0, 0] = 0.0  # type: ignore[index]
        # the format and K are in the key: another one is decoded, not the kept decode
        as45 = oracle.decode_all(by_qt(45), case, case.dims["K"])["A_up"][0]
        assert as45 is not None and not np.array_equal(as45, dec["A_up"][0])  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="K=256"):
            oracle.decode_all(fmt, case, 256)
        with oracle.memoised():  # nested: the same memo
            assert _gate_up_case() is case
    after = _gate_up_case()
    assert after is not case and after.memo is None  # the memo ended with its block


def test_the_memo_keys_on_the_fixture_function_it_calls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A NamedFixture resolves its function when called; a replaced one is a new key."""
    with oracle.memoised():
        case = _gate_up_case()
        monkeypatch.setattr(fixtures, "disjoint_halves", fixtures.equal_halves)
        swapped = _gate_up_case()
        assert swapped is not case
        assert not np.array_equal(swapped.blobs["A_gate"][0], case.blobs["A_gate"][0])
