"""Fault class: inputs that would make hqval read without end, expand without bound or
crash its readers, at boundaries the earlier rounds did not feed: the mutant manifest
(`--mutants`), the policy (nesting, NUL, bad UTF-8, a directory, a 30 MB line, a link
loop), what a kernel source includes (`/dev/stdin` held open, `/proc` files, a link loop,
`/dev/urandom`), the source itself (a FIFO, a link to /dev/zero, a link loop, a
directory), the cache directory (a link loop, a FIFO, /dev/null) and a run directory's
files (link loops, /dev/null, a NUL byte, bad UTF-8 inside a string).  Each is exit 2 with
one line naming the file, in seconds, no traceback and no MemoryError."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.faults.conftest import ARCH, REPO, Result
from tests.guards import no_hang

KERNEL = 'extern "C" __attribute__((global)) void k(float* y) { y[0] = 1.0f; }\n'
BOMB = "\n".join(["a0: &a0 [" + ", ".join(["xxxxxxxxxxxxxxxxxxxx"] * 9) + "]"]
                 + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]"
                    for i in range(1, 10)]) + "\n"


def _tree(tmp_path: Path, source: str) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "k.hip").write_text(source)
    manifest = tree / "kernels.yaml"
    manifest.write_text(yaml.safe_dump({"schema": 1, "kernels": [
        {"name": "k", "source": "k.hip", "qt": 6, "kind": "gemv", "requires": "any"}]}))
    return manifest


def _refused(r: Result, name: str) -> None:
    assert r.code == 2, r.out + r.err
    text = r.out + r.err
    assert "Traceback" not in text and "MemoryError" not in text
    assert name in text, text


def _special(path: Path, what: str) -> None:
    if what == "fifo":
        os.mkfifo(path)
    elif what == "dir":
        path.mkdir()
    elif what == "loop":
        path.symlink_to(path.name)
    elif what == "devzero":
        path.symlink_to("/dev/zero")
    elif what == "devnull":
        path.symlink_to("/dev/null")


MUTANTS = {"alias-bomb": BOMB.encode(), "nested": b"[" * 10000 + b"]" * 10000,
           "nul": b"schema: 1\x00\nkernels: []\n", "latin1": b"schema: 1\n# caf\xe9\n",
           "fifo": None, "dir": None}


@pytest.mark.parametrize("what", list(MUTANTS))
def test_a_mutant_manifest_that_cannot_be_read_is_one_line(
        tmp_path: Path, hqval: Callable[..., Result], what: str) -> None:
    manifest = _tree(tmp_path, KERNEL)
    mutants = manifest.parent / "m.yaml"
    body = MUTANTS[what]
    if body is None:
        _special(mutants, what)
    else:
        mutants.write_bytes(body)
    with no_hang(120):
        r = hqval("mutants", "--arch", ARCH, "--manifest", str(manifest), "--mutants",
                  str(mutants), "--cache-dir", str(tmp_path / "cache"))
    _refused(r, "m.yaml")


POLICIES = {"nested": b"a: " + b"[" * 10000 + b"]" * 10000, "nul": b"gates: {}\x00\n",
            "latin1": b"# caf\xe9\n", "long-line": b"x: " + b"a" * 30_000_000 + b"\n",
            "dir": None, "loop": None}


@pytest.mark.parametrize("what", list(POLICIES))
def test_a_policy_that_cannot_be_read_is_one_line(
        golden: Path, tmp_path: Path, hqval: Callable[..., Result], what: str) -> None:
    policy = tmp_path / "policy.yaml"
    body = POLICIES[what]
    if body is None:
        _special(policy, what)
    else:
        policy.write_bytes(body)
    with no_hang(120):
        r = hqval("admit", str(golden), "--policy", str(policy))
    _refused(r, "policy.yaml")


@pytest.mark.parametrize("include", ["/proc/self/status", "/proc/self/environ",
                                     "/dev/urandom", "loop.h"])
def test_an_include_of_a_special_file_is_refused(
        tmp_path: Path, hqval: Callable[..., Result], include: str) -> None:
    manifest = _tree(tmp_path, f'#include "{include}"\n' + KERNEL)
    if include == "loop.h":
        _special(manifest.parent / "loop.h", "loop")
    with no_hang(120):
        r = hqval("compile", "--arch", ARCH, "--manifest", str(manifest), "--cache-dir",
                  str(tmp_path / "cache"))
    # a link loop in the tree is refused before clang runs, as a FIFO is (once: clang's
    # "Too many levels of symbolic links", the kernel's compile failure, exit 1)
    _refused(r, include if include != "/proc/self/status" else "/proc/self")


def test_an_include_of_dev_stdin_held_open_never_hangs(tmp_path: Path) -> None:
    manifest = _tree(tmp_path, '#include "/dev/stdin"\n' + KERNEL)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HQVAL_WORKERS": "0"}
    with subprocess.Popen([sys.executable, "-m", "hqval", "compile", "--arch", ARCH,
                           "--manifest", str(manifest), "--cache-dir", str(tmp_path / "c")],
                          env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        # stdin stays open (no writer closes it): a preprocessor reading it would block
        out, err = proc.communicate(timeout=120)
    _refused(Result(proc.returncode, out, err), "/dev/stdin")


@pytest.mark.parametrize("what", ["fifo", "devzero", "loop", "dir"])
def test_a_source_that_is_no_regular_file_is_refused(
        tmp_path: Path, hqval: Callable[..., Result], what: str) -> None:
    manifest = _tree(tmp_path, KERNEL)
    (manifest.parent / "k.hip").unlink()
    _special(manifest.parent / "k.hip", what)
    with no_hang(120):
        r = hqval("compile", "--arch", ARCH, "--manifest", str(manifest), "--cache-dir",
                  str(tmp_path / "cache"))
    _refused(r, "/dev/zero" if what == "devzero" else "k.hip")


@pytest.mark.parametrize("what", ["loop", "fifo", "devnull"])
def test_a_cache_dir_that_is_no_directory_is_infrastructure(
        tmp_path: Path, hqval: Callable[..., Result], what: str) -> None:
    manifest = _tree(tmp_path, KERNEL)
    cache = tmp_path / "cache"
    _special(cache, what)
    with no_hang(120):
        r = hqval("compile", "--arch", ARCH, "--manifest", str(manifest), "--cache-dir",
                  str(cache), "--json", str(tmp_path / "rows.json"))
    _refused(r, "cache")
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert rows and all(x["details"].get("infrastructure") for x in rows)


RUN_FILES = ["envelope-loop", "rows-loop", "rows-devnull", "rows-nul", "rows-latin1-string"]


@pytest.mark.parametrize("what", RUN_FILES)
def test_a_run_file_that_cannot_be_read_is_one_line(
        copy_of: Callable[[], Path], hqval: Callable[..., Result], what: str) -> None:
    run = copy_of()
    name = "envelope.json" if what.startswith("envelope") else "rows.jsonl"
    path = run / name
    if what.endswith(("-loop", "-devnull")):
        path.unlink()
        _special(path, what.rsplit("-", 1)[1])
    else:
        lines = path.read_bytes().splitlines()
        lines[3] = (lines[3][:20] + b"\x00" + lines[3][20:] if what == "rows-nul"
                    else lines[3].replace(b'"message": "', b'"message": "\xe9', 1))
        path.write_bytes(b"\n".join(lines) + b"\n")
    with no_hang(120):
        r = hqval("admit", str(run))
    _refused(r, name)
