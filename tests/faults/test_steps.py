"""Faults of class 'steps that prove they ran': a real ``kill -9`` at
each step boundary and inside each step, then ``hqval admit`` (never a pass on what is
missing) and ``--resume`` (the clean statuses, no cell run twice); a check session that
collects nothing; a crashed xdist worker."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import ARCH, CLEAN, Result, _env, admission, hqval_process, rows, run_args

LAUNCH = str(Path(__file__).with_name("launch.py"))
STEPS = ("compile", "audit", "checks", "mutants", "timing", "admit", "report")
# a kill before the evidence is complete leaves admit nothing to pass on (exit 2); once
# every evidence step's cells exist, admission over them is sound (exit 0)
EVIDENCE_DONE = {"admit", "report"}


def _no_cell_twice(run: Path) -> None:
    counts = collections.Counter(str(r["identity"]) for r in rows(run)
                                 if r["kind"] in ("check", "compile", "audit", "mutant"))
    twice = [i for i, n in counts.items() if n > 1]
    assert not twice, twice[:5]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["kill-before", "kill-inside"])
@pytest.mark.parametrize("step", STEPS)
def test_kill_9_then_admit_then_resume(tree: Path, tmp_path: Path, mode: str, step: str,
                                       hqval: Callable[..., Result]) -> None:
    out = tmp_path / "run"
    # the mutants step's own cases run it; the others skip it (half the time)
    flags = () if step == "mutants" else ("--no-mutants",)
    killed = hqval_process(run_args(tree, out, *flags), launcher=[LAUNCH, mode, step])
    assert killed.code == -signal.SIGKILL, killed.err[-2000:]
    admit = hqval("admit", str(out))
    want = 0 if step in EVIDENCE_DONE or (mode == "kill-inside" and step == "timing") else 2
    assert admit.code == want, admit.err[-2000:]
    if want == 2:
        assert "incomplete" in admit.err or "empty" in admit.err
    resumed = hqval_process(run_args(tree, out, *flags, "--resume"))
    assert resumed.code == 0, resumed.err[-2000:] + resumed.out[-2000:]
    assert admission(out) == CLEAN
    _no_cell_twice(out)


@pytest.mark.slow
def test_kill_9_inside_checks_with_xdist_workers(tree: Path, tmp_path: Path,
                                                 hqval: Callable[..., Result]) -> None:
    out = tmp_path / "run"
    args = [*run_args(tree, out)[:-2], "--workers", "2"]
    killed = hqval_process(args, launcher=[LAUNCH, "kill-inside", "checks"])
    assert killed.code == -signal.SIGKILL
    assert hqval("admit", str(out)).code == 2
    assert hqval_process([*args, "--resume"]).code == 0
    assert admission(out) == CLEAN
    _no_cell_twice(out)


@pytest.mark.slow
def test_check_session_collecting_nothing_is_a_step_error(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = hqval_process(run_args(tree, out), launcher=[LAUNCH, "collect-nothing", "-"])
    assert res.code == 2
    marks = {str(r["identity"]): r for r in rows(out) if r["kind"] == "step"}
    mark = marks[f"checks[-|{ARCH}|step]"]
    assert mark["status"] == "error" and "expected cells have no row" in str(mark["message"])
    assert admission(out)[(44, "decode")] == "incomplete"
    # --resume redoes the step that did not finish
    assert hqval_process(run_args(tree, out, "--resume")).code == 0
    assert admission(out) == CLEAN


HOLD_PLUGIN = "tests.faults.hold_cell"
HELD = f"bit_identity[gemv_mq4g256v2_r1|{ARCH}|emu]"


@pytest.mark.slow
def test_crashed_xdist_worker_is_a_step_error(tree: Path, tmp_path: Path) -> None:
    """kill -9 the pytest-xdist worker that holds a cell (the test's plugin,
    ``hold_cell.py``, stops that cell in its worker and names the worker's pid): the cell
    has no row, so the step is not done (exit 2), and --resume runs that cell."""
    out, marker = tmp_path / "run", tmp_path / "held.pid"
    args = [*run_args(tree, out)[:-2], "--workers", "2", "--no-mutants"]
    env = {**_env(), "PYTEST_PLUGINS": HOLD_PLUGIN, "HQVAL_TEST_HOLD_CELL": HELD,
           "HQVAL_TEST_HOLD_MARKER": str(marker)}
    proc = subprocess.Popen([sys.executable, "-m", "hqval", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # no clock decides anything: the held cell waits until it is killed
        for _ in range(6000):  # the run reaches the cell in seconds; 300 s is a hang
            if marker.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert marker.exists(), "the run ended without running " + HELD
        victim = int(marker.read_text())
        os.kill(victim, signal.SIGKILL)
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 2, err[-2000:]
    got = {str(r["identity"]): r for r in rows(out)}
    assert HELD not in got  # the killed worker's cell has no row
    mark = got[f"checks[-|{ARCH}|step]"]
    assert mark["status"] == "error" and HELD in str(mark["message"]), mark
    assert hqval_process([*args, "--resume"]).code == 0
    assert admission(out) == CLEAN
    assert HELD in {str(r["identity"]) for r in rows(out)}


@pytest.mark.slow
def test_manifest_opening_with_4_kib_of_comment_still_collects_every_cell(
        tree: Path, tmp_path: Path) -> None:
    """A manifest whose first 4 KiB are a comment used to collect 0 check cells and come
    out 'compiled', exit 0.  A manifest named on the command line is collected whole."""
    commented = tree.parent / "commented.yaml"
    commented.write_text("".join(f"# comment line {i:04d} " + "x" * 40 + "\n"
                                 for i in range(100)) + tree.read_text())
    out = tmp_path / "run"
    res = hqval_process(run_args(commented, out, "--no-mutants"))
    assert res.code == 0, res.err[-2000:]
    assert admission(out) == CLEAN
    # every cell a check applies to (hqval.checks.cell.not_applicable: the others are
    # not made), of all 7 kernels
    from hqval.checks.cell import CHECKS, not_applicable
    from hqval.manifest import load_manifest
    from hqval.matrix import resolve_arch

    m, arch = load_manifest(commented), resolve_arch(ARCH)
    want = {f"{c}[{s.name}|{ARCH}|emu]" for s in m.kernels for c in CHECKS
            if not not_applicable(c, s, arch, m)}
    got = {str(r["identity"]) for r in rows(out) if r["kind"] == "check"}
    assert len(m.kernels) == 7 and got == want and len({i.split("[")[1].split("|")[0]
                                                        for i in got}) == 7


def test_report_step_that_cannot_write_fails_the_run(tree: Path, tmp_path: Path,
                                                     hqval: Callable[..., Result]) -> None:
    """The report step owes files, not cells: when it cannot write them (here a file sits
    where the report directory goes) the run is not done, exit 2, naming the step."""
    out = tmp_path / "run"
    # a run stopped before its report step (a new --out must be empty or a run), then a
    # file put where the report directory goes, then resumed
    killed = hqval_process(run_args(tree, out, "--no-mutants"),
                           launcher=[LAUNCH, "kill-before", "report"])
    assert killed.code == -signal.SIGKILL, killed.err[-2000:]
    (out / "report").write_text("a file where the report directory goes")
    res = hqval_process(run_args(tree, out, "--no-mutants", "--resume"))
    assert res.code == 2, res.out[-2000:]
    assert "step report did not finish: report step crashed" in res.out
    assert hqval("admit", str(out)).code == 0  # the evidence itself is complete


@pytest.mark.slow
def test_an_interrupted_report_step_leaves_no_stale_verdict(
        tree: Path, copy_of: Callable[[], Path], hqval: Callable[..., Result]) -> None:
    """A complete run whose rows now say rejected (a failing row after a cell's pass),
    resumed and killed inside the report step: the earlier attempt's admission.json and
    checkpoint.md (exit 0) must not survive to contradict the rows (once they did)."""
    run = copy_of()
    assert json.loads((run / "admission.json").read_text())["exit_code"] == 0
    ident = f"bit_identity[gemv_mq4g256v2_r1|{ARCH}|emu]"
    row = next(r for r in rows(run) if r["identity"] == ident)
    row["status"] = "fail"
    with (run / "rows.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
    killed = hqval_process(run_args(tree, run, "--resume"),
                           launcher=[LAUNCH, "kill-inside", "report"])
    assert killed.code == -signal.SIGKILL, killed.err[-2000:]
    assert not (run / "admission.json").exists()
    assert not (run / "report" / "checkpoint.md").exists()
    assert hqval("admit", str(run)).code == 1
    assert hqval_process(run_args(tree, run, "--resume")).code == 1
    assert json.loads((run / "admission.json").read_text())["exit_code"] == 1
