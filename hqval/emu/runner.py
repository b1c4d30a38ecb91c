"""Run one manifest kernel on the interpreter against the numpy oracle of hqval.formats,
and the speed benchmark behind ``hqval emu --bench``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hqval.emu.machine import Machine
from hqval.result import Row, Status


@dataclass(frozen=True)
class KernelRun:
    """One kernel launch on the emulator and its comparison with the oracle."""

    kernel: str
    arch: str
    shape: tuple[int, ...]
    seconds: float
    wave_instructions: int
    counts: dict[str, int]
    per_wave: dict[str, float]
    # max |y - oracle| / max(sum_k |w x|): the error relative to the dot product's own scale
    error: float
    tolerance: float
    derivation: str
    nonfinite: int = 0
    # GEMV only: outputs that differ in any bit from the lane-order model (gemv_lane_order);
    # None where there is no order model (GEMM: the WMMA's internal order is unspecified)
    bit_mismatches: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.nonfinite == 0 and self.error <= self.tolerance

    @property
    def rate(self) -> float:
        return self.wave_instructions / self.seconds if self.seconds > 0 else 0.0

    def row(self) -> Row:
        """The result as the suite's one row type: ``emu_oracle[kernel|arch|emu]``."""
        if self.nonfinite:
            status, message = Status.FAIL, f"{self.nonfinite} NaN/Inf outputs"
        elif self.error > self.tolerance:
            status, message = Status.FAIL, "differs from the formats oracle beyond tolerance"
        else:
            status, message = Status.PASS, ""
        return Row(kind="check", check="emu_oracle", kernel=self.kernel, arch=self.arch,
                   backend="emu", status=status, measured=self.error,
                   tolerance=self.tolerance, derivation=self.derivation, message=message,
                   details={"shape": list(self.shape), "seconds": self.seconds,
                            "wave_instructions": self.wave_instructions,
                            "wave_instructions_per_s": self.rate, "counts": self.counts,
                            "per_wave": self.per_wave, "bit_mismatches": self.bit_mismatches})


def gemv_lane_order(deq: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The suite's GEMV arithmetic, bit for bit: lane t of the wave accumulates weights
    8t..8t+7 of every group (the section 2 payload rule) with single-rounding fmas, groups
    ascending, then the xor butterfly over offsets 16, 8, 4, 2, 1 (hq_wave_sum).  ``deq``
    is hqval.formats' decode, which is the kernel's fma(q, scale, zero) rounded once."""
    from hqval.emu.fparith import fma_f32

    m, k = deq.shape
    lanes = np.arange(32)
    acc = np.zeros((m, 32), np.float32)
    for g in range(k // 256):
        for j in range(8):
            idx = g * 256 + 8 * lanes + j
            acc = fma_f32(deq[:, idx], x[idx][None, :], acc)
    for off in (16, 8, 4, 2, 1):
        acc = (acc + acc[:, lanes ^ off]).astype(np.float32)
    return np.asarray(acc[:, 0], np.float32)


def _mismatches(y: np.ndarray, exact: np.ndarray) -> int:
    return int(np.count_nonzero(np.asarray(y, np.float32).view(np.uint32)
                                != np.asarray(exact, np.float32).view(np.uint32)))


def _oracle_scale(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.abs(w.astype(np.float64)) @ np.abs(x.astype(np.float64)).T


def _extra_args(spec: Any) -> list[int]:
    """A manifest's ``extra_args`` as kernarg ints: null -> 0, a float -> its f32 bits."""
    out = []
    for a in getattr(spec, "extra_args", ()):
        if a is None:
            out.append(0)
        elif isinstance(a, float):
            out.append(int(np.array([a], np.float32).view(np.uint32)[0]))
        else:
            out.append(int(a))
    return out


def run_kernel(spec: Any, arch: str, M: int | None = None, K: int = 1024, N: int = 32,
               seed: int = 0, code_object: bytes | None = None,
               trace: Callable[[int, str, int], None] | None = None,
               cache_dir: str | None = None) -> KernelRun:
    """Compile (unless ``code_object`` is given) and run ``spec`` on ``arch``; compare.
    ``trace`` is passed to Machine.launch (every executed instruction)."""
    from hqval.formats import by_qt

    if code_object is None:
        from hqval.toolchain import compile_kernel

        res = compile_kernel(spec, arch, cache_dir)
        if not res.ok or res.code_object is None:
            raise RuntimeError(f"{spec.name} does not compile for {arch}: {res.message}")
        code_object = res.code_object.read_bytes()
    machine = Machine(arch)
    module = machine.load(code_object)
    fmt = by_qt(spec.qt)
    rng = np.random.default_rng(seed)
    kind = spec.kind
    if kind == "gemv":
        M = M or 64
        w = (rng.standard_normal((M, K)) * 0.02).astype(np.float32)
        blob = fmt.encode(w)
        deq = fmt.decode(blob, K)
        x = rng.standard_normal(K).astype(np.float32)
        y0 = rng.standard_normal(M).astype(np.float32)
        wa, xa, ya = machine.alloc(blob.nbytes), machine.alloc(x.nbytes), machine.alloc(4 * M)
        machine.write(wa, blob)
        machine.write(xa, x)
        machine.write(ya, y0)
        r = spec.rows_per_block
        stats = machine.launch(module, spec.symbol, (-(-M // r), 1, 1), (spec.block, 1, 1),
                               [wa, xa, ya, M, K, *_extra_args(spec)], trace=trace)
        y = machine.read(ya, 4 * M).view(np.float32)
        ref = deq.astype(np.float64) @ x.astype(np.float64)
        exact = gemv_lane_order(deq, x)
        if spec.residual:
            ref = ref + y0
            exact = (y0 + exact).astype(np.float32)
        bits: int | None = _mismatches(y, exact)
        scale = _oracle_scale(deq, x[None, :])[:, 0] + (np.abs(y0) if spec.residual else 0)
        # f32 products with single-rounding fma, K/32 sequential terms per lane then a
        # 5-level butterfly: |err| <= (K/32 + 5 + 2) u sum|w x|, u = 2^-24
        tol = (K / 32 + 7) * 2.0**-24
        derivation = f"f32 fma chain of K/32={K // 32} terms + 5 butterfly adds: (K/32+7)*2^-24"
        shape: tuple[int, ...] = (M, K)
    elif kind == "gemv_qkv":
        # fused QKV ABI (docs/ARCHITECTURE.md): three matrices, one x, one launch
        M = M or 40
        ms = (M, M // 2 + 3, M // 4 + 5)
        r = spec.rows_per_block
        x = rng.standard_normal(K).astype(np.float32)
        xa = machine.alloc(x.nbytes)
        machine.write(xa, x)
        wptrs, yptrs, refs, scales, exacts = [], [], [], [], []
        for mi in ms:
            w = (rng.standard_normal((mi, K)) * 0.02).astype(np.float32)
            blob = fmt.encode(w)
            deq = fmt.decode(blob, K)
            wa, ya = machine.alloc(blob.nbytes), machine.alloc(4 * mi)
            machine.write(wa, blob)
            wptrs.append(wa)
            yptrs.append(ya)
            refs.append(deq.astype(np.float64) @ x.astype(np.float64))
            scales.append(_oracle_scale(deq, x[None, :])[:, 0])
            exacts.append(gemv_lane_order(deq, x))
        grid_x = sum(-(-mi // r) for mi in ms)
        stats = machine.launch(module, spec.symbol, (grid_x, 1, 1), (spec.block, 1, 1),
                               [*wptrs, xa, *yptrs, *ms, K, *_extra_args(spec)], trace=trace)
        y = np.concatenate([machine.read(ya, 4 * mi).view(np.float32)
                            for ya, mi in zip(yptrs, ms, strict=True)])
        ref = np.concatenate(refs)
        scale = np.concatenate(scales)
        bits = _mismatches(y, np.concatenate(exacts))
        tol = (K / 32 + 7) * 2.0**-24
        derivation = f"f32 fma chain of K/32={K // 32} terms + 5 butterfly adds: (K/32+7)*2^-24"
        shape = (*ms, K)
    elif kind == "gemm":
        M = M or 32
        w = (rng.standard_normal((M, K)) * 0.02).astype(np.float32)
        blob = fmt.encode(w)
        # the kernel rounds each dequantised weight once to f16 for the WMMA (v_fma_mix*_f16)
        deq16 = fmt.decode(blob, K).astype(np.float16)
        xh = rng.standard_normal((N, K)).astype(np.float16)
        y0 = rng.standard_normal((N, M)).astype(np.float32)
        wa, xa, ya = (machine.alloc(blob.nbytes), machine.alloc(xh.nbytes),
                      machine.alloc(4 * M * N))
        machine.write(wa, blob)
        machine.write(xa, xh)
        machine.write(ya, y0)
        bt = spec.batch_tile or 1
        stats = machine.launch(module, spec.symbol, (-(-M // 16), -(-N // (16 * bt)), 1),
                               (spec.block, 1, 1), [wa, xa, ya, M, K, N, *_extra_args(spec)],
                               trace=trace)
        y = machine.read(ya, 4 * M * N).view(np.float32).reshape(N, M)
        ref = xh.astype(np.float64) @ deq16.astype(np.float64).T
        if spec.residual:
            ref = ref + y0
        scale = _oracle_scale(xh, deq16) + (np.abs(y0) if spec.residual else 0)
        bits = None
        # f16 x f16 products are exact; K/16 WMMA steps each round once to f32, plus the
        # round of the f16 weight is in the oracle: |err| <= (K/16 + 2) u sum|w x|
        tol = (K / 16 + 2) * 2.0**-24
        derivation = f"exact f16 products, K/16={K // 16} f32 WMMA roundings: (K/16+2)*2^-24"
        shape = (M, K, N)
    else:
        raise ValueError(f"{spec.name}: kind {kind!r} has no emulator runner "
                         f"(gemv, gemv_qkv, gemm)")
    nonfinite = int((~np.isfinite(y)).sum())
    err = float(np.max(np.abs(y - ref) / np.maximum(scale, 1e-30))) if nonfinite == 0 \
        else float("inf")
    return KernelRun(kernel=spec.name, arch=arch, shape=shape, seconds=stats.seconds,
                     wave_instructions=stats.wave_instructions, counts=stats.counts,
                     per_wave=stats.per_wave, error=err, tolerance=tol, derivation=derivation,
                     nonfinite=nonfinite, bit_mismatches=bits)


# The speed targets: (kernel, arch, shape, seconds)
BENCH_CASES: tuple[tuple[str, str, tuple[int, ...], float], ...] = (
    ("gemv_mq4g256v2_r1", "gfx1100", (512, 4096), 1.5),
    ("gemm_mq4g256v2_wmma_gfx11", "gfx1100", (256, 1024, 32), 10.0),
    ("gemm_mq4g256v2_wmma_gfx12", "gfx1201", (256, 1024, 32), 10.0),
)


def bench(manifest: Any, repeats: int = 3) -> list[tuple[KernelRun, float]]:
    """Best-of-``repeats`` launch time for each bench case: [(run, target_seconds)]."""
    out = []
    for name, arch, shape, target in BENCH_CASES:
        spec = manifest.by_name(name)
        best: KernelRun | None = None
        for _ in range(repeats):
            t0 = time.perf_counter()
            if spec.kind == "gemv":
                r = run_kernel(spec, arch, M=shape[0], K=shape[1])
            else:
                r = run_kernel(spec, arch, M=shape[0], K=shape[1], N=shape[2])
            del t0
            if best is None or r.seconds < best.seconds:
                best = r
        assert best is not None
        out.append((best, target))
    return out
