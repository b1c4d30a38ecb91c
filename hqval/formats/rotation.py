"""FWHT-256 rotation of the MQ line (qt=13, 44, 45, mq4_k): ``y = H D x / 16`` per
256-weight group along K, with ``D`` a seeded +-1 sign vector and ``H`` the 256-point
Walsh-Hadamard matrix (Sylvester order).  ``H`` is symmetric and ``H H = 256 I``, so the
inverse is ``x = D H y / 16``.  The codecs work on the rotated (stored) domain; these two
functions are the only place the rotation happens.

The engine's own sign vectors (seeds 42/1042) come from its RNG, which the suite does not
reproduce; ``sign_vector(seed)`` is the suite's documented stand-in: ``numpy`` PCG64.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hqval.formats.base import GROUP_WEIGHTS, F32Array, check_weights

_ROWS_PER_CHUNK = 1024


def sign_vector(seed: int) -> npt.NDArray[np.float64]:
    """The +-1 vector ``D`` for ``seed`` (length 256, same for every group)."""
    bits = np.random.Generator(np.random.PCG64(seed)).integers(0, 2, GROUP_WEIGHTS)
    return np.where(bits == 1, 1.0, -1.0)


def _hadamard_inplace(y: npt.NDArray[np.float64]) -> None:
    """Unnormalised FWHT over the last axis (length 256), in place."""
    n = y.shape[-1]
    h = 1
    while h < n:
        v = y.reshape(*y.shape[:-1], n // (2 * h), 2, h)
        a = v[..., 0, :].copy()
        b = v[..., 1, :]
        v[..., 0, :] += b
        b *= -1.0
        b += a
        h *= 2


def rotate(w: npt.ArrayLike, seed: int) -> F32Array:
    """Original weights float32 [M, K] -> stored (rotated) domain.  Computed in f64 and
    rounded once to f32."""
    return _apply(w, seed, inverse=False)


def unrotate(y: npt.ArrayLike, seed: int) -> F32Array:
    """Inverse of ``rotate``: stored domain -> original weights."""
    return _apply(y, seed, inverse=True)


def _apply(w: npt.ArrayLike, seed: int, *, inverse: bool) -> F32Array:
    arr = check_weights(w, "fwht256")
    M, K = arr.shape
    d = sign_vector(seed)
    out = np.empty_like(arr)
    for r0 in range(0, M, _ROWS_PER_CHUNK):
        x = arr[r0:r0 + _ROWS_PER_CHUNK].astype(np.float64).reshape(-1, K // GROUP_WEIGHTS,
                                                                      GROUP_WEIGHTS)
        if not inverse:
            x *= d
        _hadamard_inplace(x)
        x *= 1.0 / 16.0  # 1/sqrt(256): exact power of two
        if inverse:
            x *= d
        out[r0:r0 + _ROWS_PER_CHUNK] = x.reshape(-1, K)
    return out
