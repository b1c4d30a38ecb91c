"""Faults of class 'timing evidence on hardware': the timing
step's cells are known before anything runs (``hqval.run.expected`` from the bench plan),
so a lost timing row, a timing step killed half way, or a bench that cannot run its plan
leaves the run incomplete (exit 2), never admitted on part of its timing.

CI has no GPU: ``launch.py --sim-gpu`` stands the simulated timing device where
``--backend hip`` opens one (GEMVs computed on the host, a model clock; compile and audit
stay real), with a bench of two small shapes.  The rows are the real bench's and the gate
the real admission; only the device is a stand-in."""

from __future__ import annotations

import collections
import json
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import (
    CLEAN,
    Result,
    admission,
    built_once,
    hqval_process,
    rewrite_rows,
    rows,
    run_args,
)

LAUNCH = str(Path(__file__).with_name("launch.py"))
# the clean statuses, with the decode paths timed on the stand-in device
MEASURED = {**CLEAN, (44, "decode"): "measured", (45, "decode"): "measured"}


def _timed_args(tree: Path, out: Path, *extra: str) -> list[str]:
    args = run_args(tree, out, "--no-mutants", *extra)
    return [("hip" if a == "emu" else a) for a in args]  # --backend hip (the stand-in)


def _timed(tree: Path, out: Path, *extra: str, mode: str = "none", step: str = "-",
           stand_in: str = "--sim-gpu") -> Result:
    return hqval_process(_timed_args(tree, out, *extra), launcher=[LAUNCH, stand_in, mode, step])


@pytest.fixture(scope="session")
def timed(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One complete, clean timed run of the small tree on the stand-in device (made once
    for the test run's xdist workers; a test that damages it takes a copy)."""
    def make(base: Path) -> None:
        res = _timed(tree, base / "run")
        assert res.code == 0, res.out[-2000:] + res.err[-2000:]

    return built_once(tmp_path_factory, "timed", make) / "run"


def _timing_ids(run: Path) -> list[str]:
    return sorted(str(r["identity"]) for r in rows(run) if r["kind"] == "timing")


def test_a_timed_run_expects_every_bench_cell_up_front(timed: Path,
                                                       hqval: Callable[..., Result]) -> None:
    expected = json.loads((timed / "envelope.json").read_text())["expected_cells"]["timing"]
    assert sorted(expected) == _timing_ids(timed)
    # per shape: the A/A control, and qt=44 and qt=45 each against qt=6
    assert len(expected) == 6
    assert admission(timed) == MEASURED
    assert hqval("admit", str(timed)).code == 0


@pytest.mark.parametrize("check", ["timing_aa_hot", "timing_hot"])
def test_a_removed_timing_row_is_exit_2(timed: Path, tmp_path: Path, check: str,
                                        hqval: Callable[..., Result]) -> None:
    run = tmp_path / "run"
    shutil.copytree(timed, run)
    gone = next(i for i in _timing_ids(run) if i.startswith(f"{check}["))
    assert rewrite_rows(run, lambda r: r["identity"] != gone) == 1
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"first: {gone} (step timing" in res.err


@pytest.mark.slow
def test_kill_9_inside_timing_then_admit_then_resume(tree: Path, tmp_path: Path,
                                                     hqval: Callable[..., Result]) -> None:
    out = tmp_path / "run"
    killed = _timed(tree, out, mode="kill-inside", step="timing")
    assert killed.code == -signal.SIGKILL, killed.err[-2000:]
    # killed after the bench's first cell: the timing step writes each cell as it finishes
    assert len(_timing_ids(out)) == 1
    admit = hqval("admit", str(out))
    assert admit.code == 2 and "incomplete" in admit.err, admit.err[-2000:]
    resumed = _timed(tree, out, "--resume")
    assert resumed.code == 0, resumed.err[-2000:] + resumed.out[-2000:]
    assert admission(out) == MEASURED
    counts = collections.Counter(_timing_ids(out))
    assert len(counts) == 6 and set(counts.values()) == {1}


def test_a_bench_that_cannot_run_its_plan_is_exit_2(tree: Path, tmp_path: Path) -> None:
    """gfx1010 times at 2 rows per block; the small tree has only R=1 GEMVs."""
    out = tmp_path / "run"
    res = _timed(tree, out, stand_in="--sim-gpu-arch-rows")
    assert res.code == 2, res.err[-2000:]
    assert "need a qt=6 GEMV kernel with rows_per_block 2" in res.err + res.out
    assert _timing_ids(out) == []
    assert admission(out)[(44, "decode")] != "measured"
