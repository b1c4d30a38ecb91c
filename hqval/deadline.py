"""Deadlines on hardware work: no launch, synchronisation or timing cell waits forever.

A hardware backend (``hip``, ``cuda``) never blocks in the driver's own wait calls: it
polls its events (``wait_for``) against a deadline, and refuses a launch once the deadline
has passed.  The deadline is the one set on the backend for the current cell
(``bounded(backend, what, seconds)``, used by the timing bench for each of its cells),
else a fresh ``DEFAULT_WAIT_S`` for that one wait.  A missed deadline raises
``DeadlineExceeded``, an ``InfrastructureError`` naming the cell: its row is an error with
``details["infrastructure"] = True`` and the run goes on with the next cell.

One wait cannot be polled: a launch that blocks inside the driver because the device's
queue is full and the device makes no progress.  For that, ``watchdog`` is the backstop:
a timer that, ``grace`` seconds after the deadline, writes which cell is stuck and every
thread's stack to stderr and ends the process with exit status 2 (the run is then
incomplete, which admission reports; ``--resume`` redoes the missing cells).
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hqval.errors import InfrastructureError

# A single device wait (a synchronisation, a read-back) outside any timing cell: far
# longer than any kernel of the suite runs (the longest timing sample is milliseconds).
DEFAULT_WAIT_S = 120.0
# A timing cell (warm-up, runs, re-measured runs), a baseline, or a cell's buffer setup:
# on the H200 the longest, a 1 GiB copy's runs or a candidate re-timed up to 12 runs,
# takes a few seconds.
CELL_DEADLINE_S = 180.0
# Exit status of a process the watchdog ends (infrastructure, as the CLI's exit 2).
STUCK_EXIT = 2


class DeadlineExceeded(InfrastructureError):
    """Hardware work missed its deadline; the message names the cell and the limit."""


def _now() -> float:
    """The deadlines' clock (a test replaces it to make time pass without waiting)."""
    return time.monotonic()


class Deadline:
    """``seconds`` from now, for ``what`` (the cell's identity or a description)."""

    def __init__(self, what: str, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError(f"deadline for {what}: {seconds} s must be > 0")
        self.what = what
        self.seconds = seconds
        self.expires_at = _now() + seconds

    def remaining(self) -> float:
        return self.expires_at - _now()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def error(self, doing: str) -> DeadlineExceeded:
        return DeadlineExceeded(
            f"{self.what}: {doing} missed its deadline of {self.seconds:g} s (the device "
            "made no progress in time); recorded as an infrastructure error, the run goes on")

    def check(self, doing: str) -> None:
        if self.expired():
            raise self.error(doing)


def current(backend: Any, what: str) -> Deadline:
    """The deadline of the cell running on ``backend``, else a fresh default one."""
    deadline = getattr(backend, "deadline", None)
    if isinstance(deadline, Deadline):
        return deadline
    return Deadline(what, DEFAULT_WAIT_S)


def wait_for(ready: Callable[[], bool], deadline: Deadline, doing: str) -> None:
    """Poll ``ready()`` until it is true; ``DeadlineExceeded`` once ``deadline`` passes.
    The first polls are back to back (a finished event answers at once), then sleeps
    grow to 1 ms so a long wait costs the host almost nothing."""
    pause = 0.0
    while not ready():
        if deadline.expired():
            raise deadline.error(doing)
        if pause:
            time.sleep(pause)
        pause = min(max(pause * 2, 2e-5), 1e-3)


@contextmanager
def bounded(backend: Any, what: str, seconds: float = CELL_DEADLINE_S,
            grace: float | None = None) -> Iterator[Deadline]:
    """Run the block under one deadline on ``backend`` (every wait and launch in it), with
    the ``watchdog`` backstop ``grace`` seconds (default: ``seconds``) after it."""
    deadline = Deadline(what, seconds)
    previous = getattr(backend, "deadline", None)
    backend.deadline = deadline
    try:
        with watchdog(deadline, seconds if grace is None else grace):
            yield deadline
    finally:
        backend.deadline = previous


@contextmanager
def watchdog(deadline: Deadline, grace: float,
             on_stuck: Callable[[str], None] | None = None) -> Iterator[None]:
    """A timer that fires ``grace`` seconds after ``deadline`` unless the block has ended:
    it writes which cell is stuck and every thread's stack to stderr, then ends the
    process (``on_stuck``, for tests, replaces the exit)."""
    def fire() -> None:
        line = (f"hqval: {deadline.what} is still blocked in the device driver "
                f"{grace:g} s after its deadline of {deadline.seconds:g} s; stacks follow; "
                f"exiting with status {STUCK_EXIT} (the run is incomplete: fix the device, "
                "then hqval run --resume)")
        if on_stuck is not None:
            on_stuck(line)
            return
        print(line, file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(STUCK_EXIT)

    timer = threading.Timer(max(deadline.remaining(), 0.0) + grace, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
