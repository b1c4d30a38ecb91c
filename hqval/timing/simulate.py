"""A simulated timing device: the timing pipeline end to end with no GPU.

Like tinygrad's null device, this exists so the code that times, gates, compares and
reports can run in CI and in a dry run of a device script before device time is spent.
It computes every GEMV on the host (the real decoder of the kernel's format, so the
bench's verification against the f64 oracle is a real check) and stamps its events with a
synthetic clock: a kernel's duration is its weight bytes over a nominal bandwidth, times
a per-format factor, times ``1 + redundant_cost * k / 256`` for a timing mutant
(``HQ_TIMING_SLOW = k``; ``extraM`` and ``chainN`` likewise), times ``1 + displaced``
when the launch before it read another weight buffer (the cache held someone else's
weights: what hot mode's primer launch avoids), times ``drift`` (a run-to-run clock
offset the caller sets), times log-normal jitter with occasional slow outliers.  Its
numbers are a model, never a measurement: rows it produces say backend ``sim``, and
nothing here is a device fact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hqval.backends.base import Arg, Backend, Buffer, LaunchInfo, Program
from hqval.manifest import KernelSpec

# Model parameters (not device facts): qt=44 a touch slower, qt=45 2% faster than qt=6 --
# the shape of the H200 tensor-core results -- and a redundant group pass costing twice a
# pipelined one, group work being half a kernel's time.
FORMAT_FACTOR = {6: 1.0, 44: 1.002, 45: 0.98}
REDUNDANT_COST = 2.0
GROUP_SHARE = 0.5
EXTRA_STEP = 0.005  # an extra step of work in every group: +0.5% (model)
CHAIN_STEP = 0.001  # one dependent cached load after each row: +0.1% (model)


@dataclass
class _Event:
    t_us: float


@dataclass
class SimulatedDevice(Backend):
    """A Backend whose kernels compute on the host and whose clock is a model."""

    arch: str = "sim"
    bandwidth_gbps: float = 20.0
    jitter: float = 0.01
    outlier_rate: float = 0.02
    drift: float = 1.0  # multiplies every duration; set between re-runs
    # Extra cost of a launch that follows a launch on another weight buffer (model).
    displaced: float = 0.0
    seed: int = 0
    name: str = "sim"
    # Attributes bench.device_facts reads for a device outside arches.yaml (a 1 MiB LLC
    # keeps cold mode's rotating copies few).
    properties: dict[str, Any] = field(default_factory=lambda: {
        "l2_bytes": 1 << 20, "memory_clock_khz": 1_000_000, "memory_bus_bits": 256})
    _mem: dict[int, np.ndarray] = field(default_factory=dict)
    _deq: dict[int, np.ndarray] = field(default_factory=dict)
    _next: int = 1
    _clock_us: float = 0.0
    _last_w: int = 0

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng(self.seed)

    def device_name(self) -> str:
        return "simulated timing device (a model, not a measurement)"

    def runtime_info(self) -> dict[str, str]:
        return {"simulated": "true"}

    def load(self, spec: KernelSpec) -> Program:
        if spec.kind != "gemv":
            raise NotImplementedError(f"need a GPU: the simulated device runs GEMVs only "
                                      f"({spec.name} is {spec.kind})")
        d = dict(spec.defines)
        return Program(spec=spec, symbol=spec.symbol,
                       handle={"slow": int(d.get("HQ_TIMING_SLOW") or 0),
                               "extra": int(d.get("HQ_TIMING_EXTRA") or 0),
                               "chain": int(d.get("HQ_TIMING_CHAIN") or 0)})

    def alloc(self, nbytes: int) -> Buffer:
        h = self._next
        self._next += 1
        self._mem[h] = np.zeros(max(nbytes, 1), dtype=np.uint8)
        return Buffer(nbytes=nbytes, handle=h)

    def free(self, buf: Buffer) -> None:
        self._mem.pop(int(buf.handle), None)
        self._deq.pop(int(buf.handle), None)

    def copy_in(self, buf: Buffer, host: np.ndarray, offset: int = 0) -> None:
        raw = np.ascontiguousarray(host).view(np.uint8).ravel()
        self._mem[int(buf.handle)][offset:offset + raw.size] = raw
        self._deq.pop(int(buf.handle), None)

    def copy_out(self, buf: Buffer, nbytes: int | None = None, offset: int = 0) -> np.ndarray:
        n = buf.nbytes if nbytes is None else nbytes
        return self._mem[int(buf.handle)][offset:offset + n].copy()

    def launch(self, program: Program, grid: tuple[int, int, int],
               block: tuple[int, int, int], args: Sequence[Arg]) -> LaunchInfo:
        from hqval.formats import by_qt

        if self.deadline is not None:  # as a hardware backend: no launch past it
            self.deadline.check(f"launching {program.symbol}")
        spec = program.spec
        w, x, y, m, k = args
        assert isinstance(w, Buffer) and isinstance(x, Buffer) and isinstance(y, Buffer)
        assert isinstance(m, int) and isinstance(k, int)
        M, K = m, k
        fmt = by_qt(spec.qt)
        row_bytes = (K // 256) * 136
        deq = self._deq.get(int(w.handle))
        if deq is None or deq.shape != (M, K):  # decoded once per buffer and shape
            blob = self._mem[int(w.handle)][:M * row_bytes].reshape(M, row_bytes)
            deq = fmt.decode(blob, K).astype(np.float64)
            self._deq[int(w.handle)] = deq
        xv = self._mem[int(x.handle)][:4 * K].view(np.float32).astype(np.float64)
        out = (deq @ xv).astype(np.float32)
        if spec.residual:
            out = out + self._mem[int(y.handle)][:4 * M].view(np.float32)
        self._mem[int(y.handle)][:4 * M] = out.view(np.uint8)
        t = self._duration_us(spec, program.handle, M * row_bytes)
        if self._last_w != int(w.handle):
            t *= 1.0 + self.displaced
        self._last_w = int(w.handle)
        self._clock_us += t
        return LaunchInfo()

    def _duration_us(self, spec: KernelSpec, amounts: dict[str, int], nbytes: int) -> float:
        t = nbytes / (self.bandwidth_gbps * 1e3)
        t *= FORMAT_FACTOR.get(spec.qt, 1.0) * (
            1.0 + REDUNDANT_COST * GROUP_SHARE * amounts["slow"] / 256.0)
        t *= (1.0 + EXTRA_STEP * amounts["extra"]) * (1.0 + CHAIN_STEP * amounts["chain"])
        t *= self.drift * float(self._rng.lognormal(0.0, self.jitter))
        if self._rng.random() < self.outlier_rate:
            t *= 1.0 + float(self._rng.uniform(0.05, 0.3))
        return t + 0.5  # launch overhead

    def record_event(self) -> Any:
        return _Event(self._clock_us)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(end.t_us - start.t_us) / 1000.0

    def queue_filler(self) -> Any:
        return _NeverDrains()


class _NeverDrains:
    """The simulated queue never drains: the host always keeps up with its clock."""

    def start(self, microseconds: int) -> Any:
        return None

    def still_busy(self, token: Any) -> bool:
        return True
