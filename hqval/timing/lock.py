"""One timing run per device at a time, across processes.

The rest of a matrix may run in parallel (pytest-xdist workers, ``hqval run``), but two
timing runs sharing a GPU would time each other.  ``device_lock`` takes an exclusive
``flock`` on a per-device file for the whole run; a second run waits (or, with
``wait=False``, fails at once naming the holder).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path


class DeviceBusy(RuntimeError):
    """Another timing run holds the device."""


def lock_path(device: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", device).strip("_") or "device"
    root = Path(os.environ.get("HQVAL_LOCK_DIR", tempfile.gettempdir()))
    return root / f"hqval-timing-{safe}.lock"


@contextlib.contextmanager
def device_lock(device: str, *, wait: bool = True) -> Iterator[Path]:
    path = lock_path(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            raise DeviceBusy(f"{device}: another timing run holds {path} ({holder}); "
                             "timing cells never run concurrently on one device") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}\n")
        f.flush()
        try:
            yield path
        finally:
            f.seek(0)
            f.truncate()
            fcntl.flock(f, fcntl.LOCK_UN)
