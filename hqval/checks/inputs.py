"""Check inputs and the reference they are judged against.

* Activations whose values are distinct per position (and, for a token batch, per token),
  so a shifted or transposed output mapping cannot land on an equal value by accident.
* Weight fixtures encoded through the format's own codec (``Format.encode``), with the
  property each check relies on asserted before any launch.
* The f64 oracle of the decoded weights, the error metrics, and *misreadings*: decodes of
  the same bytes the way a broken kernel would read them (one header for both halves,
  halves swapped, scale and zero swapped, payload at +4, a 132 B stride, a v1 f32 header
  read).  A check proves its fixture discriminates by showing each misreading misses the
  oracle by far more than the check's tolerance.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from hqval.fixtures import Fixture, FixtureError
from hqval.formats import HFQ4G256_QT, by_qt
from hqval.formats.base import Format

__all__ = ["FixtureError"]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]


def _rng(seed: int, salt: int) -> np.random.Generator:
    return np.random.default_rng([seed, salt])


def activations(K: int, seed: int) -> F32:
    """x[k]: zero-mean gaussian, all distinct.  Zero mean matters: with a mean offset, y is
    dominated by (mean x) * (sum of weights), which many misreadings preserve; with zero
    mean a misread row's output is uncorrelated with the true one and misses by ~1."""
    rng = _rng(seed, 1)
    x = rng.standard_normal(K).astype(np.float32)
    if np.unique(x).size != K:
        raise FixtureError("activations are not distinct per position")
    return x


def token_batch(N: int, K: int, seed: int) -> npt.NDArray[np.float16]:
    """X[n][k] in f16: zero-mean gaussian (as ``activations``), every token distinct, so a
    transposed or shifted mapping reads other values and misreads miss by O(1)."""
    rng = _rng(seed, 2)
    X16 = rng.standard_normal((N, K)).astype(np.float16)
    if N > 1 and np.unique(X16.astype(np.float64).sum(axis=1)).size != N:
        raise FixtureError("token rows are not distinct")
    return X16


def residual_for(ref: F64, seed: int, fraction: tuple[float, float] = (0.1, 0.2)) -> F32:
    """A residual of ``fraction`` (low, high) of the output's magnitude, distinct values.
    The default 10-20% makes dropping the ``+=`` miss by >0.1 relative (1000x the GEMV
    tolerance) without diluting the header misreadings the fixtures are built to expose."""
    rng = _rng(seed, 3)
    scale = float(np.max(np.abs(ref))) or 1.0
    lo, hi = fraction
    return (scale * (lo + (hi - lo) * rng.random(ref.shape))).astype(np.float32)


# -- weights --------------------------------------------------------------------------
def fixture_blob(fixture: Fixture, qt: int) -> U8:
    """``fixture``'s bytes for ``qt``, after its own assertions hold (``FixtureError``
    otherwise, which the check reports as an error)."""
    return fixture.require().blob(qt)


# -- the reference ---------------------------------------------------------------------
def oracle(fmt: Format, blob: U8, K: int, x: npt.NDArray[np.floating], residual: F32 | None) -> F64:
    """f64 ``W x (+ r)`` of the decoded weights; ``x`` is [K] or a batch [N, K] -> [N, M]."""
    w = fmt.decode(blob, K).astype(np.float64)
    xs = np.asarray(x, dtype=np.float64)
    y: F64 = (w @ xs) if xs.ndim == 1 else (xs @ w.T)
    if residual is not None:
        y = y + residual.astype(np.float64)
    return y


def worst_rel(y: npt.NDArray[np.floating], ref: F64) -> float:
    """max |y - ref| / max |ref|: relative to the output's scale, so a near-zero output
    element does not blow the metric up.  Non-finite -> inf."""
    d = np.asarray(y, dtype=np.float64) - ref
    if not np.all(np.isfinite(d)):
        return float("inf")
    denom = float(np.max(np.abs(ref)))
    return float(np.max(np.abs(d))) / denom if denom else float(np.max(np.abs(d)))


def rel_rms(y: npt.NDArray[np.floating], ref: F64) -> float:
    d = np.asarray(y, dtype=np.float64) - ref
    if not np.all(np.isfinite(d)):
        return float("inf")
    denom = float(np.sqrt(np.mean(ref * ref)))
    return float(np.sqrt(np.mean(d * d))) / denom if denom else float(np.sqrt(np.mean(d * d)))


# -- misreadings -----------------------------------------------------------------------
def _fma_decode(fmt: Format, q: U8, scale: F32, zero: F32, K: int) -> F64:
    M = q.shape[0]
    sub = fmt.sub_block
    qq = q.reshape(M, K // 256, 256 // sub, sub).astype(np.float64)
    w = qq * scale.astype(np.float64)[..., None] + zero.astype(np.float64)[..., None]
    return w.reshape(M, K)


def _regroup(fmt: Format, blob: U8, K: int, stride: int, payload_shift: int) -> U8:
    """Bytes as a kernel with group stride ``stride`` and payload at
    ``payload_offset + payload_shift`` would see them, rebuilt in the correct layout."""
    M = blob.shape[0]
    G = K // 256
    gb = fmt.group_bytes
    flat = np.zeros((M, G * gb + gb), dtype=np.uint8)
    flat[:, : G * gb] = blob
    out = np.empty((M, G, gb), dtype=np.uint8)
    po = fmt.payload_offset
    for g in range(G):
        base = g * stride
        out[:, g, :po] = flat[:, base:base + po]
        src = base + po + payload_shift
        out[:, g, po:] = flat[:, src:src + gb - po]
    return out.reshape(M, G * gb)


def misreadings(fmt: Format) -> dict[str, Callable[[U8, int], F64]]:
    """Name -> decode of the bytes as a known-broken kernel reads them, for ``fmt``."""
    def hdr(blob: U8, K: int) -> tuple[U8, F32, F32]:
        scale, zero = fmt.headers(blob, K)
        return fmt.nibbles(blob, K), scale, zero

    out: dict[str, Callable[[U8, int], F64]] = {}
    if fmt.sub_block < 256:
        def one_header(blob: U8, K: int) -> F64:
            q, s, z = hdr(blob, K)
            return _fma_decode(fmt, q, np.broadcast_to(s[..., :1], s.shape),
                               np.broadcast_to(z[..., :1], z.shape), K)

        def halves_swapped(blob: U8, K: int) -> F64:
            q, s, z = hdr(blob, K)
            return _fma_decode(fmt, q, s[..., ::-1], z[..., ::-1], K)

        out["one_header_for_both_halves"] = one_header
        out["halves_swapped"] = halves_swapped

    def scale_zero_swapped(blob: U8, K: int) -> F64:
        q, s, z = hdr(blob, K)
        return _fma_decode(fmt, q, z, s, K)

    def payload_plus4(blob: U8, K: int) -> F64:
        return fmt.decode(_regroup(fmt, blob, K, fmt.group_bytes, -4), K).astype(np.float64)

    def stride_132(blob: U8, K: int) -> F64:
        return fmt.decode(_regroup(fmt, blob, K, 132, 0), K).astype(np.float64)

    out["scale_zero_swapped"] = scale_zero_swapped
    if getattr(fmt, "header", None) == "f16" and fmt.group_bytes == 136:
        v1 = by_qt(HFQ4G256_QT)

        def f32_header_read(blob: U8, K: int) -> F64:
            return v1.decode(blob, K).astype(np.float64)

        # A v2 kernel left with v1's two f32 header loads.
        out["f32_header_read"] = f32_header_read
    # "+4" means 4 bytes before where the payload belongs (qt=45: in the pad, at +4).
    out["payload_plus4"] = payload_plus4
    out["stride_132"] = stride_132
    return out


def misread_misses(
    fmt: Format, blob: U8, K: int, x: npt.NDArray[np.floating], residual: F32 | None,
    ref: F64, metric: Callable[[npt.NDArray[np.floating], F64], float] = worst_rel,
    names: tuple[str, ...] | None = None,
) -> dict[str, float]:
    """How far each misreading's output is from ``ref`` under ``metric``."""
    xs = np.asarray(x, dtype=np.float64)
    out: dict[str, float] = {}
    for name, decode in misreadings(fmt).items():
        if names is not None and name not in names:
            continue
        with np.errstate(all="ignore"):
            w = decode(blob, K)
            y = (w @ xs) if xs.ndim == 1 else (xs @ w.T)
            if residual is not None:
                y = y + residual.astype(np.float64)
        out[name] = metric(y, ref)
    return out


def require_discriminating(
    misses: dict[str, float], floor: float, what: str, overrides: dict[str, float] | None = None,
) -> None:
    """Raise ``FixtureError`` unless every misreading misses by more than its floor:
    ``overrides[name]`` where given, else ``floor``."""
    if not misses:
        raise FixtureError(f"{what}: no misreadings to prove the fixture discriminates")
    bounds = {k: (overrides or {}).get(k, floor) for k in misses}
    weak = {k: v for k, v in misses.items() if not v > bounds[k]}
    if weak:
        listed = ", ".join(f"{k} misses by only {v:.3g} (needs > {bounds[k]:g})"
                           for k, v in sorted(weak.items()))
        raise FixtureError(
            f"{what} does not discriminate: {listed}; a broken kernel reading the bytes that "
            f"way could pass"
        )
