"""Cost model arithmetic, and the emulator-measured slope on a real kernel."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from hqval.matrix import Latencies, load_arches, load_devices, load_latencies
from hqval.schema import SchemaError
from hqval.timing import cost
from hqval.timing.gemv import Shape, gemv_bytes

from ..conftest import clang19_occupancy  # type: ignore[import-not-found]

LAT = Latencies("rdna2", valu=5.0, trans=10.0, salu=2.0, smem=20.0, lds=20.0, vmem=320.0)


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
    loop = cost.LoopBody((cost.LoopOp("vmem", ("v1",), ("v2", "v3")),
                          cost.LoopOp("wait", waits=(("vm", 0),)),
                          cost.LoopOp("valu", ("v4",), ("v1", "v4"))), 4.0)
    with_loop = dataclasses.replace(_cost("b", 2.0), loop=loop, vgprs=61)
    cost.save_costs([_cost("a", 1.0), with_loop], str(p))
    back = cost.load_costs(str(p))
    assert back["b"].per_group_row["VALU"] == 2.0
    assert back["b"].loop == loop and back["b"].vgprs == 61
    assert back["a"].loop is None  # a costs file without the loop: the term is missing
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


def _op(kind: str, dst: str = "", *src: str) -> cost.LoopOp:
    return cost.LoopOp(kind, (dst,) if dst else (), tuple(src))


def test_chain_walk_waits_for_sources_and_counters() -> None:
    # load -> s_waitcnt vmcnt(0) -> two dependent VALU: 320 + 5 + 1 cycles an iteration
    # (the next iteration's load does not depend on them and issues one cycle later).
    dependent = (_op("vmem", "v1", "v8"), cost.LoopOp("wait", waits=(("vm", 0),)),
                 _op("valu", "v2", "v1"), _op("valu", "v3", "v2"))
    assert cost.chain_cycles(dependent, LAT) == 320 + 5 + 1
    # Must say no: the same four instructions with the second VALU independent of the
    # first are shorter, and with no wait and no use of the load, one cycle each.
    independent = (*dependent[:3], _op("valu", "v3", "v9"))
    assert cost.chain_cycles(independent, LAT) == 320 + 1 + 1
    free = (_op("vmem", "v1", "v8"), _op("valu", "v2", "v7"), _op("valu", "v3", "v9"))
    assert cost.chain_cycles(free, LAT) == 3
    # vmcnt(1) lets the newest load stay in flight: it waits for the older one only.
    two = (_op("vmem", "v1", "v8"), _op("salu", "s1", "s1"), _op("vmem", "v4", "v8"),
           cost.LoopOp("wait", waits=(("vm", 1),)), _op("valu", "v2", "v1"))
    assert cost.chain_cycles(two, LAT) == pytest.approx(320 - 2 + 2 + 1)
    # A scalar load of the weights costs a vector-memory latency, a scalar-cache hit 20.
    hdr = (_op("smem_w", "s4", "s2"), cost.LoopOp("wait", waits=(("lgkm", 0),)),
           _op("valu", "v2", "s4"))
    hit = (_op("smem", "s4", "s2"), *hdr[1:])
    assert cost.chain_cycles(hdr, LAT) == 320 + 1 and cost.chain_cycles(hit, LAT) == 20 + 1
    # The weights' own latency applies to loads of W only (x keeps vmem).
    assert cost.chain_cycles(hdr, LAT, w_cycles=500) == 500 + 1
    assert cost.chain_cycles(dependent, LAT, w_cycles=500) == 320 + 5 + 1


def test_vgpr_bank_stall_counts_operands_read_from_one_bank() -> None:
    # [regbank]'s example: V_FMA_F32 V111 = V0 + V4 * V8 reads three dwords of bank 0
    fma = _op("valu", "v111", "v0", "v4", "v8")
    assert cost.bank_stall(fma, 4) == 2
    assert cost.bank_stall(_op("valu", "v3", "v1", "v5", "v2"), 4) == 1  # v1, v5: bank 1
    # Must say no: three banks; one register read twice (one dword); SGPRs and vcc (not
    # VGPR banks); a load; and a family whose bank count no source gives
    assert cost.bank_stall(_op("valu", "v3", "v0", "v5", "v10"), 4) == 0
    assert cost.bank_stall(_op("valu", "v3", "v4", "v4", "s4", "s5", "vcc"), 4) == 0
    assert cost.bank_stall(_op("vmem", "v3", "v0", "v4"), 4) == 0
    assert cost.bank_stall(fma, None) == 0
    # An accumulating fma reads its destination (loop_op puts it among the sources).
    from hqval.isa import Instruction

    acc = cost.loop_op(Instruction.of(0, "v_fmac_f32_e32", "v40, v44, v48"), frozenset())
    assert acc is not None and cost.bank_stall(acc, 4) == 2  # v40, v44, v48: bank 0
    # v44 bank 0, v45 and the accumulator v41 bank 1: 1, where the sources alone give 0
    acc1 = cost.loop_op(Instruction.of(0, "v_fmac_f32_e32", "v41, v44, v45"), frozenset())
    assert acc1 is not None and cost.bank_stall(acc1, 4) == 1
    assert cost.bank_stall(_op("valu", "v41", "v44", "v45"), 4) == 0
    # The walk issues after the stall: 1 + 2 cycles, then 1 for the next op.
    banked = dataclasses.replace(LAT, vgpr_banks=4)
    loop = (fma, _op("valu", "v2", "v9"))
    assert cost.chain_cycles(loop, banked) == 4 and cost.chain_cycles(loop, LAT) == 2


def test_bank_stalls_hold_the_valu_pipe_in_the_issue_term() -> None:
    body = cost.LoopBody((_op("valu", "v111", "v0", "v4", "v8"), _op("valu", "v2", "v9")), 2.0)
    c = dataclasses.replace(_cost("k", valu=1.0), arch="gfx1030", loop=body, vgprs=32,
                            block=32)
    arch = load_arches()["gfx1030"]
    rates = cost.ArchRates.from_arch(arch)
    assert rates.latencies.vgpr_banks == 4
    assert cost.bank_stalls_per_group_row(c, rates.latencies) == 1.0  # 2 cycles / 2 rows
    shape = Shape(4096, 5120)
    p = cost.predict(c, shape, rates, "hot")
    group_rows = shape.M * shape.K // 256
    # VMEM (3) is the busiest pipe here, VALU + stalls 2; with VALU above it, VALU + stalls
    assert p.bank_stalls == 1.0
    assert p.t_issue_us == pytest.approx(group_rows * 3.0 / rates.issue_per_s * 1e6)
    busy = dataclasses.replace(c, per_group_row={**c.per_group_row, "VALU": 60.0})
    p = cost.predict(busy, shape, rates, "hot")
    assert p.t_issue_us == pytest.approx(group_rows * 61.0 / rates.issue_per_s * 1e6)
    # Must say no: a family with no bank count (rdna3) adds nothing
    rates3 = cost.ArchRates.from_arch(load_arches()["gfx1100"])
    assert rates3.latencies.vgpr_banks is None
    p3 = cost.predict(busy, shape, rates3, "hot")
    assert p3.bank_stalls == 0.0
    assert p3.t_issue_us == pytest.approx(group_rows * 60.0 / rates3.issue_per_s * 1e6)


def test_weights_latency_follows_where_they_are_read_from() -> None:
    arch = load_arches()["gfx1030"]
    lat = dataclasses.replace(LAT, llc_ns=100.0, vram_ns=200.0)
    rates = cost.ArchRates.from_arch(arch, {"rdna2": lat})
    clk = arch.boost_mhz / 1000.0  # cycles per ns
    assert cost.weights_latency(rates, True) == (pytest.approx(100 * clk), "llc_ns 100 ns")
    assert cost.weights_latency(rates, False) == (pytest.approx(200 * clk), "vram_ns 200 ns")
    # Must say no: without the level's figure the family's vmem applies, and says so.
    bare = cost.ArchRates.from_arch(arch, {"rdna2": LAT})
    assert cost.weights_latency(bare, True) == (320.0, "vmem (no llc_ns for rdna2)")
    # arches.yaml as shipped: RDNA2 has a VRAM figure ([cnc21]) and no Infinity Cache one.
    shipped = load_latencies()["rdna2"]
    assert shipped.vram_ns is not None and shipped.llc_ns is None


def test_loop_op_reads_accumulators_and_waitcnt_forms() -> None:
    from hqval.isa import Instruction

    fmac = cost.loop_op(Instruction.of(0, "v_fmac_f32_e32", "v4, v6, v42"), frozenset())
    assert fmac is not None and fmac.dst == ("v4",) and "v4" in fmac.src
    fma = cost.loop_op(Instruction.of(0, "v_fma_f32", "v4, s18, v42, s19"), frozenset())
    assert fma is not None and "v4" not in fma.src  # the 3-operand form does not read dst
    w = cost.loop_op(Instruction.of(0, "s_waitcnt", "vmcnt(3) lgkmcnt(0)"), frozenset())
    assert w is not None and w.waits == (("vm", 3), ("lgkm", 0))
    g12 = cost.loop_op(Instruction.of(0, "s_wait_loadcnt", "0x2"), frozenset())
    assert g12 is not None and g12.waits == (("vm", 2),)
    assert cost.loop_op(Instruction.of(0, "s_clause", "0x1"), frozenset()) is None
    hdr = cost.loop_op(Instruction.of(8, "s_load_dwordx2", "s[18:19], s[4:5], null"),
                       frozenset({8}))
    assert hdr is not None and hdr.kind == "smem_w" and hdr.dst == ("s18", "s19")
    exp = cost.loop_op(Instruction.of(0, "v_exp_f32_e32", "v1, v2"), frozenset())
    assert exp is not None and exp.kind == "trans"
    # vcc: a compare writes it, a select reads it, a carry chain does both.
    cmp = cost.loop_op(Instruction.of(0, "v_cmp_gt_u32_e32", "vcc_lo, 16, v0"), frozenset())
    sel = cost.loop_op(Instruction.of(0, "v_cndmask_b32_e32", "v1, v2, v3, vcc_lo"), frozenset())
    add = cost.loop_op(Instruction.of(0, "v_add_co_u32", "v1, vcc_lo, 0x1000, v1"), frozenset())
    adc = cost.loop_op(Instruction.of(0, "v_add_co_ci_u32_e32", "v2, vcc_lo, 0, v2, vcc_lo"),
                       frozenset())
    assert cmp is not None and cmp.dst == ("vcc",) and "vcc" not in cmp.src
    assert sel is not None and sel.dst == ("v1",) and "vcc" in sel.src
    assert add is not None and "vcc" in add.dst and "vcc" not in add.src
    assert adc is not None and "vcc" in adc.dst and "vcc" in adc.src


def test_loop_body_refuses_a_loop_that_is_not_the_group_loop() -> None:
    from hqval.isa import Instruction, KernelCode
    from hqval.manifest import KernelSpec

    spec = KernelSpec(name="k", source=Path("k.hip"), symbol="k", qt=6, kind="gemv")
    body = [Instruction.of(4 * i, "v_fma_f32", f"v{i}, v1, v2, v3") for i in range(12)]
    loop = [*body, Instruction.of(48, "s_cbranch_scc1", "", target=0)]
    code = KernelCode("k", "gfx1030", [*loop, Instruction.of(52, "s_endpgm", "")], {})
    # 12 VALU at 3 per group-row: 4 group-rows an iteration.
    lb, why = cost.loop_body(code, spec, {"VALU": 3.0})
    assert lb is not None and lb.group_rows_per_iter == 4.0 and why == ""
    # Must say no: at 5 per group-row the loop is 2.4 group-rows -- not the group loop.
    lb, why = cost.loop_body(code, spec, {"VALU": 5.0})
    assert lb is None and "not the group loop" in why
    no_loop = KernelCode("k", "gfx1030", [*body, Instruction.of(48, "s_endpgm", "")], {})
    assert cost.loop_body(no_loop, spec, {"VALU": 3.0}) == (None, "k: no loop in the code object")


def test_missing_latencies_for_a_family_is_a_clear_error(tmp_path: Path) -> None:
    arch = load_arches()["gfx1030"]
    with pytest.raises(ValueError, match=r"no latencies for family rdna2 \(gfx1030\): add "
                                         r"latencies.rdna2"):
        cost.ArchRates.from_arch(arch, {})
    # A latencies entry without one of its classes is refused by the schema, by name.
    text = (Path(__file__).parents[2] / "matrices" / "arches.yaml").read_text()
    start = text.index("  rdna2:\n    valu")
    line = text.index("    vmem:", start)
    bad = text[:line] + text[text.index("\n", line) + 1:]
    (tmp_path / "arches.yaml").write_text(bad)
    with pytest.raises(SchemaError, match="vmem"):
        load_latencies(tmp_path / "arches.yaml")
    # A bank count that is not a positive integer: refused, by name.
    (tmp_path / "arches.yaml").write_text(text.replace("vgpr_banks: 4", "vgpr_banks: 0", 1))
    with pytest.raises(SchemaError, match="vgpr_banks"):
        load_latencies(tmp_path / "arches.yaml")
    # A family that is not one: refused too.
    (tmp_path / "arches.yaml").write_text(text.replace("  rdna2:\n    valu", "  rdna9:\n    valu"))
    with pytest.raises(SchemaError, match="rdna9"):
        load_latencies(tmp_path / "arches.yaml")


def test_predict_without_latencies_exits_2(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from hqval import matrix
    from hqval.cli import main

    monkeypatch.setattr(matrix, "load_latencies", lambda path=None: {})
    assert main(["bench", "--predict", "--arch", "gfx1030", "--shape", "4096x5120"]) == 2
    assert "no latencies for family rdna2" in capsys.readouterr().err


def test_device_run_with_costs_without_latencies_exits_2_before_the_device(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    from hqval import matrix
    from hqval.cli import main

    costs = tmp_path / "c.json"
    cost.save_costs([_cost("a", 1.0)], str(costs))
    monkeypatch.setattr(matrix, "load_latencies", lambda path=None: {})
    assert main(["bench", "--backend", "hip", "--arch", "gfx1030", "--costs", str(costs)]) == 2
    err = capsys.readouterr().err
    assert "no latencies for family rdna2" in err and "backend" not in err


def test_latency_term_is_littles_law_over_a_simd() -> None:
    rates = cost.ArchRates.from_arch(load_arches()["gfx1030"], {"rdna2": LAT})
    loop = cost.LoopBody((_op("vmem", "v1", "v8"), cost.LoopOp("wait", waits=(("vm", 0),)),
                          _op("valu", "v2", "v1")), 4.0)
    c = dataclasses.replace(_cost("k", 30.0), loop=loop, vgprs=64)  # 16 waves on gfx1030
    chain = 320 + 1
    # 160 rows = one wave per SIMD: nothing overlaps, latency = iterations x chain.
    t = cost.predict(c, Shape(160, 4096), rates, "hot").latency
    assert t is not None and t.concurrent == 1.0 and t.iterations_per_wave == 4.0
    assert t.t_us == pytest.approx(4 * chain / rates.clock_hz * 1e6)
    # 160 x 32 rows = 32 waves a SIMD, 16 held at once: two waves' chains in sequence.
    t = cost.predict(c, Shape(160 * 32, 4096), rates, "hot").latency
    assert t is not None and t.occupancy == 16 and t.concurrent == 16
    assert t.t_us == pytest.approx(4 * chain * 2 / rates.clock_hz * 1e6)
    # NVIDIA: not modelled, and the prediction says so.
    rd = cost.ArchRates.from_device(next(iter(load_devices().values())), 1980.0)
    p = cost.predict(c, Shape(160, 4096), rd, "hot")
    assert p.latency is None and "not modelled" in p.latency_missing


@pytest.fixture(scope="module")
def real_costs() -> dict[str, cost.KernelCost]:
    """The suite's qt=6 R=1 kernel, its qt=44 twin, and the qt=6 kernel with two extra
    dependent fmas a group-row on the accumulator chain (the HQ_TIMING_EXTRA mutant), all
    compiled for gfx1030 and counted on the emulator."""
    from hqval.manifest import load_manifest

    m = load_manifest(None)
    v1 = m.by_name("gemv_hfq4g256_r1")
    extra = dataclasses.replace(v1, name="gemv_hfq4g256_r1_extra2",
                                defines=(*v1.defines, ("HQ_TIMING_EXTRA", "2")))
    return {s.name: cost.measure_cost(s, "gfx1030")
            for s in (v1, m.by_name("gemv_mq4g256v2_r1"), extra)}


@pytest.mark.slow
def test_longer_chain_is_slower_when_few_waves_hide_it(
        real_costs: dict[str, cost.KernelCost]) -> None:
    rates = cost.ArchRates.from_arch(load_arches()["gfx1030"])
    v1, v2 = real_costs["gemv_hfq4g256_r1"], real_costs["gemv_mq4g256v2_r1"]
    extra = real_costs["gemv_hfq4g256_r1_extra2"]
    lat = rates.latencies
    assert v1.loop is not None and extra.loop is not None and v2.loop is not None
    assert v1.loop.group_rows_per_iter == 4.0  # HQ_GEMV_UNROLL groups an iteration
    c1, ce = cost.chain_cycles(v1.loop.ops, lat), cost.chain_cycles(extra.loop.ops, lat)
    # 2 dependent fmas x 4 groups on the one accumulator chain: at least 8 VALU latencies
    # more an iteration; v2's header select and converts lengthen it too.
    assert ce - c1 >= 8 * lat.valu
    assert cost.chain_cycles(v2.loop.ops, lat) > c1
    # 160 rows: one wave per SIMD, latency-bound, the longer chain predicted slower by it.
    few = Shape(160, 5120)
    p1, pe = cost.predict(v1, few, rates, "hot"), cost.predict(extra, few, rates, "hot")
    assert p1.bound == "latency" and pe.bound == "latency"
    assert pe.t_us / p1.t_us == pytest.approx(ce / c1)
    r = cost.predict_ratio(v1, v2, few, rates, "hot")
    assert r.exposed and r.v2.bound == "latency"


@pytest.mark.slow
def test_latency_does_not_bind_when_enough_waves_hide_it(
        real_costs: dict[str, cost.KernelCost]) -> None:
    # Section 6's 4096x5120 at R=1: 25.6 waves a SIMD, 16 held (46 VGPRs, RDNA2's 16
    # slots): the chains overlap and the VALU issue binds, as before the term existed.
    rates = cost.ArchRates.from_arch(load_arches()["gfx1030"])
    v1, extra = real_costs["gemv_hfq4g256_r1"], real_costs["gemv_hfq4g256_r1_extra2"]
    for c in (v1, extra):
        p = cost.predict(c, Shape(4096, 5120), rates, "hot")
        assert p.latency is not None and p.latency.concurrent == 16
        assert p.bound == "issue" and p.t_latency_us < p.t_issue_us
    d = cost.predict_ratio(v1, real_costs["gemv_mq4g256v2_r1"], Shape(4096, 5120), rates,
                           "hot").to_dict()
    assert d["predicted_bound_a"] == "issue" and d["predicted_latency_a"]["occupancy"] == 16
    assert d["predicted_us_terms_b"]["latency"] < d["predicted_us_terms_b"]["issue"]


_HEAD = 'extern "C" __attribute__((global, amdgpu_flat_work_group_size(1, 32))) void k(float* p)'
OCC_PROBES = {  # what limits the kernel's waves per SIMD
    "slots": _HEAD + " { p[__builtin_amdgcn_workitem_id_x()] = 1.0f; }",
    "sgprs": _HEAD + ' { asm volatile("" ::: "s100", "s101"); '
                     "p[__builtin_amdgcn_workitem_id_x()] = 1.0f; }",
    "vgprs": _HEAD + ' { asm volatile("" ::: "v95"); p[__builtin_amdgcn_workitem_id_x()] = 1.0f; }',
    "lds": _HEAD + " { __attribute__((shared)) float t[4096]; "
                   "unsigned i = __builtin_amdgcn_workitem_id_x(); t[i] = p[i]; "
                   "__builtin_amdgcn_s_barrier(); p[i] = t[(i + 1) & 4095]; }",
}


@pytest.mark.skipif(shutil.which("clang-19") is None, reason="needs clang-19")
@pytest.mark.parametrize("arch", ["gfx1010", "gfx1030", "gfx1100"])
@pytest.mark.parametrize("probe", OCC_PROBES)
def test_occupancy_is_the_compilers(arch: str, probe: str, tmp_path: Path) -> None:
    """The latency term's waves per SIMD, from a code object's metadata (VGPRs, LDS; SGPRs
    do not limit on gfx10+), is clang-19's own occupancy remark for it."""
    from hqval.isa import analyze

    want, _, co = clang19_occupancy(arch, OCC_PROBES[probe] + "\n", tmp_path)
    notes = analyze(co, arch)["k"].notes
    c = dataclasses.replace(_cost("k", 1.0), vgprs=int(notes[".vgpr_count"]),
                            lds_bytes=int(notes[".group_segment_fixed_size"]))
    rates = cost.ArchRates.from_arch(load_arches()[arch])
    assert cost.occupancy(c, rates) == want
    if probe == "lds":  # must say no: without its LDS the same kernel holds more waves
        assert cost.occupancy(dataclasses.replace(c, lds_bytes=0), rates) > want
