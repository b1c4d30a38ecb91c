"""WMMA (wave32 16x16x16, and gfx12's 16x16x32 iu4) for gfx11 and gfx12, each with its own
register layout.

A and B (``e`` = the element index within a lane, packed low to high across the VGPRs):
  gfx11: lane l holds row (A) / column (B) l % 16 and k = e (all K values); lanes 16-31
  repeat lanes 0-15.  16-bit: 8 VGPRs, 8-bit: 4, 4-bit: 2.
  gfx12: lane l holds row / column l % 16 and k = (K/2) (l // 16) + e.  16-bit: 4 VGPRs,
  8-bit: 2, 4-bit: 1 (K = 32 iu4: 2).
C and D:
  32-bit (f32, i32): 8 VGPRs.  gfx11: VGPR i of lane l is D[2i + l // 16][l % 16];
  gfx12: D[i + 8 (l // 16)][l % 16].
  16-bit (f16, bf16): gfx11: the same 8 VGPRs, in the low half (op_sel[2] = 0) or the high
  half (op_sel[2] = 1), the other half kept; gfx12: 4 VGPRs, two rows per VGPR: the low
  half of VGPR i is row 2i + 8 (l // 16), the high half row 2i + 1 + 8 (l // 16).

Arithmetic: every f16/bf16 product is exact in f64, the K-term sums are done in f64 and the
result with C is rounded once to f32 (or to f16/bf16 for those outputs).  The hardware's
internal order is not specified; docs/emu-semantics.md says what that leaves open and
hqval.checks.prefill_parity bounds both this and the sequential-f32 order.  Integer WMMA is
exact (A, B signed where neg_lo[0] / neg_lo[1] is set), wrapped to 32 bits, or saturated
with clamp."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hqval.codeobject import Instruction
from hqval.emu.errors import UnsupportedInstruction
from hqval.emu.operands import (
    Ctx,
    Sel,
    WaveState,
    parse_operand,
    vread_regs,
    vwrite,
    vwrite_regs,
)

Fn = Callable[[WaveState, Sel], Any]

# name -> (input kind, element bits, K, output kind)
KINDS: dict[str, tuple[str, int, int, str]] = {
    "v_wmma_f32_16x16x16_f16": ("f16", 16, 16, "f32"),
    "v_wmma_f32_16x16x16_bf16": ("bf16", 16, 16, "f32"),
    "v_wmma_f16_16x16x16_f16": ("f16", 16, 16, "f16"),
    "v_wmma_bf16_16x16x16_bf16": ("bf16", 16, 16, "bf16"),
    "v_wmma_i32_16x16x16_iu8": ("int", 8, 16, "i32"),
    "v_wmma_i32_16x16x16_iu4": ("int", 4, 16, "i32"),
    "v_wmma_i32_16x16x32_iu4": ("int", 4, 32, "i32"),
}


def _elements(st: WaveState, w: Sel, reg: int, nregs: int, bits: int) -> np.ndarray:
    """[n, 32 lanes, nregs * 32 / bits] raw fields (uint32) of the packed operands."""
    words = np.stack([st.V[reg + i][w] for i in range(nregs)], axis=-1)  # [n, 32, nregs]
    return _fields(words, nregs, bits)


def _fields(words: np.ndarray, nregs: int, bits: int) -> np.ndarray:
    """The ``bits``-wide fields of uint32 ``words`` [n, 32, nregs], low to high."""
    per = 32 // bits
    shifts = (np.arange(per, dtype=np.uint32) * np.uint32(bits))
    f = (words[..., None] >> shifts) & np.uint32((1 << bits) - 1)  # [n, 32, nregs, per]
    return np.asarray(f.reshape(*words.shape[:2], nregs * per))


def _values(raw: np.ndarray, kind: str, bits: int, signed: bool) -> np.ndarray:
    if kind == "f16":
        return raw.astype(np.uint16).view(np.float16).astype(np.float64)
    if kind == "bf16":
        return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    v = raw.astype(np.int64)
    if signed:
        half = np.int64(1 << (bits - 1))
        v = (v ^ half) - half
    return v


def _matrix_fast(st: WaveState, w: Sel, reg: int, gen: int, kind: str, bits: int, K: int,
                 signed: bool) -> np.ndarray:
    """``_matrix_slow`` for 16-bit and 8-bit elements: the packed VGPRs reinterpreted in
    place (little-endian: element 0 is the low half / byte), the same values in the same
    C-contiguous [n, 16, K] layout."""
    nregs = K * bits // (32 if gen == 11 else 64)
    words = vread_regs(st, w, reg, nregs)  # [n, 32, nregs]
    if gen == 11:
        words = words[:, :16, :]
    narrow = np.ascontiguousarray(words).view(np.uint16 if bits == 16 else
                                              (np.int8 if signed else np.uint8))
    if kind == "f16":
        v = narrow.view(np.float16).astype(np.float64)
    elif kind == "bf16":
        v = (narrow.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    else:
        v = narrow.astype(np.int64)
    if gen == 11:
        return v
    return np.concatenate([v[:, :16, :], v[:, 16:, :]], axis=2)


def _matrix(st: WaveState, w: Sel, reg: int, gen: int, kind: str, bits: int, K: int,
            signed: bool) -> np.ndarray:
    """A (rows) or B (columns) as [n, 16, K]."""
    if bits in (8, 16):
        return _matrix_fast(st, w, reg, gen, kind, bits, K, signed)
    return _matrix_slow(st, w, reg, gen, kind, bits, K, signed)


def _matrix_slow(st: WaveState, w: Sel, reg: int, gen: int, kind: str, bits: int, K: int,
                 signed: bool) -> np.ndarray:
    """A (rows) or B (columns) as [n, 16, K], field by field (every element width)."""
    if gen == 11:
        nregs = K * bits // 32
        return _values(_elements(st, w, reg, nregs, bits)[:, :16, :], kind, bits, signed)
    nregs = K * bits // 64
    e = _elements(st, w, reg, nregs, bits)
    v = _values(e, kind, bits, signed)
    return np.concatenate([v[:, :16, :], v[:, 16:, :]], axis=2)


def _d_layout(D: np.ndarray, gen: int) -> np.ndarray:
    """D [n, 16 rows, 16 columns] in the C/D register layout [n, 32 lanes, 8 VGPRs]:
    gfx11: VGPR i of lane l is row 2i + l // 16, gfx12: row i + 8 (l // 16); column l % 16.
    (Rows split as (i, h) or (h, i), then lanes are (h, column).)"""
    n = D.shape[0]
    if gen == 11:
        return D.reshape(n, 8, 2, 16).transpose(0, 2, 3, 1).reshape(n, 32, 8)
    return D.reshape(n, 2, 8, 16).transpose(0, 1, 3, 2).reshape(n, 32, 8)


def _d_layout_gather(D: np.ndarray, gen: int) -> np.ndarray:
    """``_d_layout`` written as the index rule itself (the test compares the two)."""
    lane = np.arange(32)
    if gen == 11:
        row_of = np.array([[2 * i + (ln // 16) for i in range(8)] for ln in lane])
    else:
        row_of = np.array([[i + 8 * (ln // 16) for i in range(8)] for ln in lane])
    col_of = np.broadcast_to((lane % 16)[:, None], (32, 8))
    return np.asarray(D[:, row_of, col_of])


def translate_wmma(name: str, ins: Instruction, cx: Ctx) -> Fn:
    ops = [parse_operand(o) for o in ins.operands]
    if name not in KINDS:
        raise UnsupportedInstruction(ins.mnemonic, ins.addr, cx.kernel, cx.arch,
                                     "this WMMA variant (fp8/bf8, SWMMAC) is not modelled")
    if cx.lanes != 32:
        raise UnsupportedInstruction(ins.mnemonic, ins.addr, cx.kernel, cx.arch,
                                     "the wave64 WMMA layout is not modelled")
    if cx.gen not in (11, 12):
        raise UnsupportedInstruction(ins.mnemonic, ins.addr, cx.kernel, cx.arch,
                                     "WMMA exists on gfx11 and gfx12 only")
    kind, bits, K, out = KINDS[name]
    if K == 32 and cx.gen != 12:
        raise UnsupportedInstruction(ins.mnemonic, ins.addr, cx.kernel, cx.arch,
                                     "16x16x32 iu4 is a gfx12 instruction")
    d, a, b, c = ops
    mods = ins.modifiers

    def flags(key: str) -> list[int]:
        vals = [int(x) for x in mods.get(key, "[0,0,0]").strip("[]").split(",")]
        return vals + [0] * (3 - len(vals))
    neg_lo, neg_hi, op_sel = flags("neg_lo"), flags("neg_hi"), flags("op_sel")
    gen = cx.gen
    is_int = kind == "int"
    # integer: neg_lo[0]/[1] mean "A/B signed"; float: negate A/B (gfx12 also C: neg_lo[2]
    # negates, neg_hi[2] takes |C|)
    sign_a = 1.0 if is_int or not neg_lo[0] else -1.0
    sign_b = 1.0 if is_int or not neg_lo[1] else -1.0
    c_neg = bool(neg_lo[2]) and gen == 12 and not is_int
    c_abs = bool(neg_hi[2]) and gen == 12 and not is_int
    clamp = "clamp" in mods
    hi_half = bool(op_sel[2]) and gen == 11

    def read_c(st: WaveState, w: Sel) -> np.ndarray:
        """C in the D layout: [n, 32, 8] (f64 or int64)."""
        if out in ("f32", "i32"):
            words = vread_regs(st, w, c.reg, 8)
            return (words.view(np.float32).astype(np.float64) if out == "f32"
                    else words.view(np.int32).astype(np.int64))
        if gen == 11:
            words = np.stack([st.V[c.reg + i][w] for i in range(8)], axis=-1)
            halves = (words >> np.uint32(16)) if hi_half else words & np.uint32(0xFFFF)
        else:
            words = np.stack([st.V[c.reg + i][w] for i in range(4)], axis=-1)
            halves = np.stack([words & np.uint32(0xFFFF), words >> np.uint32(16)],
                              axis=-1).reshape(*words.shape[:2], 8)
        return _values(halves & np.uint32(0xFFFF), out, 16, False)

    def write_d(st: WaveState, w: Sel, res: np.ndarray) -> None:
        if out == "f32":
            bits32 = res.astype(np.float32).view(np.uint32)
        elif out == "i32":
            bits32 = (res & 0xFFFFFFFF).astype(np.uint32)
        else:
            from hqval.emu.fparith import f32_to_f16, round_odd_f32
            from hqval.emu.packed import round_bf16
            if out == "f16":
                # one rounding: f64 -> f16 through round-to-odd f32 (24 >= 11 + 2)
                h = f32_to_f16(round_odd_f32(res))
                h16 = h.view(np.uint16).astype(np.uint32)
            else:
                h16 = round_bf16(res)
            if gen == 11:
                for i in range(8):
                    old = st.V[d.reg + i][w]
                    new = ((old & np.uint32(0xFFFF)) | (h16[:, :, i] << np.uint32(16))
                           if hi_half else (old & np.uint32(0xFFFF0000)) | h16[:, :, i])
                    vwrite(st, w, d.reg + i, new)
                return
            for i in range(4):
                vwrite(st, w, d.reg + i, h16[:, :, 2 * i] | (h16[:, :, 2 * i + 1]
                                                             << np.uint32(16)))
            return
        vwrite_regs(st, w, d.reg, bits32)

    def wmma(st: WaveState, w: Sel) -> None:
        A = _matrix(st, w, a.reg, gen, kind, bits, K, bool(neg_lo[0]))
        B = _matrix(st, w, b.reg, gen, kind, bits, K, bool(neg_lo[1]))
        if is_int:
            D = np.einsum("nmk,nck->nmc", A, B)  # exact in int64
        else:
            # exact products; a sign of +1 leaves the operand as it is (x * 1.0 == x)
            D = np.einsum("nmk,nck->nmc", A if sign_a == 1.0 else A * sign_a,
                          B if sign_b == 1.0 else B * sign_b)
        Cv = read_c(st, w)
        if c_abs:
            Cv = np.abs(Cv)
        if c_neg:
            Cv = -Cv
        res = _d_layout(D, gen) + Cv  # [n, 32, 8]
        if is_int and clamp:
            res = np.clip(res, -(2**31), 2**31 - 1)
        write_d(st, w, res)
    return wmma
