"""A pytest plugin that makes the check cells of ``hqval run`` durable and resumable.

Loaded next to ``hqval.checks.plugin`` (through ``PYTEST_ADDOPTS``, so every xdist worker
loads it too), it

- deselects the cells whose identity is listed in the file named by ``HQVAL_SKIP_CELLS``
  (the cells a resumed run already has), in every process that collects;
- appends each finished cell's row to the run directory at once (controller side, where
  ``attach`` gave it the run's writer), so a run killed in the middle of the checks loses
  no cell that finished.

PYTEST_DONT_REWRITE: hqval imports this module before pytest loads it as a plugin.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hqval.result import Row
from hqval.results.store import RunWriter

SKIP_ENV = "HQVAL_SKIP_CELLS"
ROW_PROPERTY = "hqval_row"  # the user property hqval.checks.plugin reports a row under

_writer: RunWriter | None = None
appended: set[str] = set()  # identities this plugin appended in this process


@contextmanager
def attach(writer: RunWriter, skip: set[str], scratch: Path) -> Iterator[None]:
    """While active, pytest sessions started in this process append to ``writer`` and
    skip ``skip``."""
    global _writer
    skip_file = scratch / "skip-cells.txt"
    skip_file.write_text("".join(f"{i}\n" for i in sorted(skip)))
    saved = {k: os.environ.get(k) for k in (SKIP_ENV, "PYTEST_ADDOPTS")}
    os.environ[SKIP_ENV] = str(skip_file)
    os.environ["PYTEST_ADDOPTS"] = (saved["PYTEST_ADDOPTS"] or "") + " -p hqval.results.live"
    _writer = writer
    appended.clear()
    try:
        yield
    finally:
        _writer = None
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _skip_set() -> set[str]:
    path = os.environ.get(SKIP_ENV)
    if not path or not Path(path).is_file():
        return set()
    return {line for line in Path(path).read_text().splitlines() if line}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = _skip_set()
    if not skip:
        return
    keep = [i for i in items if i.name not in skip]
    dropped = [i for i in items if i.name in skip]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _writer is None:  # an xdist worker, or a session hqval run did not start
        return
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return
    rows = [Row.from_dict(json.loads(str(v))) for k, v in report.user_properties
            if k == ROW_PROPERTY]
    rows = [r for r in rows if r.identity not in appended]
    if rows:
        _writer.append(rows)
        appended.update(r.identity for r in rows)
