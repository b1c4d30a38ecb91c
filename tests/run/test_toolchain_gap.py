"""A kernel whose source calls a target builtin this compiler lacks (the engine's gfx12
``__builtin_amdgcn_s_prefetch_data``, LLVM 20's, under clang-19) is correct source the
toolchain cannot build: its compile, audit and check cells are skipped naming the builtin
and its path is ``untested`` (exit 2), never ``rejected``; an identifier nothing declares
is still the kernel's own compile failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hqval.toolchain import missing_builtin

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "tests" / "data" / "engine_tree" / "toolchain_gap.yaml"


def test_only_the_compilers_builtin_namespace_is_a_toolchain_gap() -> None:
    name = "__builtin_amdgcn_s_prefetch_data"
    assert missing_builtin(f"k.hip:72:13: error: use of undeclared identifier '{name}'") == name
    for message in ("k.hip:21:9: error: use of undeclared identifier 'ew_prefetch_next_group'",
                    "k.hip:3:1: error: use of undeclared identifier '__align__'",
                    "k.hip:9:2: error: '__builtin_amdgcn_wmma_f32_16x16x16_f16_w32' needs "
                    "target feature gfx11-insts,wavefrontsize32", ""):
        assert missing_builtin(message) is None, message


@pytest.mark.skipif(not shutil.which("clang-19"), reason="needs clang-19")
def test_a_builtin_the_compiler_lacks_leaves_the_cell_untested(tmp_path: Path) -> None:
    from hqval.toolchain import find_compiler

    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HQVAL_CACHE": str(tmp_path / "cache")}
    p = subprocess.run([sys.executable, "-m", "hqval", "run", "--manifest", str(TREE),
                        "--backend", "emu", "--arch", "gfx1201", "--out", str(out),
                        "--workers", "0", "--no-mutants"], env=env, capture_output=True,
                       text=True, timeout=600, check=False)
    rows = [json.loads(ln) for ln in (out / "rows.jsonl").read_text().splitlines()]
    mine = [r for r in rows if r.get("kernel") == "ew_gemv_mq4g256v2_prefetch"]
    if not any(r["details"].get("toolchain_gap") for r in mine):
        pytest.skip(f"{find_compiler()} has the builtin: nothing to show here")
    assert p.returncode == 2, p.stdout + p.stderr
    compile_row = next(r for r in mine if r["kind"] == "compile")
    assert compile_row["status"] == "skipped"
    assert "__builtin_amdgcn_s_prefetch_data" in compile_row["message"]
    judged = [r for r in mine if r["kind"] in ("audit", "check")]
    assert judged and all(r["status"] == "skipped" and r["details"]["toolchain_gap"]
                          == "__builtin_amdgcn_s_prefetch_data" for r in judged), judged
    cell = next(c for c in json.loads((out / "admission.json").read_text())["cells"]
                if c["key"] == "admit[qt44:decode|gfx1201]")
    assert cell["status"] == "untested"
    assert "the compiler lacks __builtin_amdgcn_s_prefetch_data" in " ".join(cell["reasons"])
    # the kernel's own undeclared identifier: a failing compile row, as before
    bad = next(r for r in rows if r.get("kernel") == "ew_gemv_mq4g256v2_bad_ident"
               and r["kind"] == "compile")
    assert bad["status"] == "fail" and "ew_prefetch_next_group" in bad["message"]


NEWER = next((c for c in ("clang-22", "clang-21", "clang-20") if shutil.which(c)), None)


@pytest.mark.skipif(NEWER is None, reason="needs a clang with the builtin (Debian 12: "
                    "apt-get install clang-22 lld-22 llvm-22)")
def test_a_clang_that_has_the_builtin_judges_the_kernel(tmp_path: Path) -> None:
    """The same tree under a clang that has the builtin (Debian 12's clang-22, from
    bookworm-security): the gfx12 build calls s_prefetch_data and the kernel is compiled,
    audited and checked like any other (no stand-in for the builtin): the cell is judged."""
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HQVAL_CACHE": str(tmp_path / "cache"),
           "HQVAL_CLANG": str(NEWER)}
    p = subprocess.run([sys.executable, "-m", "hqval", "run", "--manifest", str(TREE),
                        "--backend", "emu", "--arch", "gfx1201", "--out", str(out),
                        "--workers", "0", "--no-mutants"], env=env, capture_output=True,
                       text=True, timeout=600, check=False)
    rows = [json.loads(ln) for ln in (out / "rows.jsonl").read_text().splitlines()]
    mine = [r for r in rows if r.get("kernel") == "ew_gemv_mq4g256v2_prefetch"]
    compile_row = next(r for r in mine if r["kind"] == "compile")
    assert compile_row["status"] == "pass", compile_row
    assert compile_row["details"]["compiler"].startswith("Debian clang version 2")
    judged = {r["check"]: r["status"] for r in mine if r["kind"] in ("audit", "check")}
    for check in ("audit_header_scalar", "audit_payload_offset", "audit_v2_valu_delta",
                  "bit_identity", "reference_parity"):
        assert judged[check] == "pass", (check, judged)
    assert not any(r["details"].get("toolchain_gap") for r in mine)
    cell = next(c for c in json.loads((out / "admission.json").read_text())["cells"]
                if c["key"] == "admit[qt44:decode|gfx1201]")
    assert cell["status"] == "emulated", (cell, p.stdout[-2000:])
    # the builtin is in the machine code the audit read: a real prefetch, not a stand-in
    from hqval.codeobject import load

    co = load(compile_row["details"]["code_object"])
    text = [i.mnemonic for i in co.disassembly("ew_gemv_mq4g256v2_prefetch")]
    assert "s_prefetch_data" in text
