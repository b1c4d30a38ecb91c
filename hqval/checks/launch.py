"""Guarded launches in the kernel ABI (docs/ARCHITECTURE.md), shared by every check.

Every buffer argument, inputs and outputs alike, sits between two canary regions of
``GUARD_BYTES`` in one allocation, so a stray write within 4 KiB of any buffer lands in a
canary of that buffer instead of in another live allocation.  After the launch the suite
reads every allocation back: a changed canary byte is a write outside the buffer, a changed
input byte is a write into a const input, and either fails the check, naming the argument,
the offset from it and the device address, before anything else is looked at.
Non-residual outputs start as a quiet-NaN pattern, so an output the kernel never wrote is
caught by the NaN/Inf guard, which runs before any error metric.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hqval.backends.base import Arg, Backend, Buffer, Program

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec

# 4 KiB each side of every buffer: wider than a wave's widest store (32 lanes x 16 B) times
# the row and tile offsets a mis-indexed kernel produces in these shapes (a row of y is 4 B,
# a 16-row WMMA tile of Y 64 B per token), and the "first few KiB" a stray pointer lands in.
GUARD_BYTES = 4096
CANARY = np.frombuffer(bytes([0xDE, 0xAD, 0xBE, 0xEF]) * (GUARD_BYTES // 4), np.uint8)
# The pre-4 KiB name; every buffer now has canaries, not only outputs.
SENTINEL_BYTES = GUARD_BYTES
SENTINEL = CANARY
# A quiet NaN with a recognisable payload: "output never written".
UNWRITTEN_F32 = np.uint32(0x7FC0_0BAD)

F32 = npt.NDArray[np.float32]


class GuardViolation(Exception):
    """A launch broke a guard: a write outside a buffer, into a const input, or a NaN/Inf
    in an output."""


@dataclass(frozen=True)
class Output:
    """An output argument: its initial contents (residual input, or the unwritten pattern)."""

    init: F32

    @classmethod
    def unwritten(cls, shape: tuple[int, ...]) -> Output:
        return cls(np.full(shape, UNWRITTEN_F32, dtype=np.uint32).view(np.float32))


@dataclass(frozen=True)
class Table:
    """A pointer-table argument: a u64 array of device pointers, one per entry.  Each entry
    is a buffer of its own, guarded like any input ([canary | data | canary], a const
    input); the table holds the address of each entry's data and is itself guarded."""

    entries: tuple[npt.NDArray[np.generic], ...]


@dataclass
class Outcome:
    """What one guarded launch produced: each output as float32, in argument order."""

    outputs: list[F32]
    counts: dict[str, int] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)

    def output(self, name: str) -> F32:
        """The output argument called ``name`` (its signature name)."""
        return self.outputs[self.names.index(name)]

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


@dataclass(frozen=True)
class _Guarded:
    """One argument's allocation: [canary | data | canary]."""

    name: str
    whole: Buffer
    data: npt.NDArray[np.uint8]  # the bytes copied in
    output: Output | None

    @property
    def nbytes(self) -> int:
        return int(self.data.size)

    def address(self, offset: int) -> str:
        """The device address of byte ``offset`` of the allocation, when the backend's
        handles are addresses (every backend here: emu, HIP and CUDA device pointers)."""
        try:
            return f" at 0x{int(self.whole.handle) + offset:x}"
        except (TypeError, ValueError):
            return ""


def _damage(g: _Guarded, after: npt.NDArray[np.uint8]) -> list[str]:
    """What the launch did to ``g``'s allocation that it must not have done."""
    out = []
    n = g.nbytes
    front = np.flatnonzero(after[:GUARD_BYTES] != CANARY)
    if front.size:
        first = int(front[0])
        out.append(f"write outside {g.name} ({GUARD_BYTES - first} B below it{g.address(first)}"
                   f"): {front.size} canary byte(s) changed")
    back = np.flatnonzero(after[GUARD_BYTES + n:] != CANARY[:after.size - GUARD_BYTES - n])
    if back.size:
        first = int(back[0])
        out.append(f"write outside {g.name} ({first} B past its end"
                   f"{g.address(GUARD_BYTES + n + first)}): {back.size} canary byte(s) "
                   "changed")
    if g.output is None:
        changed = np.flatnonzero(after[GUARD_BYTES:GUARD_BYTES + n] != g.data)
        if changed.size:
            first = int(changed[0])
            out.append(f"write into const input {g.name} (byte {first} of {n}"
                       f"{g.address(GUARD_BYTES + first)}): {changed.size} byte(s) changed")
    return out


def _locate(guarded: Sequence[_Guarded], address: object) -> str:
    """Which argument a faulting address belongs to or is nearest: '1024 B below y'."""
    if not isinstance(address, int):
        return ""
    best: tuple[int, str] | None = None
    for g in guarded:
        try:
            start = int(g.whole.handle) + GUARD_BYTES
        except (TypeError, ValueError):
            return ""
        end = start + g.nbytes
        if address < start:
            d, text = start - address, f"{start - address} B below {g.name}"
        elif address >= end:
            d, text = address - end + 1, f"{address - end} B past the end of {g.name}"
        else:
            d, text = 0, f"inside {g.name} (byte {address - start})"
        if best is None or d < best[0]:
            best = (d, text)
    return f"at 0x{address:x}, {best[1]}" if best else ""


@dataclass(frozen=True)
class Plan:
    """One guarded launch, not yet run: what ``launch_guarded`` takes."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: Sequence[npt.NDArray[np.generic] | int | float | Output | Table | None]
    names: Sequence[str] | None = None


def _set_up(backend: Backend,
            args: Sequence[npt.NDArray[np.generic] | int | float | Output | Table | None],
            names: Sequence[str] | None, guarded: list[_Guarded]) -> list[Arg]:
    """Allocate [canary | data | canary] for every buffer argument (appended to
    ``guarded`` as it goes, so the caller frees them whatever happens) and copy in; the
    kernel's arguments."""
    if not any(isinstance(a, Output) for a in args):
        raise ValueError("launch_guarded needs at least one Output argument")
    names = list(names) if names is not None else [f"argument {i}" for i in range(len(args))]
    kernel_args: list[Arg] = []

    def place(name: str, host: npt.NDArray[np.generic], output: Output | None) -> Buffer:
        data = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        nbytes = max(int(data.size), 4)
        whole = backend.alloc(nbytes + 2 * GUARD_BYTES)
        guarded.append(_Guarded(name, whole, data, output))
        backend.copy_in(whole, CANARY, 0)
        if data.size:
            backend.copy_in(whole, data, GUARD_BYTES)
        backend.copy_in(whole, CANARY, GUARD_BYTES + int(data.size))
        if data.size < nbytes:  # a buffer under 4 B: pad with canary bytes
            backend.copy_in(whole, CANARY[:nbytes - data.size], GUARD_BYTES + data.size)
        return backend.view(whole, GUARD_BYTES, nbytes)

    for i, a in enumerate(args):
        if isinstance(a, Table):
            ptrs = [int(place(f"{names[i]}[{j}]", e, None).handle)
                    for j, e in enumerate(a.entries)]
            kernel_args.append(place(names[i], np.array(ptrs, dtype=np.uint64), None))
        elif isinstance(a, (Output, np.ndarray)):
            host = a.init if isinstance(a, Output) else a
            kernel_args.append(place(names[i], host, a if isinstance(a, Output) else None))
        else:
            kernel_args.append(a)  # an i32, an f32 or a null pointer
    return kernel_args


def _judge(guarded: Sequence[_Guarded], after: Sequence[npt.NDArray[np.uint8]],
           counts: Mapping[str, int]) -> Outcome:
    """The guards on what a launch left in its buffers: GuardViolation, or its outputs."""
    problems = [p for g, data in zip(guarded, after, strict=True) for p in _damage(g, data)]
    if problems:
        raise GuardViolation("; ".join(problems))
    outputs: list[F32] = []
    for g, data in zip(guarded, after, strict=True):
        if g.output is None:
            continue
        values = data[GUARD_BYTES:GUARD_BYTES + g.nbytes].copy().view(np.float32)
        outputs.append(values.reshape(g.output.init.shape))
    out_names = [g.name for g in guarded if g.output is not None]
    for g, values in zip([g for g in guarded if g.output is not None], outputs, strict=True):
        problem = non_finite(values, g.name)
        if problem:
            raise GuardViolation(problem)
    return Outcome(outputs=outputs, counts=dict(counts), names=out_names)


def launch_guarded(
    backend: Backend,
    program: Program,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: Sequence[npt.NDArray[np.generic] | int | float | Output | Table | None],
    names: Sequence[str] | None = None,
) -> Outcome:
    """Copy inputs in, launch, copy every buffer back and apply the guards to each.

    ``names`` are the ABI's argument names (``W``, ``x``, ``y``, ...) used in messages.
    Raises ``GuardViolation`` for a canary write, a changed input or a NaN/Inf output.
    """
    guarded: list[_Guarded] = []
    try:
        kernel_args = _set_up(backend, args, names, guarded)
        try:
            info = backend.launch(program, grid, block, kernel_args)
            backend.synchronize()
        except Exception as exc:
            # a backend that faults on the access (the emulator: a canary or unmapped
            # byte) names the address and the access size; say which argument it belongs
            # to.  An error without an access size (an instruction the emulator lacks, at
            # an instruction address) is no memory fault and propagates as it is.
            is_access = getattr(exc, "nbytes", None) is not None
            where = _locate(guarded, getattr(exc, "address", None)) if is_access else ""
            if where:
                raise GuardViolation(f"memory fault {where}: {exc}") from exc
            raise
        after = [backend.copy_out(g.whole) for g in guarded]
    finally:
        for g in guarded:
            backend.free(g.whole)
    return _judge(guarded, after, info.counts)


def launch_guarded_many(backend: Backend, program: Program, plans: Sequence[Plan]
                        ) -> list[Outcome]:
    """``launch_guarded`` for each plan, as if one after another: the outcomes, or the
    first plan's exception.  Independent launches of one kernel (distinct buffers, one
    block shape) go to ``backend.launch_many`` as one batch (the emulator runs them as one
    wave batch, each launch kept to its own buffers); if any of them faults or breaks a
    guard, the batch's results are dropped and the plans run one at a time, so every
    message (addresses included) is exactly a sequential run's."""
    if len(plans) < 2 or len({p.block for p in plans}) != 1:
        return [launch_guarded(backend, program, p.grid, p.block, p.args, p.names)
                for p in plans]
    per_plan: list[list[_Guarded]] = [[] for _ in plans]
    outcomes: list[Outcome] | None = None
    try:
        batch = [(p.grid, p.block, _set_up(backend, p.args, p.names, per_plan[k]))
                 for k, p in enumerate(plans)]
        try:
            infos = backend.launch_many(program, batch)
            backend.synchronize()
        except Exception:  # rerun one at a time below: the sequential message
            infos = None
        if infos is not None:
            afters = [[backend.copy_out(g.whole) for g in gs] for gs in per_plan]
            try:
                outcomes = [_judge(gs, after, info.counts)
                            for gs, after, info in zip(per_plan, afters, infos, strict=True)]
            except GuardViolation:
                outcomes = None
    finally:
        for gs in per_plan:
            for g in gs:
                backend.free(g.whole)
    if outcomes is not None:
        return outcomes
    return [launch_guarded(backend, program, p.grid, p.block, p.args, p.names)
            for p in plans]


LaunchValue = npt.NDArray[np.generic] | Output | Table


def launch_env(spec: KernelSpec, dims: Mapping[str, int]) -> dict[str, int]:
    """The names a signature's expressions read: ``dims`` plus the manifest entry's
    rows_per_block (R), batch_tile (BT) and block."""
    return {**dims, "R": spec.rows_per_block, "BT": max(1, int(spec.batch_tile or 1)),
            "block": spec.block}


def launch_signature(
    backend: Backend, program: Program, spec: KernelSpec, dims: Mapping[str, int],
    values: Mapping[str, LaunchValue],
) -> Outcome:
    """One guarded launch of ``spec`` through its signature: its arguments in ABI order
    (buffers from ``values`` by name, scalars evaluated from ``dims``), then the manifest's
    ``extra_args``; grid and block from the signature's expressions."""
    p = signature_plan(spec, dims, values)
    return launch_guarded(backend, program, p.grid, p.block, p.args, p.names)


def signature_plan(spec: KernelSpec, dims: Mapping[str, int],
                   values: Mapping[str, LaunchValue]) -> Plan:
    """The launch of ``launch_signature``, not yet run."""
    sig = spec.signature
    env = launch_env(spec, dims)
    grid, block = sig.launch(env)
    args: list[npt.NDArray[np.generic] | int | float | Output | Table | None] = []
    for a in sig.args:
        if a.role == "scalar":
            assert a.value is not None
            if a.dtype == "f32":
                args.append(float(a.value.value(env)))
            else:
                args.append(a.value.int(env))
            continue
        if a.name not in values:
            raise ValueError(f"{spec.name}: no value for argument {a.name} of {sig.name}")
        v = values[a.name]
        if a.role == "activation" and isinstance(v, np.ndarray):
            v = np.ascontiguousarray(v, dtype=np.float16 if a.dtype == "f16" else np.float32)
        elif a.role == "routing_weights" and isinstance(v, np.ndarray):
            v = np.ascontiguousarray(v, dtype=np.float32)
        elif a.role == "index" and isinstance(v, np.ndarray):
            v = np.ascontiguousarray(v, dtype=np.int32)
        elif a.role == "weight" and isinstance(v, np.ndarray):
            v = np.ascontiguousarray(v)
        args.append(v)
    args.extend(spec.extra_args)
    return Plan(grid, block, args, [*sig.arg_names(), *_extra(spec)])


def _extra(spec: KernelSpec) -> list[str]:
    """Names of the manifest's ``extra_args`` (after the ABI's), for guard messages."""
    return [f"extra_args[{i}]" for i in range(len(spec.extra_args))]


def gemv_plan(spec: KernelSpec, blob: npt.NDArray[np.uint8], x: F32,
              residual: F32 | None) -> Plan:
    """The launch of ``gemv``, not yet run."""
    M = blob.shape[0]
    K = x.shape[0]
    y0 = Output(residual.astype(np.float32)) if residual is not None else Output.unwritten((M,))
    return signature_plan(spec, {"M": M, "K": K}, {"W": blob, "x": x, "y": y0})


def gemv(
    backend: Backend,
    program: Program,
    spec: KernelSpec,
    blob: npt.NDArray[np.uint8],
    x: F32,
    residual: F32 | None,
) -> Outcome:
    """``y[m] (+)= sum_k deq(W)[m,k] x[k]``; block 32, grid.x = ceil(M / R)."""
    p = gemv_plan(spec, blob, x, residual)
    return launch_guarded(backend, program, p.grid, p.block, p.args, p.names)


def gemm_plan(spec: KernelSpec, blob: npt.NDArray[np.uint8], X: npt.NDArray[np.float16],
              residual: F32 | None) -> Plan:
    """The launch of ``gemm``, not yet run."""
    M = blob.shape[0]
    N, K = X.shape
    shape = (N, M)
    y0 = Output(residual.astype(np.float32)) if residual is not None else Output.unwritten(shape)
    return signature_plan(spec, {"M": M, "K": K, "N": N}, {"W": blob, "X": X, "Y": y0})


def gemm(
    backend: Backend,
    program: Program,
    spec: KernelSpec,
    blob: npt.NDArray[np.uint8],
    X: npt.NDArray[np.float16],
    residual: F32 | None,
) -> Outcome:
    """``Y[n][m] (+)= sum_k deq(W)[m,k] X[n][k]``; block 32, grid (ceil(M/16), ceil(N/(16 BT)))."""
    p = gemm_plan(spec, blob, X, residual)
    return launch_guarded(backend, program, p.grid, p.block, p.args, p.names)


def gemm_many(backend: Backend, program: Program, spec: KernelSpec,
              blob: npt.NDArray[np.uint8], Xs: Sequence[npt.NDArray[np.float16]],
              residuals: Sequence[F32 | None]) -> list[Outcome]:
    """``gemm`` for each (X, residual), as one batch (``launch_guarded_many``)."""
    return launch_guarded_many(backend, program, [gemm_plan(spec, blob, X, r) for X, r in
                                                  zip(Xs, residuals, strict=True)])


def gemv_qkv_plan(spec: KernelSpec, blobs: tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8],
                                                  npt.NDArray[np.uint8]], x: F32) -> Plan:
    """The launch of ``gemv_qkv``, not yet run."""
    Ms = [b.shape[0] for b in blobs]
    K = x.shape[0]
    return signature_plan(
        spec, {"Mq": Ms[0], "Mk": Ms[1], "Mv": Ms[2], "K": K},
        {"Wq": blobs[0], "Wk": blobs[1], "Wv": blobs[2], "x": x,
         **{n: Output.unwritten((m,)) for n, m in zip(("yq", "yk", "yv"), Ms, strict=True)}})


def gemv_qkv(
    backend: Backend,
    program: Program,
    spec: KernelSpec,
    blobs: tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.uint8]],
    x: F32,
) -> Outcome:
    """Fused QKV: ``NAME(Wq, Wk, Wv, x, yq, yk, yv, Mq, Mk, Mv, K)``;
    grid.x = ceil(Mq/R) + ceil(Mk/R) + ceil(Mv/R).  ``values`` is [yq, yk, yv] concatenated."""
    p = gemv_qkv_plan(spec, blobs, x)
    return launch_guarded(backend, program, p.grid, p.block, p.args, p.names)


def qkv_split(M: int) -> tuple[int, int, int]:
    """Rows of one stacked weight matrix given to Q, K and V (unequal, none empty)."""
    if M < 3:
        raise ValueError(f"fused QKV needs at least 3 rows, got {M}")
    k = M // 3
    return M - 2 * k, k, k


def decode_plan(spec: KernelSpec, blob: npt.NDArray[np.uint8], x: F32,
                residual: F32 | None) -> Plan:
    """The launch of ``decode``, not yet run."""
    if spec.kind == "gemv":
        return gemv_plan(spec, blob, x, residual)
    if spec.kind == "gemv_qkv":
        if residual is not None:
            raise ValueError(f"{spec.name}: fused QKV kernels take no residual")
        mq, mk, _ = qkv_split(blob.shape[0])
        parts = (blob[:mq], blob[mq:mq + mk], blob[mq + mk:])
        return gemv_qkv_plan(spec, parts, x)
    raise ValueError(f"{spec.name}: kind {spec.kind!r} is not a decode (GEMV) kernel")


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
    p = decode_plan(spec, blob, x, residual)
    return launch_guarded(backend, program, p.grid, p.block, p.args, p.names)


def decode_many(backend: Backend, program: Program, spec: KernelSpec,
                blob: npt.NDArray[np.uint8], xs: Sequence[F32],
                residuals: Sequence[F32] | None = None) -> list[Outcome]:
    """``decode`` for each token ``xs[n]`` (the per-token references), as one batch
    (``launch_guarded_many``), token ``n`` adding to ``residuals[n]`` where given: the
    outcomes, or the first token's exception."""
    if residuals is not None and len(residuals) != len(xs):
        raise ValueError(f"{len(residuals)} residuals for {len(xs)} tokens")
    return launch_guarded_many(backend, program, [
        decode_plan(spec, blob, x, None if residuals is None else residuals[n])
        for n, x in enumerate(xs)])
