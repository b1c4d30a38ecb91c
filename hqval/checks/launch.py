"""Guarded launches in the kernel ABI (docs/ARCHITECTURE.md), shared by every check.

Every output buffer sits between two sentinel regions; after the launch any changed
sentinel byte is a write outside the output and fails the check before anything else is
looked at.  Non-residual outputs start as a quiet-NaN pattern, so an output the kernel never
wrote is caught by the NaN/Inf guard, which runs before any error metric.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hqval.backends.base import Backend, Buffer, Program

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec

# 256 B each side: wider than one wave's 32 x 4 B store, so an off-by-one-row or
# off-by-one-tile store lands in the sentinel rather than past it.
SENTINEL_BYTES = 256
SENTINEL = np.frombuffer(bytes([0xDE, 0xAD, 0xBE, 0xEF]) * (SENTINEL_BYTES // 4), np.uint8)
# A quiet NaN with a recognisable payload: "output never written".
UNWRITTEN_F32 = np.uint32(0x7FC0_0BAD)

F32 = npt.NDArray[np.float32]


class GuardViolation(Exception):
    """A launch broke a guard: a write outside the output or a NaN/Inf in it."""


@dataclass(frozen=True)
class Output:
    """An output argument: its initial contents (residual input, or the unwritten pattern)."""

    init: F32

    @classmethod
    def unwritten(cls, shape: tuple[int, ...]) -> Output:
        return cls(np.full(shape, UNWRITTEN_F32, dtype=np.uint32).view(np.float32))


@dataclass
class Outcome:
    """What one guarded launch produced: each output as float32, in argument order."""

    outputs: list[F32]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def values(self) -> F32:
        """The single output, or all outputs flattened and concatenated (fused QKV)."""
        if len(self.outputs) == 1:
            return self.outputs[0]
        return np.concatenate([o.reshape(-1) for o in self.outputs])

    @property
    def raw(self) -> npt.NDArray[np.uint32]:
        return self.values.view(np.uint32)


def sentinel_damage(before: npt.NDArray[np.uint8], after: npt.NDArray[np.uint8]) -> str | None:
    bad = np.flatnonzero(before != after)
    if bad.size == 0:
        return None
    return f"{bad.size} sentinel byte(s) changed, first at byte {int(bad[0])}"


def non_finite(values: F32, what: str = "output") -> str | None:
    """One line naming the first NaN/Inf, or None if all are finite."""
    bad = np.argwhere(~np.isfinite(values))
    if bad.size == 0:
        return None
    idx = tuple(int(i) for i in bad[0])
    v = values[idx]
    kind = "unwritten (NaN pattern)" if v.view(np.uint32) == UNWRITTEN_F32 else repr(float(v))
    return f"{len(bad)} non-finite {what} value(s), first at {list(idx)}: {kind}"


def launch_guarded(
    backend: Backend,
    program: Program,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: Sequence[npt.NDArray[np.generic] | int | Output],
) -> Outcome:
    """Copy inputs in, launch, copy every output out and apply both guards to each.

    Raises ``GuardViolation`` for a sentinel write or a NaN/Inf output.
    """
    if not any(isinstance(a, Output) for a in args):
        raise ValueError("launch_guarded needs at least one Output argument")
    buffers: list[Buffer] = []
    kernel_args: list[Buffer | int] = []
    guarded: list[tuple[Buffer, Output]] = []
    try:
        for a in args:
            if isinstance(a, Output):
                nbytes = a.init.nbytes
                whole = backend.alloc(nbytes + 2 * SENTINEL_BYTES)
                buffers.append(whole)
                backend.copy_in(whole, SENTINEL, 0)
                backend.copy_in(whole, a.init, SENTINEL_BYTES)
                backend.copy_in(whole, SENTINEL, SENTINEL_BYTES + nbytes)
                kernel_args.append(backend.view(whole, SENTINEL_BYTES, nbytes))
                guarded.append((whole, a))
            elif isinstance(a, np.ndarray):
                buf = backend.alloc(max(a.nbytes, 4))
                buffers.append(buf)
                backend.copy_in(buf, a)
                kernel_args.append(buf)
            else:
                kernel_args.append(int(a))
        info = backend.launch(program, grid, block, kernel_args)
        backend.synchronize()
        copies = [(backend.copy_out(whole), out) for whole, out in guarded]
    finally:
        for buf in buffers:
            backend.free(buf)
    outputs: list[F32] = []
    for i, (data, out) in enumerate(copies):
        nbytes = out.init.nbytes
        front = sentinel_damage(SENTINEL, data[:SENTINEL_BYTES])
        back = sentinel_damage(SENTINEL, data[SENTINEL_BYTES + nbytes:])
        if front or back:
            where = "before" if front else "after"
            raise GuardViolation(f"write outside output {i} ({where} it): {front or back}")
        values = data[SENTINEL_BYTES:SENTINEL_BYTES + nbytes].copy().view(np.float32)
        outputs.append(values.reshape(out.init.shape))
    for i, values in enumerate(outputs):
        problem = non_finite(values, f"output {i}")
        if problem:
            raise GuardViolation(problem)
    return Outcome(outputs=outputs, counts=dict(info.counts))


def gemv(
    backend: Backend,
    program: Program,
    spec: KernelSpec,
    blob: npt.NDArray[np.uint8],
    x: F32,
    residual: F32 | None,
) -> Outcome:
    """``y[m] (+)= sum_k deq(W)[m,k] x[k]``; block 32, grid.x = ceil(M / R)."""
    M = blob.shape[0]
    K = x.shape[0]
    y0 = Output(residual.astype(np.float32)) if residual is not None else Output.unwritten((M,))
    grid = (math.ceil(M / spec.rows_per_block), 1, 1)
    return launch_guarded(backend, program, grid, (spec.block, 1, 1),
                          [np.ascontiguousarray(blob), x.astype(np.float32), y0, M, K])


def gemm(
    backend: Backend,
    program: Program,
    spec: KernelSpec,
    blob: npt.NDArray[np.uint8],
    X: npt.NDArray[np.float16],
    residual: F32 | None,
) -> Outcome:
    """``Y[n][m] (+)= sum_k deq(W)[m,k] X[n][k]``; block 32, grid (ceil(M/16), ceil(N/(16 BT)))."""
    M = blob.shape[0]
    N, K = X.shape
    shape = (N, M)
    y0 = Output(residual.astype(np.float32)) if residual is not None else Output.unwritten(shape)
    bt = max(1, int(spec.batch_tile or 1))
    grid = (math.ceil(M / 16), math.ceil(N / (16 * bt)), 1)
    return launch_guarded(backend, program, grid, (spec.block, 1, 1),
                          [np.ascontiguousarray(blob), X.astype(np.float16), y0, M, K, N])


def gemv_qkv(
    backend: Backend,
    program: Program,
    spec: KernelSpec,
    blobs: tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.uint8]],
    x: F32,
) -> Outcome:
    """Fused QKV: ``NAME(Wq, Wk, Wv, x, yq, yk, yv, Mq, Mk, Mv, K)``;
    grid.x = ceil(Mq/R) + ceil(Mk/R) + ceil(Mv/R).  ``values`` is [yq, yk, yv] concatenated."""
    R = spec.rows_per_block
    Ms = [b.shape[0] for b in blobs]
    K = x.shape[0]
    grid = (sum(math.ceil(m / R) for m in Ms), 1, 1)
    args: list[npt.NDArray[np.generic] | int | Output] = [np.ascontiguousarray(b) for b in blobs]
    args.append(x.astype(np.float32))
    args.extend(Output.unwritten((m,)) for m in Ms)
    args.extend([*Ms, K])
    return launch_guarded(backend, program, grid, (spec.block, 1, 1), args)


def qkv_split(M: int) -> tuple[int, int, int]:
    """Rows of one stacked weight matrix given to Q, K and V (unequal, none empty)."""
    if M < 3:
        raise ValueError(f"fused QKV needs at least 3 rows, got {M}")
    k = M // 3
    return M - 2 * k, k, k


def decode(
    backend: Backend,
    program: Program,
    spec: KernelSpec,
    blob: npt.NDArray[np.uint8],
    x: F32,
    residual: F32 | None,
) -> Outcome:
    """One decode step of a GEMV-family kernel over the stacked weights ``blob``: plain
    GEMV, or fused QKV with the rows split by ``qkv_split``.  ``values`` is always [M]."""
    if spec.kind == "gemv":
        return gemv(backend, program, spec, blob, x, residual)
    if spec.kind == "gemv_qkv":
        if residual is not None:
            raise ValueError(f"{spec.name}: fused QKV kernels take no residual")
        mq, mk, _ = qkv_split(blob.shape[0])
        parts = (blob[:mq], blob[mq:mq + mk], blob[mq + mk:])
        return gemv_qkv(backend, program, spec, parts, x)
    raise ValueError(f"{spec.name}: kind {spec.kind!r} is not a decode (GEMV) kernel")
