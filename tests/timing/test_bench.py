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


# ---- end to end on the simulated device (hqval.timing.simulate): gate, re-measure, mutants


def _sim_bench(**plan_kw: Any) -> list[Any]:
    from hqval.commands.bench import policy_gates
    from hqval.timing.gemv import Shape
    from hqval.timing.harness import TimingConfig
    from hqval.timing.simulate import SimulatedDevice

    plan = bench.BenchPlan(arch="sim", shapes=[Shape(128, 1024)], modes=["cold"], rows=[8],
                           config=TimingConfig(warmup=2, iterations=40, runs=2), copy=False,
                           read_floor=False, torch=False, gates=policy_gates(None), **plan_kw)
    return bench.run_bench(SimulatedDevice(seed=3), load_manifest(None), plan)


def test_bench_rows_carry_the_policy_gate_and_its_verdict() -> None:
    rows = {r.identity: r for r in _sim_bench()}
    cell = rows["timing_cold[gemv_mq4g256v2_r8@128x1024|sim|sim]"]
    assert cell.status.value == "pass" and cell.tolerance == 1.05
    assert cell.details["gate"]["source"].endswith("paths.decode.timing.cold")
    assert cell.details["verdict"]["verdict"] == "pass"
    assert cell.details["qt"] == 44 and len(cell.details["samples_a"]) == 2


def test_bench_flags_a_slowed_mutant_against_its_twin_and_fails_a_slow_one() -> None:
    rows = {r.identity: r for r in _sim_bench(timing_mutants=(16, 64))}
    killed = rows["timing_mutant_cold[gemv_mq4g256v2_r8+slow16@128x1024|sim|sim]"]
    assert killed.status.value == "pass" and "killed" in killed.message
    assert killed.measured is not None and killed.measured > 1.03
    # +slow64 is ~25% slower than qt=6 in the model: the within-run gate must fail it
    slow = rows["timing_cold[gemv_mq4g256v2_r8+slow64@128x1024|sim|sim]"]
    assert slow.status.value == "fail" and slow.details["mutant_of"] == "gemv_mq4g256v2_r8"


def test_bench_refuses_a_candidate_without_a_gate() -> None:
    from hqval.timing.gemv import Shape
    from hqval.timing.harness import TimingConfig
    from hqval.timing.simulate import SimulatedDevice

    plan = bench.BenchPlan(arch="sim", shapes=[Shape(128, 1024)], modes=["cold"], rows=[8],
                           config=TimingConfig(warmup=2, iterations=40, runs=2), copy=False,
                           read_floor=False, torch=False, gates=lambda spec, mode: None)
    with pytest.raises(NotImplementedError, match=r"policy\.yaml"):
        bench.run_bench(SimulatedDevice(), load_manifest(None), plan)


def _aa_after_self_vs_other(prime: int) -> float:
    """Median of the A/A arm's samples that follow the other arm over those that follow
    its own (hot, unprimed: ABBA's odd A samples follow B), on the simulated device with a
    3% cost for a launch after another weight buffer."""
    import numpy as np

    from hqval.timing.gemv import Shape, setup_gemv
    from hqval.timing.harness import TimingConfig, time_pair
    from hqval.timing.simulate import SimulatedDevice

    dev = SimulatedDevice(seed=1, jitter=0.002, outlier_rate=0.0, displaced=0.03)
    spec = bench.find_kernels(load_manifest(None), 6, 8)
    a = setup_gemv(dev, spec, Shape(64, 1024), "hot", 1 << 20)
    b = setup_gemv(dev, spec, Shape(64, 1024), "hot", 1 << 20)
    out = time_pair(dev, a.arm, b.arm, TimingConfig(warmup=2, iterations=40, runs=1,
                                                    prime=prime, copy_per_run=True),
                    dev.queue_filler())
    s = np.asarray(out.runs_a[0])
    return float(np.median(s[1::2]) / np.median(s[0::2]))


def test_hot_primer_puts_every_sample_in_one_cache_state() -> None:
    # unprimed: two modes 3% apart (what the H200 showed at 17408x5120, 3-4%)
    assert _aa_after_self_vs_other(0) == pytest.approx(1.03, abs=0.005)
    assert _aa_after_self_vs_other(1) == pytest.approx(1.0, abs=0.005)


def test_bench_hot_cells_are_primed_and_cold_cells_are_not() -> None:
    from hqval.timing.harness import TimingConfig

    hot = bench.mode_config(TimingConfig(), "hot")
    cold = bench.mode_config(TimingConfig(prime=1, copy_per_run=True), "cold")
    assert hot.prime == 1 and hot.copy_per_run
    assert cold.prime == 0 and not cold.copy_per_run


def test_chain_mutant_small_amount_survives_large_is_killed() -> None:
    rows = {r.identity: r for r in _sim_bench(timing_mutants=("chain1", "chain64"))}
    small = rows["timing_mutant_cold[gemv_mq4g256v2_r8+chain1@128x1024|sim|sim]"]
    big = rows["timing_mutant_cold[gemv_mq4g256v2_r8+chain64@128x1024|sim|sim]"]
    # +0.1% in the model: the gate must not call it slower than change_max (1%)
    assert small.status.value != "pass" and "killed" not in small.message
    assert big.status.value == "pass" and "killed" in big.message


# ---- deadlines: a cell that does not finish in time is an infrastructure row, the run goes on


def test_a_cell_past_its_deadline_is_an_infrastructure_row_and_the_bench_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from hqval import deadline
    from hqval.commands.bench import policy_gates
    from hqval.timing.gemv import Shape
    from hqval.timing.harness import TimingConfig
    from hqval.timing.simulate import SimulatedDevice

    class Stalls(SimulatedDevice):
        """Once its buffers are verified, each launch of qt=44's kernel takes 1 s of the
        deadlines' clock: its timing cell misses 30 s."""

        qt44 = 0

        def launch(self, program: Any, grid: Any, block: Any, args: Any) -> Any:
            if program.spec.qt == 44:
                self.qt44 += 1
                if self.qt44 > 32:  # its 32 cold copies' verifying launches
                    skew[0] += 1.0
            return super().launch(program, grid, block, args)

    skew = [0.0]
    monkeypatch.setattr(deadline, "_now", lambda: time.monotonic() + skew[0])
    plan = bench.BenchPlan(arch="sim", shapes=[Shape(128, 1024)], modes=["cold"], rows=[8],
                           config=TimingConfig(warmup=2, iterations=40, runs=2), copy=False,
                           read_floor=False, torch=False, gates=policy_gates(None),
                           deadline_s=30.0)
    manifest = load_manifest(None)
    rows = {r.identity: r for r in bench.run_bench(Stalls(seed=3), manifest, plan)}
    assert list(rows) == bench.planned_cells(manifest, plan, "sim")  # every cell has a row
    stuck = rows["timing_cold[gemv_mq4g256v2_r8@128x1024|sim|sim]"]
    assert stuck.status.value == "error" and stuck.details["infrastructure"] is True
    assert "timing_cold[gemv_mq4g256v2_r8@128x1024|sim|sim]" in stuck.message
    assert "deadline of 30 s" in stuck.message
    # the cell after it was timed
    assert rows["timing_cold[gemv_mq4c_r8@128x1024|sim|sim]"].status.value == "pass"
    # Must say no to nothing else: the same plan on a device that does not stall
    clean = bench.run_bench(SimulatedDevice(seed=3), manifest, plan)
    assert not any(r.details.get("infrastructure") for r in clean)


def test_a_device_that_never_drains_ends_the_bench_with_a_row_for_every_cell() -> None:
    from hqval.commands.bench import policy_gates
    from hqval.deadline import DeadlineExceeded
    from hqval.timing.gemv import Shape
    from hqval.timing.harness import TimingConfig
    from hqval.timing.simulate import SimulatedDevice

    class Wedged(SimulatedDevice):
        """Its first synchronisation after the copies never completes."""

        def synchronize(self) -> None:
            assert self.deadline is not None
            raise self.deadline.error("synchronising the device")

    plan = bench.BenchPlan(arch="sim", shapes=[Shape(128, 1024), Shape(256, 1024)],
                           modes=["cold"], rows=[8],
                           config=TimingConfig(warmup=2, iterations=40, runs=2), copy=False,
                           read_floor=False, torch=False, gates=policy_gates(None),
                           deadline_s=30.0)
    manifest = load_manifest(None)
    rows = bench.run_bench(Wedged(seed=3), manifest, plan)
    assert [r.identity for r in rows] == bench.planned_cells(manifest, plan, "sim")
    assert all(r.status.value == "error" and r.details["infrastructure"] for r in rows)
    assert "did not drain" in rows[-1].message
    assert issubclass(bench.DeviceStuck, DeadlineExceeded)
