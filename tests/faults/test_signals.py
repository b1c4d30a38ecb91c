"""Fault class: a user's Ctrl-C, and a CI job cancelled.  SIGINT stops ``hqval run``
cleanly: exit 130, one line, no traceback, its rows flushed and its lock released, and
``--resume`` finishes the run with no cell run twice.  SIGTERM (what a cancelled job, a
runner shutting down or ``timeout`` sends) stops it the same way, exit 143."""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path

import pytest

from tests.faults.conftest import CLEAN, admission, hqval_process, run_args

LAUNCH = str(Path(__file__).with_name("launch.py"))


@pytest.mark.slow
def test_sigint_inside_checks_is_exit_130_and_resumable(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # a shell's child starts with SIGINT at its default (a test runner's may ignore it,
    # and an ignored SIGINT is inherited)
    stopped = hqval_process(run_args(tree, out, "--no-mutants"),
                            launcher=[LAUNCH, "sigint-inside", "checks"],
                            preexec=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert stopped.code == 130, stopped.err[-2000:]
    assert "Traceback" not in stopped.err + stopped.out
    assert "interrupted" in stopped.err and "--resume" in stopped.err
    assert not (out / "admission.json").exists()
    resumed = hqval_process(run_args(tree, out, "--no-mutants", "--resume"))
    assert resumed.code == 0, resumed.err[-2000:] + resumed.out[-2000:]
    assert admission(out) == CLEAN
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines() if x.strip()]
    twice = [i for i, n in Counter(f"{r['kind']}:{r['check']}[{r['kernel']}|{r['arch']}]"
                                   for r in rows if r["kind"] in ("compile", "check")).items()
             if n > 1]
    assert twice == []


def _no_cell_twice(out: Path) -> list[str]:
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines() if x.strip()]
    return [i for i, n in Counter(f"{r['kind']}:{r['check']}[{r['kernel']}|{r['arch']}]"
                                  for r in rows if r["kind"] in ("compile", "check")).items()
            if n > 1]


@pytest.mark.slow
@pytest.mark.parametrize("step", ["checks", "compile"])
def test_sigterm_is_exit_143_and_resumable(tree: Path, tmp_path: Path, step: str) -> None:
    """Once SIGTERM ended the process on the spot (exit -15, no line; the check session's
    scratch directory left in the temporary directory)."""
    out = tmp_path / "run"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    stopped = hqval_process(run_args(tree, out, "--no-mutants", "--fresh-cache"),
                            launcher=[LAUNCH, "sigterm-inside", step],
                            env={"TMPDIR": str(scratch), "HQVAL_EMU_REPLAY": "off"})
    assert stopped.code == 143, stopped.err[-2000:]
    assert "Traceback" not in stopped.err + stopped.out
    assert "hqval run: terminated (SIGTERM); nothing was admitted (continue with --resume)" \
        in stopped.err
    assert not (out / "admission.json").exists()
    assert list(scratch.iterdir()) == []  # no check session's or fresh cache's directory
    resumed = hqval_process(run_args(tree, out, "--no-mutants", "--resume"))
    assert resumed.code == 0, resumed.err[-2000:] + resumed.out[-2000:]
    assert admission(out) == CLEAN
    assert _no_cell_twice(out) == []
