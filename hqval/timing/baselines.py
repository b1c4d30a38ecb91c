"""Reference ceilings timed in the same run as the kernels: device-to-device copy
bandwidth, and ``torch.mv`` on bf16 weights of the same shape (CUDA only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hqval.backends.base import Backend
from hqval.timing.gemv import Shape
from hqval.timing.harness import Arm, QueueFiller, TimingConfig, time_single
from hqval.timing.schedule import Mode, rotation_copies

# 1 GiB each way: ~0.5 ms on an H200, far past launch overhead and 20x its L2.
COPY_BYTES = 1 << 30


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
    torch.cuda.synchronize()

    def launcher(w: Any) -> Any:
        return lambda: torch.mv(w, x, out=y)

    arm = Arm("torch_mv_bf16", [launcher(w) for w in weights])
    runs = time_single(backend, arm, config, filler)
    del weights
    torch.cuda.synchronize()
    return Baseline("torch_mv_bf16", runs, wbytes + 2 * shape.K + 2 * shape.M)
