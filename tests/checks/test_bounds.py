"""The prefill bound's per-weight f16 rounding (hqval.checks.bounds.weight_rounding): its
assumption checked by computing the worst case of each way a kernel can hand the WMMA its
f16 weights, over every code 0..15 and every header of the fixtures."""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt
import pytest

from hqval import fixtures
from hqval.checks import inputs
from hqval.checks.bounds import F16_SUBNORMAL_ULP, U16, weight_rounding
from hqval.formats import by_qt

F64 = npt.NDArray[np.float64]


@functools.cache
def _every_code(qt: int) -> tuple[F64, F64, F64]:
    """(q, scale, zero) for every code 0..15 under every (scale, zero) of the prefill
    fixtures (gaussian and degenerate rows), each [headers, 16] in f64."""
    fmt = by_qt(qt)
    s_all, z_all = [], []
    for seed in (0, 1):
        blob = inputs.fixture_blob(fixtures.gaussian(16, 1024, seed, qts=(qt,)), qt)
        s, z = fmt.headers(blob, 1024)
        s_all.append(s.reshape(-1))
        z_all.append(z.reshape(-1))
    s = np.concatenate(s_all).astype(np.float64)[:, None]
    z = np.concatenate(z_all).astype(np.float64)[:, None]
    q = np.arange(16, dtype=np.float64)[None, :]
    return np.broadcast_to(q, (s.shape[0], 16)), np.broadcast_to(s, (s.shape[0], 16)), \
        np.broadcast_to(z, (s.shape[0], 16))


def _ratio(got: npt.NDArray[np.float16], exact: F64) -> float:
    """The worst |got - exact| over the bound weight_rounding allows."""
    return float(np.max(np.abs(got.astype(np.float64) - exact) / weight_rounding(exact)))


@pytest.mark.parametrize("qt", [6, 44, 45])
def test_one_rounding_of_the_exact_weight_is_inside_the_bound(qt: int) -> None:
    """The suite's GEMMs: q * scale + zero exact (a mixed-precision fma), rounded to f16
    once (numpy's f64 -> f16 conversion rounds to nearest even, as v_fma_mix does)."""
    q, s, z = _every_code(qt)
    exact = q * s + z  # exact in f64: 4-bit q times a 24-bit scale, plus the zero
    r = _ratio(exact.astype(np.float16), exact)
    assert r <= 1.0
    assert r > 0.5  # the worst case comes near the bound: it is no loose guess


@pytest.mark.parametrize("qt", [44, 45])
def test_an_f16_fma_of_the_f16_header_is_the_same_one_rounding(qt: int) -> None:
    """qt=44/45 headers are f16, so a kernel dequantising with an f16 fma of its header
    (scale and zero unchanged by the narrowing) rounds the exact weight once too."""
    q, s, z = _every_code(qt)
    assert np.array_equal(s.astype(np.float16).astype(np.float64), s)
    assert np.array_equal(z.astype(np.float16).astype(np.float64), z)
    assert _ratio((q * s + z).astype(np.float16), q * s + z) <= 1.0


@pytest.mark.parametrize("qt", [6, 44])
def test_two_f16_roundings_are_outside_the_bound(qt: int) -> None:
    """An f16 multiply then an f16 add (and, for qt=6, its f32 header narrowed to f16 first)
    rounds more than once: up to U16 (|q scale| + |w|) (+ U16 |zero|) per weight, beyond
    what weight_rounding allows -- such a kernel is outside the bound's derivation."""
    q, s, z = _every_code(qt)
    exact = q * s + z
    s16, z16 = s.astype(np.float16), z.astype(np.float16)
    two = (q.astype(np.float16) * s16).astype(np.float16) + z16  # numpy rounds each op
    assert _ratio(two, exact) > 1.0
    extra = np.abs(q * s) + (np.abs(z) + np.abs(q * s) if qt == 6 else 0.0)
    allowed = U16 * (1 + U16) ** 2 * (np.abs(exact) + extra) + F16_SUBNORMAL_ULP
    assert np.all(np.abs(two.astype(np.float64) - exact) <= allowed)
