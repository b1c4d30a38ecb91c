"""Floating-point arithmetic numpy lacks, done exactly.

``fma_f32`` is a single-rounding fused multiply-add.  The argument: the product of two
f32 values has at most 48 significant bits, so it is exact in f64.  The f64 sum
``s = p + c`` is rounded; TwoSum gives the exact error ``e`` (p + c = s + e exactly).
Rounding s to odd at 53 bits (nudge s one ulp toward e when e != 0 and s is even) and
then to f32 is correct rounding, because round-to-odd at p + 2 or more bits followed by
round-to-nearest-even at p bits equals one rounding at p bits (Boldo & Melquiond 2008);
53 >= 24 + 2, also for f32 subnormal results which have fewer bits."""

from __future__ import annotations

from typing import Any

import numpy as np


def _round_odd_f64(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    bits = s.view(np.int64)
    inexact = (e != 0) & np.isfinite(s) & ((bits & 1) == 0)
    if not inexact.any():
        return s
    # toward e: magnitude grows when e has s's sign
    step = np.where((e > 0) == (s > 0), 1, -1).astype(np.int64)
    return np.where(inexact, bits + step, bits).view(np.float64)


def fma_f32(a: Any, b: Any, c: Any) -> np.ndarray:
    """Correctly rounded a*b + c for float32 inputs (broadcasting)."""
    with np.errstate(invalid="ignore", over="ignore"):
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
    with np.errstate(invalid="ignore", over="ignore"):
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
        return np.asarray(np.where(np.isfinite(r), r, p + c), np.float64)


def fma_f16(a: Any, b: Any, c: Any) -> np.ndarray:
    """Correctly rounded f16 fma: a*b is exact in f32 (22 bits), a*b + c is exact in f64
    unless the exponents are far apart, where round-to-odd keeps it correct (53 >= 11+2)."""
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.asarray(a, np.float16).astype(np.float64) * np.asarray(b, np.float16)
        cc = np.asarray(c, np.float16).astype(np.float64)
        s = p + cc
        bp = s - cc
        e = (p - bp) + (cc - (s - bp))
        r = _round_odd_f64(np.asarray(s, np.float64), np.asarray(e, np.float64))
        return np.asarray(r.astype(np.float16))


def cvt_f32_to_i32(x: Any) -> np.ndarray:
    """v_cvt_i32_f32: truncate, saturate, NaN -> 0."""
    x = np.asarray(x, np.float32).astype(np.float64)
    r = np.trunc(np.nan_to_num(x, nan=0.0, posinf=2.0**31 - 1, neginf=-(2.0**31)))
    return np.asarray(np.clip(r, -(2.0**31), 2.0**31 - 1).astype(np.int64).astype(np.uint32))


def cvt_f32_to_u32(x: Any) -> np.ndarray:
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
