"""GEMV timing cells: real encoded weights on the device, verified, then timed A/B.

A cell is (shape, mode, R): the qt=6 kernel (arm A) against a v2-family kernel (arm B)
with the same arithmetic, each reading its own format's bytes.  Before any timing, every
kernel's output is checked against the f64 oracle of its decoded weights, so a timing is
never taken of a kernel that computes the wrong thing (or nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hqval.backends.base import Arg, Backend, Buffer
from hqval.timing.harness import Arm
from hqval.timing.schedule import Mode, rotation_copies

# Rows actually encoded; the blob tiles them down the matrix.  Timing does not depend on
# the values, only on their being real encodings (never zeros), and tiling keeps the
# host-side encode of a 27648 x 5120 matrix to a fraction of a second.
TILE_ROWS = 64
# Verification bound: f32 accumulation over K <= 27648 terms of |w x| ~ 1 gives relative
# errors ~ K * 2^-24 / sqrt(K) ~ 1e-5; 1e-4 is the checks' GEMV parity bound.
VERIFY_REL = 1e-4


@dataclass(frozen=True)
class Shape:
    M: int
    K: int

    @property
    def name(self) -> str:
        return f"{self.M}x{self.K}"

    @classmethod
    def parse(cls, text: str) -> Shape:
        try:
            m, k = (int(v) for v in text.lower().split("x"))
        except ValueError:
            raise ValueError(f"shape {text!r}: write it as MxK, e.g. 17408x5120") from None
        if m <= 0 or k <= 0 or k % 256:
            raise ValueError(f"shape {text!r}: M > 0 and K a positive multiple of 256")
        return cls(m, k)


def gemv_bytes(shape: Shape, group_bytes: int = 136) -> int:
    """Bytes a GEMV must move at least: W once, x once, y written once."""
    return shape.M * (shape.K // 256) * group_bytes + 4 * shape.K + 4 * shape.M


@dataclass
class GemvSetup:
    """Device buffers of one kernel for one shape: ``copies`` weight copies, x, y."""

    spec: Any
    shape: Shape
    weights: list[Buffer]
    x: Buffer
    y: Buffer
    weight_bytes: int
    max_rel_error: float
    arm: Arm

    def free(self, backend: Backend) -> None:
        for b in (*self.weights, self.x, self.y):
            backend.free(b)


def _encode_tiled(qt: int, shape: Shape, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(blob uint8[M, row_bytes], decoded f64 weights of the TILE_ROWS encoded rows)."""
    from hqval.formats import by_qt

    fmt = by_qt(qt)
    rng = np.random.default_rng(seed)
    tile = min(TILE_ROWS, shape.M)
    w = rng.standard_normal((tile, shape.K)).astype(np.float32) * np.float32(0.02)
    blob = fmt.encode(w)
    deq = fmt.decode(blob, shape.K).astype(np.float64)
    reps = -(-shape.M // tile)
    full = np.tile(blob, (reps, 1))[: shape.M]
    return np.ascontiguousarray(full), deq


def setup_gemv(
    backend: Backend, spec: Any, shape: Shape, mode: Mode, llc_bytes: int, seed: int = 0
) -> GemvSetup:
    """Encode, upload ``copies`` weight copies, launch once and verify against the oracle."""
    blob, deq = _encode_tiled(spec.qt, shape, seed)
    rng = np.random.default_rng(seed + 1)
    x = rng.standard_normal(shape.K).astype(np.float32)
    weight_bytes = int(blob.nbytes)
    copies = rotation_copies(weight_bytes, llc_bytes, mode)
    program = backend.load(spec)
    weights = []
    for _ in range(copies):
        buf = backend.alloc(weight_bytes)
        backend.copy_in(buf, blob)
        weights.append(buf)
    bx = backend.alloc(x.nbytes)
    backend.copy_in(bx, x)
    by = backend.alloc(4 * shape.M)
    R = spec.rows_per_block
    grid = ((shape.M + R - 1) // R, 1, 1)
    block = (spec.block, 1, 1)
    # a manifest's extra_args (null pointers, scalars) follow the ABI's, as in the checks
    arg_sets: list[list[Arg]] = [[w, bx, by, shape.M, shape.K, *spec.extra_args]
                                 for w in weights]

    # Verify every copy's first launch: NaN/Inf first, then the relative error.
    ref_tile = deq @ x.astype(np.float64)
    ref = np.resize(ref_tile, shape.M)
    worst = 0.0
    for args in arg_sets:
        backend.copy_in(by, np.full(shape.M, np.nan, dtype=np.float32))
        backend.launch(program, grid, block, args)
        backend.synchronize()
        y = backend.copy_out(by).view(np.float32).astype(np.float64)
        if not np.all(np.isfinite(y)):
            bad = int(np.count_nonzero(~np.isfinite(y)))
            raise RuntimeError(f"{spec.name} {shape.name}: {bad} non-finite outputs "
                               "(unwritten rows keep the NaN poison)")
        worst = max(worst, float(np.max(np.abs(y - ref)) / np.max(np.abs(ref))))
    if worst > VERIFY_REL:
        raise RuntimeError(f"{spec.name} {shape.name}: relative error {worst:.3g} exceeds "
                           f"{VERIFY_REL:g} against the f64 oracle; not timing a wrong kernel")
    arm = Arm.kernel(spec.name, backend, program, grid, block, arg_sets)
    return GemvSetup(spec, shape, weights, bx, by, weight_bytes, worst, arm)


def effective_gbps(nbytes: int, microseconds: float) -> float:
    return nbytes / (microseconds * 1e-6) / 1e9
