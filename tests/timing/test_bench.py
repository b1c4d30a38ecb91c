"""Bench plumbing that runs without a GPU: device facts, rates, kernel lookup."""

from __future__ import annotations

from typing import Any

import pytest

from hqval.manifest import load_manifest
from hqval.timing import bench


class Props:
    """Only what device_facts/arch_rates read from a backend: its reported properties."""

    name = "cuda"

    def __init__(self, **props: Any) -> None:
        self.properties = props


def test_h200_facts_from_devices_section_and_larger_reported_l2() -> None:
    f = bench.device_facts(Props(l2_bytes=62914560), "sm_90")  # type: ignore[arg-type]
    assert f.vram_peak_gbps == 4800.0
    assert f.llc_bytes == 62914560 and "device reports" in f.source
    f2 = bench.device_facts(Props(l2_bytes=1), "sm_90")  # type: ignore[arg-type]
    assert f2.llc_bytes == 50 * 2**20 and "device reports" not in f2.source


def test_rdna_facts_use_infinity_cache() -> None:
    f = bench.device_facts(Props(), "gfx1030")  # type: ignore[arg-type]
    assert f.llc_bytes == 128 * 2**20 and f.vram_peak_gbps == 576.0


def test_unknown_device_falls_back_to_attributes_or_says_what_is_needed() -> None:
    f = bench.device_facts(Props(memory_clock_khz=3201000, memory_bus_bits=6016,  # type: ignore[arg-type]
                                 l2_bytes=1 << 20), "sm_100")
    assert f.vram_peak_gbps == pytest.approx(2 * 3.201e9 * 6016 / 8 / 1e9)
    with pytest.raises(NotImplementedError, match=r"arches\.yaml"):
        bench.device_facts(Props(), "sm_100")  # type: ignore[arg-type]


def test_arch_rates_need_a_clock_for_nvidia() -> None:
    assert bench.arch_rates(Props(sm_clock_khz=1980000), "sm_90") is not None  # type: ignore[arg-type]
    assert bench.arch_rates(Props(), "sm_90") is None  # type: ignore[arg-type]
    assert bench.arch_rates(None, "gfx1100") is not None


def test_find_kernels_by_qt_and_rows() -> None:
    m = load_manifest(None)
    spec = bench.find_kernels(m, 44, 2)
    assert spec.name == "gemv_mq4g256v2_r2" and not spec.residual
    assert bench.find_kernels(m, 6, 8).name == "gemv_hfq4g256_r8"
    assert bench.find_kernels(m, 44, 3) is None
