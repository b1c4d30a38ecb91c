"""A pytest plugin for the check sessions of a run under test, loaded through
``PYTEST_PLUGINS`` (pytest reads it in the controller and in every xdist worker): the
cell named by ``HQVAL_TEST_HOLD_CELL``, in the process that runs it (an xdist worker, or
hqval's own without workers), writes that process's pid to the file
``HQVAL_TEST_HOLD_MARKER`` names and waits there: until the file
``HQVAL_TEST_HOLD_RELEASE`` names exists, when one is named, else until it is killed.  A
test then acts on a run that is exactly there (kills the worker holding the cell, starts a
second writer while the first holds its run directory), however fast the other cells run.
Once the marker exists the cell is never held again (a replacement worker runs on)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

HOLD_S = 600  # the test kills the holder long before; the test's own timeout ends a stray


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    cell = os.environ.get("HQVAL_TEST_HOLD_CELL")
    marker = os.environ.get("HQVAL_TEST_HOLD_MARKER")
    if not cell or not marker or item.name != cell:
        return
    path = Path(marker)
    if path.exists():
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(str(os.getpid()))
    os.replace(tmp, path)  # the test reads a whole pid or nothing
    release = os.environ.get("HQVAL_TEST_HOLD_RELEASE")
    until = time.monotonic() + HOLD_S
    while time.monotonic() < until and not (release and Path(release).exists()):
        time.sleep(0.05)
