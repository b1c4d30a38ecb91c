"""hqval.deadline: bounded waits, the per-cell deadline on a backend, the watchdog."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from hqval import deadline
from hqval.errors import InfrastructureError, is_infrastructure


def test_wait_for_returns_when_ready_and_raises_past_the_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = iter([False, False, True])
    deadline.wait_for(lambda: next(calls), deadline.Deadline("cell x", 5.0), "waiting")
    # the deadlines' clock is the test's own and only the wait's sleeps advance it, so
    # how long the wait waited is exact on any host, however loaded
    clock, slept = [1000.0], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(deadline, "_now", lambda: clock[0])
    monkeypatch.setattr(deadline.time, "sleep", sleep)
    d = deadline.Deadline("timing_cold[k@1x256|sm_90|cuda]", 0.05)
    with pytest.raises(deadline.DeadlineExceeded, match=r"timing_cold\[k@1x256") as info:
        deadline.wait_for(lambda: False, d, "waiting for a timed sample")
    waited = clock[0] - 1000.0
    # not before the deadline, and raised at the first poll past it (one pause, <= 1 ms)
    assert 0.05 <= waited <= 0.05 + 1e-3 and max(slept) <= 1e-3
    assert isinstance(info.value, InfrastructureError) and is_infrastructure(info.value)
    assert "waiting for a timed sample missed its deadline of 0.05 s" in str(info.value)


def test_bounded_sets_the_backends_deadline_for_the_block_only() -> None:
    class B:
        deadline: Any = None

    b = B()
    with deadline.bounded(b, "cell y", 30.0) as d:
        assert b.deadline is d and deadline.current(b, "w") is d
    assert b.deadline is None
    fresh = deadline.current(b, "a read-back")
    assert fresh.seconds == deadline.DEFAULT_WAIT_S and fresh.what == "a read-back"
    with pytest.raises(ValueError, match="must be > 0"):
        deadline.Deadline("z", 0)


def test_watchdog_fires_only_for_a_block_still_running_after_the_grace() -> None:
    fired: list[str] = []
    stuck = threading.Event()

    def on_stuck(line: str) -> None:
        fired.append(line)
        stuck.set()

    # the block stays until the watchdog fires (a loaded host may run its timer late; the
    # 60 s only ends a watchdog that never fires)
    with deadline.watchdog(deadline.Deadline("cell z", 0.01), 0.01, on_stuck=on_stuck):
        stuck.wait(60)
    assert fired and "cell z is still blocked in the device driver" in fired[0]
    quiet: list[str] = []
    with deadline.watchdog(deadline.Deadline("cell q", 0.05), 0.05, on_stuck=quiet.append):
        pass
    time.sleep(0.2)
    assert quiet == []


def test_a_process_stuck_past_the_watchdog_exits_2_naming_the_cell() -> None:
    code = ("import time\nfrom hqval import deadline\n"
            "class B: deadline = None\n"
            "with deadline.bounded(B(), 'timing_hot[k@1x256|sm_90|cuda]', 0.1, grace=0.1):\n"
            "    time.sleep(30)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=20, check=False)
    assert res.returncode == deadline.STUCK_EXIT
    assert "timing_hot[k@1x256|sm_90|cuda] is still blocked" in res.stderr
    assert "time.sleep" in res.stderr or "line 5" in res.stderr  # the stack is dumped
