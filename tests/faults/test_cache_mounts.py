"""Fault class: causes kept apart, a cache on a file system that refuses writes.  The
cache directory on a read-only mount, or on a file system with no room left (a 256 KiB
tmpfs), is hqval's machinery failing: every cell it stops is an infrastructure error
(exit 2), never a kernel's failure, and ``--resume`` with a working cache finishes the
run.  These need the privilege to mount (root in a container that allows it); elsewhere
they skip, saying so.  (Both held on main.)"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .conftest import ARCH, CLEAN, Result, admission, run_args

Hq = Callable[..., Result]


def _mount(args: list[str]) -> bool:
    return subprocess.run(["mount", *args], capture_output=True, check=False).returncode == 0


@pytest.fixture(params=["read-only", "full"])
def refusing_cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "cache"
    where.mkdir()
    if request.param == "read-only":
        ok = _mount(["--bind", "-o", "ro", str(where), str(where)])
    else:
        ok = _mount(["-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)])
    if not ok:
        pytest.skip(f"cannot mount a {request.param} file system here (needs CAP_SYS_ADMIN)")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True, check=False)


def test_a_cache_that_refuses_writes_is_infrastructure(refusing_cache: Path, tree: Path,
                                                       tmp_path: Path, hqval: Hq) -> None:
    out = tmp_path / "rows.json"
    res = hqval("compile", "--arch", ARCH, "--manifest", str(tree), "--cache-dir",
                str(refusing_cache), "--json", str(out))
    assert res.code == 2, res.out[-2000:] + res.err[-2000:]
    rows = [r for r in json.loads(out.read_text()) if r["status"] != "unsupported"]
    assert rows and all(r["status"] == "error" and r["details"]["infrastructure"]
                        for r in rows), rows


def test_a_run_on_a_read_only_cache_is_exit_2_and_resume_finishes(
        tree: Path, tmp_path: Path, hqval: Hq) -> None:
    where = tmp_path / "cache"
    where.mkdir()
    if not _mount(["--bind", "-o", "ro", str(where), str(where)]):
        pytest.skip("cannot mount a read-only file system here (needs CAP_SYS_ADMIN)")
    run = tmp_path / "run"
    try:
        first = hqval(*run_args(tree, run, "--no-mutants", "--cache-dir", str(where)))
    finally:
        subprocess.run(["umount", str(where)], capture_output=True, check=False)
    assert first.code == 2, first.out[-2000:] + first.err[-2000:]
    rows = [json.loads(x) for x in (run / "rows.jsonl").read_text().splitlines()]
    assert not [r["identity"] for r in rows if r["status"] == "fail"]
    assert [r for r in rows if r["kind"] == "compile" and r["details"].get("infrastructure")]
    assert "rejected" not in admission(run).values()
    # (the session's own cache: warm from the golden run)
    resumed = hqval(*run_args(tree, run, "--no-mutants", "--resume"))
    assert resumed.code == 0, resumed.out[-2000:] + resumed.err[-2000:]
    assert admission(run) == CLEAN
