"""Affine formats (qt=6, 13, 44, 45, retired compact): byte layout, the section 3 encoder to
the letter, exact decode, and the bad-input refusals."""

from __future__ import annotations

import shutil
import struct
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from hqval.formats import by_qt, fma_f32
from hqval.formats.affine import AffineFormat

AFFINE = (6, 13, 44, 45, 1045)


def ref_encode(fmt: AffineFormat, w: np.ndarray) -> bytes:
    """Section 3 with scalar numpy arithmetic, one weight at a time: the reference the
    vectorised encoder must match byte for byte."""
    out = bytearray()
    n = fmt.sub_block
    for row in w:
        for g in range(len(row) // 256):
            grp = row[g * 256:(g + 1) * 256]
            hdr = bytearray()
            qs: list[int] = []
            for h in range(256 // n):
                x = grp[h * n:(h + 1) * n]
                lo, hi = np.float32(x.min()), np.float32(x.max())
                step = np.float32(hi - lo) / np.float32(15)
                if fmt.header == "f16":
                    sc16, z16 = np.float16(step), np.float16(lo)
                    hdr += struct.pack("<ee", float(sc16), float(z16))
                    s, z = np.float32(sc16), np.float32(z16)
                else:
                    hdr += struct.pack("<ff", float(step), float(lo))
                    s, z = step, lo
                for v in x:
                    if s == 0:
                        qs.append(0)
                        continue
                    with np.errstate(over="ignore"):
                        r = np.float32(np.float32(v - z) / s)
                    qs.append(int(min(max(np.rint(r), 0), 15)))
            pad = fmt.payload_offset - len(hdr)
            out += hdr + bytes(pad)
            out += bytes(qs[2 * j] | (qs[2 * j + 1] << 4) for j in range(128))
    return bytes(out)


def weights(max_rows: int = 2, groups: int = 2, bound: float = 1e3) -> st.SearchStrategy:
    shape = st.tuples(st.integers(1, max_rows), st.integers(1, groups).map(lambda g: 256 * g))
    return shape.flatmap(lambda s: arrays(np.float32, s, elements=st.floats(
        -bound, bound, width=32, allow_nan=False, allow_infinity=False)))


@pytest.mark.parametrize("qt", AFFINE)
@settings(max_examples=25, deadline=None)
@given(w=weights())
def test_encoder_matches_section3_reference_bytes(qt: int, w: np.ndarray) -> None:
    fmt = by_qt(qt)
    assert isinstance(fmt, AffineFormat)
    assert fmt.encode(w).tobytes() == ref_encode(fmt, w)


def test_layout_qt44_by_hand() -> None:
    # half 0: 0..127 * 0.5 / 127 ... built so the header values are exact in fp16
    q = np.arange(256) % 16
    w = np.empty((1, 256), np.float32)
    w[0, :128] = -1.0 + 0.25 * q[:128]      # lo -1, hi 2.75, step 0.25
    w[0, 128:] = 8.0 + 0.5 * q[128:]        # lo 8, hi 15.5, step 0.5
    b = by_qt(44).encode(w)[0]
    assert b.shape == (136,)
    assert struct.unpack("<eeee", b[:8].tobytes()) == (0.25, -1.0, 0.5, 8.0)
    # byte j: weight 2j low nibble, weight 2j+1 high nibble
    assert b[8] == (q[0] | q[1] << 4) and b[8 + 64] == (q[128] | q[129] << 4)
    assert np.array_equal(by_qt(44).nibbles(b[None], 256)[0], q)
    assert np.array_equal(by_qt(44).decode(b[None], 256), w)


def test_layout_qt45_pad_and_qt6_f32_header() -> None:
    w = np.linspace(-3.0, 4.5, 256, dtype=np.float32)[None]
    b45 = by_qt(45).encode(w)[0]
    assert struct.unpack("<ee", b45[:4].tobytes()) == (0.5, -3.0)
    assert b45[4:8].tolist() == [0, 0, 0, 0]
    b1 = by_qt(6).encode(w)[0]
    assert struct.unpack("<ff", b1[:8].tobytes()) == (0.5, -3.0)
    assert b1[8:].tobytes() == b45[8:].tobytes()
    bc = by_qt(1045).encode(w)[0]
    assert bc.size == 132 and bc[4:].tobytes() == b45[8:].tobytes()


@pytest.mark.parametrize("qt", (44, 45))
@settings(max_examples=40, deadline=None)
@given(w=weights(bound=50.0))
def test_pad_bytes_zero_and_header_between_payload(qt: int, w: np.ndarray) -> None:
    g = by_qt(qt).encode(w).reshape(w.shape[0], -1, 136)
    if qt == 45:
        assert (g[:, :, 4:8] == 0).all()
    s, z = by_qt(qt).headers(g.reshape(w.shape[0], -1), w.shape[1])
    assert np.isfinite(s).all() and np.isfinite(z).all() and (s >= 0).all()


def _bound(fmt: AffineFormat, w: np.ndarray, blob: np.ndarray) -> np.ndarray:
    """Per-weight error bound: half a (stored) step inside the grid, the header's rounding
    at the edges (fp16 lo or 15*step may miss the true extremes), plus the f32 rounding of
    computing (w - z) / st (2 roundings: <= 15 * st * 2^-23) and of the fma (half an ulp
    of the result)."""
    M, K = w.shape
    n = fmt.sub_block
    s, z = fmt.headers(blob, K)
    x = w.reshape(M, K // 256, 256 // n, n).astype(np.float64)
    s64, z64 = s.astype(np.float64), z.astype(np.float64)
    lo, hi = x.min(-1), x.max(-1)
    edge = np.maximum(np.maximum(z64 - lo, 0), np.maximum(hi - (z64 + 15 * s64), 0))
    mag = np.maximum(np.abs(x).max(-1), np.abs(z64) + 15 * s64)
    bound = np.maximum(s64 / 2, edge) + 15 * s64 * 2.0**-23 + np.spacing(
        mag.astype(np.float32)).astype(np.float64)
    return np.broadcast_to(bound[..., None], x.shape).reshape(M, K)


@pytest.mark.parametrize("qt", AFFINE)
@settings(max_examples=40, deadline=None)
@given(w=weights(bound=100.0))
def test_reconstruction_within_half_step(qt: int, w: np.ndarray) -> None:
    fmt = by_qt(qt)
    assert isinstance(fmt, AffineFormat)
    blob = fmt.encode(w)
    err = np.abs(fmt.decode(blob, w.shape[1]).astype(np.float64) - w)
    assert (err <= _bound(fmt, w, blob)).all()


@pytest.mark.parametrize("qt", AFFINE)
def test_gaussian_error_is_half_a_step(qt: int) -> None:
    """On ordinary weights the header rounding is far below a step, so the bound is the
    plain half step (+ f32 rounding)."""
    fmt = by_qt(qt)
    w = (np.random.default_rng(3).standard_normal((8, 1024)) * 0.011).astype(np.float32)
    blob = fmt.encode(w)
    s, _ = fmt.headers(blob, 1024)
    n = fmt.sub_block
    step = np.repeat(s.reshape(8, -1), n, axis=1).astype(np.float64)
    err = np.abs(fmt.decode(blob, 1024).astype(np.float64) - w)
    assert (err <= step / 2 * (1 + 2.0**-12) + 1e-9).all()


@settings(max_examples=60, deadline=None)
@given(sc=st.floats(2.0**-14, 60.0, width=16), z=st.floats(-1000, 1000, width=16),
       data=st.data())
def test_equal_halves_qt44_decodes_like_qt6_on_same_nibbles(
    sc: float, z: float, data: st.DataObject
) -> None:
    q = np.array(data.draw(st.lists(st.integers(0, 15), min_size=256, max_size=256)), np.uint8)
    payload = (q[0::2] | (q[1::2] << 4)).astype(np.uint8)
    b44 = np.frombuffer(struct.pack("<eeee", sc, z, sc, z) + payload.tobytes(), np.uint8)
    b1 = np.frombuffer(struct.pack("<ff", sc, z) + payload.tobytes(), np.uint8)
    b45 = np.frombuffer(struct.pack("<ee", sc, z) + bytes(4) + payload.tobytes(), np.uint8)
    d44 = by_qt(44).decode(b44[None], 256)
    for qt, b in ((6, b1), (13, b1), (45, b45)):
        assert np.array_equal(by_qt(qt).decode(b[None], 256).view(np.uint32), d44.view(np.uint32))


@pytest.mark.parametrize("qt", AFFINE)
@settings(max_examples=40, deadline=None)
@given(c=st.floats(-60000, 60000, width=16), other=st.floats(-10, 10, width=32))
def test_degenerate_constant_half_is_exact(qt: int, c: float, other: float) -> None:
    fmt = by_qt(qt)
    w = np.full((1, 512), other, np.float32)
    w[0, :128] = c  # half 0 of group 0 constant
    w[0, 256:] = c  # all of group 1 constant
    if fmt.sub_block == 256:
        w[0, 128:256] = c
    blob = fmt.encode(w)
    d = fmt.decode(blob, 512)
    mask = w == np.float32(c)
    # Numerically exact.  A -0.0 constant decodes to +0.0, as the kernel's
    # fma(0, 0, -0.0) = +0.0 does, so the comparison is by value, not by bits.
    assert (d[mask] == w[mask]).all()
    if c != 0:
        assert np.array_equal(d[mask].view(np.uint32), w[mask].view(np.uint32))
    s, _ = fmt.headers(blob, 512)
    assert s[0, 1].tolist() == [0.0] * s.shape[-1]
    assert (fmt.nibbles(blob, 512)[0, 256:] == 0).all()


# -- the fma --------------------------------------------------------------------------
def exact_fma_f32(q: int, s: np.float32, z: np.float32) -> np.float32:
    """Reference: exact rational q*s+z rounded once to f32 (round half to even)."""
    exact = Fraction(q) * Fraction(float(s)) + Fraction(float(z))
    lo = np.float32(float(exact))
    # float(Fraction) is correctly rounded to f64, then f32 could double-round: step to
    # whichever f32 neighbour is truly nearest.
    cands = [np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))]
    dist = [abs(Fraction(float(c)) - exact) for c in cands]
    best = min(dist)
    ties = [c for c, d in zip(cands, dist, strict=True) if d == best]
    if len(ties) == 1:
        return ties[0]
    return next(c for c in ties if int(np.float32(c).view(np.uint32)) % 2 == 0)


def test_fma_avoids_double_rounding() -> None:
    """q*s is exactly an f32 midpoint and zero is a tiny negative: the exact sum sits just
    below the midpoint.  A plain f64 add loses ``zero`` and the cast then ties to even, one
    ulp high; the kernel's single-rounding fma does not."""
    s = np.float32(1 + 2.0**-23)
    z = np.float32(-(2.0**-80))
    want = exact_fma_f32(3, s, z)
    assert want == np.float32(3 + 2.0**-22)
    naive = np.float32(np.float64(3) * np.float64(s) + np.float64(z))
    assert naive != want  # the hazard is real
    got = fma_f32(np.array([3], np.uint8), np.array([s]), np.array([z]))[0]
    assert got.view(np.uint32) == want.view(np.uint32)


@settings(max_examples=300, deadline=None)
@given(q=st.integers(0, 15), s=st.floats(0, 1e4, width=32), z=st.floats(-1e4, 1e4, width=32))
def test_fma_f32_is_correctly_rounded(q: int, s: float, z: float) -> None:
    got = fma_f32(np.array([q], np.uint8), np.array([s], np.float32), np.array([z], np.float32))
    want = exact_fma_f32(q, np.float32(s), np.float32(z))
    assert got[0].view(np.uint32) == np.float32(want).view(np.uint32)


# -- bad input --------------------------------------------------------------------------
@pytest.mark.parametrize("qt", AFFINE)
def test_bad_weights_refused(qt: int) -> None:
    fmt = by_qt(qt)
    w = np.zeros((2, 256), np.float32)
    w[1, 7] = np.nan
    with pytest.raises(ValueError, match=r"non-finite.*\[1, 7\]"):
        fmt.encode(w)
    with pytest.raises(ValueError, match="not a positive multiple of 256"):
        fmt.encode(np.zeros((2, 300), np.float32))
    with pytest.raises(ValueError, match="float32"):
        fmt.encode(np.zeros((2, 256), np.float64))
    with pytest.raises(ValueError, match="2-D"):
        fmt.encode(np.zeros(256, np.float32))
    with pytest.raises(ValueError, match="no rows"):
        fmt.encode(np.zeros((0, 256), np.float32))


@pytest.mark.parametrize("qt", (44, 45, 1045))
def test_fp16_overflow_refused(qt: int) -> None:
    w = np.zeros((3, 512), np.float32)
    w[2, 300] = -70000.0  # group 1 of row 2: its zero (the min) has no fp16
    with pytest.raises(ValueError, match=r"overflow the fp16.*row 2, group 1"):
        by_qt(qt).encode(w)
    w[2, 300], w[2, 301] = -60000.0, 1e6  # zero fits; step 70667 does not
    with pytest.raises(ValueError, match=r"overflow the fp16.*row 2, group 1"):
        by_qt(qt).encode(w)
    w[2, 301] = 70000.0  # max above 65504 is fine: it is z + 15*step, formed in f32
    blob = by_qt(qt).encode(w)
    assert abs(float(by_qt(qt).decode(blob, 512)[2, 301]) - 70000.0) < 0.51 * 130000 / 15


def test_f32_range_overflow_refused() -> None:
    w = np.zeros((1, 256), np.float32)
    w[0, 0], w[0, 1] = -3e38, 3e38
    with pytest.raises(ValueError, match="overflow the f32"):
        by_qt(6).encode(w)


@pytest.mark.parametrize("qt", AFFINE)
def test_bad_blob_refused(qt: int) -> None:
    fmt = by_qt(qt)
    blob = fmt.encode(np.zeros((2, 512), np.float32))
    with pytest.raises(ValueError, match="uint8"):
        fmt.decode(blob.astype(np.int16), 512)
    with pytest.raises(ValueError, match=r"another format or another K"):
        fmt.decode(blob, 768)
    with pytest.raises(ValueError, match="2-D"):
        fmt.decode(blob.reshape(-1), 512)
    other = 132 if fmt.group_bytes == 136 else 136
    with pytest.raises(ValueError, match="stride"):
        fmt.decode(np.zeros((2, 2 * other), np.uint8), 512)


HIP_DECODE = """extern "C" __attribute__((global)) void deq(const unsigned char* q, const float* s,
                                              const float* z, float* out) {
  unsigned i = __builtin_amdgcn_workitem_id_x();
  out[i] = (float)(q[i] & 15) * s[i >> 7] + z[i >> 7];
}
"""


@pytest.mark.skipif(shutil.which("clang-19") is None,
                    reason="needs clang-19 and llvm-objdump-19 (apt-get install clang-19 llvm-19)")
@pytest.mark.parametrize("arch", ["gfx1010", "gfx1100", "gfx1201"])
def test_hip_contracts_decode_into_one_fma(arch: str, tmp_path: Path) -> None:
    """The decode model (one rounding of q*sc + zp) is what the compiler emits: HIP's default
    fp-contract fuses the kernel's expression into a single v_fma/v_fmac_f32."""
    d = tmp_path
    (d / "k.hip").write_text(HIP_DECODE)
    subprocess.run(["clang-19", "-x", "hip", f"--offload-arch={arch}", "-nogpulib",
                    "-nogpuinc", "--cuda-device-only", "--no-gpu-bundle-output", "-O3",
                    str(d / "k.hip"), "-o", str(d / "k.co")], check=True, timeout=120)
    asm = subprocess.run(["llvm-objdump-19", "-d", f"--mcpu={arch}", str(d / "k.co")],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    ops = [ln.split()[0] for ln in asm.splitlines() if ln.startswith("\tv_")]
    assert any(o.startswith(("v_fma_f32", "v_fmac_f32")) for o in ops), ops
    assert not any(o.startswith(("v_mul_f32", "v_add_f32")) for o in ops), ops
