"""The ``Format`` protocol shared by every 4-bit codec, and the input checks they all use.

A format works on the *stored* domain: ``encode`` takes the weights exactly as the kernel
will see them after any rotation (see ``hqval.formats.rotation``) and ``decode`` returns
what a kernel computes from the bytes, bit for bit.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
import numpy.typing as npt

Status = Literal["shipping", "retired", "candidate"]

GROUP_WEIGHTS = 256

F32Array = npt.NDArray[np.float32]
U8Array = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class Format(abc.ABC):
    """One 4-bit weight format: identity, geometry, and its byte-exact codec.

    ``qt`` is the engine's dtype id where the engine allocated one (6, 13, 44, 45); formats
    the engine never allocated carry a suite-local id >= 1000 so tensor files can still
    self-describe (see ``hqval.formats.SUITE_LOCAL_QT``).
    """

    qt: int
    name: str
    group_bytes: int
    rotated: bool
    status: Status
    payload_offset: int
    description: str
    aliases: tuple[str, ...] = ()

    group_weights: ClassVar[int] = GROUP_WEIGHTS

    # -- geometry -----------------------------------------------------------------------
    def row_bytes(self, K: int) -> int:
        check_k(K, self.name)
        return (K // GROUP_WEIGHTS) * self.group_bytes

    def bytes_per_weight(self) -> float:
        return self.group_bytes / GROUP_WEIGHTS

    # -- codec --------------------------------------------------------------------------
    def encode(self, w: npt.ArrayLike) -> U8Array:
        """Quantize ``w`` (float32 [M, K], stored domain) into ``uint8[M, K//256*group_bytes]``.

        Raises ``ValueError`` naming the problem on bad input; nothing is returned partially.
        """
        arr = check_weights(w, self.name)
        M, K = arr.shape
        out = np.empty((M, self.row_bytes(K)), dtype=np.uint8)
        # Row chunks keep the temporaries inside the cache; the result does not depend on it.
        step = max(1, _CHUNK_WEIGHTS // K)
        for r0 in range(0, M, step):
            self._encode_rows(arr[r0:r0 + step], out[r0:r0 + step], r0)
        return out

    def decode(self, blob: npt.ArrayLike, K: int) -> F32Array:
        """Dequantize ``blob`` (uint8 [M, K//256*group_bytes]) into float32 [M, K], bit-exact
        with the kernels' ``fma(q, scale, zero)``."""
        b = self.check_blob(blob, K)
        M = b.shape[0]
        out = np.empty((M, K), dtype=np.float32)
        step = max(1, _CHUNK_WEIGHTS // K)
        for r0 in range(0, M, step):
            self._decode_rows(b[r0:r0 + step], out[r0:r0 + step])
        return out

    def roundtrip(self, w: npt.ArrayLike) -> F32Array:
        arr = check_weights(w, self.name)
        return self.decode(self.encode(arr), arr.shape[1])

    def groups(self, blob: npt.ArrayLike, K: int) -> U8Array:
        """The blob viewed as ``uint8[M, K//256, group_bytes]``."""
        b = self.check_blob(blob, K)
        return b.reshape(b.shape[0], K // GROUP_WEIGHTS, self.group_bytes)

    def nibbles(self, blob: npt.ArrayLike, K: int) -> U8Array:
        """The 4-bit codes as ``uint8[M, K]``: payload byte j holds weight 2j in its low
        nibble and weight 2j+1 in its high nibble."""
        g = self.groups(blob, K)
        payload = g[:, :, self.payload_offset:self.payload_offset + GROUP_WEIGHTS // 2]
        return unpack_nibbles(payload).reshape(g.shape[0], K)

    @abc.abstractmethod
    def headers(self, blob: npt.ArrayLike, K: int) -> tuple[F32Array, F32Array]:
        """The widened per-sub-block ``(scale, zero)``, each float32 [M, K//256, n_sub]: the
        exact f32 values a kernel feeds into ``fma(q, scale, zero)``."""

    @property
    @abc.abstractmethod
    def sub_block(self) -> int:
        """Weights sharing one (scale, zero): 256, 128 (qt=44) or 32 (mq4_k)."""

    @abc.abstractmethod
    def _encode_rows(self, w: F32Array, out: U8Array, row0: int) -> None: ...

    @abc.abstractmethod
    def _decode_rows(self, blob: U8Array, out: F32Array) -> None: ...

    # -- checks -------------------------------------------------------------------------
    def check_blob(self, blob: npt.ArrayLike, K: int) -> U8Array:
        check_k(K, self.name)
        b = np.asarray(blob)
        if b.dtype != np.uint8:
            raise ValueError(
                f"{self.name}: blob dtype is {b.dtype}, expected uint8; pass the bytes that "
                f"{self.name}.encode returned (or np.frombuffer(data, np.uint8))"
            )
        if b.ndim != 2:
            raise ValueError(
                f"{self.name}: blob has shape {b.shape}, expected 2-D [M, K//256*"
                f"{self.group_bytes}]; reshape it to one row per weight row"
            )
        want = self.row_bytes(K)
        if b.shape[1] != want:
            raise ValueError(
                f"{self.name}: blob rows are {b.shape[1]} bytes but K={K} needs "
                f"{K // GROUP_WEIGHTS} groups x {self.group_bytes} B = {want} B; the blob is "
                f"another format or another K (qt={self.qt} stride is {self.group_bytes} B)"
            )
        return np.ascontiguousarray(b)


# About 1 Mi weights per chunk: large enough to amortise numpy call overhead, small enough
# that the float32 temporaries of one chunk stay in L2/L3.
_CHUNK_WEIGHTS = 1 << 20


def check_k(K: int, name: str) -> None:
    if not isinstance(K, (int, np.integer)) or isinstance(K, bool):
        raise ValueError(f"{name}: K must be an int, got {type(K).__name__}")
    if K <= 0 or K % GROUP_WEIGHTS:
        raise ValueError(
            f"{name}: K={K} is not a positive multiple of {GROUP_WEIGHTS}; every format "
            f"packs whole {GROUP_WEIGHTS}-weight groups, so pad or split K first"
        )


def check_weights(w: npt.ArrayLike, name: str) -> F32Array:
    arr = np.asarray(w)
    if arr.dtype != np.float32:
        raise ValueError(
            f"{name}: weights dtype is {arr.dtype}, expected float32; convert with "
            f".astype(np.float32) (the kernels read f32 reconstruction, so the codec does too)"
        )
    if arr.ndim != 2:
        raise ValueError(f"{name}: weights have shape {arr.shape}, expected 2-D [M, K]")
    M, K = arr.shape
    if M == 0:
        raise ValueError(f"{name}: weights have no rows (shape {arr.shape})")
    check_k(K, name)
    finite = np.isfinite(arr)
    if not finite.all():
        bad = np.argwhere(~finite)
        r, c = (int(x) for x in bad[0])
        raise ValueError(
            f"{name}: {len(bad)} non-finite weight(s), first at [{r}, {c}] = {arr[r, c]}; "
            f"the codec cannot place NaN/Inf on a min/max grid, clean the tensor first"
        )
    return np.ascontiguousarray(arr)


def unpack_nibbles(payload: U8Array) -> U8Array:
    """``uint8[..., n]`` -> ``uint8[..., 2n]`` with element 2j the low nibble of byte j."""
    out = np.empty((*payload.shape, 2), dtype=np.uint8)
    np.bitwise_and(payload, 0x0F, out=out[..., 0])
    np.right_shift(payload, 4, out=out[..., 1])
    return out.reshape(*payload.shape[:-1], payload.shape[-1] * 2)


def pack_nibbles(q: U8Array) -> U8Array:
    """Inverse of ``unpack_nibbles``; ``q`` values must be in [0, 15].

    Each pair (q[2j], q[2j+1]) read as one little-endian u16 is ``q0 | q1 << 8``; OR-ing in
    itself shifted right by 4 puts ``q1 << 4`` next to ``q0`` in the low byte (5x faster
    than packing the strided pairs)."""
    pairs = np.ascontiguousarray(q).view("<u2")
    packed: U8Array = (pairs | (pairs >> 4)).astype(np.uint8)
    return packed
