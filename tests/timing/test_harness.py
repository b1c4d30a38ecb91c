"""The harness realises ABBA order, rotates copies and re-runs when the host outran the
queue filler.  A host-clock backend stands in for a device (the real one runs in the gpu
test of tests/backends/test_cuda.py and in reports/checkpoints/h200_bench.sh)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from hqval.backends.base import Backend, Buffer, LaunchInfo, Program
from hqval.timing.harness import Arm, TimingConfig, time_pair, time_single


class HostClock(Backend):
    """Events are positions in a launch log; a sample's time is what the launcher says."""

    name = "hostclock"

    def __init__(self) -> None:
        super().__init__("host")
        self.log: list[str] = []
        self.cost: dict[str, float] = {}

    def device_name(self) -> str:
        return "host clock"

    def load(self, spec: Any) -> Program:
        raise NotImplementedError

    def alloc(self, nbytes: int) -> Buffer:
        return Buffer(nbytes, bytearray(nbytes))

    def free(self, buf: Buffer) -> None:
        return None

    def copy_in(self, buf: Buffer, host: np.ndarray, offset: int = 0) -> None:
        return None

    def copy_out(self, buf: Buffer, nbytes: int | None = None, offset: int = 0) -> np.ndarray:
        return np.zeros(0, np.uint8)

    def launch(self, program: Program, grid: tuple[int, int, int],
               block: tuple[int, int, int], args: Sequence[Buffer | int]) -> LaunchInfo:
        return LaunchInfo()

    def record_event(self) -> Any:
        return len(self.log)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        (entry,) = self.log[start:end]
        return self.cost[entry.split(":")[0]] / 1000.0


def _arm(be: HostClock, name: str, copies: int, us: float) -> Arm:
    be.cost[name] = us
    return Arm(name, [lambda c=c: be.log.append(f"{name}:{c}") for c in range(copies)])


def test_time_pair_is_abba_and_rotates_copies() -> None:
    be = HostClock()
    a, b = _arm(be, "A", 3, 10.0), _arm(be, "B", 2, 12.0)
    cfg = TimingConfig(warmup=2, iterations=4, runs=2)
    out = time_pair(be, a, b, cfg)
    timed = be.log[2 * cfg.warmup:]
    arms = "".join(e[0] for e in timed)
    assert arms == "ABBAABBA" * cfg.runs
    a_copies = [int(e[2]) for e in be.log if e[0] == "A"]
    assert a_copies == [i % 3 for i in range(len(a_copies))]
    assert out.runs_a == [[10.0] * 4] * 2 and out.runs_b == [[12.0] * 4] * 2


def test_single_arm_never_rereads_the_copy_just_read() -> None:
    be = HostClock()
    arm = _arm(be, "C", 2, 5.0)
    runs = time_single(be, arm, TimingConfig(warmup=2, iterations=4, runs=1))
    copies = [int(e[2]) for e in be.log]
    assert all(x != y for x, y in itertools.pairwise(copies))
    assert runs == [[5.0] * 8]


class Filler:
    def __init__(self, busy_after: int) -> None:
        self.calls: list[int] = []
        self.busy_after = busy_after

    def start(self, microseconds: int) -> int:
        self.calls.append(microseconds)
        return len(self.calls)

    def still_busy(self, token: int) -> bool:
        return token > self.busy_after


class PhaseClock(HostClock):
    """A device whose every fourth kernel launch runs 2% faster, counting every launch of
    the stream (the filler's spins too), as the H200 measured."""

    def __init__(self, fast_phase: int) -> None:
        super().__init__()
        self.launches = 0
        self.fast_phase = fast_phase
        self.phase_of: dict[int, int] = {}  # log position -> launch index mod 4

    def log_launch(self, entry: str) -> None:
        self.phase_of[len(self.log)] = self.launches % 4
        self.log.append(entry)
        self.launches += 1

    def elapsed_ms(self, start: Any, end: Any) -> float:
        base = super().elapsed_ms(start, end)
        return base * (0.98 if self.phase_of[start] == self.fast_phase else 1.0)


class PhaseFiller:
    def __init__(self, be: PhaseClock) -> None:
        self.be = be

    def start(self, microseconds: int) -> int:
        self.be.log_launch("spin")
        return 0

    def still_busy(self, token: int) -> bool:
        return True


def test_launch_phase_segments_cancel_a_period_four_launch_effect(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hqval.timing import harness, stats

    def ratio(fast_phase: int) -> float:
        be = PhaseClock(fast_phase)
        be.cost.update(A=10.0, B=10.0)
        a = Arm("A", [lambda: be.log_launch("A:0")])
        b = Arm("B", [lambda: be.log_launch("B:0")])
        out = time_pair(be, a, b, TimingConfig(warmup=32, iterations=100, runs=3),
                        PhaseFiller(be))
        return stats.cell_ratio(out.runs_a, out.runs_b)

    # identical arms: with the shipped segments every stratum sees every phase equally
    # often, whatever phase the stream starts at
    assert all(abs(ratio(p) - 1.0) < 0.0015 for p in range(4))
    # Must say no: one segment a run (as before), 3 runs cover 3 of the 4 phases and the
    # cell's ratio carries the offset of where the stream started (runs +-1%, cell +-0.34%)
    monkeypatch.setattr(harness, "LAUNCH_PHASES", 1)
    monkeypatch.setattr(harness, "MAX_SEGMENT_PAIRS", 10**6)
    assert max(abs(ratio(p) - 1.0) for p in range(4)) > 0.003


def test_drained_queue_retries_with_longer_fill_then_reports() -> None:
    be = HostClock()
    a, b = _arm(be, "A", 1, 1.0), _arm(be, "B", 1, 1.0)
    # two pairs: two segments, each started by its own spin
    filler = Filler(busy_after=1)  # the first spin is too short, the later ones hold
    out = time_pair(be, a, b, TimingConfig(warmup=2, iterations=2, runs=1), filler)
    assert filler.calls[0] == filler.calls[1] and filler.calls[2] == 2 * filler.calls[0]
    assert len(filler.calls) == 4 and out.queue_drained == [False]
    never = Filler(busy_after=10**6)
    out = time_pair(be, a, b, TimingConfig(warmup=2, iterations=2, runs=1,
                                           max_fill_retries=2), never)
    assert len(never.calls) == 3 * 2 and out.queue_drained == [True]


def test_segments_hold_a_bounded_number_of_pairs() -> None:
    """A run is cut into a multiple of the launch phases, never more than
    MAX_SEGMENT_PAIRS pairs a segment (the device's queue holds one segment at a time)."""
    from hqval.timing import harness
    from hqval.timing.schedule import abba_order

    for n in (2, 4, 100, 128, 130, 400, 1000):
        parts = harness.segments(abba_order(n))
        assert [p for part in parts for p in part] == abba_order(n)
        assert max(map(len, parts)) <= harness.MAX_SEGMENT_PAIRS
        assert len(parts) % harness.LAUNCH_PHASES == 0 or len(parts) == n
    assert list(map(len, harness.segments(abba_order(100)))) == [25, 25, 25, 25]


class QueueDepthClock(HostClock):
    """A device that holds at most ``depth`` queued launches and events while its spin
    runs: a host that enqueues more blocks until the spin ends, so the spin 'drained'
    (what torch.mv's cuBLAS launches did on the H200, with a whole run behind one spin)."""

    def __init__(self, depth: int) -> None:
        super().__init__()
        self.depth, self.queued, self.spinning = depth, 0, False

    def record_event(self) -> Any:
        self._enqueue()
        return super().record_event()

    def _enqueue(self) -> None:
        self.queued += 1
        if self.spinning and self.queued > self.depth:
            self.spinning = False  # the host blocked until the spin ended

    def synchronize(self) -> None:
        self.queued = 0


class DepthFiller:
    def __init__(self, be: QueueDepthClock) -> None:
        self.be, self.spins = be, 0

    def start(self, microseconds: int) -> int:
        self.be.queued, self.be.spinning = 1, True
        self.spins += 1
        return 0

    def still_busy(self, token: int) -> bool:
        return self.be.spinning


def test_a_run_longer_than_the_device_queue_is_not_retried_for_ever(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hqval.timing import harness

    def drained(max_pairs: int, phases: int = harness.LAUNCH_PHASES
                ) -> tuple[list[bool], int]:
        monkeypatch.setattr(harness, "MAX_SEGMENT_PAIRS", max_pairs)
        monkeypatch.setattr(harness, "LAUNCH_PHASES", phases)
        # the spin's length comes from the host's measured enqueue time; past the cap a
        # retry stops early (a longer spin cannot help), which a loaded host reaches after
        # fewer doublings: lift the cap so the retry count is the config's, exactly
        monkeypatch.setattr(harness, "MAX_FILL_US", 1 << 60)
        be = QueueDepthClock(depth=300)
        a, b = _arm(be, "A", 1, 10.0), _arm(be, "B", 1, 10.0)
        a.launchers = [lambda: (be._enqueue(), be._enqueue(), be.log.append("A:0"))]
        b.launchers = [lambda: (be._enqueue(), be._enqueue(), be.log.append("B:0"))]
        filler = DepthFiller(be)
        out = time_pair(be, a, b, TimingConfig(warmup=2, iterations=100, runs=3), filler)
        return out.queue_drained, filler.spins

    # the shipped segments fit the queue: no run drains, one spin per segment
    assert drained(harness.MAX_SEGMENT_PAIRS) == ([False] * 3, 3 * 4)
    # Must say no: the whole run behind one spin (as before) overflows the queue: every
    # run drains, is retried up to max_fill_retries times and then reported, never more
    flags, spins = drained(10**6, phases=1)
    assert flags == [True] * 3 and spins == 3 * (TimingConfig().max_fill_retries + 1)


def test_the_spin_ignores_the_first_calls_set_up_and_is_capped() -> None:
    """The spin comes from the median warm-up pair: a 0.2 s first call (a library's set-up)
    does not make every spin seconds long."""
    import time as _time

    from hqval.timing import harness

    be = HostClock()
    first = [True]

    def slow_once() -> None:
        if first[0]:
            first[0] = False
            _time.sleep(0.2)
        be.log.append("A:0")

    be.cost["A"] = 1.0
    a = Arm("A", [slow_once])
    filler = Filler(busy_after=-1)
    time_pair(be, a, a, TimingConfig(warmup=8, iterations=4, runs=1), filler)
    assert filler.calls and max(filler.calls) < 50_000, filler.calls
    assert harness.MAX_FILL_US <= 1_000_000


def test_config_validates() -> None:
    with pytest.raises(ValueError, match="even"):
        TimingConfig(iterations=3)
    with pytest.raises(ValueError, match="runs"):
        TimingConfig(runs=0)


def test_amd_spin_kernel_builds_and_reads_the_realtime_counter(tmp_path: Any) -> None:
    import shutil
    import subprocess

    from hqval.timing.harness import amd_spin_spec
    from hqval.toolchain import ToolchainError, compile_kernel, find_compiler

    try:
        find_compiler()
    except ToolchainError as exc:
        pytest.skip(f"needs clang for amdgcn: {exc}")
    if shutil.which("llvm-objdump-19") is None:
        pytest.skip("needs llvm-objdump-19 to read the code object")
    spec = amd_spin_spec(tmp_path)
    for arch, reader in (("gfx1030", "s_memrealtime"), ("gfx1100", "REALTIME"),
                         ("gfx1201", "REALTIME")):
        result = compile_kernel(spec, arch, cache_dir=tmp_path / "cache")
        assert result.ok and result.code_object is not None, result.message
        dis = subprocess.run(["llvm-objdump-19", "-d", str(result.code_object)],
                             capture_output=True, text=True, check=True).stdout
        assert reader in dis and "s_sleep" in dis


def test_hip_filler_calls_exist_in_hip_python() -> None:
    hip_mod = pytest.importorskip("hip", reason="needs hip-python")
    from hip import hip

    assert hip_mod is not None
    for name in ("hipEventQuery", "hipEventSynchronize", "hipEventDestroy"):
        assert callable(getattr(hip, name))
    assert int(hip.hipError_t.hipErrorNotReady) == 600


def test_prime_precedes_every_timed_sample_with_its_own_arm_and_copy() -> None:
    be = HostClock()
    a, b = _arm(be, "A", 2, 10.0), _arm(be, "B", 1, 12.0)
    cfg = TimingConfig(warmup=2, iterations=4, runs=1, prime=1)
    out = time_pair(be, a, b, cfg)
    timed = be.log[2 * 2 * cfg.warmup:]  # warm-ups are primed too
    assert len(timed) == 2 * 2 * cfg.iterations
    primer, sample = timed[0::2], timed[1::2]
    assert primer == sample  # each sample follows a launch of the same arm and copy
    assert "".join(e[0] for e in sample) == "ABBAABBA"[:2 * cfg.iterations]
    assert out.runs_a == [[10.0] * 4] and out.runs_b == [[12.0] * 4]
    # unprimed, half of each arm's samples follow the other arm
    be2 = HostClock()
    a2, b2 = _arm(be2, "A", 1, 10.0), _arm(be2, "B", 1, 12.0)
    time_pair(be2, a2, b2, TimingConfig(warmup=2, iterations=4, runs=1))
    stream = [e[0] for e in be2.log]
    after_other = sum(1 for p, q in itertools.pairwise(stream) if p != q)
    assert after_other > 0


def test_prime_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="prime"):
        TimingConfig(prime=-1)


def test_copy_per_run_reads_one_copy_per_run() -> None:
    be = HostClock()
    a, b = _arm(be, "A", 3, 10.0), _arm(be, "B", 3, 12.0)
    cfg = TimingConfig(warmup=2, iterations=4, runs=4, prime=1, copy_per_run=True)
    time_pair(be, a, b, cfg)
    timed = be.log[2 * 2 * cfg.warmup:]
    per_run = 2 * 2 * cfg.iterations  # primer + sample, both arms
    for r in range(cfg.runs):
        copies = {e.split(":")[1] for e in timed[r * per_run:(r + 1) * per_run]}
        assert copies == {str(r % 3)}, (r, copies)
    # without it, consecutive launches of an arm rotate through the copies
    be2 = HostClock()
    a2, b2 = _arm(be2, "A", 3, 10.0), _arm(be2, "B", 3, 12.0)
    time_pair(be2, a2, b2, TimingConfig(warmup=2, iterations=4, runs=1))
    assert {e.split(":")[1] for e in be2.log[4:]} == {"0", "1", "2"}
