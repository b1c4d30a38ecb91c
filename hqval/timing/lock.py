"""One timing run per device at a time, across processes.

The rest of a matrix may run in parallel (pytest-xdist workers, ``hqval run``), but two
timing runs sharing a GPU would time each other.  ``device_lock`` takes an exclusive
``flock`` on a per-device file for the whole run.  A second run waits for it, but not
for ever: a holder that is itself stuck (a hung driver call in another night's run) would
otherwise keep every later run waiting all night.  After ``LOCK_WAIT_S`` the waiter gives
up with ``DeviceBusy``, an infrastructure error naming the holder, the lock file and the
wait; ``wait=False`` gives up at once.  The lock dies with its holder (``flock``), so a
holder that crashed never blocks anyone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from hqval.errors import InfrastructureError

# How long a timing run waits for another run to release the device: longer than the
# longest timing run the suite makes (every shapes.yaml shape, hot and cold, with the
# torch baselines and re-measured candidates, is a few minutes on an H200), short enough
# that a night whose device is held by a stuck run fails that night, naming the holder.
LOCK_WAIT_S = 1800.0
# How often a waiter tries the lock again.
LOCK_POLL_S = 0.5


class DeviceBusy(InfrastructureError, RuntimeError):
    """Another timing run holds the device (and did not release it in time)."""


def lock_path(device: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", device).strip("_") or "device"
    root = Path(os.environ.get("HQVAL_LOCK_DIR", tempfile.gettempdir()))
    return root / f"hqval-timing-{safe}.lock"


def _holder(f: IO[str]) -> str:
    f.seek(0)
    return f.read().strip() or "a holder that has not written its name yet"


def _clock() -> float:
    """The waiter's clock (a test replaces it to make time pass without waiting)."""
    return time.monotonic()


@contextlib.contextmanager
def device_lock(device: str, *, wait: bool = True, wait_s: float = LOCK_WAIT_S,
                on_wait: Callable[[str], None] = lambda line: None) -> Iterator[Path]:
    """Hold ``device``'s timing lock for the ``with`` body.  When another run holds it,
    ``on_wait`` is told once who does, then the lock is tried every ``LOCK_POLL_S`` until
    ``wait_s`` has passed (never, with ``wait=False``): then ``DeviceBusy``."""
    if wait_s <= 0:
        raise ValueError(f"device lock wait {wait_s} s must be > 0")
    path = lock_path(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as f:
        give_up = _clock() + (wait_s if wait else 0.0)
        told = False
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(f)
                if _clock() >= give_up:
                    waited = f" after waiting {wait_s:g} s" if wait else ""
                    raise DeviceBusy(
                        f"{device}: another timing run holds {path} ({holder}){waited}; "
                        "timing cells never run concurrently on one device: stop that "
                        "run, or rerun this one with --resume once it ends") from None
                if not told:
                    on_wait(f"{device}: waiting up to {wait_s:g} s for the timing lock "
                            f"{path}, held by {holder}")
                    told = True
                time.sleep(LOCK_POLL_S)
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} on {socket.gethostname()}, since "
                f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
        f.flush()
        try:
            yield path
        finally:
            f.seek(0)
            f.truncate()
            fcntl.flock(f, fcntl.LOCK_UN)
