"""VOP3P: packed f16/i16 math, ``v_fma_mix*`` and ``v_dot2*``.

Source halves follow ``op_sel`` (the half feeding the low result) and ``op_sel_hi`` (the
half feeding the high result); ``neg_lo``/``neg_hi`` negate per half.  For the mix ops
``op_sel_hi[i]`` says source i is f16 (else f32), ``neg_hi`` is abs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hqval.emu.fparith import _round_odd_f64, fma_f16
from hqval.emu.operands import NULL, Ctx, Operand, Sel, WaveState, vwrite

Fn = Callable[[WaveState, Sel], Any]
F16, F32, F64 = np.float16, np.float32, np.float64


def _flags(mods: dict[str, str], key: str, default: int, n: int = 3) -> list[int]:
    if key not in mods:
        return [default] * n
    vals = [int(x) for x in mods[key].strip("[]").split(",")]
    return vals + [default] * (n - len(vals))


def _raw(op: Operand, packed_const: bool) -> Fn:
    if op.kind == "v":
        r = op.reg
        return lambda st, w: st.V[r][w]
    if op.kind == "s":
        r = op.reg
        if r == NULL:
            z = np.array(0, np.uint32)
            return lambda st, w: z
        return lambda st, w: st.S[r][w][:, None]
    if op.kind == "lit":
        c = np.array(op.bits(32), np.uint32)
    else:
        # an inline constant is 16 bits; packed ops see it in both halves
        lo = op.bits(16)
        c = np.array(lo | (lo << 16) if packed_const else op.bits(32, op.kind == "float"),
                     np.uint32)
    return lambda st, w: c


def _half(x: Any, hi: int) -> Any:
    x = np.asarray(x, np.uint32)
    return ((x >> np.uint32(16)) if hi else x) & np.uint32(0xFFFF)


def fma_round(a: Any, b: Any, c: Any, out: Any) -> Any:
    """a*b + c with f32-or-narrower inputs, rounded once to ``out`` (f32 or f16)."""
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.asarray(a, F64) * np.asarray(b, F64)
        cc = np.asarray(c, F64)
        s = p + cc
        bp = s - cc
        e = (p - bp) + (cc - (s - bp))
        return _round_odd_f64(np.asarray(s, F64), np.asarray(e, F64)).astype(out)


def dot2_f32_bf16(a: Any, b: Any, c: Any) -> Any:
    """v_dot2_f32_bf16: tmp = c; tmp += lo*lo; tmp += hi*hi in f32 (bf16 products exact)."""
    def halves(x: Any) -> tuple[Any, Any]:
        x = np.asarray(x, np.uint32)
        lo = (x << np.uint32(16)).view(F32).astype(F64)
        hi = (x & np.uint32(0xFFFF0000)).view(F32).astype(F64)
        return lo, hi
    (a0, a1), (b0, b1) = halves(a), halves(b)
    with np.errstate(invalid="ignore", over="ignore"):
        tmp = np.asarray(c, F32) + (a0 * b0).astype(F32)
        return (tmp + (a1 * b1).astype(F32)).astype(F32)


def dot2_f32_f16(a: Any, b: Any, c: Any) -> Any:
    """v_dot2_f32_f16 as the ISA pseudocode orders it: tmp = c; tmp += lo*lo; tmp += hi*hi,
    in f32 (each f16 x f16 product is exact in f32; each add rounds)."""
    a = np.asarray(a, np.uint32)
    b = np.asarray(b, np.uint32)
    a0 = _half(a, 0).astype(np.uint16).view(F16).astype(F64)
    a1 = _half(a, 1).astype(np.uint16).view(F16).astype(F64)
    b0 = _half(b, 0).astype(np.uint16).view(F16).astype(F64)
    b1 = _half(b, 1).astype(np.uint16).view(F16).astype(F64)
    with np.errstate(invalid="ignore", over="ignore"):
        tmp = np.asarray(c, F32) + (a0 * b0).astype(F32)
        return (tmp + (a1 * b1).astype(F32)).astype(F32)


_PK_F16: dict[str, Callable[..., Any]] = {
    "v_pk_add_f16": lambda a, b: a + b,
    "v_pk_mul_f16": lambda a, b: a * b,
    "v_pk_fma_f16": fma_f16,
    "v_pk_max_f16": np.fmax,
    "v_pk_min_f16": np.fmin,
}
_PK_INT: dict[str, Callable[..., Any]] = {
    "v_pk_add_u16": lambda a, b: a + b,
    "v_pk_sub_u16": lambda a, b: a - b,
    "v_pk_mul_lo_u16": lambda a, b: a * b,
    "v_pk_lshlrev_b16": lambda a, b: b << (a & 15),
    "v_pk_lshrrev_b16": lambda a, b: b >> (a & 15),
    "v_pk_max_u16": np.maximum,
    "v_pk_min_u16": np.minimum,
    "v_pk_add_i16": lambda a, b: _s16(a) + _s16(b),
    "v_pk_sub_i16": lambda a, b: _s16(a) - _s16(b),
    "v_pk_max_i16": lambda a, b: np.maximum(_s16(a), _s16(b)),
    "v_pk_min_i16": lambda a, b: np.minimum(_s16(a), _s16(b)),
    "v_pk_ashrrev_i16": lambda a, b: _s16(b) >> (a & 15),
    "v_pk_mad_u16": lambda a, b, c: a * b + c,
}


def _s16(x: Any) -> Any:
    return ((np.asarray(x, np.int64) & 0xFFFF) ^ 0x8000) - 0x8000


def translate_packed(name: str, ops: list[Operand], mods: dict[str, str], cx: Ctx) -> Fn | None:
    d = ops[0].reg
    srcs = ops[1:]
    n = len(srcs)
    opsel = _flags(mods, "op_sel", 0)
    is_mix = name.startswith("v_fma_mix")
    opsel_hi = _flags(mods, "op_sel_hi", 0 if is_mix else 1)
    neg_lo = _flags(mods, "neg_lo", 0)
    neg_hi = _flags(mods, "neg_hi", 0)
    clamp = "clamp" in mods
    raws = [_raw(o, packed_const=not is_mix) for o in srcs]

    if is_mix:
        def val(k: int, st: WaveState, w: Sel) -> Any:
            x = np.asarray(raws[k](st, w), np.uint32)
            v = (_half(x, opsel[k]).astype(np.uint16).view(F16).astype(F32) if opsel_hi[k]
                 else x.view(F32))
            if neg_hi[k]:
                v = np.abs(v)
            if neg_lo[k]:
                v = -v
            return v
        out = F32 if name == "v_fma_mix_f32" else F16

        def mix(st: WaveState, w: Sel) -> None:
            # ISA pseudocode: f32 fma, then (mixlo/mixhi) f32_to_f16
            r = fma_round(val(0, st, w), val(1, st, w), val(2, st, w), F32).astype(out)
            if clamp:
                r = np.clip(r, 0, 1).astype(out)
            if out == F32:
                vwrite(st, w, d, np.asarray(r, F32).view(np.uint32))
                return
            bits = np.asarray(r, F16).view(np.uint16).astype(np.uint32)
            old = st.V[d][w]
            if name == "v_fma_mixhi_f16":
                new = (old & np.uint32(0xFFFF)) | (bits << np.uint32(16))
            else:
                new = (old & np.uint32(0xFFFF0000)) | bits
            vwrite(st, w, d, new)
        return mix

    if name in ("v_dot2_f32_f16", "v_dot2_f32_bf16"):
        dot2 = dot2_f32_bf16 if name.endswith("bf16") else dot2_f32_f16

        def dot(st: WaveState, w: Sel) -> None:
            a = np.asarray(raws[0](st, w), np.uint32)
            b = np.asarray(raws[1](st, w), np.uint32)
            # apply op_sel/neg by rebuilding the packed halves
            a = _repack(a, opsel[0], opsel_hi[0], neg_lo[0], neg_hi[0])
            b = _repack(b, opsel[1], opsel_hi[1], neg_lo[1], neg_hi[1])
            c = np.asarray(raws[2](st, w), np.uint32).view(F32)
            if neg_lo[2]:
                c = -c
            if neg_hi[2]:
                c = np.abs(c)
            r = dot2(a, b, c)
            if clamp:
                r = np.clip(r, 0, 1).astype(F32)
            vwrite(st, w, d, np.asarray(r, F32).view(np.uint32))
        return dot

    if name in _PK_F16:
        fn = _PK_F16[name]

        def halves(hi_result: int, st: WaveState, w: Sel) -> list[Any]:
            vals = []
            for k in range(n):
                sel = opsel_hi[k] if hi_result else opsel[k]
                v = _half(raws[k](st, w), sel).astype(np.uint16).view(F16)
                if (neg_hi if hi_result else neg_lo)[k]:
                    v = -v
                vals.append(v)
            return vals

        def pkf(st: WaveState, w: Sel) -> None:
            with np.errstate(all="ignore"):
                lo = np.asarray(fn(*halves(0, st, w)), F16)
                hi = np.asarray(fn(*halves(1, st, w)), F16)
            if clamp:
                lo, hi = np.clip(lo, 0, 1).astype(F16), np.clip(hi, 0, 1).astype(F16)
            vwrite(st, w, d, lo.view(np.uint16).astype(np.uint32)
                   | (hi.view(np.uint16).astype(np.uint32) << np.uint32(16)))
        return pkf
    if name in _PK_INT:
        fi = _PK_INT[name]

        def ihalves(hi_result: int, st: WaveState, w: Sel) -> list[Any]:
            return [_half(raws[k](st, w), opsel_hi[k] if hi_result else opsel[k])
                    .astype(np.int64) for k in range(n)]

        def pki(st: WaveState, w: Sel) -> None:
            lo = np.asarray(fi(*ihalves(0, st, w)), np.int64) & 0xFFFF
            hi = np.asarray(fi(*ihalves(1, st, w)), np.int64) & 0xFFFF
            vwrite(st, w, d, (lo | (hi << 16)).astype(np.uint32))
        return pki
    return None


def _repack(x: Any, sel_lo: int, sel_hi: int, nlo: int, nhi: int) -> Any:
    lo = _half(x, sel_lo)
    hi = _half(x, sel_hi)
    if nlo:
        lo = lo ^ np.uint32(0x8000)
    if nhi:
        hi = hi ^ np.uint32(0x8000)
    return lo | (hi << np.uint32(16))
