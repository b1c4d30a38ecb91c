"""The minimum waves per EU a kernel's launch bounds declare (HIP's
``__launch_bounds__(N, MIN_WAVES)``): the code object does not record it, clang warns when
it cannot meet it, the compile keeps that finding with the cached object, and the audit's
vgpr_budget fails a kernel short of it (tests/data/engine_tree/occupancy.yaml)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hqval.audit import audit_matrix
from hqval.containment import occupancy_misses
from hqval.manifest import load_manifest
from hqval.matrix import load_arches
from hqval.result import Row, Status
from hqval.toolchain import cache_root, compile_kernel

pytestmark = pytest.mark.skipif(
    not (shutil.which("clang-19") and shutil.which("llvm-objdump-19")),
    reason="needs clang-19 and llvm-objdump-19 (apt-get install clang-19 llvm-19)")

TREE = load_manifest(Path(__file__).resolve().parents[1] / "data" / "engine_tree"
                     / "occupancy.yaml")
ARCHES = load_arches()


def _budget(name: str, cache: Path) -> Row:
    spec = TREE.by_name(name)
    res = compile_kernel(spec, "gfx1100", cache)
    assert res.ok, res.message
    rows = audit_matrix([(spec, res)], ARCHES["gfx1100"], cache)
    return next(r for r in rows if r.check == "audit_vgpr_budget")


def test_an_occupancy_the_lds_caps_below_the_declared_minimum_fails(tmp_path: Path) -> None:
    """8 KB of LDS per one-wave block holds gfx1100 at 4 waves per SIMD against the 16
    declared: clang says so, and vgpr_budget (once a pass: 20 VGPRs, "occupancy 16") fails
    naming both numbers."""
    row = _budget("ew_gemv_mq4g256v2_lds_waves16", tmp_path)
    assert row.status is Status.FAIL, row.message
    assert "at least 16 waves per SIMD" in row.message
    assert "final occupancy 4" in row.message
    assert row.details["declared_min_waves_per_eu"] == 16
    assert row.details["compiler_final_occupancy"] == 4


def test_a_declared_minimum_the_kernel_meets_passes(tmp_path: Path) -> None:
    """The control: the same GEMV without the LDS staging meets its 16."""
    row = _budget("ew_gemv_mq4g256v2_waves16", tmp_path)
    assert row.status is Status.PASS, row.message
    assert "declared_min_waves_per_eu" not in row.details


def test_a_request_above_the_wave_slots_is_named_and_judged_by_the_slots(
        tmp_path: Path) -> None:
    """32 waves per SIMD on gfx1100 (16 slots): clang drops the request and warns; the
    kernel still runs 16, all the request could get, so the row passes and says so."""
    row = _budget("ew_gemv_mq4g256v2_waves32", tmp_path)
    assert row.status is Status.PASS, row.message
    assert "ask for 32 waves per SIMD" in row.message and "16 wave slots" in row.message
    assert row.details["declared_min_waves_per_eu"] == 32


def test_the_finding_is_kept_with_the_cached_object_and_sealed(tmp_path: Path) -> None:
    """A cache hit has the build's finding (the warning is not printed again); a record
    without it (an older hqval's) is built again; one whose finding was edited under the
    kept tag is not authenticated."""
    spec = TREE.by_name("ew_gemv_mq4g256v2_lds_waves16")
    first = compile_kernel(spec, "gfx1100", tmp_path)
    assert first.ok and not first.cached
    assert first.details["occupancy_target_missed"] == {"desired": 16, "final": 4}
    again = compile_kernel(spec, "gfx1100", tmp_path)
    assert again.cached and again.details["occupancy_target_missed"] == {"desired": 16,
                                                                          "final": 4}
    meta = cache_root(tmp_path) / first.key[:2] / f"{first.key}.json"
    info = json.loads(meta.read_text())
    assert info["occupancy_misses"] == {spec.symbol: [16, 4]}

    meta.write_text(json.dumps({k: v for k, v in info.items() if k != "occupancy_misses"}))
    rebuilt = compile_kernel(spec, "gfx1100", tmp_path)
    assert not rebuilt.cached and "occupancy findings" in rebuilt.details["rebuilt"]
    assert rebuilt.details["occupancy_target_missed"] == {"desired": 16, "final": 4}

    info = json.loads(meta.read_text())
    info["occupancy_misses"] = {}
    meta.write_text(json.dumps(info))
    forged = compile_kernel(spec, "gfx1100", tmp_path)
    assert not forged.cached and "not authenticated" in forged.details["rebuilt"]
    assert forged.details["occupancy_target_missed"] == {"desired": 16, "final": 4}


def test_the_warning_is_read_from_sarif_and_from_plain_text() -> None:
    text = ("failed to meet occupancy target given by 'amdgpu-waves-per-eu' in "
            "'gemv_x': desired occupancy was 32, final occupancy is 12")
    sarif = json.dumps({"runs": [{"results": [
        {"level": "warning", "message": {"text": text}},
        {"level": "warning", "message": {"text": "loop not unrolled"}}]}]})
    assert occupancy_misses(sarif) == {"gemv_x": [32, 12]}
    assert occupancy_misses(f"k.hip:3:1: warning: {text} [-Wpass-failed]") == {
        "gemv_x": [32, 12]}
    assert occupancy_misses("k.hip:3:1: warning: loop not unrolled") == {}
