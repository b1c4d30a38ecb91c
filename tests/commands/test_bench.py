"""hqval bench: argument handling, exit codes, and the table printer."""

from __future__ import annotations

import argparse

import pytest

from hqval.cli import UsageError, main
from hqval.commands import bench
from hqval.manifest import load_manifest
from hqval.result import Row, Status


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    return p.parse_args(list(argv))


def test_emu_backend_is_refused_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--backend", "emu", "--arch", "gfx1100"]) == 2
    assert "device events" in capsys.readouterr().err


def test_one_arch_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--backend", "cuda", "--arch", "sm_90", "--arch", "gfx1100"]) == 2
    assert "exactly one --arch" in capsys.readouterr().err


def test_bad_shape_names_the_form() -> None:
    with pytest.raises(UsageError, match="MxK"):
        bench._shapes(_args("--shape", "17408*5120"))
    with pytest.raises(UsageError, match="multiple of 256"):
        bench._shapes(_args("--shape", "64x100"))


def test_default_shapes_are_the_full_set() -> None:
    shapes = bench._shapes(_args())
    names = {s.name for s in shapes}
    assert {"4096x5120", "4096x17408", "5120x5120", "17408x5120", "5120x17408"} <= names


def test_rows_default_from_arch_and_sweep() -> None:
    assert bench._rows(_args(), "gfx1100") == [1]  # RDNA3 dGPU: section 6 rule
    assert bench._rows(_args(), "gfx1151") == [2]  # APU
    assert bench._rows(_args("--sweep-rows"), "sm_90") == [1, 2, 4, 8]
    assert bench._rows(_args("--rows", "4", "--rows", "2"), "sm_90") == [2, 4]
    with pytest.raises(UsageError, match="--rows"):
        bench._rows(_args(), "sm_90")


def test_missing_cuda_driver_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        from cuda.bindings import driver

        driver.cuInit(0)
        pytest.skip("a CUDA driver is present here")
    except ImportError:
        pass
    except Exception:  # no libcuda: the case under test
        pass
    code = main(["bench", "--backend", "cuda", "--arch", "sm_90", "--shape", "256x256",
                 "--rows", "1"])
    assert code == 2
    assert "backend 'cuda'" in capsys.readouterr().err


def test_with_defines_adds_to_every_kernel_and_validates() -> None:
    m = load_manifest(None)
    out = bench.with_defines(m, ["HQ_GEMV_UNROLL=8", "FLAG"])
    assert all(("HQ_GEMV_UNROLL", "8") in k.defines and ("FLAG", "") in k.defines
               for k in out.kernels)
    assert bench.with_defines(m, []) is m
    with pytest.raises(UsageError, match="NAME=VALUE"):
        bench.with_defines(m, ["8=x"])


def test_table_prints_cells_and_messages() -> None:
    stats = {"ratio": 1.0123, "ci_low": 1.01, "ci_high": 1.015, "mwu_p": 1e-9}
    cell = Row(kind="timing", check="timing_cold", kernel="gemv_mq4g256v2_r1@17408x5120",
               arch="sm_90", backend="cuda", status=Status.FAIL, measured=1.0123,
               details={"stats": stats, "median_us_a": 34.0, "median_us_b": 34.4,
                        "gbps_b": 1400.0, "frac_copy_b": 0.33, "frac_read_floor_b": 0.456,
                        "speedup_vs_torch_b": 1.4,
                        "cache_resident": False, "predicted_ratio": 1.002})
    copy = Row(kind="timing", check="copy_bandwidth", kernel="device_copy", arch="sm_90",
               backend="cuda", status=Status.PASS, message="4254 GB/s device-to-device")
    text = bench.format_table([copy, cell])
    lines = text.splitlines()
    assert "4254 GB/s" in lines[1]
    assert "1.0123" in lines[2] and "33.0" in lines[2] and "45.6" in lines[2]
    assert "1.002" in lines[2]
    assert lines[2].split()[1] == "fail"


def test_predict_prints_the_binding_term_and_the_latency_parts(
        capsys: pytest.CaptureFixture[str]) -> None:
    # 160 rows: one wave per SIMD on gfx1030, latency-bound; section 6's 4096x5120: 16 of
    # 25.6 waves held, issue-bound.  The table says which, with the three terms.
    assert main(["bench", "--predict", "--arch", "gfx1030", "--rows", "1", "--mode", "hot",
                 "--candidates", "44", "--shape", "160x5120", "--shape", "4096x5120"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "bound v1/v2" in out[0] and "mem/issue/lat us" in out[0]
    few = next(line for line in out if "160x5120" in line)
    many = next(line for line in out if "4096x5120" in line)
    assert "latency/latency" in few and few.split()[-2] == "1/1"
    assert "issue/issue" in many and many.split()[-2] == "16/25.6"
    # gfx1030 has 4 VGPR banks: each kernel's bank-conflict cycles per group-row, printed
    assert "banks v1/v2" in out[0]
    stalls = [float(v) for v in many.split()[-1].split("/")]
    assert len(stalls) == 2 and all(v > 0 for v in stalls)
    # Must say no: gfx1100 has no sourced bank count, so none is printed
    assert main(["bench", "--predict", "--arch", "gfx1100", "--rows", "1", "--mode", "hot",
                 "--candidates", "44", "--shape", "4096x5120"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "4096x5120" in x)
    assert line.split()[-1] == "-"
