"""Vector ALU: VOP1/VOP2/VOP3/VOPC/VOP3P, DPP source swizzles and VOPD dual issue.

Every op is described once by its operand types and a numpy function over the values;
the encodings (``_e32``, ``_e64``, DPP, VOPD halves) only change how operands are read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hqval.codeobject import Instruction
from hqval.emu.errors import EmuError
from hqval.emu.fparith import (
    cvt_f32_to_i32,
    cvt_f32_to_u32,
    f16_to_f32,
    f32_to_f16,
    flush_denormals,
    fma_f16,
    fma_f32,
    fma_f64,
    fp_quiet,
    max_isa,
    maximum_isa,
    min_isa,
    quiet_nan,
)
from hqval.emu.operands import (
    EXEC,
    NULL,
    VCC,
    Ctx,
    Operand,
    Sel,
    WaveState,
    parse_operand,
    swrite,
    vwrite,
)

Fn = Callable[[WaveState, Sel], Any]
M32 = np.int64(0xFFFFFFFF)
F32, F16, F64 = np.float32, np.float16, np.float64

ALIASES = {
    "v_add_u32": "v_add_nc_u32", "v_sub_u32": "v_sub_nc_u32", "v_subrev_u32": "v_subrev_nc_u32",
    "v_add_i32": "v_add_nc_i32", "v_sub_i32": "v_sub_nc_i32",
    "v_cvt_pkrtz_f16_f32": "v_cvt_pk_rtz_f16_f32", "v_mul_lo_i32": "v_mul_lo_u32",
    "v_mad_co_u64_u32": "v_mad_u64_u32", "v_mad_co_i64_i32": "v_mad_i64_i32",
}


def _s32(a: Any) -> Any:
    return np.asarray(a, np.uint32).view(np.int32).astype(np.int64)


def _u32(a: Any) -> Any:
    return np.asarray(a, np.uint32).astype(np.int64)


@dataclass(frozen=True)
class Op:
    dst: str
    srcs: tuple[str, ...]
    fn: Callable[..., Any]


def _cvt_f16(x: Any) -> Any:
    return f32_to_f16(x)


def _rcp_f32(a: Any) -> Any:
    """V_RCP_F32 without denormals in or out: LLVM relies on it (SIISelLowering.cpp,
    lowerFDIV_FAST: "rcp does not support denormals", so |x| > 2^96 is scaled by 2^-32
    first).  rcp(FLT_MAX) = +0, rcp(denormal) = inf, with the operand's sign."""
    a = flush_denormals(np.asarray(a, F32))
    return flush_denormals(F32(1) / a)


def _ldexp(a: Any, b: Any) -> Any:
    # any |exponent| past 2200 over- or underflows every f64 (2^-1074 .. 2^1024)
    return np.ldexp(a, np.clip(b, -2200, 2200).astype(np.int32)).astype(a.dtype)


def _frexp_exp(a: Any) -> Any:
    _, e = np.frexp(a)
    return np.where(np.isfinite(a), e, 0).astype(np.int64)


def _frexp_mant(a: Any) -> Any:
    m, _ = np.frexp(a)
    return np.where(np.isfinite(a), m, a).astype(a.dtype)


def _bfe_u(a: Any, b: Any, c: Any) -> Any:
    off, w = b & 31, c & 31
    return (a >> off) & ((np.int64(1) << w) - 1)


def _bfe_i(a: Any, b: Any, c: Any) -> Any:
    off, w = b & 31, c & 31
    x = (a >> off) & ((np.int64(1) << w) - 1)
    sign = np.int64(1) << np.maximum(w - 1, 0)
    return np.where(w > 0, (x ^ sign) - sign, 0)


def _perm(a: Any, b: Any, sel: Any) -> Any:
    # bytes 0-3 from src1, 4-7 from src0; 8-11 sign fill; 12 zero; 13+ 0xff
    data = (np.asarray(b, np.int64) & M32) | ((np.asarray(a, np.int64) & M32) << 32)
    out = np.zeros(np.broadcast(data, sel).shape, np.int64)

    def signbyte(i: int) -> Any:
        return np.where((data >> (8 * i + 7)) & 1, 0xFF, 0)
    for k in range(4):
        s = (sel >> (8 * k)) & 0xFF
        byte = (data >> (8 * np.minimum(s, 7))) & 0xFF
        byte = np.where(s == 8, signbyte(1), byte)
        byte = np.where(s == 9, signbyte(3), byte)
        byte = np.where(s == 10, signbyte(5), byte)
        byte = np.where(s == 11, signbyte(7), byte)
        byte = np.where(s == 12, 0, byte)
        byte = np.where(s > 12, 0xFF, byte)
        out |= byte << (8 * k)
    return out


def _med3(a: Any, b: Any, c: Any) -> Any:
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def _med3_float(ieee: bool) -> Callable[[Any, Any, Any], Any]:
    """V_MED3_F32/F16 (``ieee``) and V_MED3_NUM_F32/F16 (RDNA3/RDNA4 pseudocode): any NaN
    operand takes the v_min3 path, so med3(qNaN, 1, 2) = 1; otherwise the v_max of the two
    operands that are not the v_max3."""
    def med3(a: Any, b: Any, c: Any) -> Any:
        a, b, c = np.broadcast_arrays(np.asarray(a), np.asarray(b), np.asarray(c))
        mx = max_isa(max_isa(a, b, ieee), c, ieee)
        r = np.where(mx == a, max_isa(b, c, ieee),
                     np.where(mx == b, max_isa(a, c, ieee), max_isa(a, b, ieee)))
        nan = np.isnan(a) | np.isnan(b) | np.isnan(c)
        return np.where(nan, min_isa(min_isa(a, b, ieee), c, ieee), r).astype(a.dtype)
    return med3


def _max(ieee: bool) -> Callable[[Any, Any], Any]:
    return lambda a, b: max_isa(a, b, ieee)


def _min(ieee: bool) -> Callable[[Any, Any], Any]:
    return lambda a, b: min_isa(a, b, ieee)


def _max3(ieee: bool) -> Callable[[Any, Any, Any], Any]:
    return lambda a, b, c: max_isa(max_isa(a, b, ieee), c, ieee)


def _min3(ieee: bool) -> Callable[[Any, Any, Any], Any]:
    return lambda a, b, c: min_isa(min_isa(a, b, ieee), c, ieee)


def _exponent(x: Any) -> Any:
    """Biased exponent field of an f32 (ISA ``exponent()``)."""
    return (np.asarray(x, F32).view(np.uint32) >> np.uint32(23)).astype(np.int64) & 0xFF


def _div_fixup(a: Any, b: Any, c: Any) -> Any:
    """V_DIV_FIXUP_F32 (ISA pseudocode): a quotient estimate, b denominator, c numerator."""
    a, b, c = (np.asarray(v, F32) for v in (a, b, c))
    shape = np.broadcast(a, b, c).shape
    a, b, c = (np.broadcast_to(v, shape) for v in (a, b, c))
    sign = np.signbit(b) ^ np.signbit(c)
    inf = np.where(sign, F32(-np.inf), F32(np.inf))
    zero = np.where(sign, F32(-0.0), F32(0.0))

    def quiet(v: Any) -> Any:
        return (v.view(np.uint32) | np.uint32(0x400000)).view(F32)
    qnan = np.array(0xFFC00000, np.uint32).view(F32)
    # last branch: D0.f32 = sign_out ? -abs(S0.f32) : abs(S0.f32); a NaN S0 stays NaN
    mag = np.where(sign, -np.abs(a), np.abs(a))
    conds = [np.isnan(c), np.isnan(b), (b == 0) & (c == 0), np.isinf(b) & np.isinf(c),
             (b == 0) | np.isinf(c), np.isinf(b) | (c == 0),
             _exponent(c) - _exponent(b) < -150]
    choices = [quiet(c), quiet(b), np.broadcast_to(qnan, shape),
               np.broadcast_to(qnan, shape), inf, zero, zero]
    return np.select(conds, choices, mag).astype(F32)


def _div_fmas(a: Any, b: Any, c: Any, vcc: Any) -> Any:
    """V_DIV_FMAS_F32: fma, and where VCC is set the result scaled by 2^64 when
    exponent(c) > 127 else by 2^-64 (undoing v_div_scale), rounded once."""
    from hqval.emu.packed import fma_round

    exact = fma_round(a, b, c, F64)  # round-to-odd in f64: a second rounding is exact
    scale = np.where(_exponent(c) > 127, 64, -64)
    scaled = np.where(vcc, np.ldexp(exact, scale), exact)
    return scaled.astype(F32)


OPS: dict[str, Op] = {
    # moves and bit ops
    "v_mov_b32": Op("b32", ("b32",), lambda a: a),
    "v_not_b32": Op("b32", ("b32",), lambda a: ~a & M32),
    "v_bfrev_b32": Op("b32", ("b32",), lambda a: _bits_rev(a)),
    "v_and_b32": Op("b32", ("b32", "b32"), lambda a, b: a & b),
    "v_or_b32": Op("b32", ("b32", "b32"), lambda a, b: a | b),
    "v_xor_b32": Op("b32", ("b32", "b32"), lambda a, b: a ^ b),
    "v_xnor_b32": Op("b32", ("b32", "b32"), lambda a, b: ~(a ^ b) & M32),
    "v_or3_b32": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: a | b | c),
    "v_xor3_b32": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: a ^ b ^ c),
    "v_and_or_b32": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: (a & b) | c),
    "v_lshlrev_b32": Op("b32", ("b32", "b32"), lambda a, b: (b << (a & 31)) & M32),
    "v_lshrrev_b32": Op("b32", ("b32", "b32"), lambda a, b: b >> (a & 31)),
    "v_ashrrev_i32": Op("b32", ("b32", "i32"), lambda a, b: b >> (a & 31)),
    "v_lshl_or_b32": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: ((a << (b & 31)) & M32) | c),
    "v_lshl_add_u32": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: (a << (b & 31)) + c),
    "v_add_lshl_u32": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: (a + b) << (c & 31)),
    "v_xad_u32": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: (a ^ b) + c),
    "v_add3_u32": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: a + b + c),
    "v_bfe_u32": Op("b32", ("b32", "b32", "b32"), _bfe_u),
    "v_bfe_i32": Op("b32", ("i32", "b32", "b32"), _bfe_i),
    "v_bfi_b32": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: (a & b) | (~a & M32 & c)),
    "v_bfm_b32": Op("b32", ("b32", "b32"), lambda a, b: (((1 << (a & 31)) - 1) << (b & 31)) & M32),
    "v_alignbit_b32": Op("b32", ("b32", "b32", "b32"),
                         lambda a, b, c: ((a << 32 | b) >> (c & 31)) & M32),
    "v_alignbyte_b32": Op("b32", ("b32", "b32", "b32"),
                          lambda a, b, c: ((a << 32 | b) >> (8 * (c & 3))) & M32),
    "v_perm_b32": Op("b32", ("b32", "b32", "b32"), _perm),
    "v_bcnt_u32_b32": Op("b32", ("b32", "b32"), lambda a, b: _popcnt(a) + b),
    "v_cndmask_b32": Op("b32", ("b32", "b32", "mask"), lambda a, b, m: np.where(m, b, a)),
    # integer arithmetic
    "v_add_nc_u32": Op("b32", ("b32", "b32"), lambda a, b: a + b),
    "v_sub_nc_u32": Op("b32", ("b32", "b32"), lambda a, b: a - b),
    "v_subrev_nc_u32": Op("b32", ("b32", "b32"), lambda a, b: b - a),
    "v_add_nc_i32": Op("b32", ("i32", "i32"), lambda a, b: a + b),
    "v_sub_nc_i32": Op("b32", ("i32", "i32"), lambda a, b: a - b),
    "v_mul_lo_u32": Op("b32", ("b32", "b32"), lambda a, b: (a * b) & M32),
    "v_mul_hi_u32": Op("b32", ("b32", "b32"), lambda a, b: _mulhi_u(a, b)),
    "v_mul_hi_i32": Op("b32", ("i32", "i32"), lambda a, b: (a * b) >> 32),
    "v_mul_u32_u24": Op("b32", ("b32", "b32"), lambda a, b: ((a & 0xFFFFFF) * (b & 0xFFFFFF))),
    "v_mul_hi_u32_u24": Op("b32", ("b32", "b32"),
                           lambda a, b: ((a & 0xFFFFFF) * (b & 0xFFFFFF)) >> 32),
    "v_mul_i32_i24": Op("b32", ("b32", "b32"), lambda a, b: _s24(a) * _s24(b)),
    "v_mad_u32_u24": Op("b32", ("b32", "b32", "b32"),
                        lambda a, b, c: (a & 0xFFFFFF) * (b & 0xFFFFFF) + c),
    "v_mad_i32_i24": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: _s24(a) * _s24(b) + c),
    "v_mad_u32_u16": Op("b32", ("b32", "b32", "b32"),
                        lambda a, b, c: (a & 0xFFFF) * (b & 0xFFFF) + c),
    "v_min_u32": Op("b32", ("b32", "b32"), np.minimum),
    "v_max_u32": Op("b32", ("b32", "b32"), np.maximum),
    "v_min_i32": Op("b32", ("i32", "i32"), np.minimum),
    "v_max_i32": Op("b32", ("i32", "i32"), np.maximum),
    "v_med3_i32": Op("b32", ("i32", "i32", "i32"), _med3),
    "v_maxmin_i32": Op("b32", ("i32", "i32", "i32"),
                       lambda a, b, c: np.minimum(np.maximum(a, b), c)),
    "v_minmax_i32": Op("b32", ("i32", "i32", "i32"),
                       lambda a, b, c: np.maximum(np.minimum(a, b), c)),
    "v_maxmin_u32": Op("b32", ("b32", "b32", "b32"),
                       lambda a, b, c: np.minimum(np.maximum(a, b), c)),
    "v_minmax_u32": Op("b32", ("b32", "b32", "b32"),
                       lambda a, b, c: np.maximum(np.minimum(a, b), c)),
    "v_med3_i16": Op("b16", ("i16", "i16", "i16"), _med3),
    "v_med3_u16": Op("b16", ("u16", "u16", "u16"), _med3),
    "v_max3_i16": Op("b16", ("i16", "i16", "i16"), lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_i16": Op("b16", ("i16", "i16", "i16"), lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_max3_u16": Op("b16", ("u16", "u16", "u16"), lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_u16": Op("b16", ("u16", "u16", "u16"), lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_mad_i16": Op("b16", ("i16", "i16", "i16"), lambda a, b, c: a * b + c),
    "v_mad_i32_i16": Op("b32", ("i16", "i16", "i32"), lambda a, b, c: a * b + c),
    "v_mul_hi_i32_i24": Op("b32", ("b32", "b32"), lambda a, b: (_s24(a) * _s24(b)) >> 32),
    "v_cvt_i32_i16": Op("b32", ("i16",), lambda a: a),
    "v_cvt_u32_u16": Op("b32", ("u16",), lambda a: a),
    "v_mov_b16": Op("b16", ("u16",), lambda a: a),
    "v_not_b16": Op("b16", ("u16",), lambda a: ~a & 0xFFFF),
    "v_cls_i32": Op("b32", ("b32",), lambda a: _cls(a)),
    "v_med3_u32": Op("b32", ("b32", "b32", "b32"), _med3),
    "v_max3_i32": Op("b32", ("i32", "i32", "i32"), lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_i32": Op("b32", ("i32", "i32", "i32"), lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_max3_u32": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_u32": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_sad_u32": Op("b32", ("b32", "b32", "b32"), lambda a, b, c: np.abs(a - b) + c),
    "v_ffbh_u32": Op("b32", ("b32",), lambda a: _ffbh(a)),
    # v_flbit_i32: first bit from the MSB that differs from the sign bit; -1 for 0 and -1
    "v_ffbh_i32": Op("b32", ("b32",), lambda a: _ffbh_i32(a)),
    "v_clz_i32_u32": Op("b32", ("b32",), lambda a: _ffbh(a)),
    "v_ffbl_b32": Op("b32", ("b32",), lambda a: _ffbl(a)),
    "v_ctz_i32_b32": Op("b32", ("b32",), lambda a: _ffbl(a)),
    # f32
    "v_add_f32": Op("f32", ("f32", "f32"), lambda a, b: a + b),
    "v_sub_f32": Op("f32", ("f32", "f32"), lambda a, b: a - b),
    "v_subrev_f32": Op("f32", ("f32", "f32"), lambda a, b: b - a),
    "v_mul_f32": Op("f32", ("f32", "f32"), lambda a, b: a * b),
    "v_mul_legacy_f32": Op("f32", ("f32", "f32"),
                           lambda a, b: np.where((a == 0) | (b == 0), F32(0), a * b)),
    "v_fma_f32": Op("f32", ("f32", "f32", "f32"), fma_f32),
    "v_fmac_f32": Op("f32", ("f32", "f32", "dst_f32"), fma_f32),
    "v_fmamk_f32": Op("f32", ("f32", "f32", "f32"), lambda a, k, b: fma_f32(a, k, b)),
    "v_fmaak_f32": Op("f32", ("f32", "f32", "f32"), fma_f32),
    "v_max_f32": Op("f32", ("f32", "f32"), _max(True)),
    "v_min_f32": Op("f32", ("f32", "f32"), _min(True)),
    "v_max_num_f32": Op("f32", ("f32", "f32"), _max(False)),
    "v_min_num_f32": Op("f32", ("f32", "f32"), _min(False)),
    "v_maximum_f32": Op("f32", ("f32", "f32"), maximum_isa),
    "v_minimum_f32": Op("f32", ("f32", "f32"), lambda a, b: maximum_isa(a, b, False)),
    "v_max3_f32": Op("f32", ("f32", "f32", "f32"), _max3(True)),
    "v_min3_f32": Op("f32", ("f32", "f32", "f32"), _min3(True)),
    "v_med3_f32": Op("f32", ("f32", "f32", "f32"), _med3_float(True)),
    "v_max3_num_f32": Op("f32", ("f32", "f32", "f32"), _max3(False)),
    "v_min3_num_f32": Op("f32", ("f32", "f32", "f32"), _min3(False)),
    "v_med3_num_f32": Op("f32", ("f32", "f32", "f32"), _med3_float(False)),
    "v_max3_f16": Op("f16", ("f16", "f16", "f16"), _max3(True)),
    "v_min3_f16": Op("f16", ("f16", "f16", "f16"), _min3(True)),
    "v_med3_f16": Op("f16", ("f16", "f16", "f16"), _med3_float(True)),
    "v_max3_num_f16": Op("f16", ("f16", "f16", "f16"), _max3(False)),
    "v_min3_num_f16": Op("f16", ("f16", "f16", "f16"), _min3(False)),
    "v_med3_num_f16": Op("f16", ("f16", "f16", "f16"), _med3_float(False)),
    # V_MAXMIN_F32: "D0.f32 = v_min_f32(v_max_f32(S0.f32, S1.f32), S2.f32)"; MINMAX the
    # other way round (gfx11; gfx12's _num_ forms use the NUM max/min)
    "v_maxmin_f32": Op("f32", ("f32", "f32", "f32"),
                       lambda a, b, c: min_isa(max_isa(a, b), c)),
    "v_minmax_f32": Op("f32", ("f32", "f32", "f32"),
                       lambda a, b, c: max_isa(min_isa(a, b), c)),
    "v_maxmin_num_f32": Op("f32", ("f32", "f32", "f32"),
                           lambda a, b, c: min_isa(max_isa(a, b, False), c, False)),
    "v_minmax_num_f32": Op("f32", ("f32", "f32", "f32"),
                           lambda a, b, c: max_isa(min_isa(a, b, False), c, False)),
    "v_maxmin_f16": Op("f16", ("f16", "f16", "f16"),
                       lambda a, b, c: min_isa(max_isa(a, b), c)),
    "v_minmax_f16": Op("f16", ("f16", "f16", "f16"),
                       lambda a, b, c: max_isa(min_isa(a, b), c)),
    "v_maxmin_num_f16": Op("f16", ("f16", "f16", "f16"),
                           lambda a, b, c: min_isa(max_isa(a, b, False), c, False)),
    "v_minmax_num_f16": Op("f16", ("f16", "f16", "f16"),
                           lambda a, b, c: max_isa(min_isa(a, b, False), c, False)),
    "v_rcp_f32": Op("f32", ("f32",), _rcp_f32),
    "v_rcp_iflag_f32": Op("f32", ("f32",), _rcp_f32),
    "v_rsq_f32": Op("f32", ("f32",), lambda a: (1.0 / np.sqrt(a.astype(F64))).astype(F32)),
    "v_sqrt_f32": Op("f32", ("f32",), np.sqrt),
    "v_exp_f32": Op("f32", ("f32",), lambda a: np.exp2(a.astype(F64)).astype(F32)),
    "v_log_f32": Op("f32", ("f32",), lambda a: np.log2(a.astype(F64)).astype(F32)),
    "v_sin_f32": Op("f32", ("f32",), lambda a: np.sin(2 * np.pi * a.astype(F64)).astype(F32)),
    "v_cos_f32": Op("f32", ("f32",), lambda a: np.cos(2 * np.pi * a.astype(F64)).astype(F32)),
    "v_floor_f32": Op("f32", ("f32",), np.floor),
    "v_ceil_f32": Op("f32", ("f32",), np.ceil),
    "v_trunc_f32": Op("f32", ("f32",), np.trunc),
    "v_rndne_f32": Op("f32", ("f32",), np.rint),
    "v_fract_f32": Op("f32", ("f32",), lambda a: np.where(
        np.isinf(a), F32(np.nan), np.minimum(a - np.floor(a), F32(0.99999994)))),
    "v_ldexp_f32": Op("f32", ("f32", "i32"), _ldexp),
    "v_frexp_exp_i32_f32": Op("b32", ("f32",), _frexp_exp),
    "v_frexp_mant_f32": Op("f32", ("f32",), _frexp_mant),
    "v_div_fixup_f32": Op("f32", ("f32", "f32", "f32"), _div_fixup),
    "v_div_fmas_f32": Op("f32", ("f32", "f32", "f32", "vcc"), _div_fmas),
    # conversions
    "v_cvt_f32_u32": Op("f32", ("b32",), lambda a: a.astype(F32)),
    "v_cvt_f32_i32": Op("f32", ("i32",), lambda a: a.astype(F32)),
    "v_cvt_u32_f32": Op("u32raw", ("f32",), cvt_f32_to_u32),
    "v_cvt_i32_f32": Op("u32raw", ("f32",), cvt_f32_to_i32),
    "v_cvt_f32_ubyte0": Op("f32", ("b32",), lambda a: (a & 0xFF).astype(F32)),
    "v_cvt_f32_ubyte1": Op("f32", ("b32",), lambda a: ((a >> 8) & 0xFF).astype(F32)),
    "v_cvt_f32_ubyte2": Op("f32", ("b32",), lambda a: ((a >> 16) & 0xFF).astype(F32)),
    "v_cvt_f32_ubyte3": Op("f32", ("b32",), lambda a: ((a >> 24) & 0xFF).astype(F32)),
    "v_cvt_f32_f16": Op("f32", ("f16",), f16_to_f32),
    "v_cvt_f16_f32": Op("f16z", ("f32",), _cvt_f16),
    "v_cvt_f64_f32": Op("f64", ("f32",), lambda a: a.astype(F64)),
    "v_cvt_f32_f64": Op("f32", ("f64",), lambda a: a.astype(F32)),
    "v_cvt_f64_i32": Op("f64", ("i32",), lambda a: a.astype(F64)),
    "v_cvt_f64_u32": Op("f64", ("b32",), lambda a: a.astype(F64)),
    "v_cvt_pk_rtz_f16_f32": Op("b32", ("f32", "f32"), lambda a, b: _pk_rtz(a, b)),
    "v_pack_b32_f16": Op("b32", ("f16", "f16"),
                         lambda a, b: _h16(a) | (_h16(b) << 16)),
    "v_cvt_pk_u8_f32": Op("b32", ("f32", "b32", "b32"), lambda a, b, c: _pk_u8(a, b, c)),
    # f16 (result in the low half; gfx10+ keeps the high half)
    "v_add_f16": Op("f16", ("f16", "f16"), lambda a, b: a + b),
    "v_sub_f16": Op("f16", ("f16", "f16"), lambda a, b: a - b),
    "v_subrev_f16": Op("f16", ("f16", "f16"), lambda a, b: b - a),
    "v_mul_f16": Op("f16", ("f16", "f16"), lambda a, b: a * b),
    "v_fma_f16": Op("f16", ("f16", "f16", "f16"), fma_f16),
    "v_fmac_f16": Op("f16", ("f16", "f16", "dst_f16"), fma_f16),
    "v_max_f16": Op("f16", ("f16", "f16"), _max(True)),
    "v_min_f16": Op("f16", ("f16", "f16"), _min(True)),
    "v_max_num_f16": Op("f16", ("f16", "f16"), _max(False)),
    "v_min_num_f16": Op("f16", ("f16", "f16"), _min(False)),
    # V_LDEXP_F16: "S0.f16 * 16'F(2.0F ** 32'I(S1.i16))": the exponent is S1's low half
    "v_ldexp_f16": Op("f16", ("f16", "i16"), _ldexp),
    "v_rcp_f16": Op("f16z", ("f16",), lambda a: (1.0 / a.astype(F32)).astype(F16)),
    "v_sqrt_f16": Op("f16z", ("f16",), lambda a: np.sqrt(a.astype(F32)).astype(F16)),
    # 16-bit integer (result in the low half; gfx10+ keeps the high half)
    "v_add_nc_u16": Op("b16", ("u16", "u16"), lambda a, b: a + b),
    "v_sub_nc_u16": Op("b16", ("u16", "u16"), lambda a, b: a - b),
    "v_add_nc_i16": Op("b16", ("i16", "i16"), lambda a, b: a + b),
    "v_sub_nc_i16": Op("b16", ("i16", "i16"), lambda a, b: a - b),
    "v_mul_lo_u16": Op("b16", ("u16", "u16"), lambda a, b: a * b),
    "v_lshlrev_b16": Op("b16", ("u16", "u16"), lambda a, b: b << (a & 15)),
    "v_lshrrev_b16": Op("b16", ("u16", "u16"), lambda a, b: b >> (a & 15)),
    "v_ashrrev_i16": Op("b16", ("u16", "i16"), lambda a, b: b >> (a & 15)),
    "v_max_u16": Op("b16", ("u16", "u16"), np.maximum),
    "v_min_u16": Op("b16", ("u16", "u16"), np.minimum),
    "v_max_i16": Op("b16", ("i16", "i16"), np.maximum),
    "v_min_i16": Op("b16", ("i16", "i16"), np.minimum),
    "v_mad_u16": Op("b16", ("u16", "u16", "u16"), lambda a, b, c: a * b + c),
    "v_cvt_f16_u16": Op("f16z", ("u16",), lambda a: a.astype(F16)),
    "v_cvt_f16_i16": Op("f16z", ("i16",), lambda a: a.astype(F16)),
    "v_cvt_u16_f16": Op("b16", ("f16",), lambda a: np.clip(np.nan_to_num(np.trunc(
        a.astype(F32)), nan=0), 0, 65535).astype(np.int64)),
    "v_cvt_i16_f16": Op("b16", ("f16",), lambda a: np.clip(np.nan_to_num(np.trunc(
        a.astype(F32)), nan=0), -32768, 32767).astype(np.int64)),
    "v_cvt_f32_f16_hi": Op("f32", ("f16",), f16_to_f32),
    "v_div_fixup_f16": Op("f16", ("f16", "f16", "f16"), lambda a, b, c: _div_fixup_f16(a, b, c)),
    "v_floor_f16": Op("f16z", ("f16",), np.floor),
    "v_ceil_f16": Op("f16z", ("f16",), np.ceil),
    "v_trunc_f16": Op("f16z", ("f16",), np.trunc),
    "v_rndne_f16": Op("f16z", ("f16",), np.rint),
    "v_exp_f16": Op("f16z", ("f16",), lambda a: np.exp2(a.astype(F32)).astype(F16)),
    "v_log_f16": Op("f16z", ("f16",), lambda a: np.log2(a.astype(F32)).astype(F16)),
    "v_rsq_f16": Op("f16z", ("f16",), lambda a: (1 / np.sqrt(a.astype(F32))).astype(F16)),
    # f64 extras, incl. the division sequence
    "v_ldexp_f64": Op("f64", ("f64", "i32"), _ldexp),
    "v_rsq_f64": Op("f64", ("f64",), lambda a: 1.0 / np.sqrt(a)),
    "v_sqrt_f64": Op("f64", ("f64",), np.sqrt),
    "v_floor_f64": Op("f64", ("f64",), np.floor),
    "v_ceil_f64": Op("f64", ("f64",), np.ceil),
    "v_trunc_f64": Op("f64", ("f64",), np.trunc),
    "v_rndne_f64": Op("f64", ("f64",), np.rint),
    "v_fract_f64": Op("f64", ("f64",), lambda a: np.where(
        np.isinf(a), np.nan, np.minimum(a - np.floor(a), np.nextafter(1.0, 0.0)))),
    "v_frexp_exp_i32_f64": Op("b32", ("f64",), _frexp_exp),
    "v_frexp_mant_f64": Op("f64", ("f64",), _frexp_mant),
    "v_cvt_i32_f64": Op("u32raw", ("f64",), lambda a: _cvt_f64_int(a, -(2.0**31), 2.0**31 - 1)),
    "v_cvt_u32_f64": Op("u32raw", ("f64",), lambda a: _cvt_f64_int(a, 0.0, 2.0**32 - 1)),
    "v_div_fixup_f64": Op("f64", ("f64", "f64", "f64"), lambda a, b, c: _div_fixup_f64(a, b, c)),
    "v_div_fmas_f64": Op("f64", ("f64", "f64", "f64", "vcc"), lambda a, b, c, v: _div_fmas_f64(
        a, b, c, v)),
    "v_cvt_floor_i32_f32": Op("u32raw", ("f32",), lambda a: cvt_f32_to_i32(np.floor(a))),
    "v_cvt_flr_i32_f32": Op("u32raw", ("f32",), lambda a: cvt_f32_to_i32(np.floor(a))),
    "v_cvt_nearest_i32_f32": Op("u32raw", ("f32",),
                                lambda a: cvt_f32_to_i32(np.floor(a + F32(0.5)))),
    "v_cvt_rpi_i32_f32": Op("u32raw", ("f32",),
                            lambda a: cvt_f32_to_i32(np.floor(a + F32(0.5)))),
    # dot2 accumulating into the destination (gfx10.3 v_dot2c, gfx11+ v_dot2acc, VOPD)
    "v_dot2c_f32_f16": Op("f32", ("b32", "b32", "dst_f32"), lambda a, b, c: _dot2(a, b, c)),
    "v_dot2acc_f32_f16": Op("f32", ("b32", "b32", "dst_f32"), lambda a, b, c: _dot2(a, b, c)),
    # gfx10.3 integer dots accumulating into the destination (VOP2)
    "v_dot4c_i32_i8": Op("b32", ("b32", "b32", "dst_b32"),
                         lambda a, b, c: _int_dot(a, b, c, 8)),
    "v_dot2c_i32_i16": Op("b32", ("b32", "b32", "dst_b32"),
                          lambda a, b, c: _int_dot(a, b, c, 16)),
    "v_dot8c_i32_i4": Op("b32", ("b32", "b32", "dst_b32"),
                         lambda a, b, c: _int_dot(a, b, c, 4)),
    # f64
    "v_add_f64": Op("f64", ("f64", "f64"), lambda a, b: a + b),
    "v_mul_f64": Op("f64", ("f64", "f64"), lambda a, b: a * b),
    "v_fma_f64": Op("f64", ("f64", "f64", "f64"), fma_f64),
    "v_max_f64": Op("f64", ("f64", "f64"), _max(True)),
    "v_min_f64": Op("f64", ("f64", "f64"), _min(True)),
    "v_max_num_f64": Op("f64", ("f64", "f64"), _max(False)),
    "v_min_num_f64": Op("f64", ("f64", "f64"), _min(False)),
    "v_rcp_f64": Op("f64", ("f64",), lambda a: 1.0 / a),
    # 64-bit integer
    "v_lshlrev_b64": Op("b64", ("b32", "b64"), lambda a, b: b << (np.uint64(a) & np.uint64(63))),
    "v_lshrrev_b64": Op("b64", ("b32", "b64"), lambda a, b: b >> (np.uint64(a) & np.uint64(63))),
    "v_ashrrev_i64": Op("b64", ("b32", "b64"), lambda a, b: (
        b.view(np.int64) >> (np.asarray(a, np.int64) & 63)).view(np.uint64)),
    "v_lshl_add_u64": Op("b64", ("b64", "b32", "b64"),
                         lambda a, s, c: (a << (np.uint64(s) & np.uint64(7))) + c),
    "v_add_nc_u64": Op("b64", ("b64", "b64"), lambda a, b: a + b),
}


def _cvt_f64_int(a: Any, lo: float, hi: float) -> Any:
    r = np.trunc(np.nan_to_num(np.asarray(a, F64), nan=0.0, posinf=hi, neginf=lo))
    return np.clip(r, lo, hi).astype(np.int64).astype(np.uint32)


def _exponent64(x: Any) -> Any:
    return (np.asarray(x, F64).view(np.uint64) >> np.uint64(52)).astype(np.int64) & 0x7FF


def _div_fixup_f64(a: Any, b: Any, c: Any) -> Any:
    """V_DIV_FIXUP_F64 (ISA pseudocode)."""
    a, b, c = (np.asarray(v, F64) for v in (a, b, c))
    shape = np.broadcast(a, b, c).shape
    a, b, c = (np.broadcast_to(v, shape) for v in (a, b, c))
    sign = np.signbit(b) ^ np.signbit(c)
    inf = np.where(sign, -np.inf, np.inf)
    zero = np.where(sign, -0.0, 0.0)
    qnan = np.array(0xFFF8000000000000, np.uint64).view(F64)
    mag = np.where(sign, -np.abs(a), np.abs(a))
    conds = [np.isnan(c), np.isnan(b), (b == 0) & (c == 0), np.isinf(b) & np.isinf(c),
             (b == 0) | np.isinf(c), np.isinf(b) | (c == 0),
             _exponent64(c) - _exponent64(b) < -1075]
    choices = [quiet_nan(c), quiet_nan(b), np.broadcast_to(qnan, shape),
               np.broadcast_to(qnan, shape), inf, zero, zero]
    return np.select(conds, choices, mag).astype(F64)


def _div_fmas_f64(a: Any, b: Any, c: Any, vcc: Any) -> Any:
    r = fma_f64(a, b, c)
    scale = np.where(_exponent64(c) > 1023, 128, -128)
    return np.where(vcc, np.ldexp(r, scale), r).astype(F64)


def _div_fixup_f16(a: Any, b: Any, c: Any) -> Any:
    """V_DIV_FIXUP_F16 (ISA pseudocode; no underflow/overflow cases)."""
    a, b, c = (np.asarray(v, F16) for v in (a, b, c))
    shape = np.broadcast(a, b, c).shape
    a, b, c = (np.broadcast_to(v, shape) for v in (a, b, c))
    sign = np.signbit(b) ^ np.signbit(c)
    inf = np.where(sign, F16(-np.inf), F16(np.inf))
    zero = np.where(sign, F16(-0.0), F16(0.0))
    qnan = np.array(0xFE00, np.uint16).view(F16)
    mag = np.where(sign, -np.abs(a), np.abs(a))
    conds = [np.isnan(c), np.isnan(b), (b == 0) & (c == 0), np.isinf(b) & np.isinf(c),
             (b == 0) | np.isinf(c), np.isinf(b) | (c == 0)]
    choices = [quiet_nan(c), quiet_nan(b), np.broadcast_to(qnan, shape),
               np.broadcast_to(qnan, shape), inf, zero]
    return np.select(conds, choices, mag).astype(F16)


def _dot2(a: Any, b: Any, c: Any) -> Any:
    from hqval.emu.packed import dot2_f32_f16

    return dot2_f32_f16(np.asarray(a, np.int64).astype(np.uint32),
                        np.asarray(b, np.int64).astype(np.uint32), c)


def _int_dot(a: Any, b: Any, c: Any, bits: int) -> Any:
    from hqval.emu.packed import int_dot

    return int_dot(a, b, c, bits, True, True, True, False).astype(np.int64)


def _h16(a: Any) -> Any:
    return np.asarray(a, F16).view(np.uint16).astype(np.int64)


def _pk_rtz(a: Any, b: Any) -> Any:
    return _h16(_rtz_f16(a)) | (_h16(_rtz_f16(b)) << 16)


def _rtz_f16(a: Any) -> Any:
    r = f32_to_f16(a)
    over = np.abs(r.astype(F32)) > np.abs(a)
    toward0 = np.nextafter(r, F16(0))
    return np.where(over & np.isfinite(a), toward0, r)


def _pk_u8(a: Any, b: Any, c: Any) -> Any:
    byte = np.clip(np.rint(np.nan_to_num(a)), 0, 255).astype(np.int64)
    sh = 8 * (b & 3)
    return (c & ~(0xFF << sh) & M32) | (byte << sh)


def _mulhi_u(a: Any, b: Any) -> Any:
    a = np.asarray(a, np.uint64)
    b = np.asarray(b, np.uint64)
    return ((a * b) >> np.uint64(32)).astype(np.int64)


def _s24(a: Any) -> Any:
    a = np.asarray(a, np.int64) & 0xFFFFFF
    return (a ^ 0x800000) - 0x800000


def _popcnt(a: Any) -> Any:
    a = np.atleast_1d(np.asarray(a, np.int64)).astype("<u4")
    return np.unpackbits(a.view(np.uint8).reshape(*a.shape, 4), axis=-1).sum(-1).astype(np.int64)


def _bits_rev(a: Any) -> Any:
    # an inline-constant operand is 0-d: the byte view needs at least one axis
    a = np.atleast_1d(np.asarray(a, np.int64)).astype("<u4")
    b = np.unpackbits(a.view(np.uint8).reshape(*a.shape, 4), axis=-1, bitorder="little")
    return np.packbits(b[..., ::-1], axis=-1, bitorder="little").view("<u4")[..., 0] \
        .astype(np.int64)


def _cls(a: Any) -> Any:
    """V_CLS_I32: "for i in 1 : 31 do if S0.i32[31 - i] != S0.i32[31] then D0.i32 = i":
    the count of leading bits equal to the sign bit; -1 when all 32 are equal."""
    a = np.asarray(a, np.int64) & M32
    return _ffbh(np.where(a >> 31, ~a & M32, a))  # sign bits of a = leading zeros of x


def _ffbh(a: Any) -> Any:
    a = np.asarray(a, np.int64)
    hi = np.floor(np.log2(np.maximum(a, 1))).astype(np.int64)
    return np.where(a == 0, M32, 31 - hi)


def _ffbh_i32(a: Any) -> Any:
    a = np.asarray(a, np.int64)
    return _ffbh(np.where(a & 0x80000000, a ^ M32, a))


def _ffbl(a: Any) -> Any:
    a = np.asarray(a, np.int64)
    low = a & -a
    return np.where(a == 0, M32, np.log2(np.maximum(low, 1)).astype(np.int64))


# ----------------------------------------------------------------------------- operands

def _bits16(x: Any, high: bool) -> Any:
    return ((x >> np.uint32(16)) if high else x) & np.uint32(0xFFFF)


def _vsrc32(op: Operand, width: int = 32, is_float: bool = False) -> Fn:
    """Getter for a raw VALU source: uint32 [n, lanes] (or [n, 1] / scalar)."""
    if op.kind == "v":
        r = op.reg
        if width == 64:
            return lambda st, w: (st.V[r][w].astype(np.uint64)
                                  | (st.V[r + 1][w].astype(np.uint64) << np.uint64(32)))
        return lambda st, w: st.V[r][w]
    if op.kind == "s":
        r = op.reg
        if r == NULL:
            z = np.array(0, np.uint64 if width == 64 else np.uint32)
            return lambda st, w: z
        if width == 64:
            return lambda st, w: (st.S[r][w].astype(np.uint64)
                                  | (st.S[r + 1][w].astype(np.uint64) << np.uint64(32)))[:, None]
        return lambda st, w: st.S[r][w][:, None]
    c = np.array(op.bits(width, is_float), np.uint64 if width == 64 else np.uint32)
    return lambda st, w: c


def _typed(raw: Fn, t: str, op: Operand, opsel_hi: bool = False) -> Fn:
    """Turn a raw getter into one returning values of type ``t`` with abs/neg applied."""
    neg, ab = op.neg, op.abs
    high = op.high or opsel_hi
    if t in ("f32", "dst_f32"):
        def g(st: WaveState, w: Sel) -> Any:
            return np.asarray(raw(st, w), np.uint32).view(F32)
        base = g
    elif t in ("f16", "dst_f16"):
        def g16(st: WaveState, w: Sel) -> Any:
            return _bits16(np.asarray(raw(st, w), np.uint32), high).astype(np.uint16).view(F16)
        base = g16
    elif t == "f64":
        def g64(st: WaveState, w: Sel) -> Any:
            return np.asarray(raw(st, w), np.uint64).view(F64)
        base = g64
    elif t == "u16":
        return lambda st, w: _bits16(np.asarray(raw(st, w), np.uint32), high).astype(np.int64)
    elif t == "i16":
        return lambda st, w: ((_bits16(np.asarray(raw(st, w), np.uint32), high).astype(np.int64)
                               ^ 0x8000) - 0x8000)
    elif t == "i32":
        return lambda st, w: _s32(raw(st, w))
    elif t in ("b32", "dst_b32"):
        if ab or neg:
            # VOP3 abs/neg on a 32-bit move-like source (v_cndmask_b32 |v1|) act on the
            # sign bit, as for f32
            clear = M32 if not ab else np.int64(0x7FFFFFFF)
            flip = np.int64(0x80000000) if neg else np.int64(0)
            return lambda st, w: (_u32(raw(st, w)) & clear) ^ flip
        return lambda st, w: _u32(raw(st, w))
    elif t == "b64":
        return lambda st, w: np.asarray(raw(st, w), np.uint64)
    else:
        raise EmuError(f"unknown operand type {t}")
    if ab and neg:
        return lambda st, w: -np.abs(base(st, w))
    if ab:
        return lambda st, w: np.abs(base(st, w))
    if neg:
        return lambda st, w: -base(st, w)
    return base


def _mask_src(op: Operand) -> Fn:
    """A lane-mask source (carry-in, cndmask selector): bool [n, lanes]."""
    if op.kind != "s":
        raise EmuError(f"lane mask operand must be an SGPR, got {op}")
    r = op.reg
    return lambda st, w: st.read_mask(w, r)


def _result_writer(dst: Operand, t: str) -> Callable[[WaveState, Sel, Any, Any], None]:
    """Writes a typed result to the destination VGPR on the lanes in ``lanes``."""
    r = dst.reg
    if t in ("f32", "dst_f32"):
        return lambda st, w, val, lanes: vwrite(st, w, r, np.asarray(val, F32).view(np.uint32),
                                                lanes)
    if t in ("b32", "u32raw"):
        return lambda st, w, val, lanes: vwrite(st, w, r, np.asarray(val, np.int64) & M32
                                                if t == "b32" else val, lanes)
    if t in ("f16", "f16z", "b16"):
        # a 16-bit result written to a whole VGPR (``v1``: gfx10, gfx11 fake16) clears
        # the high half for these ops; one written to a named half (true16 ``v1.l`` or
        # ``v1.h``, as LLVM 20+ emits for gfx11/gfx12) leaves the other half as it was
        zero_hi = t == "f16z" and not dst.low
        high = dst.high

        def w16(st: WaveState, w: Sel, val: Any, lanes: Any) -> None:
            if t == "b16":
                bits = (np.asarray(val, np.int64) & 0xFFFF).astype(np.uint32)
            else:
                bits = np.asarray(val, F16).view(np.uint16).astype(np.uint32)
            if zero_hi and not high:
                vwrite(st, w, r, bits, lanes)
                return
            old = st.V[r][w]
            new = (old & np.uint32(0xFFFF)) | (bits << np.uint32(16)) if high else \
                (old & np.uint32(0xFFFF0000)) | bits
            vwrite(st, w, r, new, lanes)
        return w16
    if t in ("f64", "b64"):
        def w64(st: WaveState, w: Sel, val: Any, lanes: Any) -> None:
            u = np.asarray(val, F64).view(np.uint64) if t == "f64" else np.asarray(val, np.uint64)
            vwrite(st, w, r, (u & np.uint64(0xFFFFFFFF)).astype(np.uint32), lanes)
            vwrite(st, w, r + 1, (u >> np.uint64(32)).astype(np.uint32), lanes)
        return w64
    raise EmuError(f"unknown result type {t}")


# ----------------------------------------------------------------------------- DPP

def _dpp_lanes(mods: dict[str, str], nl: int) -> tuple[np.ndarray, np.ndarray]:
    """Source lane per lane and validity (False: out of the row, no source lane)."""
    lane = np.arange(nl)
    row = lane & ~15
    li = lane & 15
    src = lane.copy()
    valid = np.ones(nl, bool)
    if "quad_perm" in mods:
        perm = [int(x) for x in mods["quad_perm"].strip("[]").split(",")]
        src = (lane & ~3) + np.array(perm)[lane & 3]
    elif "dpp8" in mods:
        sel = [int(x) for x in mods["dpp8"].strip("[]").split(",")]
        src = (lane & ~7) + np.array(sel)[lane & 7]
    elif "row_shl" in mods:
        n = int(mods["row_shl"], 0)
        src, valid = lane + n, li + n < 16
    elif "row_shr" in mods:
        n = int(mods["row_shr"], 0)
        src, valid = lane - n, li - n >= 0
    elif "row_ror" in mods:
        n = int(mods["row_ror"], 0)
        src = row + ((li - n) & 15)
    elif "row_mirror" in mods:
        src = row + (15 - li)
    elif "row_half_mirror" in mods:
        src = (lane & ~7) + (7 - (lane & 7))
    elif "row_share" in mods:
        src = row + int(mods["row_share"], 0)
    elif "row_xmask" in mods:
        src = row + (li ^ int(mods["row_xmask"], 0))
    elif "row_newbcast" in mods or "row_bcast" in mods:
        raise EmuError("row broadcast DPP is not defined for RDNA")
    src = np.where(valid, src, lane) % nl
    return src.astype(np.int64), valid


def _dpp_source(raw: Fn, mods: dict[str, str], nl: int) -> tuple[Fn, Fn]:
    """Wrap src0 with the DPP swizzle; also return the lane-write mask modifier."""
    src, valid = _dpp_lanes(mods, nl)
    bound_ctrl = mods.get("bound_ctrl") in ("0", "1", "")
    fi = mods.get("fi", "0") == "1"
    row_mask = int(mods.get("row_mask", "0xf"), 0)
    bank_mask = int(mods.get("bank_mask", "0xf"), 0)
    lane = np.arange(nl)
    enabled = (((row_mask >> (lane // 16)) & 1) != 0) & (((bank_mask >> ((lane & 15) // 4)) & 1)
                                                          != 0)

    def get(st: WaveState, w: Sel) -> Any:
        x = np.broadcast_to(raw(st, w), (_n(st, w), nl))
        out = x[:, src]
        ok = valid[None, :] & (fi | st.em[w][:, src])
        if bound_ctrl:
            out = np.where(ok, out, 0).astype(x.dtype)
        return out

    def lanes(st: WaveState, w: Sel) -> Any:
        m = st.em[w] & enabled[None, :]
        if not bound_ctrl:
            m = m & valid[None, :] & (fi | st.em[w][:, src])
        return m
    return get, lanes


def _n(st: WaveState, w: Sel) -> int:
    return st.n if isinstance(w, slice) else len(w)


# ----------------------------------------------------------------------------- translate

def base_name(mnemonic: str) -> str:
    name = mnemonic
    for suf in ("_e64_dpp", "_e32", "_e64", "_dpp", "_sdwa"):
        if name.endswith(suf):
            name = name[: -len(suf)]
            break
    if name.startswith("v_dual_"):
        name = "v_" + name[len("v_dual_"):]
    return ALIASES.get(name, name)


def translate(ins: Instruction, cx: Ctx, nl: int = 32) -> tuple[Fn, str] | None:
    if not ins.mnemonic.startswith("v_"):
        return None
    if ins.second is not None:
        return _vopd(ins, cx, nl), "VALU"
    name = base_name(ins.mnemonic)
    if name.startswith("v_wmma_"):
        from hqval.emu.wmma import translate_wmma
        return translate_wmma(name, ins, cx), "WMMA"
    fn = _translate_valu(name, ins, cx, nl)
    if fn is None:
        return None
    return fn, "VALU"


def _vopd(ins: Instruction, cx: Ctx, nl: int) -> Fn:
    """VOPD: both halves read their sources before either writes."""
    assert ins.second is not None
    parts = []
    for half in (ins, ins.second):
        name = base_name(half.mnemonic)
        spec = OPS.get(name)
        if spec is None:
            from hqval.emu.errors import UnsupportedInstruction
            raise UnsupportedInstruction(half.mnemonic, ins.addr, cx.kernel, cx.arch, "VOPD half")
        ops = [parse_operand(o) for o in half.operands]
        parts.append(_compute_parts(name, spec, ops, half.modifiers, cx, nl))

    def run(st: WaveState, w: Sel) -> None:
        results = [(write, compute(st, w), lanes) for compute, write, lanes in parts]
        for write, val, _lanes in results:
            write(st, w, val, None)
    return run


# ----------------------------------------------------------------------------- SDWA
# gfx10 VOP1/VOP2/VOPC sub-dword addressing (RDNA1 ISA, "SDWA"): each source is the
# selected byte or word of its register, zero- or (sext) sign-extended to 32 bits; the
# result goes into the dst_sel field, the other bits zeroed (UNUSED_PAD), sign-filled
# above the field (UNUSED_SEXT) or kept (UNUSED_PRESERVE).
_SDWA_SEL = {"BYTE_0": (0, 8), "BYTE_1": (8, 8), "BYTE_2": (16, 8), "BYTE_3": (24, 8),
             "WORD_0": (0, 16), "WORD_1": (16, 16), "DWORD": (0, 32)}
SDWA_MODS = ("src0_sel", "src1_sel", "dst_sel", "dst_unused")


def _sdwa_sel(mods: dict[str, str], key: str) -> tuple[int, int]:
    sel = mods.get(key, "DWORD")
    if sel not in _SDWA_SEL:
        raise EmuError(f"unknown SDWA {key}:{sel}")
    return _SDWA_SEL[sel]


def _sdwa_source(raw: Fn, shift: int, size: int, sext: bool) -> Fn:
    if size == 32:
        return raw
    mask, sign = np.uint32((1 << size) - 1), 1 << (size - 1)

    def get(st: WaveState, w: Sel) -> Any:
        field = (np.asarray(raw(st, w), np.uint32) >> np.uint32(shift)) & mask
        if not sext:
            return field
        return ((field.astype(np.int64) ^ sign) - sign).astype(np.int64) & M32
    return get


def _sdwa_bits(val: Any, t: str) -> Any:
    """A typed result as the 32 bits a full-register write would store."""
    if t in ("f32", "dst_f32"):
        return np.asarray(val, F32).view(np.uint32).astype(np.int64)
    if t in ("b32", "u32raw"):
        return np.asarray(val, np.int64) & M32
    if t == "b16":
        return np.asarray(val, np.int64) & 0xFFFF
    if t in ("f16", "f16z"):
        return np.asarray(val, F16).view(np.uint16).astype(np.int64)
    raise EmuError(f"SDWA result of type {t}")


def _sdwa_writer(dst: Operand, t: str, mods: dict[str, str]) -> Callable[..., None]:
    shift, size = _sdwa_sel(mods, "dst_sel")
    unused = mods.get("dst_unused", "UNUSED_PAD")
    if unused not in ("UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE"):
        raise EmuError(f"unknown SDWA dst_unused:{unused}")
    if dst.kind != "v":
        raise EmuError(f"SDWA destination must be a VGPR, got {dst}")
    r = dst.reg
    field_mask = ((1 << size) - 1) << shift

    def write(st: WaveState, w: Sel, val: Any, lanes: Any) -> None:
        bits = _sdwa_bits(val, t)
        if size == 32:
            vwrite(st, w, r, bits & M32, lanes)
            return
        field = (bits & ((1 << size) - 1)) << shift
        if unused == "UNUSED_PRESERVE":
            new = (st.V[r][w].astype(np.int64) & (M32 ^ field_mask)) | field
        elif unused == "UNUSED_SEXT":
            top = (bits >> (size - 1)) & 1
            above = M32 ^ ((1 << (shift + size)) - 1)
            new = field | np.where(top == 1, above, 0)
        else:
            new = field
        vwrite(st, w, r, np.asarray(new, np.int64) & M32, lanes)
    return write


def _compute_parts(name: str, spec: Op, ops: list[Operand], mods: dict[str, str], cx: Ctx,
                   nl: int, dpp: bool = False, sdwa: bool = False,
                   ) -> tuple[Fn, Callable[..., None], Fn | None]:
    """(compute(st, w) -> value, write(st, w, value, lanes), lanes or None)."""
    dst = ops[0]
    srcs = ops[1:]
    opsel = [int(x) for x in mods.get("op_sel", "[0,0,0,0]").strip("[]").split(",")]
    getters: list[Fn] = []
    lanes_fn: Fn | None = None
    vi = 0
    for t in spec.srcs:
        if t == "mask":
            # VOPD v_dual_cndmask_b32 reads vcc_lo implicitly
            getters.append(_mask_src(srcs[vi] if vi < len(srcs) else Operand("s", VCC)))
            vi += 1
            continue
        if t == "vcc":
            getters.append(lambda st, w: st.read_mask(w, VCC))
            continue
        if t.startswith("dst_"):
            getters.append(_typed(_vsrc32(dst), t, dst))
            continue
        if vi >= len(srcs):
            raise EmuError(f"{name}: expected more operands than {len(srcs)}")
        op = srcs[vi]
        width = 64 if t in ("f64", "b64") else (16 if t in ("f16", "u16", "i16")
                                                and op.kind not in ("v", "s") else 32)
        raw = _vsrc32(op, width, t.startswith("f"))
        if dpp and vi == 0:
            raw, lanes_fn = _dpp_source(raw, mods, nl)
        if sdwa and vi < 2:
            if width != 32:
                raise EmuError(f"{name}: SDWA on a {width}-bit source")
            raw = _sdwa_source(raw, *_sdwa_sel(mods, f"src{vi}_sel"), op.sext)
        elif op.sext:
            raise EmuError(f"{name}: sext() outside SDWA")
        hi = bool(opsel[vi]) if vi < len(opsel) else False
        getters.append(_typed(raw, t, op, hi))
        vi += 1
    fn = spec.fn
    clamp = "clamp" in mods
    omod = {"mul": {"2": 2.0, "4": 4.0}, "div": {"2": 0.5}}
    scale = 1.0
    for k, table in omod.items():
        if k in mods:
            scale = table[mods[k]]
    dtype = spec.dst
    if len(opsel) > 3 and opsel[3] and dtype in ("f16", "f16z", "b16"):
        dst = Operand(dst.kind, dst.reg, dst.count, high=True)
    write = _sdwa_writer(dst, dtype, mods) if sdwa else _result_writer(dst, dtype)

    f32_srcs = [t in ("f32", "dst_f32") for t in spec.srcs]
    f32_out = dtype == "f32"
    h_srcs = [t in ("f16", "dst_f16", "f64") for t in spec.srcs]
    h_out = dtype in ("f16", "f16z", "f64")

    def compute(st: WaveState, w: Sel) -> Any:
        with fp_quiet(all="ignore"):
            vals = [g(st, w) for g in getters]
            if st.denorm32 and st.denorm16_64:
                r = fn(*vals)
            else:
                # FLOAT_DENORM_MODE_32 / _16_64 = 0: denormal inputs and results flushed
                vals = [flush_denormals(v) if (is_f and not st.denorm32)
                        or (is_h and not st.denorm16_64) else v
                        for v, is_f, is_h in zip(vals, f32_srcs, h_srcs, strict=False)]
                r = fn(*vals)
                if (f32_out and not st.denorm32) or (h_out and not st.denorm16_64):
                    r = flush_denormals(r)
            if scale != 1.0:
                r = r * r.dtype.type(scale)
            if clamp and dtype.startswith("f"):
                r = np.clip(r, 0, 1) if not np.issubdtype(np.asarray(r).dtype, np.integer) else r
            return r
    return compute, write, lanes_fn


def _translate_valu(name: str, ins: Instruction, cx: Ctx, nl: int) -> Fn | None:
    ops = [parse_operand(o) for o in ins.operands]
    mods = ins.modifiers
    dpp = any(k in mods for k in ("quad_perm", "dpp8", "row_shl", "row_shr", "row_ror",
                                  "row_mirror", "row_half_mirror", "row_share", "row_xmask"))
    sdwa = ins.mnemonic.endswith("_sdwa") or any(k in mods for k in SDWA_MODS)
    if name.startswith(("v_cmp_", "v_cmpx_", "v_cmp_class", "v_cmpx_class")):
        return _vopc(name, ops, mods, cx, dpp, nl, sdwa)
    if sdwa and name not in OPS:
        return None  # no SDWA form modelled: unsupported, never run without the selects
    special = None if sdwa else _special(name, ops, mods, cx, nl)
    if special is not None:
        return special
    if name.startswith(("v_pk_", "v_fma_mix", "v_dot2_", "v_dot4_", "v_dot8_")):
        from hqval.emu.packed import translate_packed
        return translate_packed(name, ops, mods, cx)
    fast = None if sdwa or dpp else _fast_b32(name, ins.mnemonic, ops, mods)
    if fast is not None:
        return fast
    spec = OPS.get(name)
    if spec is None:
        return None
    compute, write, lanes_fn = _compute_parts(name, spec, ops, mods, cx, nl, dpp, sdwa)
    if lanes_fn is None:
        return lambda st, w: write(st, w, compute(st, w), None)
    lf = lanes_fn
    return lambda st, w: write(st, w, compute(st, w), lf(st, w))


# Integer ops on plain 32-bit operands, computed on the raw uint32 registers (wrapping
# like the generic int64 path's final & 0xffffffff); the same bits as OPS' definitions
# (test_vector compares them on random and edge operands).
_U32 = np.uint32
_FAST_B32: dict[str, Callable[..., Any]] = {
    "v_mov_b32": lambda a: a,
    "v_and_b32": lambda a, b: a & b,
    "v_or_b32": lambda a, b: a | b,
    "v_xor_b32": lambda a, b: a ^ b,
    "v_lshlrev_b32": lambda a, b: b << (a & _U32(31)),
    "v_lshrrev_b32": lambda a, b: b >> (a & _U32(31)),
    "v_bfe_u32": lambda a, b, c: (a >> (b & _U32(31))) & ((_U32(1) << (c & _U32(31)))
                                                         - _U32(1)),
    "v_cvt_f32_ubyte0": lambda a: (a & _U32(0xFF)).astype(F32).view(_U32),
    "v_cvt_f32_ubyte1": lambda a: ((a >> _U32(8)) & _U32(0xFF)).astype(F32).view(_U32),
    "v_cvt_f32_ubyte2": lambda a: ((a >> _U32(16)) & _U32(0xFF)).astype(F32).view(_U32),
    "v_cvt_f32_ubyte3": lambda a: (a >> _U32(24)).astype(F32).view(_U32),
}


def _fast_b32(name: str, mnemonic: str, ops: list[Operand], mods: dict[str, str]
              ) -> Fn | None:
    """The _FAST_B32 form of an instruction with no modifiers, a plain VGPR destination
    and plain 32-bit sources (VGPR, SGPR, constant), or None for the generic path."""
    fn = _FAST_B32.get(name)
    if fn is None or mods or mnemonic not in (name, name + "_e32", name + "_e64"):
        return None
    dst, srcs = ops[0], ops[1:]
    if dst.kind != "v" or dst.high or dst.low or len(srcs) != fn.__code__.co_argcount:
        return None
    if any(o.neg or o.abs or o.high or o.low or o.kind not in ("v", "s", "int", "float", "lit")
           for o in srcs):
        return None
    getters = [_vsrc32(o) for o in srcs]
    r = dst.reg
    if len(getters) == 1:
        (g0,) = getters
        return lambda st, w: vwrite(st, w, r, fn(np.asarray(g0(st, w), _U32)))
    if len(getters) == 2:
        g0, g1 = getters
        return lambda st, w: vwrite(st, w, r, fn(np.asarray(g0(st, w), _U32),
                                                 np.asarray(g1(st, w), _U32)))
    g0, g1, g2 = getters
    return lambda st, w: vwrite(st, w, r, fn(np.asarray(g0(st, w), _U32),
                                             np.asarray(g1(st, w), _U32),
                                             np.asarray(g2(st, w), _U32)))


_FCMP: dict[str, Callable[[Any, Any], Any]] = {
    "f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool),
    "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater,
    "lg": lambda a, b: (a < b) | (a > b), "ge": np.greater_equal,
    "o": lambda a, b: ~np.isnan(a) & ~np.isnan(b), "u": lambda a, b: np.isnan(a) | np.isnan(b),
    "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)),
    "ngt": lambda a, b: ~(a > b), "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b),
    "nlt": lambda a, b: ~(a < b), "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
    "tru": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
}
_ICMP: dict[str, Callable[[Any, Any], Any]] = {
    "f": _FCMP["f"], "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater,
    "ne": np.not_equal, "lg": np.not_equal, "ge": np.greater_equal, "t": _FCMP["t"],
}


def _class_test(x: Any, mask: Any) -> Any:
    x = np.asarray(x)
    finfo = np.finfo(x.dtype)
    m = np.asarray(mask, np.int64)
    bits = x.view(np.uint16 if x.dtype == F16 else (np.uint32 if x.dtype == F32 else np.uint64))
    quiet_bit = {F16: 0x200, F32: 0x400000, F64: 0x8000000000000}[x.dtype.type]
    isnan = np.isnan(x)
    snan = isnan & ((bits & bits.dtype.type(quiet_bit)) == 0)
    qnan = isnan & ~snan
    neg = np.signbit(x)
    ax = np.abs(x)
    inf = np.isinf(x)
    zero = x == 0
    denorm = (ax < finfo.tiny) & ~zero & ~isnan
    normal = ~inf & ~zero & ~denorm & ~isnan
    classes = [snan, qnan, inf & neg, normal & neg, denorm & neg, zero & neg, zero & ~neg,
               denorm & ~neg, normal & ~neg, inf & ~neg]
    out = np.zeros(np.broadcast(x, m).shape, bool)
    for k, c in enumerate(classes):
        out |= c & (((m >> k) & 1) != 0)
    return out


# gfx12's transcendental ops with an SGPR source and destination (VOP3 "SALU in VALU"):
# the same arithmetic as their VGPR forms; the f16 forms zero D[31:16] (pseudocode)
_SALU_TRANS: dict[str, tuple[str, str]] = {
    "v_s_rcp_f32": ("f32", "v_rcp_f32"), "v_s_rsq_f32": ("f32", "v_rsq_f32"),
    "v_s_sqrt_f32": ("f32", "v_sqrt_f32"), "v_s_exp_f32": ("f32", "v_exp_f32"),
    "v_s_log_f32": ("f32", "v_log_f32"), "v_s_rcp_f16": ("f16", "v_rcp_f16"),
    "v_s_rsq_f16": ("f16", "v_rsq_f16"), "v_s_sqrt_f16": ("f16", "v_sqrt_f16"),
    "v_s_exp_f16": ("f16", "v_exp_f16"), "v_s_log_f16": ("f16", "v_log_f16"),
}


def _salu_in_valu(name: str, ops: list[Operand], mods: dict[str, str]) -> Fn:
    from hqval.emu.operands import sreader

    typ, vector_op = _SALU_TRANS[name]
    fn = OPS[vector_op].fn
    d, src = ops[0], ops[1]
    if d.kind != "s":
        raise EmuError(f"{name}: SGPR destination expected, got {d}")
    raw = sreader(src, 32, True)
    neg, ab = src.neg, src.abs
    dt, ut = (F32, np.uint32) if typ == "f32" else (F16, np.uint16)
    clamp = "clamp" in mods
    scale = {"mul:2": 2.0, "mul:4": 4.0, "div:2": 0.5}
    omod = next((v for k, v in scale.items() if mods.get(k.split(":")[0]) == k.split(":")[1]),
                1.0)

    def run(st: WaveState, w: Sel) -> None:
        n = _n(st, w)
        bits = np.broadcast_to(np.asarray(raw(st, w), np.uint32), (n,))
        x = bits.view(F32) if typ == "f32" else (bits & np.uint32(0xFFFF)).astype(
            np.uint16).view(F16)
        if ab:
            x = np.abs(x)
        if neg:
            x = -x
        keep = st.denorm32 if typ == "f32" else st.denorm16_64
        with fp_quiet(all="ignore"):
            if not keep:
                x = flush_denormals(x)
            r = np.asarray(fn(x), dt)
            if not keep:
                r = flush_denormals(r)
            if omod != 1.0:
                r = np.asarray(np.multiply(r, omod), dt)
            if clamp:
                r = np.clip(r, 0, 1).astype(dt)
        swrite(st, w, d.reg, r.view(ut).astype(np.uint32))
    return run


def _vopc(name: str, ops: list[Operand], mods: dict[str, str], cx: Ctx, dpp: bool,
          nl: int, sdwa: bool = False) -> Fn | None:
    cmpx = name.startswith("v_cmpx_")
    parts = name.split("_")  # v, cmp(x), op, type
    if parts[2] == "class":
        typ = parts[3]
        cmp: Callable[[Any, Any], Any] = _class_test
        types = (typ, "b32")
    else:
        if len(parts) != 4:
            return None
        op, typ = parts[2], parts[3]
        table = _FCMP if typ.startswith("f") else _ICMP
        if op not in table:
            return None
        cmp = table[op]
        types = {"f32": ("f32", "f32"), "f16": ("f16", "f16"), "f64": ("f64", "f64"),
                 "i32": ("i32", "i32"), "u32": ("b32", "b32"), "u64": ("b64", "b64"),
                 "i64": ("b64", "b64"), "u16": ("b32", "b32"), "i16": ("i32", "i32")}.get(
            typ, ("", ""))
        if not types[0]:
            return None
    # destination: explicit sdst (vcc_lo / sN) unless cmpx on gfx10+ (writes exec only)
    if len(ops) == 3:
        sdst: Operand | None = ops[0]
        srcs = ops[1:]
    else:
        sdst = None
        srcs = ops
    if not cmpx and sdst is None:
        sdst = Operand("s", VCC)
    getters = []
    for k, (t, operand) in enumerate(zip(types, srcs, strict=True)):
        width = 64 if t in ("f64", "b64") else 32
        raw = _vsrc32(operand, width, t.startswith("f"))
        if dpp and k == 0:
            raw, _ = _dpp_source(raw, mods, nl)
        if sdwa:
            if width != 32:
                raise EmuError(f"{name}: SDWA on a {width}-bit source")
            raw = _sdwa_source(raw, *_sdwa_sel(mods, f"src{k}_sel"), operand.sext)
        elif operand.sext:
            raise EmuError(f"{name}: sext() outside SDWA")
        g = _typed(raw, t, operand)
        if typ == "i64" and t == "b64":
            g = (lambda gg: (lambda st, w: np.asarray(gg(st, w), np.uint64).view(np.int64)))(g)
        if typ in ("u16", "i16"):
            g = (lambda gg, signed: (lambda st, w: (((gg(st, w) & 0xFFFF) ^ 0x8000) - 0x8000)
                                     if signed else gg(st, w) & 0xFFFF))(g, typ == "i16")
        getters.append(g)
    sreg = sdst.reg if sdst is not None else None

    def run(st: WaveState, w: Sel) -> None:
        with fp_quiet(invalid="ignore"):
            res = cmp(getters[0](st, w), getters[1](st, w))
        res = np.broadcast_to(res, (_n(st, w), nl)) & st.em[w]
        if sreg is not None:
            st.write_mask(w, sreg, res)
        if cmpx:
            st.write_mask(w, EXEC, res)
    return run


def _permlane_flags(mods: dict[str, str]) -> tuple[bool, bool]:
    """(fetch inactive, bound_ctrl) of v_permlane*16*: llvm-objdump prints them as
    op_sel[0] and op_sel[1] (LLVM VOP3Instructions.td, VOP3_PERMLANE_Profile)."""
    sel = [int(x) for x in mods.get("op_sel", "[0,0]").strip("[]").split(",")] + [0, 0]
    return bool(sel[0]) or mods.get("fi", "0") == "1", \
        bool(sel[1]) or mods.get("bound_ctrl", "0") == "1"


def _special(name: str, ops: list[Operand], mods: dict[str, str], cx: Ctx,
             nl: int) -> Fn | None:
    """Ops with a scalar destination, carries or other irregular operands."""
    if name in ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32"):
        d, sd = ops[0], ops[1]
        a, b = _typed(_vsrc32(ops[2]), "b32", ops[2]), _typed(_vsrc32(ops[3]), "b32", ops[3])
        wr = _result_writer(d, "b32")

        def addco(st: WaveState, w: Sel) -> None:
            x, y = a(st, w), b(st, w)
            if name == "v_add_co_u32":
                r = x + y
                c = r > M32
            elif name == "v_sub_co_u32":
                r, c = x - y, x < y
            else:
                r, c = y - x, y < x
            c = np.broadcast_to(c, (_n(st, w), nl)) & st.em[w]
            wr(st, w, np.broadcast_to(r, (_n(st, w), nl)), None)
            st.write_mask(w, sd.reg, c)
        return addco
    if name in ("v_add_co_ci_u32", "v_sub_co_ci_u32", "v_subrev_co_ci_u32", "v_addc_co_u32"):
        d, sd = ops[0], ops[1]
        a, b = _typed(_vsrc32(ops[2]), "b32", ops[2]), _typed(_vsrc32(ops[3]), "b32", ops[3])
        cin = _mask_src(ops[4])
        wr = _result_writer(d, "b32")

        def addci(st: WaveState, w: Sel) -> None:
            x, y, ci = a(st, w), b(st, w), cin(st, w).astype(np.int64)
            if name in ("v_add_co_ci_u32", "v_addc_co_u32"):
                r = x + y + ci
                c = r > M32
            elif name == "v_sub_co_ci_u32":
                r, c = x - y - ci, x < y + ci
            else:
                r, c = y - x - ci, y < x + ci
            c = np.broadcast_to(c, (_n(st, w), nl)) & st.em[w]
            wr(st, w, np.broadcast_to(r, (_n(st, w), nl)), None)
            st.write_mask(w, sd.reg, c)
        return addci
    if name in ("v_mad_u64_u32", "v_mad_i64_i32"):
        d, sd = ops[0], ops[1]
        signed = name == "v_mad_i64_i32"
        a = _typed(_vsrc32(ops[2]), "i32" if signed else "b32", ops[2])
        b = _typed(_vsrc32(ops[3]), "i32" if signed else "b32", ops[3])
        c = _vsrc32(ops[4], 64)
        wr = _result_writer(d, "b64")

        def mad64(st: WaveState, w: Sel) -> None:
            x, y = np.asarray(a(st, w), np.int64), np.asarray(b(st, w), np.int64)
            # signed: |x*y| < 2^62 is exact in int64, then reinterpreted mod 2^64
            p = (x * y).astype(np.uint64) if signed else \
                x.astype(np.uint64) * y.astype(np.uint64)
            cc = np.asarray(c(st, w), np.uint64)
            r = p + cc
            carry = r < cc
            wr(st, w, np.broadcast_to(r, (_n(st, w), nl)), None)
            if sd.reg != NULL:
                st.write_mask(w, sd.reg, np.broadcast_to(carry, (_n(st, w), nl)) & st.em[w])
        return mad64
    if name == "v_div_scale_f32":
        d, sd = ops[0], ops[1]
        num = [_typed(_vsrc32(o), "f32", o) for o in ops[2:5]]
        wr = _result_writer(d, "f32")

        def div_scale(st: WaveState, w: Sel) -> None:
            shape = (_n(st, w), nl)
            s0, s1, s2 = (np.broadcast_to(g(st, w), shape).astype(F32) for g in num)
            with fp_quiet(all="ignore"):
                e1, e2 = _exponent(s1), _exponent(s2)
                tiny = np.finfo(F32).tiny
                q = (s2.astype(F64) / s1.astype(F64)).astype(F32)
                q_denorm = (np.abs(q) < tiny) & (q != 0)
                s1_denorm = (np.abs(s1) < tiny) & (s1 != 0)
                up = np.ldexp(s0.astype(F64), 64).astype(F32)
                # ISA pseudocode, first matching case wins (1/S1 is never an f64 denormal
                # for an f32 S1, so those two cases cannot occur)
                c_nan = (s2 == 0) | (s1 == 0)
                c_big = (e2 - e1) >= 96
                c_s1d = s1_denorm
                c_qd = q_denorm
                c_tiny = e2 <= 23
                res = np.select(
                    [c_nan, c_big, c_s1d, c_qd, c_tiny],
                    [np.full(shape, np.nan, F32), np.where(s0 == s1, up, s0), up,
                     np.where(s0 == s2, up, s0), up], s0)
                vcc = ~c_nan & (c_big | (~c_s1d & c_qd))
            wr(st, w, res.astype(F32), None)
            st.write_mask(w, sd.reg, vcc & st.em[w])
        return div_scale
    if name == "v_div_scale_f64":
        d, sd = ops[0], ops[1]
        num = [_typed(_vsrc32(o, 64, True), "f64", o) for o in ops[2:5]]
        wr = _result_writer(d, "f64")

        def div_scale64(st: WaveState, w: Sel) -> None:
            shape = (_n(st, w), nl)
            s0, s1, s2 = (np.broadcast_to(g(st, w), shape).astype(F64) for g in num)
            with fp_quiet(all="ignore"):
                e1, e2 = _exponent64(s1), _exponent64(s2)
                tiny = np.finfo(F64).tiny
                q = s2 / s1
                q_denorm = (np.abs(q) < tiny) & (q != 0)
                s1_denorm = (np.abs(s1) < tiny) & (s1 != 0)
                r1 = 1.0 / s1
                r1_denorm = (np.abs(r1) < tiny) & (r1 != 0)
                up = np.ldexp(s0, 128)
                down = np.ldexp(s0, -128)
                c_nan = (s2 == 0) | (s1 == 0)
                c_big = (e2 - e1) >= 768
                c_both = r1_denorm & q_denorm
                res = np.select(
                    [c_nan, c_big, s1_denorm, c_both, r1_denorm, q_denorm, e2 <= 53],
                    [np.full(shape, np.nan), np.where(s0 == s1, up, s0), up,
                     np.where(s0 == s1, up, s0), down, np.where(s0 == s2, up, s0), up], s0)
                vcc = ~c_nan & (c_big | (~s1_denorm & (c_both | (~r1_denorm & q_denorm))))
            wr(st, w, res, None)
            st.write_mask(w, sd.reg, vcc & st.em[w])
        return div_scale64
    if name == "v_swap_b32":
        ra, rb = ops[0].reg, ops[1].reg

        def swap(st: WaveState, w: Sel) -> None:
            va, vb = st.V[ra][w].copy(), st.V[rb][w].copy()
            vwrite(st, w, ra, vb)
            vwrite(st, w, rb, va)
        return swap
    if name in ("v_movrels_b32", "v_movreld_b32", "v_movrelsd_b32", "v_movrelsd_2_b32"):
        # indexed register access: M0 holds the (per wave) register offset
        d, s0 = ops[0], ops[1]

        def movrel(st: WaveState, w: Sel) -> None:
            m0 = st.S[124][w].astype(np.int64)
            if not (m0 == m0[0]).all():
                raise EmuError(f"{name}: waves with different M0 in one batch")
            k = int(m0[0]) if m0.size else 0
            src = s0.reg + (k if name != "v_movreld_b32" else 0)
            dst = d.reg + (k if name in ("v_movreld_b32", "v_movrelsd_b32") else 0)
            if s0.kind != "v":
                src = s0.reg
            if dst >= st.V.shape[0] or src >= st.V.shape[0]:
                raise EmuError(f"{name}: register index past the kernel's VGPRs")
            vwrite(st, w, dst, st.V[src][w].copy() if s0.kind == "v" else
                   st.S[s0.reg][w][:, None])
        return movrel
    if name in ("v_permlane16_b32", "v_permlanex16_b32"):
        # lane i reads lane sel(i) of its own row (permlane16) or of the other row of its
        # 32-lane half (permlanex16); sel(i) is nibble i % 16 of the 64-bit {src2, src1}
        d, src = ops[0], _vsrc32(ops[1])
        s1, s2 = _vsrc32(ops[2]), _vsrc32(ops[3])
        cross = name == "v_permlanex16_b32"
        fi, bound_ctrl = _permlane_flags(mods)
        lanes_i = np.arange(nl)

        def permlane(st: WaveState, w: Sel) -> None:
            n = _n(st, w)
            lo = np.broadcast_to(np.asarray(s1(st, w), np.uint32).reshape(-1), (n,))
            hi = np.broadcast_to(np.asarray(s2(st, w), np.uint32).reshape(-1), (n,))
            sel64 = lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32))
            nib = ((sel64[:, None] >> (np.uint64(4) * (lanes_i % 16).astype(np.uint64)))
                   & np.uint64(0xF)).astype(np.int64)
            row = lanes_i & ~15
            if cross:
                row = row ^ 16
            srcl = row[None, :] + nib  # [n, lanes]
            x = np.broadcast_to(src(st, w), (n, nl))
            rows = np.arange(n)[:, None]
            val = x[rows, srcl]
            active_src = st.em[w][rows, srcl]
            ok = active_src | fi
            out = np.where(ok, val, 0 if bound_ctrl else st.V[d.reg][w])
            vwrite(st, w, d.reg, out.astype(np.uint32))
        return permlane
    if name in ("v_permlane16_var_b32", "v_permlanex16_var_b32"):
        # gfx12: lane i reads lane VGPR[i][SRC1][3:0] of its own row (or of the other row
        # of its 32-lane half for permlanex16_var); inactive lanes keep D
        d, src, sel = ops[0], _vsrc32(ops[1]), _vsrc32(ops[2])
        cross = name == "v_permlanex16_var_b32"
        fi, bound_ctrl = _permlane_flags(mods)
        lanes_i = np.arange(nl)

        def permlane_var(st: WaveState, w: Sel) -> None:
            n = _n(st, w)
            nib = (np.broadcast_to(np.asarray(sel(st, w), np.uint32), (n, nl))
                   & np.uint32(0xF)).astype(np.int64)
            row = lanes_i & ~15
            if cross:
                row = row ^ 16
            srcl = row[None, :] + nib
            x = np.broadcast_to(src(st, w), (n, nl))
            rows = np.arange(n)[:, None]
            ok = st.em[w][rows, srcl] | fi
            out = np.where(ok, x[rows, srcl], 0 if bound_ctrl else st.V[d.reg][w])
            vwrite(st, w, d.reg, out.astype(np.uint32))
        return permlane_var
    if name.startswith("v_s_") and name in _SALU_TRANS:
        return _salu_in_valu(name, ops, mods)
    if name == "v_permlane64_b32":
        d, src = ops[0], _vsrc32(ops[1])

        def permlane64(st: WaveState, w: Sel) -> None:
            x = np.broadcast_to(src(st, w), (_n(st, w), nl))
            vwrite(st, w, d.reg, np.roll(x, 32, axis=1) if nl == 64 else x)
        return permlane64
    if name == "v_readfirstlane_b32":
        sd, src = ops[0], _vsrc32(ops[1])

        def rfl(st: WaveState, w: Sel) -> None:
            em = st.em[w]
            first = np.where(em.any(1), em.argmax(1), 0)
            x = np.broadcast_to(src(st, w), (_n(st, w), nl))
            swrite(st, w, sd.reg, x[np.arange(len(first)), first])
        return rfl
    if name == "v_readlane_b32":
        sd, src, lane = ops[0], _vsrc32(ops[1]), _vsrc32(ops[2])

        def rl(st: WaveState, w: Sel) -> None:
            x = np.broadcast_to(src(st, w), (_n(st, w), nl))
            ln = np.broadcast_to(np.asarray(lane(st, w)).reshape(-1), (_n(st, w),)) % nl
            swrite(st, w, sd.reg, x[np.arange(x.shape[0]), ln])
        return rl
    if name == "v_writelane_b32":
        d, src, lane = ops[0], _vsrc32(ops[1]), _vsrc32(ops[2])

        def wl(st: WaveState, w: Sel) -> None:
            n = _n(st, w)
            val = np.broadcast_to(np.asarray(src(st, w)).reshape(-1), (n,))
            ln = np.broadcast_to(np.asarray(lane(st, w)).reshape(-1), (n,)) % nl
            sel = np.zeros((n, nl), bool)
            sel[np.arange(n), ln] = True
            vwrite(st, w, d.reg, np.broadcast_to(val[:, None], (n, nl)), sel)
        return wl
    if name in ("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32"):
        # count of mask bits below this lane (lo: lanes 0-31; hi: lanes 32-63, none in wave32)
        d = ops[0]
        mask_src, add = _typed(_vsrc32(ops[1]), "b32", ops[1]), _typed(_vsrc32(ops[2]), "b32",
                                                                     ops[2])
        hi = name == "v_mbcnt_hi_u32_b32"
        lanes = np.arange(nl, dtype=np.int64)
        below = np.where(hi, np.clip(lanes - 32, 0, 32), np.minimum(lanes, 32))
        below_mask = ((np.int64(1) << below) - 1) & M32
        wr = _result_writer(d, "b32")
        return lambda st, w: wr(st, w, _popcnt(np.asarray(mask_src(st, w)) & below_mask)
                                + add(st, w), None)
    if name == "v_nop" or name == "v_pipeflush":
        return lambda st, w: None
    return None
