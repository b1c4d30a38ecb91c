"""Cost model arithmetic, and the emulator-measured slope on a real kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hqval.matrix import load_arches, load_devices
from hqval.timing import cost
from hqval.timing.gemv import Shape, gemv_bytes


def _cost(name: str, valu: float, per_block: float = 0.0) -> cost.KernelCost:
    return cost.KernelCost(name, "gfx1100", {"VALU": valu, "SALU": 2.0, "VMEM": 3.0,
                                             "SMEM": 1.0, "LDS": 50.0},
                           {"VALU": per_block})


def test_slope_recovers_per_group_and_per_wave() -> None:
    # 4 rows, 8 vs 16 groups: counts = 30 per group-row * groups * rows + 100 per wave.
    lo = {"VALU": 30 * 8 * 4 + 100}
    hi = {"VALU": 30 * 16 * 4 + 100}
    per_gr, per_wave = cost.slope(lo, hi, 8, 16, rows=4, waves=1)
    assert per_gr["VALU"] == 30.0
    assert per_wave["VALU"] == 100.0
    with pytest.raises(ValueError, match="more groups"):
        cost.slope(lo, hi, 16, 8, rows=4, waves=1)


def test_issue_counts_only_issuing_classes() -> None:
    # NVIDIA: one slot for any class; LDS excluded
    assert _cost("k", 30.0).issue_per_group_row(cost.SHARED) == 30.0 + 2.0 + 3.0 + 1.0
    # RDNA: VALU, SALU and memory instructions issue on their own ports: the busiest binds
    assert _cost("k", 30.0).issue_per_group_row(cost.PIPES) == 30.0
    salu_heavy = cost.KernelCost("s", "gfx1030", {"VALU": 10.0, "SALU": 12.0}, {})
    assert salu_heavy.issue_per_group_row(cost.PIPES) == 12.0
    assert salu_heavy.binding_class() == "SALU"
    with pytest.raises(ValueError, match="issue rule"):
        cost.issue_slots({"VALU": 1.0}, "dual")


def test_memory_bound_when_cold_and_vram_limited() -> None:
    rates = cost.ArchRates("x", vram_gbps=1000.0, llc_bytes=1 << 20, issue_per_s=1e15,
                           source="test")
    shape = Shape(4096, 5120)
    p = cost.predict(_cost("v1", 30.0), shape, rates, "cold")
    assert p.bound == "memory"
    assert p.t_mem_us == pytest.approx(gemv_bytes(shape) / 1e12 * 1e6)
    r = cost.predict_ratio(_cost("v1", 30.0), _cost("v2", 33.0), shape, rates, "cold")
    assert r.ratio == 1.0 and not r.exposed


def test_resident_hot_cell_is_compute_bound_and_exposes_extra_valu() -> None:
    # gfx1030-like: the weights fit the 128 MB Infinity Cache in hot mode.
    rates = cost.ArchRates.from_arch(load_arches()["gfx1030"])
    shape = Shape(5120, 5120)
    assert cost.resident(shape, rates, "hot") and not cost.resident(shape, rates, "cold")
    v1, v2 = _cost("v1", 30.0), _cost("v2", 33.0)
    r = cost.predict_ratio(v1, v2, shape, rates, "hot")
    assert r.exposed and r.v2.resident and r.v2.t_mem_us == 0.0
    # Issue-bound on the VALU port: the ratio is the ratio of VALU per group-row (the
    # SALU and memory instructions issue beside them, they do not dilute the extra VALU)
    assert rates.rule == cost.PIPES
    assert r.ratio == pytest.approx(33.0 / 30.0)
    groups = 5120 * 20
    assert r.v1.t_issue_us == pytest.approx(groups * 30.0 / rates.issue_per_s * 1e6)


def test_rates_from_matrix() -> None:
    a = load_arches()["gfx1100"]
    r = cost.ArchRates.from_arch(a)
    assert r.issue_per_s == a.cu_count * 2 * a.boost_mhz * 1e6
    assert r.llc_bytes == a.last_level_cache_bytes
    h200 = next(d for d in load_devices().values() if d.arch == "sm_90")
    rd = cost.ArchRates.from_device(h200, 1980.0)
    assert rd.issue_per_s == h200.sm_count * 4 * 1980e6


def test_per_block_overhead_scales_with_blocks() -> None:
    rates = cost.ArchRates("x", 1e9, 1, issue_per_s=1e9, source="t")
    c = _cost("k", 0.0, per_block=1000.0)
    shape = Shape(64, 256)
    # SALU/VMEM/SMEM per group-row (6) x 64 group-rows, + 1000 per block.
    assert cost.predict(c, shape, rates, "hot", 1).t_issue_us == pytest.approx(
        (64 * 6 + 64 * 1000) / 1e9 * 1e6)
    assert cost.predict(c, shape, rates, "hot", 4).t_issue_us == pytest.approx(
        (64 * 6 + 16 * 1000) / 1e9 * 1e6)


def test_costs_round_trip_and_bad_file(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    cost.save_costs([_cost("a", 1.0), _cost("b", 2.0)], str(p))
    back = cost.load_costs(str(p))
    assert back["b"].per_group_row["VALU"] == 2.0
    p.write_text(json.dumps([{"kernel": "a"}]))
    with pytest.raises(ValueError, match="costs-out"):
        cost.load_costs(str(p))


@pytest.mark.slow
def test_emulator_slope_on_real_kernels_shows_v2_header_work() -> None:
    from hqval.manifest import load_manifest

    m = load_manifest(None)
    v1 = cost.measure_cost(m.by_name("gemv_hfq4g256_r1"), "gfx1100")
    v2 = cost.measure_cost(m.by_name("gemv_mq4g256v2_r1"), "gfx1100")
    # v2 decodes two fp16 values and selects a half per group-row: strictly more VALU.
    assert v2.per_group_row["VALU"] > v1.per_group_row["VALU"] > 8
    # Vector loads per group-row at R=1: x (two 16-byte loads) and the payload dword; the
    # 8 header bytes are one scalar load (the audit's rule (a) in counts).
    assert v1.per_group_row["VMEM"] == 3.0
    assert v1.per_group_row["SMEM"] == 1.0
