"""Fault class: causes kept apart, the compiler's time limit.  A preprocessor or compiler
run that does not finish in its time limit reached no verdict on the kernel (a loaded or
stalled machine, a read that blocks): an infrastructure error naming the tool (exit 2),
never the kernel's compile failure (exit 1), and ``--resume`` redoes it.  The limits are
lowered here and the fake clang (``HQVAL_CLANG``, its ``--version`` the real one's) sleeps
where the stage under test runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from hqval import toolchain

from .conftest import ARCH, Result
from .test_toolchain_faults import CLANG

Hq = Callable[..., Result]
# the real clang for what hqval asks before building and for the stage not under test
STAGES = {
    # -M (the dependency list) runs with -E; the build does not
    "compiler": 'for a in "$@"; do case "$a" in --version|-print-*|-###|-E) exec {real} "$@";; '
               "esac; done; exec sleep 30",
    "preprocessor": 'for a in "$@"; do case "$a" in --version|-print-*|-###) exec {real} "$@";; '
                    "esac; done; exec sleep 30",
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_a_compiler_past_its_time_limit_is_infrastructure_not_the_kernels(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hqval: Hq,
        stage: str) -> None:
    exe = tmp_path / "clang"
    exe.write_text("#!/bin/sh\n" + STAGES[stage].format(real=CLANG) + "\n")
    exe.chmod(0o755)
    monkeypatch.setenv("HQVAL_CLANG", str(exe))
    monkeypatch.setattr(toolchain, "COMPILE_TIMEOUT_S", 1)
    monkeypatch.setattr(toolchain, "DEPS_TIMEOUT_S", 1)
    out = tmp_path / "rows.json"
    res = hqval("compile", "--arch", ARCH, "--manifest", str(tree), "--cache-dir",
                str(tmp_path / "cache"), "--jobs", "4", "--json", str(out))
    assert res.code == 2, res.out + res.err  # once: exit 1, every kernel's own failure
    rows = [r for r in json.loads(out.read_text()) if r["status"] != "unsupported"]
    assert rows and all(r["status"] == "error" and r["details"]["infrastructure"]
                        and r["details"]["infrastructure_cause"] == "compiler"
                        for r in rows), rows
    assert f"the {stage} {exe} did not finish in 1 s: no verdict on the kernel" \
        in rows[0]["message"]
