"""The fault suite's shared parts: a small real kernel tree (copied from the suite's own
kernels: three GEMVs and four GEMMs, so gfx1010 has decode and per-token fallback
evidence), one complete run of it made once per session, and ways to run hqval on it as
a user would: in this process (``hqval``) or as its own process (``hqval_process``), to
be killed, limited or run twice at once.

Each module holds one class of fault (``test_<class>.py``); every case feeds an input
where the gate must say no (incomplete, rejected, refused) and checks it says no, with
the exit code and the one line a user sees.  docs/faults.md lists every case.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from hqval.cli import main
from hqval.manifest import KERNELS_DIR

REPO = Path(__file__).resolve().parents[2]
ARCH = "gfx1010"
KEEP = ("gemv_hfq4g256_r1", "gemv_mq4g256v2_r1", "gemv_mq4c_r1",
        "gemm_hfq4g256_wmma_gfx11", "gemm_mq4g256v2_wmma_gfx11",
        "gemm_hfq4g256_wmma_gfx12", "gemm_mq4c_wmma_gfx12")
# the statuses a clean run of the small tree gets on gfx1010 (no WMMA: prefill falls back)
CLEAN = {(44, "decode"): "emulated", (45, "decode"): "emulated",
         (44, "prefill"): "fallback", (45, "prefill"): "fallback",
         # the small tree has no fused or MoE kernels: no evidence for their paths (the
         # dense GEMMs' fallback rows are the dense prefill's), MoE is not claimed for
         # this arch (design note)
         (44, "fused_decode"): "untested", (45, "fused_decode"): "untested",
         (44, "fused_prefill"): "untested", (45, "fused_prefill"): "untested",
         (44, "moe_decode"): "unsupported", (44, "moe_prefill"): "unsupported"}


def small_tree(dest: Path) -> Path:
    """A kernel tree of the suite's own sources with a manifest of ``KEEP``; returns the
    manifest's path."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in KERNELS_DIR.glob("*.hip"):
        shutil.copy(f, dest / f.name)
    shutil.copytree(KERNELS_DIR / "include", dest / "include", dirs_exist_ok=True)
    data = yaml.safe_load((KERNELS_DIR / "kernels.yaml").read_text())
    data["kernels"] = [k for k in data["kernels"] if k["name"] in KEEP]
    manifest = dest / "kernels.yaml"
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    return manifest


@dataclass
class Result:
    code: int
    out: str
    err: str


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HQVAL_WORKERS": "0"}


def run_args(manifest: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--arch", ARCH, "--backend", "emu", "--manifest", str(manifest),
            "--out", str(out), "--workers", "0", *extra]


@contextlib.contextmanager
def made_once(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path | None]:
    """A directory the session's xdist workers share for ``name``, held under a lock:
    yields it, or None when it is already made (its ``made`` marker exists); the caller
    makes it inside the block and the marker is written when the block ends without an
    error.  Without xdist: a directory of this process's own, made here."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        path = tmp_path_factory.mktemp(name)
        yield path
        return
    # every worker's basetemp is a directory of this test run's own (popen-gwN)
    path = tmp_path_factory.getbasetemp().parent / f"shared-{name}"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (path / ".made").exists():
            yield None
            return
        shutil.rmtree(path, ignore_errors=True)  # what a failed attempt left
        path.mkdir()
        yield path
        (path / ".made").touch()


def _shared(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    return tmp_path_factory.getbasetemp().parent / f"shared-{name}"


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str,
               make: Callable[[Path], None]) -> Path:
    """The directory ``name`` of this test run, filled by ``make(path)`` once for all its
    xdist workers (``made_once``: the first worker makes it under the lock, the others
    wait for it and find it made; a failed ``make`` leaves no marker, so the next worker
    tries again and fails the same way).  For a fixture whose run is expensive and whose
    tests only read what it made (a test that damages it takes a copy)."""
    with made_once(tmp_path_factory, name) as path:
        if path is not None:
            make(path)
            return path
    return _shared(tmp_path_factory, name)


@pytest.fixture(scope="session")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small tree, one for the session (the xdist workers share it: the golden run
    records its manifest and sources, and the tests run on it by path)."""
    with made_once(tmp_path_factory, "tree") as path:
        if path is not None:
            return small_tree(path)
    return _shared(tmp_path_factory, "tree") / "kernels.yaml"


@pytest.fixture(scope="session")
def golden(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One complete, clean run of the small tree (mutants included), made once per
    session (the xdist workers share it: every test that damages it takes a copy,
    ``copy_of``)."""
    with made_once(tmp_path_factory, "golden") as path:
        if path is not None:
            out = path / "run"
            proc = subprocess.run([sys.executable, "-m", "hqval", *run_args(tree, out)],
                                  env=_env(), capture_output=True, text=True, timeout=900,
                                  check=False)
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
            return out
    return _shared(tmp_path_factory, "golden") / "run"


@pytest.fixture
def copy_of(golden: Path, tmp_path: Path) -> Callable[[], Path]:
    """A fresh copy of the golden run directory to damage."""
    def make() -> Path:
        dest = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        shutil.copytree(golden, dest)
        return dest
    return make


@pytest.fixture
def hqval(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """``hqval ARGS`` in this process: (exit code, stdout, stderr)."""
    def call(*args: str) -> Result:
        capsys.readouterr()
        code = main(list(args))
        got = capsys.readouterr()
        return Result(code, got.out, got.err)
    return call


def hqval_process(args: Sequence[str], *, timeout: float = 900,
                  preexec: Callable[[], None] | None = None,
                  launcher: Sequence[str] = (), env: Mapping[str, str] | None = None
                  ) -> Result:
    """``hqval ARGS`` as its own process (through ``launcher`` when given; ``env``: more
    environment variables)."""
    cmd = [sys.executable, *(launcher or ["-m", "hqval"]), *args]
    proc = subprocess.run(cmd, env={**_env(), **(env or {})}, capture_output=True,
                          text=True, timeout=timeout, check=False, preexec_fn=preexec)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def admission(run: Path) -> dict[tuple[int, str], str]:
    data = json.loads((run / "admission.json").read_text())
    return {(c["qt"], c["path"]): c["status"] for c in data["cells"]}


def rows(run: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in (run / "rows.jsonl").read_text().splitlines() if x.strip()]


def run_id(run: Path) -> str:
    """The id the run's envelope names it by (every row it wrote carries it)."""
    return str(json.loads((run / "envelope.json").read_text())["run_id"])


def as_another_run(run: Path) -> Path:
    """``run`` (a copy of another run) renamed to a run of its own: a new run id in its
    envelope and in every row it wrote, as a second ``hqval run`` of the same inputs
    would give (admit refuses one run given twice, a copy of it included)."""
    import uuid

    old, new = run_id(run), uuid.uuid4().hex
    env = json.loads((run / "envelope.json").read_text())
    env["run_id"] = new
    (run / "envelope.json").write_text(json.dumps(env, indent=1))
    lines = [json.loads(x) for x in (run / "rows.jsonl").read_text().splitlines() if x.strip()]
    (run / "rows.jsonl").write_text("".join(
        json.dumps({**r, "run_id": new} if r.get("run_id") == old else r) + "\n"
        for r in lines))
    return run


def append_rows(run: Path, *new: dict[str, object], stamp: bool = True) -> None:
    """Append rows to the run, stamped with its run id (as its own writer would) unless
    ``stamp`` is false."""
    rid = run_id(run) if stamp else None
    with (run / "rows.jsonl").open("a") as f:
        for r in new:
            f.write(json.dumps({**r, "run_id": rid} if rid is not None else r) + "\n")


def rewrite_rows(run: Path, keep: Callable[[dict[str, object]], bool]) -> int:
    """Drop the rows ``keep`` refuses; returns how many were dropped."""
    all_rows = rows(run)
    kept = [r for r in all_rows if keep(r)]
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    return len(all_rows) - len(kept)


def rewrite_each(run: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite the run's rows.jsonl with ``change`` applied to every row (in place)."""
    data = rows(run)
    for r in data:
        change(r)
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))


def edit_envelope(run: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    """Rewrite the run's envelope.json with ``change`` applied to it (in place)."""
    env = json.loads((run / "envelope.json").read_text())
    change(env)
    (run / "envelope.json").write_text(json.dumps(env))


BIT_IDENTITY = f"bit_identity[gemv_mq4g256v2_r1|{ARCH}|emu]"
PARITY = f"reference_parity[gemv_mq4g256v2_r1|{ARCH}|emu]"


def set_fields(ident: str, **fields: Any) -> Callable[[dict[str, Any]], None]:
    """A ``rewrite_each`` change: the row of cell ``ident`` gets ``fields``."""
    def change(r: dict[str, Any]) -> None:
        if r["identity"] == ident:
            r.update(fields)
    return change


def assert_damaged(res: Result, *named: str) -> None:
    """Exit 2, and stderr names each of ``named``."""
    assert res.code == 2, res.out + res.err
    for n in named:
        assert n in res.err, res.err


def fail_bit_identity(run: Path) -> None:
    """The qt=44 decode kernel's bit_identity cell fails, as a broken kernel's would (its
    measured count above 0)."""
    def change(r: dict[str, Any]) -> None:
        if r["identity"] == BIT_IDENTITY:
            r["status"], r["measured"], r["message"] = "fail", 7.0, "wrong half"
    rewrite_each(run, change)


def header_load_broken(tree: Path, dest: Path, statement: str) -> Path:
    """A copy of the small tree (``tree``: its kernels.yaml) at ``dest`` whose qt=44
    header load runs ``statement`` on every real header, behind a test the compiler cannot
    fold (the rest of the kernel stays); returns the copy's kernels.yaml."""
    import shutil

    shutil.copytree(tree.parent, dest)
    header = dest / "include" / "hq4_header.h"
    text = header.read_text()
    old = ("        return Hq4Raw{hq_load_u32(gp), hq_load_u32(gp + 4)};"
           "  // addresses lane-invariant")
    assert old in text
    header.write_text(text.replace(old, (
        "        const Hq4Raw r{hq_load_u32(gp), hq_load_u32(gp + 4)};\n"
        f"        if (r.a != 0x7fc00001u) {statement}\n"
        "        return r;"), 1))
    return dest / "kernels.yaml"
