"""Floating-point arithmetic numpy lacks, done exactly.

``fma_f32`` is a single-rounding fused multiply-add.  The argument: the product of two
f32 values has at most 48 significant bits, so it is exact in f64.  The f64 sum
``s = p + c`` is rounded; TwoSum gives the exact error ``e`` (p + c = s + e exactly).
Rounding s to odd at 53 bits (nudge s one ulp toward e when e != 0 and s is even) and
then to f32 is correct rounding, because round-to-odd at p + 2 or more bits followed by
round-to-nearest-even at p bits equals one rounding at p bits (Boldo & Melquiond 2008);
53 >= 24 + 2, also for f32 subnormal results which have fewer bits."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from hqval.emu import fastfma

_NO_CHANGE = contextlib.nullcontext()


class _LaunchDepth:
    """How many Machine launches are running (they hold np.errstate(all="ignore"))."""

    n = 0


def fp_quiet(**kw: str) -> contextlib.AbstractContextManager[Any]:
    """``np.errstate(**kw)`` -- or nothing inside a launch, which already ignores every
    floating-point warning for all its instructions (an errstate costs ~10 us, more than
    many instructions' arithmetic)."""
    return _NO_CHANGE if _LaunchDepth.n else np.errstate(**kw)  # type: ignore[arg-type]


@contextlib.contextmanager
def launch_fp() -> Any:
    """Held by Machine._run around a launch: every instruction's IEEE exceptions (NaN,
    overflow: the point of emulating them) stay silent."""
    with np.errstate(all="ignore"):
        _LaunchDepth.n += 1
        try:
            yield
        finally:
            _LaunchDepth.n -= 1


def _round_odd_f64(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    bits = s.view(np.int64)
    inexact = (e != 0) & np.isfinite(s) & ((bits & 1) == 0)
    if not inexact.any():
        return s
    # toward e: magnitude grows when e has s's sign
    step = np.where((e > 0) == (s > 0), 1, -1).astype(np.int64)
    return np.where(inexact, bits + step, bits).view(np.float64)


def _fast() -> Any:
    """The compiled (fma_odd, fma_f32, mix_f16) ufuncs, or False for the numpy code."""
    f = fastfma.CURRENT[0]
    if f is None:
        fastfma.load((fma_odd_numpy, fma_f32_numpy, mix_f16_numpy))
        f = fastfma.CURRENT[0]
    return f


def _compiled(which: int, dtype: Any, oracle: Callable[..., np.ndarray], a: Any, b: Any,
              c: Any) -> np.ndarray:
    """Loop ``which`` of ``_fast()`` (0 fma_odd, 1 fma_f32, 2 mix_f16) on a, b, c with
    output ``dtype``, or ``oracle``, the numpy code, where the compiled loops are not used."""
    f = _fast()
    if not f:
        return oracle(a, b, c)
    with fp_quiet(invalid="ignore", over="ignore"):
        r = f[which](a, b, c, dtype=dtype, casting="unsafe")
    return r if type(r) is np.ndarray else np.asarray(r)


def fma_f32(a: Any, b: Any, c: Any) -> np.ndarray:
    """Correctly rounded a*b + c for float32 inputs (broadcasting): the compiled loop of
    ``hqval.emu.fastfma`` where it is available, else ``fma_f32_numpy``; the two are
    bit-identical (``tests/emu/test_fastfma.py``)."""
    return _compiled(1, np.float32, fma_f32_numpy, a, b, c)


def fma_odd(a: Any, b: Any, c: Any) -> np.ndarray:
    """a*b + c in f64 rounded to odd, for operands whose product is exact in f64 (f32 or
    narrower values): a following rounding to f32 or f16 is then the single rounding of
    the exact result.  Compiled where available, else ``fma_odd_numpy``."""
    return _compiled(0, np.float64, fma_odd_numpy, a, b, c)


def fma_odd_numpy(a: Any, b: Any, c: Any) -> np.ndarray:
    """The oracle of ``fma_odd``: f64 product and sum, TwoSum's exact error, round to odd."""
    with fp_quiet(invalid="ignore", over="ignore"):
        p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
        cc = np.asarray(c, np.float64)
        s = p + cc
        bp = s - cc
        e = (p - bp) + (cc - (s - bp))
        return _round_odd_f64(np.asarray(s, np.float64), np.asarray(e, np.float64))


def fma_f32_numpy(a: Any, b: Any, c: Any) -> np.ndarray:
    """Correctly rounded a*b + c for float32 inputs, in numpy: the oracle."""
    with fp_quiet(invalid="ignore", over="ignore"):
        p = np.asarray(a, np.float32).astype(np.float64) * np.asarray(b, np.float32)
        cc = np.asarray(c, np.float32).astype(np.float64)
        s = p + cc
        bp = s - cc
        e = (p - bp) + (cc - (s - bp))
        s = np.asarray(s, np.float64)
        r = _round_odd_f64(s, np.asarray(e, np.float64))
        return np.asarray(r.astype(np.float32))


def fma_f64(a: Any, b: Any, c: Any) -> np.ndarray:
    """a*b + c for float64.  Exact single rounding via splitting (Dekker TwoProduct)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    with fp_quiet(invalid="ignore", over="ignore"):
        p = a * b
        split = 134217729.0
        ah = a * split
        ah = ah - (ah - a)
        al = a - ah
        bh = b * split
        bh = bh - (bh - b)
        bl = b - bh
        pe = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        s = p + c
        bb = s - c
        se = (p - bb) + (c - (s - bb))
        r = s + (pe + se)
        # an exact zero keeps IEEE's sign (-0 * x + -0 = -0); r's correction term would
        # turn it into +0
        r = np.where(r == 0, p + c, r)
        return np.asarray(np.where(np.isfinite(r), r, p + c), np.float64)


def fma_f16(a: Any, b: Any, c: Any) -> np.ndarray:
    """Correctly rounded f16 fma: a*b is exact in f32 (22 bits), a*b + c is exact in f64
    unless the exponents are far apart, where round-to-odd keeps it correct (53 >= 11+2).
    Compiled round-to-odd where available, else ``fma_f16_numpy``."""
    if not _fast():
        return fma_f16_numpy(a, b, c)
    r = fma_odd(np.asarray(a, np.float16).astype(np.float64),
                np.asarray(b, np.float16).astype(np.float64),
                np.asarray(c, np.float16).astype(np.float64))
    with fp_quiet(invalid="ignore", over="ignore"):
        return np.asarray(r.astype(np.float16))


def fma_f16_numpy(a: Any, b: Any, c: Any) -> np.ndarray:
    """The oracle of ``fma_f16``."""
    with fp_quiet(invalid="ignore", over="ignore"):
        p = np.asarray(a, np.float16).astype(np.float64) * np.asarray(b, np.float16)
        cc = np.asarray(c, np.float16).astype(np.float64)
        s = p + cc
        bp = s - cc
        e = (p - bp) + (cc - (s - bp))
        r = _round_odd_f64(np.asarray(s, np.float64), np.asarray(e, np.float64))
        return np.asarray(r.astype(np.float16))


def cvt_f32_to_i32(x: Any) -> np.ndarray:
    """v_cvt_i32_f32: truncate, saturate, NaN -> 0."""
    with fp_quiet(invalid="ignore"):
        x = np.asarray(x, np.float32).astype(np.float64)
    r = np.trunc(np.nan_to_num(x, nan=0.0, posinf=2.0**31 - 1, neginf=-(2.0**31)))
    return np.asarray(np.clip(r, -(2.0**31), 2.0**31 - 1).astype(np.int64).astype(np.uint32))


def cvt_f32_to_u32(x: Any) -> np.ndarray:
    with fp_quiet(invalid="ignore"):
        x = np.asarray(x, np.float32).astype(np.float64)
    r = np.trunc(np.nan_to_num(x, nan=0.0, posinf=2.0**32 - 1, neginf=0.0))
    return np.asarray(np.clip(r, 0, 2.0**32 - 1).astype(np.int64).astype(np.uint32))


def flush_denormals(x: Any) -> np.ndarray:
    """Denormals to signed zero, in the value's own format (f16, f32 or f64):
    FLOAT_DENORM_MODE_32 / FLOAT_DENORM_MODE_16_64 = 0."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        return np.asarray(x)
    tiny = np.abs(x) < np.finfo(x.dtype).tiny
    return np.asarray(np.where(tiny & (x != 0), np.copysign(x.dtype.type(0), x), x), x.dtype)


def flush_f32(x: Any) -> np.ndarray:
    """f32 denormals to signed zero (FLOAT_DENORM_MODE_32 = 0)."""
    return flush_denormals(np.asarray(x, np.float32))


def f32_to_f16(x: Any) -> np.ndarray:
    """f32 -> f16, nearest even, a signalling NaN quieted (ISA ``f32_to_f16``; LLVM's
    APFloat convert does the same: the quiet bit set, the payload's top bits kept).
    numpy truncates a NaN's payload without setting the quiet bit (0x7fa00000 -> 0x7d00;
    the hardware gives 0x7f00)."""
    x = np.asarray(x, np.float32)
    with fp_quiet(invalid="ignore", over="ignore"):
        h = x.astype(np.float16)
    nan = np.isnan(x)
    if not nan.any():
        return np.asarray(h)
    bits = h.view(np.uint16) | np.where(nan, np.uint16(0x0200), np.uint16(0))
    return np.asarray(bits.astype(np.uint16).view(np.float16))


def f16_to_f32(x: Any) -> np.ndarray:
    """f16 -> f32 (exact), a signalling NaN quieted (ISA ``f16_to_f32``)."""
    x = np.asarray(x, np.float16)
    f = x.astype(np.float32)
    nan = np.isnan(x)
    if not nan.any():
        return np.asarray(f)
    bits = f.view(np.uint32) | np.where(nan, np.uint32(0x00400000), np.uint32(0))
    return np.asarray(bits.astype(np.uint32).view(np.float32))


def quiet_nan(x: Any) -> np.ndarray:
    """``cvtToQuietNAN``: set the quiet bit of every NaN, in the value's own format."""
    x = np.asarray(x)
    bit = {2: 0x0200, 4: 0x00400000, 8: 0x0008000000000000}[x.dtype.itemsize]
    ut = {2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
    quiet = np.where(np.isnan(x), np.asarray(bit, ut), np.asarray(0, ut))
    bits = x.view(ut) | quiet.astype(ut)
    return np.asarray(bits.astype(ut).view(x.dtype))


def max_isa(a: Any, b: Any, ieee: bool = True) -> np.ndarray:
    """V_MAX_F32/F16/F64 (IEEE mode) and V_MAX_NUM_* (``ieee=False``), per the RDNA3/RDNA4
    pseudocode: a signalling NaN operand gives its quieted self (IEEE mode) or the other
    operand (NUM: both NaN gives the quieted S0); one NaN gives the other operand; +0 > -0."""
    return _minmax(a, b, ieee, greater=True)


def min_isa(a: Any, b: Any, ieee: bool = True) -> np.ndarray:
    """V_MIN_F32/F16/F64 and V_MIN_NUM_*: as ``max_isa`` with -0 < +0."""
    return _minmax(a, b, ieee, greater=False)


def _is_snan(x: np.ndarray) -> np.ndarray:
    ut = {2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
    bit = {2: 0x0200, 4: 0x00400000, 8: 0x0008000000000000}[x.dtype.itemsize]
    return np.asarray(np.isnan(x) & ((x.view(ut) & ut(bit)) == 0))


def _minmax(a: Any, b: Any, ieee: bool, greater: bool) -> np.ndarray:
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    with fp_quiet(invalid="ignore"):
        both_zero = (a == 0) & (b == 0)
        if greater:
            pick_a = (a > b) | (both_zero & ~np.signbit(a) & np.signbit(b))
        else:
            pick_a = (a < b) | (both_zero & np.signbit(a) & ~np.signbit(b))
    r = np.where(pick_a, a, b)
    na, nb = np.isnan(a), np.isnan(b)
    if not (na.any() or nb.any()):
        return np.asarray(r)
    if ieee:
        # the pseudocode's branches, last applied = first tested
        sa, sb = _is_snan(a), _is_snan(b)
        r = np.where(na, b, r)  # isQuietNAN(S0) -> S1
        r = np.where(nb, a, r)  # isQuietNAN(S1) -> S0
        r = np.where(sb, quiet_nan(b), r)
        r = np.where(sa, quiet_nan(a), r)
    else:
        r = np.where(nb, a, r)
        r = np.where(na, b, r)
        r = np.where(na & nb, quiet_nan(a), r)
    return np.asarray(r, a.dtype)


def maximum_isa(a: Any, b: Any, greater: bool = True) -> np.ndarray:
    """V_MAXIMUM_F32 / V_MINIMUM_F32 (gfx12 pseudocode): a NaN operand wins (a signalling
    one quieted, S0 before S1); +0 > -0."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    r = _minmax(a, b, False, greater)
    na, nb = np.isnan(a), np.isnan(b)
    r = np.where(nb, b, r)  # isQuietNAN(S1) -> S1
    r = np.where(na, a, r)  # isQuietNAN(S0) -> S0
    r = np.where(_is_snan(b), quiet_nan(b), r)
    r = np.where(_is_snan(a), quiet_nan(a), r)
    return np.asarray(r, a.dtype)


def round_odd_f32(x: Any) -> np.ndarray:
    """f64 -> f32 rounding to odd: an inexact result gets an odd last bit.  Followed by a
    nearest-even rounding to a format of at most 22 significant bits (f16, bf16) it equals
    one rounding of x (Boldo & Melquiond 2008)."""
    x = np.asarray(x, np.float64)
    with fp_quiet(invalid="ignore", over="ignore"):
        f = x.astype(np.float32)
        inexact = (f.astype(np.float64) != x) & np.isfinite(x) & np.isfinite(f)
    if not inexact.any():
        return np.asarray(f)
    bits = f.view(np.uint32).astype(np.int64)
    step = np.where(np.abs(x) > np.abs(f.astype(np.float64)), 1, -1)
    bits = np.where(inexact & ((bits & 1) == 0), bits + step, bits)
    return np.asarray(bits.astype(np.uint32).view(np.float32))


def mix_f16(a: Any, b: Any, c: Any) -> np.ndarray:
    """v_fma_mix{lo,hi}_f16's result as f16 bits (uint16) for f64 operands that are f16 or
    f32 values (broadcasting): a*b + c rounded once to f32, then ``f32_to_f16``.  The
    compiled loop of ``hqval.emu.fastfma`` where it is available, else ``mix_f16_numpy``;
    the two are bit-identical (``tests/emu/test_fastfma.py``)."""
    return _compiled(2, np.uint16, mix_f16_numpy, a, b, c)


def mix_f16_numpy(a: Any, b: Any, c: Any) -> np.ndarray:
    """The oracle of ``mix_f16``: ``fma_odd_numpy``, the f64 -> f32 cast, ``f32_to_f16``."""
    r = fma_odd_numpy(a, b, c)
    with fp_quiet(invalid="ignore", over="ignore"):
        f = r.astype(np.float32)
    return np.asarray(f32_to_f16(f).view(np.uint16))


fastfma._ORACLE[0] = (fma_odd_numpy, fma_f32_numpy, mix_f16_numpy)
