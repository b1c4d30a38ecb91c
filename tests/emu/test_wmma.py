"""WMMA: each generation's operand layout, checked with distinct values against numpy.

The kernels load A, B and C into registers by the layout documented in hqval/emu/wmma.py
and store D back by the same rule; a wrong lane/VGPR mapping in the interpreter moves
values to other cells and the comparison fails."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from hqval.emu import Machine, Module

Ops = Callable[[str], tuple[Machine, Module]]


@pytest.mark.parametrize(("arch", "kernel"), [("gfx1100", "wmma_gfx11"),
                                              ("gfx1151", "wmma_gfx11"),
                                              ("gfx1201", "wmma_gfx12")])
def test_wmma_matches_matmul_with_distinct_values(ops: Ops, arch: str, kernel: str) -> None:
    m, mod = ops(arch)
    # distinct small integers and halves: every product and sum is exact in f32, so the
    # result must equal the f64 matmul bit for bit
    a = (np.arange(256).reshape(16, 16) % 29 - 14).astype(np.float16) * np.float16(0.5)
    b = (np.arange(256).reshape(16, 16).T % 31 - 15).astype(np.float16)
    c = np.arange(256, dtype=np.float32).reshape(16, 16) * 1000
    pa, pb, pc, pd = (m.alloc(n) for n in (512, 512, 1024, 1024))
    m.write(pa, a)
    m.write(pb, b)
    m.write(pc, c)
    stats = m.launch(mod, kernel, (1, 1, 1), (32, 1, 1), [pa, pb, pc, pd])
    d = m.read(pd, 1024).view(np.float32).reshape(16, 16)
    want = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)
    np.testing.assert_array_equal(d, want)
    assert stats.counts["WMMA"] == 1


def test_wmma_transposed_operand_would_be_caught() -> None:
    """The check above discriminates: A^T B differs from A B in most cells."""
    a = (np.arange(256).reshape(16, 16) % 29 - 14).astype(np.float64) * 0.5
    b = (np.arange(256).reshape(16, 16).T % 31 - 15).astype(np.float64)
    assert np.count_nonzero(a.T @ b != a @ b) > 200


# ---- every WMMA variant clang-19 emits, one instruction at a time, against the layout in
# hqval/emu/wmma.py's docstring (written out again here from the ISA's tables, not shared)

def _pack_lanes(mat: np.ndarray, gen: int, bits: int) -> np.ndarray:
    """A [16 rows, K] (or B as [16 cols, K]) of raw fields -> [nregs, 32 lanes] words."""
    k = mat.shape[1]
    lanes = np.zeros((32, k if gen == 11 else k // 2), np.int64)
    for ln in range(32):
        lanes[ln] = mat[ln % 16] if gen == 11 else mat[ln % 16, (k // 2) * (ln // 16):
                                                       (k // 2) * (ln // 16 + 1)]
    per = 32 // bits
    nregs = lanes.shape[1] // per
    words = np.zeros((nregs, 32), np.int64)
    for r in range(nregs):
        for e in range(per):
            words[r] |= (lanes[:, r * per + e] & ((1 << bits) - 1)) << (bits * e)
    return words.astype(np.uint32)


def _d_rc(gen: int, lane: int, i: int) -> tuple[int, int]:
    return ((2 * i + lane // 16) if gen == 11 else (i + 8 * (lane // 16))), lane % 16


def _run(text: str, arch: str, regs: dict[int, np.ndarray]):  # type: ignore[no-untyped-def]
    from tests.emu.instr import execute, state

    st = state(nvgpr=48)
    for r, words in regs.items():
        for i, wds in enumerate(words):
            st.V[r + i, 0] = wds
    execute(text, st, arch=arch)
    return st


_INT_WMMA = [("v_wmma_i32_16x16x16_iu8", 8, 16, (True, False)),
             ("v_wmma_i32_16x16x16_iu4", 4, 16, (True, True)),
             ("v_wmma_i32_16x16x32_iu4", 4, 32, (False, False))]


@pytest.mark.parametrize(("arch", "gen", "name", "bits", "K", "signed"), [
    (arch, gen, *case) for arch, gen in (("gfx1100", 11), ("gfx1201", 12))
    for case in _INT_WMMA if case[2] == 16 or gen == 12])
def test_integer_wmma(arch: str, gen: int, name: str, bits: int, K: int,
                      signed: tuple[bool, bool]) -> None:
    rng = np.random.default_rng(bits + K)
    lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1))
    A = rng.integers(lo if signed[0] else 0, hi if signed[0] else 1 << bits, (16, K))
    B = rng.integers(lo if signed[1] else 0, hi if signed[1] else 1 << bits, (16, K))
    C = rng.integers(-1000, 1000, (16, 16))
    wa, wb = _pack_lanes(A, gen, bits), _pack_lanes(B, gen, bits)
    cw = np.zeros((8, 32), np.int64)
    for ln in range(32):
        for i in range(8):
            cw[i, ln] = C[_d_rc(gen, ln, i)]
    na, nb = len(wa), len(wb)
    ra = "v" + (f"[16:{16 + na - 1}]" if na > 1 else "16")
    rb = "v" + (f"[24:{24 + nb - 1}]" if nb > 1 else "24")
    neg = f" neg_lo:[{int(signed[0])},{int(signed[1])},0]" if any(signed) else ""
    st = _run(f"{name} v[0:7], {ra}, {rb}, v[8:15]{neg}", arch,
              {16: wa, 24: wb, 8: (cw & 0xFFFFFFFF).astype(np.uint32)})
    want = A @ B.T + C
    for ln in range(32):
        for i in range(8):
            assert int(st.V[i, 0, ln].view(np.int32)) == want[_d_rc(gen, ln, i)]


@pytest.mark.parametrize(("arch", "gen"), [("gfx1100", 11), ("gfx1201", 12)])
@pytest.mark.parametrize("out", ["f16", "bf16"])
def test_16_bit_result_wmma(arch: str, gen: int, out: str) -> None:
    from hqval.emu.packed import round_bf16

    # small integers: every product and sum is exact, so the result is exact in f16/bf16
    rng = np.random.default_rng(3)
    A = rng.integers(-4, 5, (16, 16)).astype(np.float64)
    B = rng.integers(-4, 5, (16, 16)).astype(np.float64)
    C = rng.integers(-8, 9, (16, 16)).astype(np.float64)

    def raw(x: np.ndarray) -> np.ndarray:
        if out == "f16":
            return x.astype(np.float16).view(np.uint16).astype(np.int64)
        return round_bf16(x).astype(np.int64)
    wa, wb = _pack_lanes(raw(A), gen, 16), _pack_lanes(raw(B), gen, 16)
    craw = raw(C)
    if gen == 11:
        cw = np.zeros((8, 32), np.int64)
        for ln in range(32):
            for i in range(8):
                cw[i, ln] = craw[_d_rc(11, ln, i)] << 16 | 0x1234  # op_sel:[0,0,1]: high
        creg = "v[8:15]"
    else:
        cw = np.zeros((4, 32), np.int64)
        for ln in range(32):
            for i in range(4):
                r0, c0 = 2 * i + 8 * (ln // 16), ln % 16
                cw[i, ln] = craw[r0, c0] | (craw[r0 + 1, c0] << 16)
        creg = "v[8:11]"
    name = "v_wmma_f16_16x16x16_f16" if out == "f16" else "v_wmma_bf16_16x16x16_bf16"
    ab = "v[16:23], v[24:31]" if gen == 11 else "v[16:19], v[24:27]"
    sel = " op_sel:[0,0,1]" if gen == 11 else ""
    st = _run(f"{name} {creg}, {ab}, {creg}{sel}", arch,
              {16: wa, 24: wb, 8: cw.astype(np.uint32)})
    want = raw(A @ B.T + C)
    for ln in range(32):
        if gen == 11:
            for i in range(8):
                word = int(st.V[8 + i, 0, ln])
                assert word >> 16 == want[_d_rc(11, ln, i)] and word & 0xFFFF == 0x1234
        else:
            for i in range(4):
                word = int(st.V[8 + i, 0, ln])
                r0, c0 = 2 * i + 8 * (ln // 16), ln % 16
                assert word & 0xFFFF == want[r0, c0] and word >> 16 == want[r0 + 1, c0]


def test_unmodelled_wmma_variant_is_refused() -> None:
    from hqval.emu.errors import UnsupportedInstruction
    from tests.emu.instr import execute, state

    with pytest.raises(UnsupportedInstruction, match="not modelled"):
        execute("v_wmma_f32_16x16x16_fp8_fp8 v[0:7], v[8:9], v[10:11], v[0:7]", state(),
                arch="gfx1201")


@pytest.mark.parametrize("gen", [11, 12])
@pytest.mark.parametrize(("kind", "bits", "signed"), [("f16", 16, False), ("bf16", 16, False),
                                                      ("int", 8, False), ("int", 8, True)])
@pytest.mark.parametrize("selection", ["all", "some"])
def test_wmma_operand_fast_path_equals_the_field_by_field_reading(
        gen: int, kind: str, bits: int, signed: bool, selection: str) -> None:
    """16- and 8-bit A/B operands are read by reinterpreting the VGPRs in place; the values
    and their layout must equal the generic field extraction's, NaN/inf/denormal bit
    patterns included, for a slice of every wave and for an index selection."""
    from hqval.emu.operands import WaveState
    from hqval.emu.wmma import _matrix_fast, _matrix_slow

    rng = np.random.default_rng(gen * 100 + bits)
    st = WaveState(3, 24)
    special = np.array([0x0000, 0x8000, 0x0001, 0x7C00, 0xFC00, 0x7E00, 0x7D01, 0x7F80,
                        0xFF81, 0x7FC0, 0x3C00, 0x00FF, 0x8080, 0xFFFF], np.uint32)
    lo = rng.choice(special, st.V.shape)
    hi = rng.choice(special, st.V.shape)
    random = rng.integers(0, 2**32, st.V.shape, dtype=np.uint64).astype(np.uint32)
    st.V[:] = np.where(rng.random(st.V.shape) < 0.5, lo | (hi << np.uint32(16)), random)
    w = slice(None) if selection == "all" else np.array([2, 0])
    for reg in (0, 8, 13):
        with np.errstate(all="ignore"):
            fast = _matrix_fast(st, w, reg, gen, kind, bits, 16, signed)
            slow = _matrix_slow(st, w, reg, gen, kind, bits, 16, signed)
        assert fast.dtype == slow.dtype and fast.shape == slow.shape
        assert fast.flags.c_contiguous
        np.testing.assert_array_equal(fast.view(np.uint64) if fast.dtype == np.float64
                                      else fast, slow.view(np.uint64)
                                      if slow.dtype == np.float64 else slow)


@pytest.mark.parametrize("gen", [11, 12])
def test_d_layout_by_reshape_equals_the_index_rule(gen: int) -> None:
    from hqval.emu.wmma import _d_layout, _d_layout_gather

    D = np.arange(3 * 256, dtype=np.float64).reshape(3, 16, 16)
    np.testing.assert_array_equal(_d_layout(D, gen), _d_layout_gather(D, gen))
