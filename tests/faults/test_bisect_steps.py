"""Faults of class 'a bisect step is not a run': ``hqval bisect`` writes a directory per
step that ran one cell at one commit (no steps, expected cells or code objects of a run).
``hqval admit`` on one, or on the bisect's output directory, says in one line what it is
and how to admit that commit (exit 2), never a list of damage."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import ARCH, Result, built_once, hqval_process

Admit = Callable[..., Result]
CELL = f"reference_parity[gemv_mq4g256v2_r1|{ARCH}|emu]"


def _git(root: Path, *args: str) -> None:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)


@pytest.fixture(scope="module")
def bisected(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bisect of the small tree over two commits: the tree, then its qt=44 header load
    trapping on every launch (a real ``s_trap``, so the cell fails); made once for the
    test run's xdist workers (the tests only read it)."""
    def make(base: Path) -> None:
        repo = base / "repo"
        shutil.copytree(tree.parent, repo)
        _git(repo, "init", "-q")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", "good")
        header = repo / "include" / "hq4_header.h"
        old = ("        return Hq4Raw{hq_load_u32(gp), hq_load_u32(gp + 4)};"
               "  // addresses lane-invariant")
        text = header.read_text()
        assert old in text
        header.write_text(text.replace(old, (
            "        const Hq4Raw r{hq_load_u32(gp), hq_load_u32(gp + 4)};\n"
            "        if (r.a != 0x7fc00001u) __builtin_trap();\n"
            "        return r;"), 1))
        _git(repo, "commit", "-qam", "bad")
        out = base / "out"
        res = hqval_process(["bisect", "--tree", str(repo), "--manifest",
                             str(repo / "kernels.yaml"), "--cell", CELL, "--good", "HEAD~1",
                             "--bad", "HEAD", "--out", str(out)])
        assert res.code == 0, res.out[-2000:] + res.err[-2000:]

    return built_once(tmp_path_factory, "bisect-steps", make) / "out"


def _one_line(res: Result) -> str:
    lines = [x for x in res.err.splitlines() if x.strip()]
    assert len(lines) == 1, res.err
    assert "damaged" not in res.err
    return lines[0]


def test_admit_on_a_bisect_step_says_it_is_one(bisected: Path, hqval: Admit) -> None:
    """A step's run directory (once: exit 2 with three damage lines: no steps, no objects,
    no expected cells)."""
    step = sorted(p for p in bisected.iterdir() if p.is_dir() and p.name[:1].isdigit())[0]
    res = hqval("admit", str(step))
    assert res.code == 2
    line = _one_line(res)
    assert f"{step}: a bisect step (commit " in line and f"cell {CELL}), not a run" in line
    assert "hqval run --manifest" in line and "hqval admit DIR" in line


def test_a_bisect_step_as_a_baseline_says_it_is_one(bisected: Path, golden: Path,
                                                    hqval: Admit) -> None:
    """A step given as ``--baseline`` of a real run."""
    step = sorted(p for p in bisected.iterdir() if p.is_dir() and p.name[:1].isdigit())[-1]
    res = hqval("admit", str(golden), "--baseline", str(step))
    assert res.code == 2
    assert f"{step}: a bisect step (commit " in _one_line(res)


def test_admit_on_a_bisect_output_says_it_is_one(bisected: Path, hqval: Admit) -> None:
    """The bisect's ``--out`` directory itself (bisect.json and the steps, no envelope)."""
    res = hqval("admit", str(bisected))
    assert res.code == 2
    line = _one_line(res)
    assert f"{bisected}: the output of hqval bisect (bisect.json), not a run" in line
    assert "hqval run --manifest" in line
