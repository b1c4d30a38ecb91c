"""WMMA (wave32 16x16x16) for gfx11 and gfx12, each with its own register layout.

gfx11: A and B take 8 VGPRs: lane l holds row (A) / column (B) l % 16, all 16 k values
as packed halves (k = 2i, 2i+1 in VGPR i); lanes 16-31 repeat lanes 0-15.  C/D take 8
VGPRs: VGPR i of lane l is D[2i + l // 16][l % 16].
gfx12: A and B take 4 VGPRs: lane l holds row/column l % 16 and k = 8 (l // 16) + 0..7.
C/D: VGPR i of lane l is D[i + 8 (l // 16)][l % 16].

Arithmetic: every f16 product is exact in f64, the 16-term sums are done in f64 and the
result with C is rounded once to f32 (the hardware's internal order is not specified; any
order differs from this one by at most a few f32 ulps of the dot product)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hqval.emu.disasm import Instruction
from hqval.emu.errors import UnsupportedInstruction
from hqval.emu.operands import Ctx, Sel, WaveState, parse_operand, vwrite

Fn = Callable[[WaveState, Sel], Any]


def _halves(st: WaveState, w: Sel, reg: int, nregs: int, bf16: bool) -> np.ndarray:
    """[n, 32 lanes, 2*nregs] values (f64) of the packed 16-bit operands."""
    words = np.stack([st.V[reg + i][w] for i in range(nregs)], axis=-1)  # [n, 32, nregs]
    lo = words & np.uint32(0xFFFF)
    hi = words >> np.uint32(16)
    h = np.stack([lo, hi], axis=-1).reshape(*words.shape[:2], 2 * nregs)
    if bf16:
        return (h.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    return h.astype(np.uint16).view(np.float16).astype(np.float64)


def translate_wmma(name: str, ins: Instruction, cx: Ctx) -> Fn:
    ops = [parse_operand(o) for o in ins.operands]
    if name not in ("v_wmma_f32_16x16x16_f16", "v_wmma_f32_16x16x16_bf16"):
        raise UnsupportedInstruction(ins.mnemonic, ins.addr, cx.kernel, cx.arch,
                                     "only the f32-accumulating f16/bf16 WMMA is modelled")
    if cx.lanes != 32:
        raise UnsupportedInstruction(ins.mnemonic, ins.addr, cx.kernel, cx.arch,
                                     "the wave64 WMMA layout is not modelled")
    if cx.gen not in (11, 12):
        raise UnsupportedInstruction(ins.mnemonic, ins.addr, cx.kernel, cx.arch,
                                     "WMMA exists on gfx11 and gfx12 only")
    bf16 = name.endswith("bf16")
    d, a, b, c = ops
    neg_lo = [int(x) for x in ins.modifiers.get("neg_lo", "[0,0,0]").strip("[]").split(",")]
    neg_hi = [int(x) for x in ins.modifiers.get("neg_hi", "[0,0,0]").strip("[]").split(",")]
    sign_a = -1.0 if neg_lo[0] else 1.0
    sign_b = -1.0 if neg_lo[1] else 1.0
    c_neg = bool(neg_lo[2]) if cx.gen == 12 else False
    c_abs = bool(neg_hi[2]) if cx.gen == 12 else False
    gen = cx.gen
    lane = np.arange(32)
    if gen == 11:
        row_of = np.array([[2 * i + (ln // 16) for i in range(8)] for ln in lane])
    else:
        row_of = np.array([[i + 8 * (ln // 16) for i in range(8)] for ln in lane])
    col_of = np.broadcast_to((lane % 16)[:, None], (32, 8))

    def wmma(st: WaveState, w: Sel) -> None:
        if gen == 11:
            A = _halves(st, w, a.reg, 8, bf16)[:, :16, :]  # [n, m, k]
            B = _halves(st, w, b.reg, 8, bf16)[:, :16, :]  # [n, col, k]
        else:
            ha = _halves(st, w, a.reg, 4, bf16)
            hb = _halves(st, w, b.reg, 4, bf16)
            A = np.concatenate([ha[:, :16, :], ha[:, 16:, :]], axis=2)
            B = np.concatenate([hb[:, :16, :], hb[:, 16:, :]], axis=2)
        D = np.einsum("nmk,nck->nmc", A * sign_a, B * sign_b)  # [n, 16, 16] exact products
        C = np.stack([st.V[c.reg + i][w] for i in range(8)], axis=-1).view(np.float32)
        Cv = C.astype(np.float64)
        if c_abs:
            Cv = np.abs(Cv)
        if c_neg:
            Cv = -Cv
        out = D[:, row_of, col_of] + Cv  # [n, 32, 8]
        res = out.astype(np.float32).view(np.uint32)
        for i in range(8):
            vwrite(st, w, d.reg + i, res[:, :, i])
    return wmma
