"""``hqval emu``: one kernel on the interpreter through the CLI, and bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hqval.cli import main

needs_clang = pytest.mark.skipif(shutil.which("clang-19") is None, reason="needs clang-19")


@needs_clang
def test_runs_a_kernel_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "emu.json"
    rc = main(["emu", "--arch", "gfx1100", "--kernel", "gemv_mq4g256v2_r1", "-M", "8",
               "-K", "512", "--json", str(out)])
    assert rc == 0
    assert "PASS" in capsys.readouterr().out
    (res,) = json.loads(out.read_text())["rows"]
    assert res["identity"] == "emu_oracle[gemv_mq4g256v2_r1|gfx1100|emu]"
    assert res["status"] == "pass" and res["measured"] <= res["tolerance"]
    assert res["details"]["counts"]["VALU"] > 0 and res["details"]["per_wave"]["VMEM"] > 0
    assert res["details"]["bit_mismatches"] == 0


def test_bad_k_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["emu", "--arch", "gfx1100", "-K", "300"]) == 2
    assert "multiple of 256" in capsys.readouterr().err


def test_missing_arch_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HQVAL_ARCH", raising=False)
    assert main(["emu"]) == 2
    assert "--arch" in capsys.readouterr().err


@needs_clang
def test_coverage_lists_no_gaps_for_the_suite_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["emu", "--coverage", "--arch", "gfx1201", "--kernel", "gemv_mq4g256v2_r1",
               "--kernel", "gemm_mq4g256v2_wmma_gfx12"])
    out = capsys.readouterr().out
    assert rc == 0 and out.count("runs") == 2


def test_unknown_arch_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["emu", "--arch", "sm_90"]) == 2
    assert "sm_90" in capsys.readouterr().err


@needs_clang
def test_trace_prints_the_first_instructions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["emu", "--arch", "gfx1100", "--kernel", "gemv_mq4g256v2_r1", "-M", "4",
                 "-K", "256", "--trace", "5"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "waves]" in ln]
    assert len(lines) == 5 and "[   4 waves]" in lines[0]
