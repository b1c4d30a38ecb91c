"""Interleaved A/B device-event timing of two launchable arms.

One event pair per sample; warm-ups first (the same event-bracketed pattern, discarded);
ABBA order; ``runs`` independent runs.  With ``prime`` > 0 every timed sample is preceded by
that many untimed launches of the same arm on the same copy (hot mode,
``hqval.timing.schedule.primes``): every hot sample then reads weights its own arm has
just read, instead of half of them following the other arm.  Timing cells are run one
after another by the caller, never concurrently on one device.

Launch gaps: a GEMV on an H200 runs for 3 to 20 us, about what one Python launch costs.
If the device drains its queue between samples, the start event is stamped before the
host has even issued the kernel, and the sample measures the host.  So each run starts by
enqueuing a spin kernel (the ``QueueFiller``) long enough to cover the host's enqueue of
the whole run; afterwards the harness asks whether the spin was still running when the
host finished.  If it was not, the run is retried with a longer spin, and a run that
still drained is reported (``queue_drained``), not silently trusted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hqval.backends.base import Arg, Backend, Program
from hqval.timing.schedule import abba_order


@dataclass
class Arm:
    """One side of a comparison: one enqueue function per rotating copy of its inputs.
    Each must only enqueue device work on the stream the backend's events use."""

    name: str
    launchers: list[Callable[[], object]]

    def __post_init__(self) -> None:
        if not self.launchers:
            raise ValueError(f"arm {self.name}: needs at least one launcher")

    @classmethod
    def kernel(
        cls,
        name: str,
        backend: Backend,
        program: Program,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        arg_sets: Sequence[Sequence[Arg]],
    ) -> Arm:
        def launcher(args: Sequence[Arg]) -> Callable[[], object]:
            return lambda: backend.launch(program, grid, block, args)

        return cls(name, [launcher(a) for a in arg_sets])


class QueueFiller(Protocol):
    """Keeps the device busy while the host enqueues a run."""

    def start(self, microseconds: int) -> Any: ...

    def still_busy(self, token: Any) -> bool: ...

    def nop(self) -> None:
        """Enqueue one kernel launch that reads no memory and takes no time (the spin
        kernel for 0 us), untimed: shifts the launch index of what follows by one."""
        ...


# Launch-phase segments of a run.  On the H200 every fourth kernel launch of a stream
# ran about 2% faster than the other three (cold 4096x5120 and 17408x5120; the fast
# launch's index mod 4 moved by one per run, with the run's queue-filler launch).  In
# cold ABBA each (arm, order position) stratum is one launch index mod 4, so one arm's
# half of its samples was fast in a run, and a run's ratio moved by about +-1% with the
# phase the run began at: with 3 runs a cell's ratio carried the offset of its place in
# the launch stream, the same in every re-run and different from cell to cell
# (reports/checkpoints/2026-12-01-h200-timing-stability-4, section 3c).  Each run is cut
# into this many segments with one untimed no-op launch between them, so every stratum
# sees every launch phase in one segment of the run.
LAUNCH_PHASES = 4


@dataclass(frozen=True)
class TimingConfig:
    warmup: int = 32
    iterations: int = 100
    runs: int = 3
    # Spin retries when the host outran the queue filler.
    max_fill_retries: int = 3
    # Untimed launches of the same arm and copy before each timed sample (hot mode: 1).
    prime: int = 0
    # Every sample of run r reads copy r (mod copies) instead of rotating per launch (hot
    # mode: each run is hot on one copy; the runs average over the copies' placements).
    copy_per_run: bool = False

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.runs < 1:
            raise ValueError("warmup must be >= 0 and runs >= 1")
        if self.prime < 0:
            raise ValueError(f"prime {self.prime}: untimed launches before a sample, >= 0")
        abba_order(self.iterations)  # validates evenness


@dataclass
class PairSamples:
    """Per-run sample times in microseconds, arm A and arm B."""

    runs_a: list[list[float]] = field(default_factory=list)
    runs_b: list[list[float]] = field(default_factory=list)
    queue_drained: list[bool] = field(default_factory=list)
    fill_us: list[int] = field(default_factory=list)


def _bracketed(backend: Backend, arm: Arm, copy: int, prime: int = 0) -> tuple[Any, Any]:
    for _ in range(prime):  # untimed: the sample then follows a read of its own copy
        arm.launchers[copy]()
    start = backend.record_event()
    arm.launchers[copy]()
    end = backend.record_event()
    return start, end


def time_pair(
    backend: Backend,
    a: Arm,
    b: Arm,
    config: TimingConfig,
    filler: QueueFiller | None = None,
    progress: Callable[[str], None] | None = None,
) -> PairSamples:
    """Time ``a`` against ``b``: ``config.runs`` runs of ``config.iterations`` ABBA samples."""
    arms = (a, b)
    # One rotation counter per distinct arm: an arm timed against itself (a baseline)
    # shares it, so consecutive samples never re-read the copy just read.
    counters: dict[int, int] = {id(a): 0, id(b): 0}
    current_run = [0]

    def next_copy(i: int) -> int:
        if config.copy_per_run:
            return current_run[0] % len(arms[i].launchers)
        key = id(arms[i])
        c = counters[key] % len(arms[i].launchers)
        counters[key] += 1
        return c

    # Warm-ups: same bracketed pattern, so module load, first-touch and clock ramp are
    # out of the way, and the host cost of one sample pair is measured.
    t0 = time.perf_counter()
    pending = []
    for i in range(config.warmup):
        for arm_i in (0, 1) if i % 2 == 0 else (1, 0):
            pending.append(_bracketed(backend, arms[arm_i], next_copy(arm_i), config.prime))
    host_per_pair = (time.perf_counter() - t0) / max(config.warmup, 1)
    for s, e in pending:
        backend.elapsed_ms(s, e)
    backend.synchronize()

    out = PairSamples()
    order = abba_order(config.iterations)
    # Spin for twice the host's measured enqueue time of one run, at least 2 ms.
    fill_us = max(2000, int(2.0 * host_per_pair * config.iterations * 1e6))
    for run in range(config.runs):
        current_run[0] = run
        for attempt in range(config.max_fill_retries + 1):
            token = filler.start(fill_us) if filler is not None else None
            events: list[tuple[int, Any, Any]] = []
            segment = -(-len(order) // LAUNCH_PHASES)
            for k, (first, second) in enumerate(order):
                if filler is not None and k and k % segment == 0:
                    filler.nop()  # the next segment starts one launch phase later
                for arm_i in (first, second):
                    s, e = _bracketed(backend, arms[arm_i], next_copy(arm_i), config.prime)
                    events.append((arm_i, s, e))
            drained = filler is None or not filler.still_busy(token)
            samples: tuple[list[float], list[float]] = ([], [])
            for arm_i, s, e in events:
                samples[arm_i].append(backend.elapsed_ms(s, e) * 1000.0)
            backend.synchronize()
            if not drained or filler is None or attempt == config.max_fill_retries:
                break
            fill_us *= 2
            if progress:
                progress(f"run {run}: host outran the queue filler; retrying with {fill_us} us")
        out.runs_a.append(samples[0])
        out.runs_b.append(samples[1])
        out.queue_drained.append(drained if filler is not None else True)
        out.fill_us.append(fill_us)
    return out


def time_single(
    backend: Backend,
    arm: Arm,
    config: TimingConfig,
    filler: QueueFiller | None = None,
) -> list[list[float]]:
    """Event-timed samples (us) of one arm alone, per run (baselines such as a copy)."""
    samples = time_pair(backend, arm, arm, config, filler)
    return [ra + rb for ra, rb in zip(samples.runs_a, samples.runs_b, strict=True)]


SPIN_SOURCE = r"""
// Busy-waits for the given number of microseconds of the device's global timer, so the
// host can enqueue a whole timing run behind it without the queue draining.
extern "C" __global__ void hqval_spin(int microseconds) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < 1000ull * (unsigned long long)microseconds);
}
"""


class CudaSpinFiller:
    """QueueFiller for the CUDA backend: a one-thread spin kernel plus an event query."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.program = backend.load_source(SPIN_SOURCE, "hqval_spin", filename="spin.cu")

    def start(self, microseconds: int) -> Any:
        self.backend.launch(self.program, (1, 1, 1), (1, 1, 1), [int(microseconds)])
        return self.backend.record_event()

    def nop(self) -> None:
        self.backend.launch(self.program, (1, 1, 1), (1, 1, 1), [0])

    def still_busy(self, token: Any) -> bool:
        cu = self.backend.cu
        (err,) = cu.cuEventQuery(token)
        busy = bool(err == cu.CUresult.CUDA_ERROR_NOT_READY)
        if not busy and int(err) != 0:
            raise RuntimeError(f"cuEventQuery failed: {err}")
        cu.cuEventSynchronize(token)
        cu.cuEventDestroy(token)
        return busy


AMD_SPIN_SOURCE = r"""
// Busy-waits for the given number of microseconds of the 100 MHz REALTIME counter
// (s_memrealtime on gfx10, s_sendmsg_rtn REALTIME on gfx11/12), sleeping between reads.
extern "C" __attribute__((global)) void hqval_spin(int microseconds) {
    const unsigned long long t0 = __builtin_readsteadycounter();
    while (__builtin_readsteadycounter() - t0 < 100ull * (unsigned long long)microseconds) {
        __builtin_amdgcn_s_sleep(8);
    }
}
"""


def amd_spin_spec(root: str | Path | None = None) -> Any:
    """A KernelSpec for the AMD spin kernel, its source written under the hqval cache so
    the toolchain builds and caches it like any kernel."""
    from hqval.manifest import KernelSpec
    from hqval.toolchain import cache_base

    base = cache_base(root)
    path = base / "timing" / "hqval_spin.hip"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != AMD_SPIN_SOURCE:
        path.write_text(AMD_SPIN_SOURCE)
    return KernelSpec(name="hqval_spin", source=path, symbol="hqval_spin", qt=0, kind="spin",
                      block=1)


class HipSpinFiller:
    """QueueFiller for the HIP backend: the AMD spin kernel plus hipEventQuery."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.program = backend.load(amd_spin_spec(backend.cache_dir))

    def start(self, microseconds: int) -> Any:
        self.backend.launch(self.program, (1, 1, 1), (1, 1, 1), [int(microseconds)])
        return self.backend.record_event()

    def nop(self) -> None:
        self.backend.launch(self.program, (1, 1, 1), (1, 1, 1), [0])

    def still_busy(self, token: Any) -> bool:
        hip = self.backend.hip
        result = hip.hipEventQuery(token)
        err = result[0] if isinstance(result, tuple) else result
        busy = bool(err == hip.hipError_t.hipErrorNotReady)
        if not busy and int(err) != 0:
            raise RuntimeError(f"hipEventQuery failed: {err}")
        hip.hipEventSynchronize(token)
        hip.hipEventDestroy(token)
        return busy


def filler_for(backend: Backend) -> QueueFiller | None:
    """The queue filler for ``backend``, or None where it has none (then every run is
    reported with ``queue_drained`` true, i.e. not trusted)."""
    own = getattr(backend, "queue_filler", None)
    if callable(own):  # a backend that brings its own (the simulated device)
        return own()  # type: ignore[no-any-return]
    if backend.name == "cuda":
        return CudaSpinFiller(backend)
    if backend.name == "hip":
        return HipSpinFiller(backend)
    return None


def flatten(runs: Sequence[Sequence[float]]) -> list[float]:
    return [x for r in runs for x in r]
