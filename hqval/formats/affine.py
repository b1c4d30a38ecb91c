"""Affine min/max formats: qt=6 HFQ4G256, qt=13 MQ4G256, qt=44 MQ4G256V2, qt=45 MQ4CG256
and the retired 132 B compact form.

All five share one rule (design note section 3): per sub-block, ``lo = min``, ``hi = max``,
``step = (hi - lo) / 15`` in f32, header rounded to its stored precision, nibbles
``q = clamp(rint((w - z) / st), 0, 15)`` against the ROUND-TRIPPED header ``(st, z)``.
They differ only in sub-block size, header precision and where the payload sits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from hqval.formats.base import (
    GROUP_WEIGHTS,
    F32Array,
    Format,
    U8Array,
    pack_nibbles,
    unpack_nibbles,
)

# Smallest magnitude that rounds to +-inf in fp16 (65504 + half an ulp of 32).
F16_OVERFLOW = 65520.0


@dataclass(frozen=True, kw_only=True)
class AffineFormat(Format):
    """``header``: stored precision of scale and zero ("f32" or "f16").  ``halves``: number
    of (scale, zero) pairs per 256-weight group, packed back to back from byte 0 as
    ``scale0, zero0, scale1, zero1``.  Bytes between the header and ``payload_offset`` are
    zero padding."""

    header: Literal["f32", "f16"]
    halves: int

    @property
    def sub_block(self) -> int:
        return GROUP_WEIGHTS // self.halves

    @property
    def _hdr_dtype(self) -> np.dtype[np.float32] | np.dtype[np.float16]:
        return np.dtype("<f4") if self.header == "f32" else np.dtype("<f2")

    @property
    def header_bytes(self) -> int:
        return self.halves * 2 * self._hdr_dtype.itemsize

    def __post_init__(self) -> None:
        if self.payload_offset < self.header_bytes:
            raise ValueError(f"{self.name}: payload at +{self.payload_offset} overlaps header")
        if self.payload_offset + GROUP_WEIGHTS // 2 != self.group_bytes:
            raise ValueError(f"{self.name}: payload does not end at the group stride")

    # -- encode -------------------------------------------------------------------------
    def _encode_rows(self, w: F32Array, out: U8Array, row0: int) -> None:
        m, K = w.shape
        G = K // GROUP_WEIGHTS
        x = w.reshape(m, G, self.halves, self.sub_block)
        lo = x.min(axis=-1)
        hi = x.max(axis=-1)
        with np.errstate(over="ignore"):
            step = (hi - lo) / np.float32(15)  # f32, as the design note requires
        if self.header == "f16":
            big = (np.abs(step) >= F16_OVERFLOW) | (np.abs(lo) >= F16_OVERFLOW)
            self._refuse_overflow(big, row0, lo, hi, "fp16 (max 65504)")
            st = step.astype(np.float16).astype(np.float32)
            z = lo.astype(np.float16).astype(np.float32)
        else:
            self._refuse_overflow(~np.isfinite(step), row0, lo, hi, "f32")
            st, z = step, lo
        q = quantize(x, st, z)

        g = out.reshape(m, G, self.group_bytes)
        hdr = np.empty((m, G, self.halves, 2), dtype=self._hdr_dtype)
        hdr[..., 0] = st
        hdr[..., 1] = z
        g[:, :, :self.header_bytes] = hdr.view(np.uint8).reshape(m, G, self.header_bytes)
        g[:, :, self.header_bytes:self.payload_offset] = 0
        g[:, :, self.payload_offset:] = pack_nibbles(q.reshape(m, G, GROUP_WEIGHTS))

    def _refuse_overflow(
        self, bad: npt.NDArray[np.bool_], row0: int, lo: F32Array, hi: F32Array, what: str
    ) -> None:
        if not bad.any():
            return
        r, g, h = (int(v) for v in np.argwhere(bad)[0])
        where = f"row {row0 + r}, group {g}" + (f", half {h}" if self.halves > 1 else "")
        raise ValueError(
            f"{self.name}: {int(bad.sum())} sub-block(s) overflow the {what} header, first at "
            f"{where} (min {lo[r, g, h]:.6g}, max {hi[r, g, h]:.6g}); rescale the tensor or "
            f"use a format with a wider header"
        )

    # -- decode -------------------------------------------------------------------------
    def headers(self, blob: npt.ArrayLike, K: int) -> tuple[F32Array, F32Array]:
        g = self.groups(blob, K)
        raw = np.ascontiguousarray(g[:, :, :self.header_bytes])
        hdr = raw.view(self._hdr_dtype).reshape(g.shape[0], g.shape[1], self.halves, 2)
        wide = hdr.astype(np.float32)
        return wide[..., 0], wide[..., 1]

    def _decode_rows(self, blob: U8Array, out: F32Array) -> None:
        m = blob.shape[0]
        K = out.shape[1]
        G = K // GROUP_WEIGHTS
        scale, zero = self.headers(blob, K)
        g = blob.reshape(m, G, self.group_bytes)
        q = unpack_nibbles(g[:, :, self.payload_offset:]).reshape(
            m, G, self.halves, self.sub_block
        )
        out.reshape(m, G, self.halves, self.sub_block)[...] = fma_f32(
            q, scale[..., None], zero[..., None]
        )


def quantize(x: F32Array, st: F32Array, z: F32Array) -> U8Array:
    """``clamp(rint((x - z) / st), 0, 15)`` with ``st``/``z`` broadcast over the last axis;
    ``st == 0`` (a degenerate constant sub-block, or a step that underflowed its header)
    gives q = 0, so the decoder returns exactly ``z``."""
    st_safe = np.where(st == 0, np.float32(np.inf), st)[..., None]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        r = np.subtract(x, z[..., None])
        np.divide(r, st_safe, out=r)
    np.rint(r, out=r)  # half to even
    np.clip(r, 0, 15, out=r)
    return r.astype(np.uint8)


def fma_f32(q: npt.ArrayLike, scale: npt.ArrayLike, zero: npt.ArrayLike) -> F32Array:
    """``fma(q, scale, zero)`` rounded once to f32, the value HIP computes for
    ``q * sc + zp`` (fp-contract fuses it into v_fma_f32).

    When every scale has at most 20 significant bits (fp16-widened headers, mq4_k's
    ``d * sc``), ``q * scale`` is exact in f32 (4 + 20 <= 24 bits), so f32 multiply then add
    is the fma.  Otherwise (qt=6/13's f32 scale) the product is formed exactly in f64
    (4 + 24 <= 53 bits) and the sum ``p + zero`` is rounded to odd at 53 bits before the final
    rounding to f32: a plain f64 add followed by a cast would round twice and can miss the
    correct f32 neighbour when the exact sum sits just off an f32 midpoint (for example
    ``|zero|`` far below ``q * scale``).  Round-to-odd at precision >= 24 + 2 makes the second
    rounding correct (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums",
    IEEE TC 2008).
    """
    qa = np.asarray(q)
    s = np.asarray(scale, dtype=np.float32)
    z = np.asarray(zero, dtype=np.float32)
    if not (np.asarray(s).view(np.uint32) & np.uint32(0xF)).any():
        r = np.empty(np.broadcast_shapes(qa.shape, s.shape, z.shape), dtype=np.float32)
        np.multiply(qa, s, out=r)  # exact: no rounding happens here
        with np.errstate(over="ignore", invalid="ignore"):
            np.add(r, z, out=r)  # the one rounding of the fma
        return r
    p = qa.astype(np.float64) * s.astype(np.float64)  # exact
    z64 = np.broadcast_to(z.astype(np.float64), p.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        t = p + z64
    # The cast can only round wrongly where t is exactly an f32 midpoint (a midpoint
    # strictly between the exact sum and t would be an f64 nearer than t) or where the
    # result is f32-subnormal (there the midpoints sit at other bit positions).  Fix just
    # those few by rounding t to odd: TwoSum recovers the lost part of p + z exactly.
    bits = t.view(np.int64)
    suspect = ((bits & _BELOW_F32) == _F32_HALF_ULP) | (np.abs(t) < _F32_MIN_NORMAL)
    if suspect.any():
        i = np.nonzero(suspect)
        pi, zi, ti = p[i], z64[i], t[i]
        with np.errstate(over="ignore", invalid="ignore"):
            bb = ti - pi
            err = (pi - (ti - bb)) + (zi - bb)  # TwoSum: ti + err == pi + zi exactly
        fix = (err != 0) & ((ti.view(np.int64) & 1) == 0) & np.isfinite(ti)
        t[i] = np.where(fix, np.nextafter(ti, np.where(err > 0, np.inf, -np.inf)), ti)
    with np.errstate(over="ignore"):
        return t.astype(np.float32)


# f64 mantissa bits below f32 precision (52 - 23 = 29), and the pattern of an f32 midpoint.
_BELOW_F32 = np.int64((1 << 29) - 1)
_F32_HALF_ULP = np.int64(1 << 28)
_F32_MIN_NORMAL = float(np.finfo(np.float32).tiny)
