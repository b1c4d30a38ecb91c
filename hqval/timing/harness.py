"""Interleaved A/B device-event timing of two launchable arms.

One event pair per sample; warm-ups first (the same event-bracketed pattern, discarded);
ABBA order; ``runs`` independent runs.  With ``prime`` > 0 every timed sample is preceded by
that many untimed launches of the same arm on the same copy (hot mode,
``hqval.timing.schedule.primes``): every hot sample then reads weights its own arm has
just read, instead of half of them following the other arm.  Timing cells are run one
after another by the caller, never concurrently on one device.

Launch gaps: a GEMV on an H200 runs for 3 to 20 us, about what one Python launch costs.
If the device drains its queue between samples, the start event is stamped before the
host has even issued the kernel, and the sample measures the host.  So each launch-phase
segment of a run starts by enqueuing a spin kernel (the ``QueueFiller``) long enough to
cover the host's enqueue of that segment; afterwards the harness asks whether the spin
was still running when the host finished, and waits for the segment before the next one.
If a spin was not still running, the run is retried with longer spins, and a run that
still drained is reported (``queue_drained``), not silently trusted.

One spin per segment, not one per run: the device holds a bounded number of queued
launches and events, and a host that fills the queue blocks until the spin ends, so the
spin always "drained" and each retry, doubling it, was pointless (docs/timing.md, "Queue
filler and deadlines", has what the torch.mv baseline did on the H200).  A segment is at
most ``MAX_SEGMENT_PAIRS`` ABBA pairs.  The spin's length comes from the median host cost
of a warm-up pair, not the mean, which a first call's one-time set-up inflates; no spin
is ever longer than ``MAX_FILL_US``.
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


# Launch-phase segments of a run.  On the H200 every fourth kernel launch of a stream ran
# faster than the other three; in cold ABBA each (arm, order position) stratum is one
# launch index mod 4, so a run's ratio moved with the phase the run began at, and with 3
# runs a cell's ratio carried the offset of its place in the launch stream (the figures:
# reports/checkpoints/2026-12-01-h200-timing-stability-4, section 3c).  Each run is cut
# into this many segments (or a multiple of it) with one untimed launch between them, the
# spin that starts the next segment, so every stratum sees every launch phase.
LAUNCH_PHASES = 4
# ABBA pairs a segment holds at most: with a primer and two events a sample, 64 samples
# of a torch.mv arm are a few hundred queued entries, well inside the device's queue.
MAX_SEGMENT_PAIRS = 32
# Spin bounds: at least 2 ms; never more than 1 s (a longer spin cannot help: the host
# enqueues a segment in milliseconds).
MIN_FILL_US = 2000
MAX_FILL_US = 1_000_000


def segments(order: Sequence[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """``order`` cut into a multiple of ``LAUNCH_PHASES`` segments of at most
    ``MAX_SEGMENT_PAIRS`` pairs each (as even as the pairs allow)."""
    per_phase = -(-len(order) // (LAUNCH_PHASES * MAX_SEGMENT_PAIRS))
    count = min(max(LAUNCH_PHASES * per_phase, 1), max(len(order), 1))
    size = -(-len(order) // count)
    return [list(order[i:i + size]) for i in range(0, len(order), size)]


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
    deadline = backend.deadline  # the cell's (hqval.deadline.bounded): no sample after it
    if deadline is not None:
        deadline.check(f"timing a sample of {arm.name}")
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
    # out of the way, and the host cost of one sample pair is measured (its median: the
    # first pair carries one-time set-up, such as a library's first call).
    pending = []
    pair_s: list[float] = []
    for i in range(config.warmup):
        t0 = time.perf_counter()
        for arm_i in (0, 1) if i % 2 == 0 else (1, 0):
            pending.append(_bracketed(backend, arms[arm_i], next_copy(arm_i), config.prime))
        pair_s.append(time.perf_counter() - t0)
    host_per_pair = sorted(pair_s)[len(pair_s) // 2] if pair_s else 0.0
    for s, e in pending:
        backend.elapsed_ms(s, e)
    backend.synchronize()

    out = PairSamples()
    parts = segments(abba_order(config.iterations))
    longest = max(len(p) for p in parts)
    # Spin for twice the host's enqueue time of the longest segment.
    fill_us = min(max(MIN_FILL_US, int(2.0 * host_per_pair * longest * 1e6)), MAX_FILL_US)
    for run in range(config.runs):
        current_run[0] = run
        for attempt in range(config.max_fill_retries + 1):
            events: list[tuple[int, Any, Any]] = []
            drained = False
            for part in parts:
                # The spin is the one untimed launch between segments: the next segment
                # starts one launch phase later.
                token = filler.start(fill_us) if filler is not None else None
                for first, second in part:
                    for arm_i in (first, second):
                        s, e = _bracketed(backend, arms[arm_i], next_copy(arm_i), config.prime)
                        events.append((arm_i, s, e))
                if filler is not None:
                    drained = not filler.still_busy(token) or drained
                    backend.synchronize()  # the queue holds one segment at a time
            samples: tuple[list[float], list[float]] = ([], [])
            for arm_i, s, e in events:
                samples[arm_i].append(backend.elapsed_ms(s, e) * 1000.0)
            backend.synchronize()
            if not drained or filler is None or attempt == config.max_fill_retries:
                break
            if fill_us >= MAX_FILL_US:
                break  # a longer spin cannot help; the run is reported drained
            fill_us = min(2 * fill_us, MAX_FILL_US)
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

    def still_busy(self, token: Any) -> bool:
        cu = self.backend.cu
        (err,) = cu.cuEventQuery(token)
        busy = bool(err == cu.CUresult.CUDA_ERROR_NOT_READY)
        if not busy and int(err) != 0:
            raise RuntimeError(f"cuEventQuery failed: {err}")
        try:
            self.backend.wait_event(token, "waiting for the queue filler's spin")
        finally:
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

    def still_busy(self, token: Any) -> bool:
        hip = self.backend.hip
        result = hip.hipEventQuery(token)
        err = result[0] if isinstance(result, tuple) else result
        busy = bool(err == hip.hipError_t.hipErrorNotReady)
        if not busy and int(err) != 0:
            raise RuntimeError(f"hipEventQuery failed: {err}")
        try:
            self.backend.wait_event(token, "waiting for the queue filler's spin")
        finally:
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
