"""Reference ceilings timed in the same run as the kernels: device-to-device copy
bandwidth, the read floor of a cell's own weight copies (``kernels/stream_read.hip``), and
``torch.mv`` on bf16 weights of the same shape (CUDA only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hqval.backends.base import Backend, Buffer
from hqval.manifest import KERNELS_DIR, KernelSpec
from hqval.timing.gemv import Shape
from hqval.timing.harness import Arm, QueueFiller, TimingConfig, time_single
from hqval.timing.schedule import Mode, rotation_copies

# 1 GiB each way: ~0.5 ms on an H200, far past launch overhead and 20x its L2.
COPY_BYTES = 1 << 30
STREAM_READ_SOURCE = KERNELS_DIR / "stream_read.hip"
STREAM_READ_BLOCK = 256
# 16-byte words per thread: four passes of four loads in flight, ~0.4% of the bytes written.
STREAM_READ_WORDS = 16


@dataclass(frozen=True)
class Baseline:
    name: str
    runs: list[list[float]]  # us per sample
    nbytes: int  # bytes moved per sample (read + write)

    @property
    def median_us(self) -> float:
        return float(np.median(np.concatenate([np.asarray(r) for r in self.runs])))

    @property
    def gbps(self) -> float:
        return self.nbytes / (self.median_us * 1e-6) / 1e9


def copy_bandwidth(backend: Backend, config: TimingConfig, filler: QueueFiller | None,
                   nbytes: int = COPY_BYTES) -> Baseline:
    """Device-to-device copy, counting bytes read plus bytes written."""
    src, dst = backend.alloc(nbytes), backend.alloc(nbytes)
    try:
        # Random bytes, never zeros (compression and zero-skipping paths exist).
        chunk = np.random.default_rng(5).integers(0, 256, size=1 << 24, dtype=np.uint8)
        for off in range(0, nbytes, chunk.nbytes):
            n = min(chunk.nbytes, nbytes - off)
            backend.copy_in(src, chunk[:n], offset=off)
        arm = Arm("copy", [lambda: backend.copy_device(dst, src, nbytes)])
        runs = time_single(backend, arm, config, filler)
    finally:
        backend.free(src)
        backend.free(dst)
    return Baseline("device_copy", runs, 2 * nbytes)


def torch_mv_bf16(backend: Backend, shape: Shape, mode: Mode, llc_bytes: int,
                  config: TimingConfig, filler: QueueFiller | None) -> Baseline:
    """``torch.mv`` of bf16 [M, K] weights by a bf16 vector, rotating copies in cold mode."""
    if backend.name != "cuda":
        raise NotImplementedError("need the cuda backend: the torch.mv baseline is CUDA-only")
    try:
        import torch
    except ImportError as exc:
        raise NotImplementedError("need torch with CUDA for the torch.mv baseline") from exc
    gen = torch.Generator(device="cuda").manual_seed(3)
    wbytes = shape.M * shape.K * 2
    copies = rotation_copies(wbytes, llc_bytes, mode)
    weights = [torch.randn(shape.M, shape.K, device="cuda", dtype=torch.bfloat16, generator=gen)
               for _ in range(copies)]
    x = torch.randn(shape.K, device="cuda", dtype=torch.bfloat16, generator=gen)
    y = torch.empty(shape.M, device="cuda", dtype=torch.bfloat16)
    backend.synchronize()  # torch's stream is the legacy default one: bounded wait

    def launcher(w: Any) -> Any:
        return lambda: torch.mv(w, x, out=y)

    arm = Arm("torch_mv_bf16", [launcher(w) for w in weights])
    runs = time_single(backend, arm, config, filler)
    del weights
    backend.synchronize()
    return Baseline("torch_mv_bf16", runs, wbytes + 2 * shape.K + 2 * shape.M)


def stream_read_spec() -> KernelSpec:
    return KernelSpec(name="hqval_stream_read", source=STREAM_READ_SOURCE,
                      symbol="hqval_stream_read", qt=0, kind="baseline",
                      include_dirs=(KERNELS_DIR / "include",),
                      block=STREAM_READ_BLOCK)


def stream_read_threads(n16: int) -> int:
    """Threads of the read floor for ``n16`` 16-byte words: whole blocks of 256."""
    blocks = max(1, -(-n16 // (STREAM_READ_WORDS * STREAM_READ_BLOCK)))
    return blocks * STREAM_READ_BLOCK


def stream_read_expected(data: np.ndarray, threads: int) -> np.ndarray:
    """What ``hqval_stream_read`` writes: thread t XORs 16-byte words t, t + threads, ..."""
    words = np.ascontiguousarray(data[: (data.nbytes // 16) * 16]).view(np.uint32)
    per_word = np.bitwise_xor.reduce(words.reshape(-1, 4), axis=1)
    padded = np.zeros(-(-per_word.size // threads) * threads, dtype=np.uint32)
    padded[: per_word.size] = per_word
    out: np.ndarray = np.bitwise_xor.reduce(padded.reshape(-1, threads), axis=0)
    return out


def stream_read(backend: Backend, buffers: list[Buffer], nbytes: int, config: TimingConfig,
                filler: QueueFiller | None) -> Baseline:
    """The read floor of a cell: each of its rotating weight copies read once per sample
    with 16-byte loads and nothing else, verified against numpy before it is timed."""
    n16 = nbytes // 16
    threads = stream_read_threads(max(n16, 1))
    if n16 == 0 or n16 + 4 * threads >= 2**31:  # the kernel's int indices stay in range
        raise ValueError(f"stream_read: {nbytes} B is outside 16 B .. ~30 GiB")
    short = [b.nbytes for b in buffers if b.nbytes < nbytes]
    if not buffers or short:
        raise ValueError(f"stream_read: reading {nbytes} B needs buffers at least that large "
                         f"(got {[b.nbytes for b in buffers]}); pass the weight bytes")
    program = backend.load(stream_read_spec())
    out = backend.alloc(4 * threads)
    grid, block = (threads // STREAM_READ_BLOCK, 1, 1), (STREAM_READ_BLOCK, 1, 1)
    try:
        arg_sets: list[list[Buffer | int]] = [[b, n16, out, threads] for b in buffers]
        backend.launch(program, grid, block, arg_sets[0])
        backend.synchronize()
        got = backend.copy_out(out).view(np.uint32)
        want = stream_read_expected(backend.copy_out(buffers[0], 16 * n16), threads)
        if not np.array_equal(got, want):
            bad = int(np.count_nonzero(got != want))
            raise RuntimeError(f"stream_read: {bad} of {threads} threads read wrong bytes; "
                               "not timing a wrong read floor")
        arm = Arm.kernel("stream_read", backend, program, grid, block, arg_sets)
        runs = time_single(backend, arm, config, filler)
    finally:
        backend.free(out)
    return Baseline("stream_read", runs, 16 * n16)
