"""mq4_k (144 B hierarchical candidate): layout, code packing, grid coverage, exact decode."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from hqval.formats import by_name, fma_f32
from hqval.formats.hierarchical import NSUB, pack_codes, unpack_codes

FMT = by_name("mq4_k")


@settings(max_examples=50, deadline=None)
@given(codes=arrays(np.uint8, (3, 16), elements=st.integers(0, 63)))
def test_code_packing_roundtrips(codes: np.ndarray) -> None:
    raw = pack_codes(codes)
    assert raw.shape == (3, 12)
    assert np.array_equal(unpack_codes(raw), codes)
    # code i sits at bits 6i..6i+5 of the little-endian 96-bit integer
    for row, r in zip(codes, raw, strict=True):
        v = int.from_bytes(r.tobytes(), "little")
        assert [(v >> (6 * i)) & 63 for i in range(16)] == row.tolist()


def test_layout_by_hand() -> None:
    w = np.zeros((1, 256), np.float32)
    w[0, :32] = np.linspace(-1.0, 1.0, 32)
    w[0, 32:64] = 0.5
    b = FMT.encode(w)[0]
    assert b.size == 144
    d, dmin = struct.unpack("<ee", b[:4].tobytes())
    codes = unpack_codes(b[None, 4:16])[0]
    sc, m = codes[:NSUB], codes[NSUB:]
    assert dmin * m[0] >= 1.0 and dmin * (m[0] - 1) < 1.0  # smallest code covering -1
    assert (m[1:] == 0).all()  # sub-blocks 1..7 have min >= 0, so zero offset 0
    assert d * sc[0] * 15 - dmin * m[0] >= 1.0  # grid reaches the max
    scale, zero = FMT.headers(b[None], 256)
    assert scale[0, 0, 0] == np.float32(d) * sc[0] and zero[0, 0, 0] == -np.float32(dmin) * m[0]
    q = FMT.nibbles(b[None], 256)
    assert q[0, 2] == b[17] & 15 and q[0, 3] == b[17] >> 4


@settings(max_examples=60, deadline=None)
@given(w=st.tuples(st.integers(1, 3), st.integers(1, 2)).flatmap(
    lambda s: arrays(np.float32, (s[0], 256 * s[1]), elements=st.floats(
        -100, 100, width=32, allow_nan=False))))
@example(w=np.full((1, 256), -7.4126086, np.float32))  # all negative: the grid's top is hi
def test_grid_covers_and_error_within_half_step(w: np.ndarray) -> None:
    blob = FMT.encode(w)
    M, K = w.shape
    scale, zero = FMT.headers(blob, K)
    x = w.reshape(M, K // 256, NSUB, 32).astype(np.float64)
    s64, z64 = scale.astype(np.float64), zero.astype(np.float64)
    # coverage: z <= min(lo, 0) and z + 15 s >= hi (up to f64 rounding of the fit)
    assert (z64 <= np.minimum(x.min(-1), 0)).all()
    # (the slack is 1e-15 of |hi| below hi: hi * (1 - 1e-15) would lie above a negative
    # hi, demanding more than exact coverage of a group whose values are all negative)
    hi = x.max(-1)
    assert (z64 + 15 * s64 >= hi - np.abs(hi) * 1e-15).all()
    err = np.abs(FMT.decode(blob, K).astype(np.float64).reshape(x.shape) - x)
    # half a step, the f32 rounding of (w - z) / s (<= 15 s 2^-23) and of the fma
    bound = s64 / 2 + 15 * s64 * 2.0**-23 + np.spacing(
        np.maximum(np.abs(x).max(-1), np.abs(z64) + 15 * s64).astype(np.float32))
    assert (err <= bound[..., None]).all()


def test_decode_is_fma_of_headers() -> None:
    w = (np.random.default_rng(1).standard_normal((4, 512)) * 0.02).astype(np.float32)
    blob = FMT.encode(w)
    scale, zero = FMT.headers(blob, 512)
    q = FMT.nibbles(blob, 512).reshape(4, 2, NSUB, 32)
    want = fma_f32(q, scale[..., None], zero[..., None]).reshape(4, 512)
    assert np.array_equal(FMT.decode(blob, 512).view(np.uint32), want.view(np.uint32))


def test_overflow_refused() -> None:
    w = np.zeros((1, 256), np.float32)
    w[0, 5] = 1e8  # step 6.7e6 / 63 = 1.06e5 > 65504
    with pytest.raises(ValueError, match=r"super-d.*overflows fp16"):
        FMT.encode(w)
    w[0, 5] = -1e8
    with pytest.raises(ValueError, match=r"super-dmin.*overflows fp16"):
        FMT.encode(w)


def test_grid_reaches_a_max_far_below_the_zero() -> None:
    """hi - zero absorbs hi = FLT_MIN beside zero = -0.2 in f64; the grid must still reach
    hi (it used to stop at exactly 0: the case hypothesis found)."""
    w = np.full((1, 256), -0.2, np.float32)
    w[0, 0] = np.float32(1.1754944e-38)
    scale, zero = FMT.headers(FMT.encode(w), 256)
    top = zero.astype(np.float64) + 15 * scale.astype(np.float64)
    assert top[0, 0, 0] >= np.float64(w[0, 0])
