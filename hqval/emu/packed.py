"""VOP3P: packed f16/i16 math, ``v_fma_mix*`` and ``v_dot2*``.

Source halves follow ``op_sel`` (the half feeding the low result) and ``op_sel_hi`` (the
half feeding the high result); ``neg_lo``/``neg_hi`` negate per half.  For the mix ops
``op_sel_hi[i]`` says source i is f16 (else f32), ``neg_hi`` is abs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hqval.emu.fparith import (
    f32_to_f16,
    fma_f16,
    fma_odd,
    fp_quiet,
    max_isa,
    min_isa,
    mix_f16,
)
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
    """a*b + c with f32-or-narrower inputs, rounded once to ``out`` (f32 or f16; f64: the
    round-to-odd value, exact for one further rounding).  ``fparith.fma_odd`` (compiled
    where available, bit-identical to its numpy oracle), then one numpy cast."""
    r = fma_odd(a, b, c)
    with fp_quiet(invalid="ignore", over="ignore"):
        return r.astype(out)


def dot2_f32_bf16(a: Any, b: Any, c: Any) -> Any:
    """v_dot2_f32_bf16: tmp = c; tmp += lo*lo; tmp += hi*hi in f32 (bf16 products exact)."""
    def halves(x: Any) -> tuple[Any, Any]:
        x = np.asarray(x, np.uint32)
        lo = (x << np.uint32(16)).view(F32).astype(F64)
        hi = (x & np.uint32(0xFFFF0000)).view(F32).astype(F64)
        return lo, hi
    (a0, a1), (b0, b1) = halves(a), halves(b)
    with fp_quiet(invalid="ignore", over="ignore"):
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
    with fp_quiet(invalid="ignore", over="ignore"):
        tmp = np.asarray(c, F32) + (a0 * b0).astype(F32)
        return (tmp + (a1 * b1).astype(F32)).astype(F32)


def round_bf16(x: Any) -> Any:
    """f64 (or f32) -> bf16 bits (uint32 in the low 16), nearest even, one rounding
    (through round-to-odd f32), a NaN quieted."""
    from hqval.emu.fparith import round_odd_f32

    x = np.asarray(x, F64)
    bits = round_odd_f32(x).view(np.uint32).astype(np.int64)
    rne = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return np.where(np.isnan(x), ((bits >> 16) | 0x40) & 0xFFFF, rne & 0xFFFF).astype(
        np.uint32)


def bf16_value(bits: Any) -> Any:
    return (np.asarray(bits, np.uint32) << np.uint32(16)).view(F32).astype(F64)


def dot2_f16_f16(a: Any, b: Any, c: Any) -> Any:
    """V_DOT2_F16_F16: ``tmp = S2.f16; tmp += S0[15:0] * S1[15:0]; tmp += S0[31:16] *
    S1[31:16]``, each ``+=`` one rounding to f16 of the exact product plus tmp (the
    pseudocode does not say whether the product rounds first: docs/emu-semantics.md)."""
    a0, a1 = (_half(a, k).astype(np.uint16).view(F16) for k in (0, 1))
    b0, b1 = (_half(b, k).astype(np.uint16).view(F16) for k in (0, 1))
    return fma_f16(a1, b1, fma_f16(a0, b0, np.asarray(c, F16)))


def dot2_bf16_bf16(a: Any, b: Any, c: Any) -> Any:
    """V_DOT2_BF16_BF16, the same order with bf16 roundings: returns bf16 bits.  Each
    bf16 x bf16 product is exact in f64; fma_round keeps the sum's rounding single."""
    a0, a1 = (bf16_value(_half(a, k)) for k in (0, 1))
    b0, b1 = (bf16_value(_half(b, k)) for k in (0, 1))
    t = round_bf16(fma_round(a0, b0, bf16_value(c), F64))
    return round_bf16(fma_round(a1, b1, bf16_value(t), F64))


def _fields(x: Any, bits: int, signed: bool) -> list[Any]:
    x = np.asarray(x, np.int64) & 0xFFFFFFFF
    m = (1 << bits) - 1
    out = []
    for i in range(32 // bits):
        v = (x >> (bits * i)) & m
        if signed:
            v = (v ^ (1 << (bits - 1))) - (1 << (bits - 1))
        out.append(v)
    return out


def int_dot(a: Any, b: Any, c: Any, bits: int, sa: bool, sb: bool, signed_out: bool,
            clamp: bool) -> Any:
    """V_DOT4_I32_IU8 / V_DOT8_I32_IU4 / V_DOT4_U32_U8 / V_DOT8_U32_U4 / V_DOT2_*_*16 (and
    gfx10.3's V_DOT4_I32_I8 ...): ``tmp = S2; tmp += A[i] * B[i]`` over the packed fields,
    exact in int64, then wrapped to 32 bits; ``clamp`` saturates the exact sum instead (LLVM's
    clamp operand of llvm.amdgcn.sdot4 / udot4 / sudot4)."""
    fa, fb = _fields(a, bits, sa), _fields(b, bits, sb)
    acc = np.asarray(c, np.int64)
    acc = ((acc & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000 if signed_out else acc & 0xFFFFFFFF
    for x, y in zip(fa, fb, strict=True):
        acc = acc + x * y
    if clamp:
        lo, hi = (-(2**31), 2**31 - 1) if signed_out else (0, 2**32 - 1)
        acc = np.clip(acc, lo, hi)
    return (acc & 0xFFFFFFFF).astype(np.uint32)


# integer dots: name -> (field bits, A signed, B signed, signed result); None: from neg_lo
_INT_DOT: dict[str, tuple[int, bool | None, bool | None, bool]] = {
    "v_dot4_i32_iu8": (8, None, None, True), "v_dot8_i32_iu4": (4, None, None, True),
    "v_dot4_u32_u8": (8, False, False, False), "v_dot8_u32_u4": (4, False, False, False),
    "v_dot2_u32_u16": (16, False, False, False), "v_dot2_i32_i16": (16, True, True, True),
    "v_dot4_i32_i8": (8, True, True, True), "v_dot8_i32_i4": (4, True, True, True),
}


_PK_F16: dict[str, Callable[..., Any]] = {
    "v_pk_add_f16": lambda a, b: a + b,
    "v_pk_mul_f16": lambda a, b: a * b,
    "v_pk_fma_f16": fma_f16,
    "v_pk_max_f16": lambda a, b: max_isa(a, b, True),
    "v_pk_min_f16": lambda a, b: min_isa(a, b, True),
    "v_pk_max_num_f16": lambda a, b: max_isa(a, b, False),
    "v_pk_min_num_f16": lambda a, b: min_isa(a, b, False),
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
        getters = [_mix_source(srcs[k], raws[k], k, val, opsel[k], opsel_hi[k], neg_lo[k],
                               neg_hi[k]) for k in range(3)]
        g0, g1, g2 = getters
        half_index = 1 if name == "v_fma_mixhi_f16" else 0

        def mix(st: WaveState, w: Sel) -> None:
            # ISA pseudocode: f32 fma, then (mixlo/mixhi) f32_to_f16
            with fp_quiet(invalid="ignore"):  # widening a signalling NaN
                if out == F16 and not clamp:  # both roundings in one call
                    h = mix_f16(g0(st, w), g1(st, w), g2(st, w))
                else:
                    r = fma_round(g0(st, w), g1(st, w), g2(st, w), F32)
                    r = f32_to_f16(r) if out == F16 else r
                    if clamp:
                        r = np.clip(r, 0, 1).astype(out)
                    if out == F32:
                        vwrite(st, w, d, np.asarray(r, F32).view(np.uint32))
                        return
                    h = np.asarray(r, F16).view(np.uint16)
            if isinstance(w, slice):
                # the destination half in place (little-endian: element 1 of each pair
                # of uint16 is the high half); the other half is left as it is
                half = st.V[d][w].view(np.uint16)[..., half_index::2]
                if st.full:
                    np.copyto(half, h)
                else:
                    np.copyto(half, h, where=st.em[w])
                return
            bits = h.astype(np.uint32)
            old = st.V[d][w]
            if name == "v_fma_mixhi_f16":
                new = (old & np.uint32(0xFFFF)) | (bits << np.uint32(16))
            else:
                new = (old & np.uint32(0xFFFF0000)) | bits
            vwrite(st, w, d, new)
        return mix

    if name in _INT_DOT:
        bits, sa, sb, signed_out = _INT_DOT[name]
        a_signed = bool(neg_lo[0]) if sa is None else sa
        b_signed = bool(neg_lo[1]) if sb is None else sb

        def idot(st: WaveState, w: Sel) -> None:
            r = int_dot(raws[0](st, w), raws[1](st, w), raws[2](st, w), bits, a_signed,
                        b_signed, signed_out, clamp)
            vwrite(st, w, d, r)
        return idot

    if name in ("v_dot2_f16_f16", "v_dot2_bf16_bf16"):
        # VOP3 with 16-bit S2 and D: op_sel[2] picks S2's half, op_sel[3] D's half (the
        # other half of D is kept)
        opsel4 = _flags(mods, "op_sel", 0, 4)
        bf = name == "v_dot2_bf16_bf16"
        if any(neg_lo) or any(neg_hi) or ops[1].neg or ops[1].abs or ops[2].neg:
            return None

        def dot16(st: WaveState, w: Sel) -> None:
            a = np.asarray(raws[0](st, w), np.uint32)
            b = np.asarray(raws[1](st, w), np.uint32)
            c = _half(raws[2](st, w), opsel4[2])
            with fp_quiet(all="ignore"):
                if bf:
                    r = dot2_bf16_bf16(a, b, c)
                else:
                    r = dot2_f16_f16(a, b, c.astype(np.uint16).view(F16)).view(np.uint16)
            bits16 = np.asarray(r, np.uint32) & np.uint32(0xFFFF)
            old = st.V[d][w]
            new = ((old & np.uint32(0xFFFF)) | (bits16 << np.uint32(16)) if opsel4[3]
                   else (old & np.uint32(0xFFFF0000)) | bits16)
            vwrite(st, w, d, new)
        return dot16

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
            with fp_quiet(all="ignore"):
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


def _mix_source(op: Operand, raw: Fn, k: int, slow: Callable[[int, WaveState, Sel], Any],
                sel: int, is_f16: int, nlo: int, nhi: int) -> Fn:
    """A v_fma_mix source as f64 (what fma_round widens it to): the f16 half (op_sel) or
    the f32 of a register read in place, |x| for neg_hi, -x for neg_lo.  f16 and f32 widen
    to f64 exactly, so the values equal ``slow``'s (test_packed checks them against it).
    A constant is worked out once with ``slow``."""
    def signs(x: Any) -> Any:
        if nhi:
            x = np.abs(x)
        return -x if nlo else x

    if op.kind == "v":
        r = op.reg
        if is_f16:
            return lambda st, w: signs(st.V[r][w].view(np.uint16)[..., sel::2].view(F16)
                                       .astype(F64))
        return lambda st, w: signs(st.V[r][w].view(F32).astype(F64))
    if op.kind == "s" and op.reg != NULL:
        r = op.reg
        if is_f16:
            return lambda st, w: signs(st.S[r][w].view(np.uint16)[sel::2].view(F16)
                                       .astype(F64))[:, None]
        return lambda st, w: signs(st.S[r][w].view(F32).astype(F64))[:, None]
    const = np.asarray(slow(k, WaveState(1, 1), slice(None)), F64)
    return lambda st, w: const


def _repack(x: Any, sel_lo: int, sel_hi: int, nlo: int, nhi: int) -> Any:
    lo = _half(x, sel_lo)
    hi = _half(x, sel_hi)
    if nlo:
        lo = lo ^ np.uint32(0x8000)
    if nhi:
        hi = hi ^ np.uint32(0x8000)
    return lo | (hi << np.uint32(16))
