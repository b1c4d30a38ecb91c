"""Guards for tests whose bug is a wait without end or work without bound, in place of
wall-clock bounds (which flake on a loaded 2-core machine and prove no speed anyway).

``no_hang``: for a bug that blocks forever (a FIFO opened for reading, a lock waited on, a
read of ``/dev/zero``).  The block runs with faulthandler armed: one still running after
``HANG_S`` ends the test's process with every thread's stack on stderr (pytest-xdist
reports the test as the one its worker crashed in).  No correct run comes near it.

``cpu_seconds``: for a bug that does unbounded work (an alias bomb expanded, a huge file
read): the CPU time this process spent in the block, which other processes' load does not
inflate, unlike wall time.
"""

from __future__ import annotations

import contextlib
import faulthandler
import sys
import time
from collections.abc import Iterator

HANG_S = 300.0


@contextlib.contextmanager
def no_hang(seconds: float = HANG_S) -> Iterator[None]:
    faulthandler.dump_traceback_later(seconds, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


class CpuTime:
    seconds: float = 0.0


@contextlib.contextmanager
def cpu_seconds() -> Iterator[CpuTime]:
    """``with cpu_seconds() as cpu: ...`` then ``cpu.seconds``: this process's user+system
    CPU time inside the block (every thread of it)."""
    got = CpuTime()
    t0 = time.process_time()
    try:
        yield got
    finally:
        got.seconds = time.process_time() - t0
