"""fparith: the single-rounding fma against exact rational arithmetic."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hqval.emu.fparith import cvt_f32_to_i32, cvt_f32_to_u32, fma_f16, fma_f32, fma_f64

f32s = st.floats(width=32, allow_nan=False, allow_infinity=False)


def correctly_rounded_f32(exact: Fraction) -> np.float32:
    """Round a rational to f32, nearest-even, by bracketing with f64 neighbours."""
    guess = np.float32(float(exact))
    with np.errstate(over="ignore"):
        cands = [np.nextafter(guess, np.float32(-np.inf)), guess,
                 np.nextafter(guess, np.float32(np.inf))]
    cands = [c for c in cands if np.isfinite(c)]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - exact),
                                     int(np.array(c).view(np.uint32)) & 1))
    return np.float32(best)


def test_double_rounding_case_rounds_once() -> None:
    u = np.float32(1 + 2.0**-12)
    got = fma_f32(u, u, np.float32(2.0**-70))
    assert got == np.float32(1 + 2.0**-11 + 2.0**-23)
    # the naive f64 route gets it wrong, which is why fma_f32 exists
    naive = np.float32(np.float64(u) * np.float64(u) + 2.0**-70)
    assert naive == np.float32(1 + 2.0**-11)


@settings(max_examples=400, deadline=None)
@given(f32s, f32s, f32s)
def test_fma_f32_is_correctly_rounded(a: float, b: float, c: float) -> None:
    a32, b32, c32 = np.float32(a), np.float32(b), np.float32(c)
    exact = Fraction(float(a32)) * Fraction(float(b32)) + Fraction(float(c32))
    got = fma_f32(a32, b32, c32)
    # overflow starts half an ulp (2^103) above the largest finite f32
    if abs(exact) >= Fraction(float(np.finfo(np.float32).max)) + 2**103:
        assert np.isinf(got)
        return
    want = correctly_rounded_f32(exact)
    assert got == want or (got == 0 and want == 0), (a32, b32, c32, got, want)


def test_fma_special_values() -> None:
    assert np.isnan(fma_f32(np.float32(np.inf), np.float32(0), np.float32(1)))
    assert fma_f32(np.float32(np.inf), np.float32(2), np.float32(1)) == np.inf
    assert np.isnan(fma_f32(np.float32(np.inf), np.float32(1), np.float32(-np.inf)))
    assert np.signbit(fma_f32(np.float32(-0.0), np.float32(1), np.float32(-0.0)))
    assert fma_f64(3.0, 1 / 3, -1.0) == float(Fraction(3) * Fraction(1 / 3) - 1)
    assert fma_f16(np.float16(0.5), np.float16(3), np.float16(1)) == np.float16(2.5)


def test_float_to_int_saturates_and_maps_nan_to_zero() -> None:
    x = np.array([1.9, -1.9, 3e9, -3e9, np.nan, np.inf], np.float32)
    assert cvt_f32_to_i32(x).view(np.int32).tolist() == [1, -1, 2**31 - 1, -(2**31), 0,
                                                          2**31 - 1]
    assert cvt_f32_to_u32(x).tolist() == [1, 0, 3000000000, 0, 0, 2**32 - 1]
