from __future__ import annotations

import json
from pathlib import Path

import pytest

from hqval import isa
from hqval.cli import main


def test_doctor_lists_found_pieces_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "found    HIP-capable clang (LLVM 19)" in out
    assert "code object cache" in out


def test_doctor_without_a_compiler_exits_1_and_says_what_is_disabled(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("HQVAL_CLANG", raising=False)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm"))
    isa.find_llvm_tool.cache_clear()
    try:
        code = main(["doctor"])
    finally:
        isa.find_llvm_tool.cache_clear()
    out = capsys.readouterr().out
    assert code == 1
    assert "MISSING  HIP-capable clang (LLVM 19)" in out
    assert "disables: compile, audit, check" in out
    assert out.rstrip().endswith("missing")


def test_doctor_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"piece", "found", "detail", "disables", "required"} <= set(rows[0])
