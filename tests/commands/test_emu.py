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


@needs_clang
def test_coverage_of_code_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess

    src = Path(__file__).parents[1] / "emu" / "kernels"
    objs = []
    for name, arch in (("probes", "gfx1201"), ("unsupported", "gfx1100")):
        co = tmp_path / f"{name}.co"
        subprocess.run(["clang-19", "-x", "hip", f"--offload-arch={arch}", "-nogpulib",
                        "-nogpuinc", "--cuda-device-only", "--no-gpu-bundle-output", "-O3",
                        str(src / f"{name}.hip"), "-o", str(co)], check=True, timeout=300)
        objs.append(str(co))
    out_json = tmp_path / "cov.json"
    assert main(["emu", "--coverage", objs[0], "--json", str(out_json)]) == 0
    rows = json.loads(out_json.read_text())["coverage"]
    assert rows and all(r["unsupported"] == [] and r["arch"] == "gfx1201" for r in rows)
    # the kernel reading a hardware register: listed with the instruction, exit 1, before
    # anything runs
    assert main(["emu", "--coverage", *objs]) == 1
    out = capsys.readouterr().out
    assert "reads_mode_register gfx1100 unsupported: s_getreg_b32" in out


def test_coverage_of_a_file_that_is_no_code_object(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "k.hipfb"
    bad.write_bytes(b"__CLANG_OFFLOAD_BUNDLE__")
    assert main(["emu", "--coverage", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "k.hipfb" in err and "--no-gpu-bundle-output" in err
    assert main(["emu", "--coverage", str(tmp_path / "missing.co")]) == 2
    assert "no such code object" in capsys.readouterr().err
    assert main(["emu", str(bad)]) == 2  # objects without --coverage
