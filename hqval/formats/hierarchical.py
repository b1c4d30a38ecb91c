"""``mq4_k``: the 144 B hierarchical candidate of design note section 1c.

Per 256-weight group: eight 32-weight sub-blocks, each with a 6-bit sub-scale ``sc`` and a
6-bit sub-min ``m`` against an fp16 super-scale ``d`` and super-min ``dmin`` (GGML Q4_K's
design, under the MQ line's FWHT rotation; the name cites that provenance).

Layout (little-endian), 144 B per group::

    [0..2)    d     fp16 super-scale
    [2..4)    dmin  fp16 super-min
    [4..16)   16 six-bit codes sc0..sc7, m0..m7; code i occupies bits 6i..6i+5 of the
              96-bit little-endian integer formed by these 12 bytes
    [16..144) 128 nibble bytes, byte j = weight 2j (low) | weight 2j+1 (high)

Decode: ``w = fma(q, d*sc_j, -(dmin*m_j))``.  ``d*sc_j`` and ``dmin*m_j`` are exact in f32
(11 + 6 bits), so the decode is one rounding, like the affine formats.

Like Q4_K the sub-zero is a non-positive offset: the grid of sub-block j spans
``[min(lo_j, 0), hi_j]``.  Encoding rounds ``d``/``dmin`` and each code UP so the
quantized grid always covers the sub-block; the nibbles are then fitted to the quantized
(scale, zero), the same round-tripped-header discipline as section 3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hqval.formats.affine import F16_OVERFLOW, fma_f32, quantize
from hqval.formats.base import GROUP_WEIGHTS, F32Array, Format, U8Array, pack_nibbles

SUB = 32
NSUB = GROUP_WEIGHTS // SUB
CODE_MAX = 63


@dataclass(frozen=True, kw_only=True)
class HierarchicalFormat(Format):
    @property
    def sub_block(self) -> int:
        return SUB

    def _encode_rows(self, w: F32Array, out: U8Array, row0: int) -> None:
        m, K = w.shape
        G = K // GROUP_WEIGHTS
        x = w.reshape(m, G, NSUB, SUB)
        # Header arithmetic in f64 (1/32 of the weights, so cheap): every bound below is
        # exact up to f64 rounding (~1e-16 relative), so the quantized grid covers
        # [min(lo, 0), hi].
        lo = np.minimum(x.min(axis=-1), np.float32(0)).astype(np.float64)
        hi = x.max(axis=-1).astype(np.float64)

        # Super-min first: the sub-zeros fix where each grid starts.
        dmin = _f16_round_up(lo.min(axis=-1) / -CODE_MAX, "dmin", row0, self.name)
        mcode = _code_up(-lo, dmin)
        zero = -(dmin[..., None] * mcode.astype(np.float32))  # exact in f32

        step = (hi - zero) / 15.0
        d = _f16_round_up(step.max(axis=-1) / CODE_MAX, "d", row0, self.name)
        scode = _code_up(step, d)
        scale = d[..., None] * scode.astype(np.float32)  # exact in f32
        # hi - zero absorbs a hi far below |zero| in f64 (hi = 1e-38 beside zero = -0.2),
        # so the grid can stop at 0 short of hi.  zero + 15 scale is exact in f64 (two f32
        # values), so this test is exact; a short sub-block asks for the next larger step.
        short = zero.astype(np.float64) + 15.0 * scale.astype(np.float64) < hi
        if short.any():
            step = np.where(short, np.nextafter(scale.astype(np.float64), np.inf), step)
            d = _f16_round_up(np.maximum(step.max(axis=-1) / CODE_MAX, d), "d", row0,
                              self.name)
            scode = _code_up(step, d)
            scale = d[..., None] * scode.astype(np.float32)

        q = quantize(x, scale, zero)

        g = out.reshape(m, G, self.group_bytes)
        sup = np.empty((m, G, 2), dtype="<f2")
        sup[..., 0] = d
        sup[..., 1] = dmin
        g[:, :, 0:4] = sup.view(np.uint8).reshape(m, G, 4)
        g[:, :, 4:16] = pack_codes(np.concatenate([scode, mcode], axis=-1))
        g[:, :, 16:] = pack_nibbles(q.reshape(m, G, GROUP_WEIGHTS))

    def headers(self, blob: npt.ArrayLike, K: int) -> tuple[F32Array, F32Array]:
        g = self.groups(blob, K)
        sup = np.ascontiguousarray(g[:, :, 0:4]).view("<f2").astype(np.float32)
        codes = unpack_codes(g[:, :, 4:16]).astype(np.float32)
        scale = sup[..., 0:1] * codes[..., :NSUB]
        zero = -(sup[..., 1:2] * codes[..., NSUB:])
        return scale, zero

    def _decode_rows(self, blob: U8Array, out: F32Array) -> None:
        m = blob.shape[0]
        K = out.shape[1]
        G = K // GROUP_WEIGHTS
        scale, zero = self.headers(blob, K)
        q = self.nibbles(blob, K).reshape(m, G, NSUB, SUB)
        out.reshape(m, G, NSUB, SUB)[...] = fma_f32(q, scale[..., None], zero[..., None])


def _f16_round_up(
    v: npt.NDArray[np.float64], what: str, row0: int, name: str
) -> F32Array:
    """Smallest fp16 >= v (v >= 0, computed in f64 so the bound itself is not rounded
    down), widened back to f32."""
    if (v >= F16_OVERFLOW).any():
        r, g = (int(i) for i in np.argwhere(v >= F16_OVERFLOW)[0])
        raise ValueError(
            f"{name}: super-{what} {v[r, g]:.6g} at row {row0 + r}, group {g} overflows "
            f"fp16 (max 65504); rescale the tensor"
        )
    h = v.astype(np.float16)
    low = h.astype(np.float64) < v
    h = np.where(low, np.nextafter(h, np.float16(np.inf)), h)
    return h.astype(np.float32)


def _code_up(num: npt.NDArray[np.float64], den: F32Array) -> npt.NDArray[np.uint8]:
    """Smallest code c in [0, 63] with ``c * den >= num`` (0 where den == 0, which only
    happens when every numerator is 0).  ``den`` is an fp16 value, so ``c * den`` is exact
    in f64 and the check after the ceiling makes the result exact whatever the quotient's
    rounding did."""
    den_b = np.broadcast_to(den[..., None].astype(np.float64), num.shape)
    safe = np.where(den_b == 0, 1.0, den_b)
    c = np.where(den_b == 0, 0.0, np.ceil(num / safe))
    c = c + (c * den_b < num)
    c = np.where((c > 0) & ((c - 1) * den_b >= num), c - 1, c)
    return np.clip(c, 0, CODE_MAX).astype(np.uint8)


def pack_codes(codes: npt.NDArray[np.integer[npt.NBitBase]]) -> U8Array:
    """16 six-bit codes -> 12 bytes, little-endian bit stream (4 codes per 3 bytes)."""
    c = codes.astype(np.uint32).reshape(*codes.shape[:-1], 4, 4)
    v = c[..., 0] | (c[..., 1] << 6) | (c[..., 2] << 12) | (c[..., 3] << 18)
    b = np.stack([v & 0xFF, (v >> 8) & 0xFF, (v >> 16) & 0xFF], axis=-1).astype(np.uint8)
    return b.reshape(*codes.shape[:-1], 12)


def unpack_codes(raw: U8Array) -> npt.NDArray[np.uint8]:
    b = raw.astype(np.uint32).reshape(*raw.shape[:-1], 4, 3)
    v = b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16)
    c = np.stack([(v >> s) & 0x3F for s in (0, 6, 12, 18)], axis=-1).astype(np.uint8)
    return c.reshape(*raw.shape[:-1], 16)
