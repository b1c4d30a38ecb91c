"""Fault class: hqval's toolchain breaks, and the kernels must not be blamed.  A clang
that is killed by a signal, exits 139, reports its own crash or prints garbage where
``-M`` writes a dependency rule, and an llvm-objdump that is missing or crashes: each is
an infrastructure error naming the tool and the fix (exit 2), never a kernel's compile
failure or audit error (exit 1); ``--resume`` with a working compiler redoes the cells.
The fakes are real executables (``HQVAL_CLANG``, ``HQVAL_OBJDUMP``) that answer
``--version`` with the real tool's, so hqval takes them for a usable toolchain."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import ARCH, CLEAN, admission, hqval_process, run_args

CLANG = shutil.which("clang-19") or "clang-19"
OBJDUMP = shutil.which("llvm-objdump-19") or "llvm-objdump-19"
# the real tool for what hqval asks of it before building (its version, its driver's
# plan); the fault for everything else
PASS_THROUGH = ('for a in "$@"; do case "$a" in --version|-print-*|-###) exec {real} "$@";; '
                'esac; done; ')
CLANGS = {
    "killed-by-sigsegv": "kill -SEGV $$",
    "exit-139": 'echo "PLEASE submit a bug report to https://github.com/llvm/" >&2; exit 139',
    "crash-report-exit-1": ('echo "clang: error: unable to execute command: Segmentation '
                            'fault" >&2; exit 1'),
    "garbage-exit-0": "head -c 300 /dev/urandom; exit 0",
}


def _fake(tmp_path: Path, name: str, real: str, body: str) -> Path:
    exe = tmp_path / name
    exe.write_text("#!/bin/sh\n" + PASS_THROUGH.format(real=real) + body + "\n")
    exe.chmod(0o755)
    return exe


def _rows(path: Path) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text())) if path.exists() else []


@pytest.mark.parametrize("fault", list(CLANGS))
def test_a_crashing_compiler_is_infrastructure_not_the_kernels(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    monkeypatch.setenv("HQVAL_CLANG", str(_fake(tmp_path, "clang", CLANG, CLANGS[fault])))
    out = tmp_path / "rows.json"
    r = hqval_process(["compile", "--arch", ARCH, "--manifest", str(tree), "--cache-dir",
                       str(tmp_path / "cache"), "--json", str(out)], timeout=300)
    assert r.code == 2, r.out + r.err
    rows = [x for x in _rows(out) if x["status"] != "unsupported"]
    assert rows and all(x["status"] == "error" and x["details"]["infrastructure"]
                        and x["details"]["infrastructure_cause"] == "compiler" for x in rows)
    assert "is broken, not the kernel; fix: install a working clang" in rows[0]["message"]
    assert "Traceback" not in r.out + r.err


def test_a_run_with_a_crashing_compiler_is_exit_2_and_resume_redoes_it(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    cache = ["--cache-dir", str(tmp_path / "cache")]
    monkeypatch.setenv("HQVAL_CLANG", str(_fake(tmp_path, "clang", CLANG, "kill -SEGV $$")))
    first = hqval_process(run_args(tree, out, "--no-mutants", *cache))
    assert first.code == 2, first.out[-2000:] + first.err[-2000:]
    compiles = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
    compiles = [x for x in compiles if x["kind"] == "compile" and x["status"] != "unsupported"]
    assert compiles and all(x["details"].get("infrastructure") for x in compiles)
    monkeypatch.setenv("HQVAL_CLANG", CLANG)
    resumed = hqval_process(run_args(tree, out, "--no-mutants", "--resume", *cache))
    assert resumed.code == 0, resumed.out[-3000:] + resumed.err[-3000:]
    assert admission(out) == CLEAN


@pytest.mark.parametrize("fault", ["missing", "killed-by-sigsegv"])
def test_a_broken_disassembler_is_infrastructure_not_the_kernels(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    tool = (tmp_path / "no-such-objdump" if fault == "missing"
            else _fake(tmp_path, "objdump", OBJDUMP, "kill -SEGV $$"))
    monkeypatch.setenv("HQVAL_OBJDUMP", str(tool))
    out = tmp_path / "rows.json"
    r = hqval_process(["audit", "--arch", ARCH, "--manifest", str(tree), "--cache-dir",
                       str(tmp_path / "cache"), "--json", str(out)], timeout=300)
    assert r.code == 2, r.out + r.err  # once: exit 1, the kernels' audit errors
    assert "hqval audit: infrastructure error in" in r.err
    rows = _rows(out)
    assert rows and all(x["status"] == "error" and x["details"]["infrastructure"]
                        for x in rows)
    assert str(tool) in rows[0]["message"]
