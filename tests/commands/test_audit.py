"""``hqval audit``: the suite's kernels pass, the mutants do not, --table and --json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hqval.cli import main

pytestmark = pytest.mark.skipif(
    not (shutil.which("clang-19") and shutil.which("llvm-objdump-19")),
    reason="needs clang-19 and llvm-objdump-19")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("HQVAL_CACHE", str(d))
    return d


@pytest.mark.slow
def test_suite_kernels_pass_the_audit(tmp_path: Path, cache: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "audit.json"
    assert main(["audit", "--arch", "gfx1201", "--table", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    checks = {r["check"] for r in rows}
    assert checks == {"audit_header_scalar", "audit_no_spill", "audit_vgpr_budget",
                      "audit_v2_valu_delta", "audit_wmma", "audit_payload_offset"}
    assert {r["status"] for r in rows} <= {"pass", "unsupported"}
    wmma = [r for r in rows if r["check"] == "audit_wmma" and r["status"] == "pass"]
    # every gfx12 WMMA kernel of the manifest (the single- and multi-matrix GEMMs) is
    # judged by the WMMA rule on gfx1201 and passes it
    from hqval.manifest import load_manifest
    gfx12 = {k.name for k in load_manifest(None).kernels if k.requires == "wmma_gfx12"}
    assert {"gemm_hfq4g256_wmma_gfx12", "gemm_mq4g256v2_wmma_gfx12", "gemm_mq4c_wmma_gfx12",
            "gemm_mq4c_wmma_gfx12_residual"} <= gfx12
    assert {r["kernel"] for r in wmma} == gfx12
    text = capsys.readouterr().out
    assert "| kernel | VGPR |" in text and "gemv_mq4g256v2_r8" in text


@pytest.mark.slow
def test_mutants_fail_the_audit(tmp_path: Path, cache: Path) -> None:
    out = tmp_path / "audit.json"
    assert main(["audit", "--arch", "gfx1030", "--mutants", "--json", str(out)]) == 1
    failed = {(r["kernel"], r["check"]) for r in json.loads(out.read_text())
              if r["status"] == "fail"}
    assert ("gemv_mut_lane_header_address_r1", "audit_header_scalar") in failed
    assert ("gemv_mut_extra_work_r1", "audit_v2_valu_delta") in failed
    assert not [k for k, _ in failed if "_mut_" not in k]
