"""Exploration only (not part of hqval): time kernel variants at the issue-6 shapes, cold.

Usage (repo root, CUDA host with cupy):
  python3 reports/checkpoints/2026-11-29-h200-gemv-d/probes/probe.py \\
      "NAME;INCLUDE_DIR;DEF=1,DEF2;KERNEL_FILE;SYMBOL" ...
Each variant: median of 200 event-timed launches over rotating weight copies (> 3x L2),
no A/A control and no verification: for ranking variants only (hqval bench measures).
"""

import sys
from pathlib import Path

import cupy as cp
import numpy as np

ROOT = Path(__file__).resolve().parents[4]  # the repository
SHAPES = [(17408, 5120), (27648, 5120)]
ITERS = 200


def timeit(launch_for, copies):
    ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(ITERS)]
    for i in range(20):
        launch_for(i % copies)
    cp.cuda.Device().synchronize()
    for i, (s, e) in enumerate(ev):
        s.record()
        launch_for(i % copies)
        e.record()
    cp.cuda.Device().synchronize()
    return float(np.median([cp.cuda.get_elapsed_time(s, e) * 1000 for s, e in ev]))


def bufs(M, K):
    nbytes = M * (K // 256) * 136
    copies = max(2, -(-3 * 62914560 // nbytes))
    rng = np.random.default_rng(1)
    host = rng.integers(0, 256, size=nbytes, dtype=np.uint8)
    # valid fp16 headers (scale, zero) so no NaN paths: set every group's 8 header bytes
    hdr = np.frombuffer(np.array([0.01, -0.05, 0.012, -0.04], dtype=np.float16).tobytes(), np.uint8)
    h = host.reshape(-1, 136)
    h[:, :8] = hdr
    W = [cp.asarray(host) for _ in range(copies)]
    x = cp.asarray(rng.standard_normal(K).astype(np.float32))
    y = cp.zeros(M, dtype=cp.float32)
    return W, x, y, nbytes, copies


def main():
    (ROOT / "kernels/gemv_hfq4g256.hip").read_text()
    variants = [v.split(";") for v in sys.argv[1:]]  # "name;incdir;DEF=1,DEF2=2;kernelfile;func"
    empty = cp.RawKernel(r'extern "C" __global__ void e(){}', "e")
    for M, K in SHAPES:
        W, x, y, nbytes, copies = bufs(M, K)
        t_empty = timeit(lambda i: empty((1,), (32,), ()), 1)
        print(
            f"{M}x{K}: {nbytes / 1e6:.1f} MB, copies {copies}, empty kernel {t_empty:.2f} us",
            flush=True,
        )
        # streaming read ceiling
        rd = cp.RawKernel(
            r"""extern "C" __global__ void rd(const uint4* __restrict__ p, size_t n, unsigned* out){
            unsigned a = 0; size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x, s = (size_t)gridDim.x * blockDim.x;
            for (; i < n; i += s) { uint4 v = __ldcs(p + i); a ^= v.x ^ v.y ^ v.z ^ v.w; }
            if (a == 0x12345678u) out[0] = a; }""",
            "rd",
        )
        out = cp.zeros(1, dtype=cp.uint32)
        for blocks, thr in ((132 * 8, 256), (132 * 16, 256), (132 * 4, 512)):
            t = timeit(
                lambda i: rd((blocks,), (thr,), (W[i], np.uint64(nbytes // 16), out)), copies
            )
            print(f"  read {blocks}x{thr}: {t:.2f} us {nbytes / t / 1e3:.0f} GB/s", flush=True)
        for name, inc, defs, kfile, func in variants:
            opts = ["-std=c++17", "--device-as-default-execution-space", f"-I{ROOT / inc}"] + [
                f"-D{d}" for d in defs.split(",") if d
            ]
            src = (ROOT / kfile).read_text()
            try:
                mod = cp.RawModule(code=src, options=tuple(opts), backend="nvrtc")
                f = mod.get_function(func)
            except Exception as exc:
                print(f"  {name}: compile failed {exc}"[:2000], flush=True)
                continue
            R = 8
            grid = (M + R - 1) // R
            t = timeit(lambda i: f((grid,), (32,), (W[i], x, y, np.int32(M), np.int32(K))), copies)
            print(
                f"  {name}: {t:.2f} us {nbytes / t / 1e3:.0f} GB/s regs={f.num_regs} smem={f.shared_size_bytes}",
                flush=True,
            )
        del W
        cp.get_default_memory_pool().free_all_blocks()


main()
