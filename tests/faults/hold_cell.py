"""A pytest plugin for the check sessions of a run under test, loaded through
``PYTEST_PLUGINS`` (pytest reads it in the controller and in every xdist worker): the
cell named by ``HQVAL_TEST_HOLD_CELL``, when an xdist worker runs it, writes that worker's
pid to the file ``HQVAL_TEST_HOLD_MARKER`` names and waits there.  A test then kills
exactly the worker that holds a cell, however fast the other cells run.  Once the marker
exists the cell is never held again (the replacement worker xdist starts runs on)."""

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
    if not cell or not marker or item.name != cell or not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    path = Path(marker)
    if path.exists():
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(str(os.getpid()))
    os.replace(tmp, path)  # the test reads a whole pid or nothing
    time.sleep(HOLD_S)
