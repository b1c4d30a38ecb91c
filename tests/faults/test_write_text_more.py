"""Fault class: one safe writer at every boundary, the text it writes.  A path whose bytes
are no UTF-8 (a run directory or an output named so on a Linux file system, which Python
carries as lone surrogates) reaches the report, the checkpoint and the run's summary; the
writer (``safeio.write_atomic``) writes each such code point as its ``\\udcXX`` escape
instead of crashing: the report step of such a run failed ("UnicodeEncodeError"), so the
run could never exit 0, and ``hqval report`` was an internal error."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from .conftest import CLEAN, Result, admission, run_args

Hq = Callable[..., Result]
BYTE = "\udcfe"  # the byte 0xfe of a file name, as os.fsdecode gives it


def test_a_report_of_a_run_at_a_path_of_no_utf8_is_written(
        copy_of: Callable[[], Path], tmp_path: Path, hqval: Hq) -> None:
    run = tmp_path / f"run-{BYTE}"
    shutil.move(copy_of(), run)
    out = tmp_path / f"report-{BYTE}"
    res = hqval("report", str(run), "-o", str(out))
    assert res.code == 0, res.err  # once: "internal error: … UnicodeEncodeError"
    html = (out / "report.html").read_bytes().decode("utf-8")
    assert "run-\\udcfe" in html
    assert json.loads((out / "admission.json").read_text())["exit_code"] == 0


def test_a_run_at_a_path_of_no_utf8_finishes(copy_of: Callable[[], Path], tree: Path,
                                             tmp_path: Path, hqval: Hq) -> None:
    """A complete run moved to such a path and resumed: only its admit and report steps
    run again (once: "report step crashed: UnicodeEncodeError", exit 2)."""
    run = tmp_path / f"run-{BYTE}"
    shutil.move(copy_of(), run)
    res = hqval(*run_args(tree, run, "--resume"))
    assert res.code == 0, res.out[-2000:] + res.err[-2000:]
    assert admission(run) == CLEAN
    (run / "report" / "checkpoint.md").read_bytes().decode("utf-8")
