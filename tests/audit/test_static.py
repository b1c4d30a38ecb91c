"""hqval.audit: notes, disassembly and the audit rules on real code objects (the suite's
kernels, its mutants, and small kernels written here to break one rule each)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hqval.audit import analyze, audit_kernel, audit_matrix, occupancy, summary
from hqval.codeobject import Instruction, elf_symbols, parse_lines, symbol_lines
from hqval.manifest import KernelSpec, load_manifest, load_mutants
from hqval.matrix import load_arches
from hqval.result import Row, Status
from hqval.toolchain import compile_kernel


def parse_disassembly(text: str) -> dict[str, list[Instruction]]:
    return {k: parse_lines(v) for k, v in symbol_lines(text).items()}


pytestmark = pytest.mark.skipif(
    not (shutil.which("clang-19") and shutil.which("llvm-objdump-19")),
    reason="needs clang-19 and llvm-objdump-19 (apt-get install clang-19 llvm-19)")

PRELUDE = Path(__file__).resolve().parents[2] / "kernels" / "include"
ARCHES = load_arches()
REAL = load_manifest()
MUTANTS = load_mutants()


def audit(spec: KernelSpec, arch: str, cache: Path) -> dict[str, Row]:
    res = compile_kernel(spec, arch, cache)
    assert res.ok and res.code_object is not None, res.message
    base = None
    if spec.baseline:
        bspec = REAL.by_name(spec.baseline)
        bres = compile_kernel(bspec, arch, cache)
        assert bres.code_object is not None
        base = analyze(bres.code_object, arch)[bspec.symbol]
    code = analyze(res.code_object, arch)[spec.symbol]
    return {r.check.removeprefix("audit_"): r for r in
            audit_kernel(spec, ARCHES[arch], code, base)}


@pytest.mark.parametrize("arch", ["gfx1010", "gfx1100", "gfx1201"])
@pytest.mark.parametrize("name", ["gemv_mq4g256v2_r1", "gemv_mq4g256v2_r4", "gemv_mq4c_r2",
                                  "gemv_mq4g256v2_qkv_r1"])
def test_real_gemv_passes_every_rule(name: str, arch: str, cache: Path) -> None:
    rows = audit(REAL.by_name(name), arch, cache)
    assert set(rows) == {"header_scalar", "no_spill", "vgpr_budget", "v2_valu_delta", "wmma",
                         "payload_offset"}
    assert {k: r.status for k, r in rows.items() if not r.status.ok} == {}
    assert rows["header_scalar"].status is Status.PASS
    assert rows["header_scalar"].details["loop_scalar_loads"]
    assert rows["wmma"].status is Status.UNSUPPORTED
    delta = rows["v2_valu_delta"]
    assert delta.measured is not None and delta.measured <= 3.0
    assert rows["payload_offset"].details["offsets_mod_group"] == [8]


@pytest.mark.parametrize(("name", "arch"), [
    ("gemm_mq4g256v2_wmma_gfx11", "gfx1100"), ("gemm_mq4g256v2_wmma_gfx11_bt8", "gfx1151"),
    ("gemm_mq4g256v2_wmma_gfx12", "gfx1201"), ("gemm_mq4c_wmma_gfx12", "gfx1200")])
def test_real_gemm_passes_every_rule(name: str, arch: str, cache: Path) -> None:
    rows = audit(REAL.by_name(name), arch, cache)
    assert {k: r.status for k, r in rows.items() if r.status is not Status.PASS} == {}
    gen = "gfx11" if "gfx11" in name else "gfx12"
    assert rows["wmma"].details["required"] == gen
    assert rows["wmma"].details["wmma_in_group_loop"] >= 16
    assert rows["payload_offset"].details["offsets_mod_group"][0] == 8


def test_v2_cost_is_one_select_per_group_row_on_gfx1100(cache: Path) -> None:
    rows = audit(REAL.by_name("gemv_mq4g256v2_r8"), "gfx1100", cache)
    d = rows["v2_valu_delta"]
    assert d.details["group_rows_per_iteration"] == 32  # 4 groups in flight x 8 rows
    assert d.measured is not None and 0.0 < d.measured <= 3.0
    assert "v_cndmask_b32_e32" in d.details["delta_histogram"]


@pytest.mark.parametrize("arch", ["gfx1010", "gfx1030", "gfx1100", "gfx1151", "gfx1201"])
def test_lane_dependent_header_address_fails_rule_a(arch: str, cache: Path) -> None:
    rows = audit(MUTANTS.by_name("gemv_mut_lane_header_address_r1"), arch, cache)
    a = rows["header_scalar"]
    assert a.status is Status.FAIL
    assert a.details["rule"] == "a"
    assert "vector" in a.message


@pytest.mark.parametrize(("mutant", "rule"), [
    ("gemv_mut_mq4c_payload_at4_r1", "payload_offset"),
    ("gemv_mut_v2_payload_at4_r2", "payload_offset"),
    ("gemv_mut_mq4c_stride132_r1", "payload_offset"),
    ("gemv_mut_extra_work_r1", "v2_valu_delta"),
])
def test_mutants_fail_their_audit_rule(mutant: str, rule: str, cache: Path) -> None:
    rows = audit(MUTANTS.by_name(mutant), "gfx1100", cache)
    assert rows[rule].status is Status.FAIL, rows[rule].message


def test_wmma_of_the_wrong_generation_fails_rule_e(cache: Path) -> None:
    spec = replace(REAL.by_name("gemm_mq4g256v2_wmma_gfx11"), requires="wmma_gfx12")
    res = compile_kernel(REAL.by_name("gemm_mq4g256v2_wmma_gfx11"), "gfx1100", cache)
    assert res.code_object is not None
    code = analyze(res.code_object, "gfx1100")[spec.symbol]
    rows = {r.check: r for r in audit_kernel(spec, ARCHES["gfx1100"], code)}
    e = rows["audit_wmma"]
    assert e.status is Status.FAIL and "gfx11" in e.message
    # A GEMV is not a prefill kernel: no v_wmma is expected of it.
    gemv = replace(REAL.by_name("gemv_hfq4g256_r1"), kind="gemm", requires="wmma_gfx11")
    res = compile_kernel(gemv, "gfx1100", cache)
    assert res.code_object is not None
    code = analyze(res.code_object, "gfx1100")[gemv.symbol]
    rows = {r.check: r for r in audit_kernel(gemv, ARCHES["gfx1100"], code)}
    assert rows["audit_wmma"].status is Status.FAIL
    assert rows["audit_wmma"].message == "no v_wmma instruction"


SCRATCH = """\
#include "hqval_prelude.h"
HQ_GLOBAL void BOUNDS scratchy(const unsigned char* W, const float* x, float* y, int M, int K) {
    float a[96];
    for (int i = 0; i < 96; ++i) a[i] = x[i * M];
    y[hq_lane()] = a[(K + hq_lane()) % 96] + a[W[0] % 96];
}
"""


def tiny(tmp_path: Path, bounds: str) -> KernelSpec:
    (tmp_path / "s.hip").write_text(SCRATCH.replace("BOUNDS", bounds))
    return KernelSpec(name="scratchy", source=tmp_path / "s.hip", symbol="scratchy", qt=44,
                      kind="gemv", include_dirs=(PRELUDE,))


def test_scratch_fails_rule_b_and_missing_launch_bounds_fail_rule_c(
        tmp_path: Path, cache: Path) -> None:
    spec = tiny(tmp_path, "")
    res = compile_kernel(spec, "gfx1100", cache)
    assert res.ok and res.code_object is not None
    code = analyze(res.code_object, "gfx1100")["scratchy"]
    rows = {r.check: r for r in audit_kernel(spec, ARCHES["gfx1100"], code)}
    b = rows["audit_no_spill"]
    assert b.status is Status.FAIL
    assert b.details[".private_segment_fixed_size"] > 0
    c = rows["audit_vgpr_budget"]
    assert c.status is Status.FAIL and "launch bounds 1024 != block 32" in c.message
    # The same kernel with the ABI's launch bounds passes rule (c).
    (tmp_path / "b").mkdir()
    spec32 = tiny(tmp_path / "b", "HQ_LAUNCH_BOUNDS(32)")
    res32 = compile_kernel(spec32, "gfx1100", cache)
    assert res32.code_object is not None
    code32 = analyze(res32.code_object, "gfx1100")["scratchy"]
    rows32 = {r.check: r for r in audit_kernel(spec32, ARCHES["gfx1100"], code32)}
    assert rows32["audit_vgpr_budget"].status is Status.PASS


def test_occupancy_follows_the_vgpr_file() -> None:
    # gfx1010: 1024 VGPRs, granule 8, at most 20 waves; gfx1100: 1536, granule 24, 16 waves.
    assert occupancy(ARCHES["gfx1010"], 46) == 20
    assert occupancy(ARCHES["gfx1010"], 128) == 8
    assert occupancy(ARCHES["gfx1100"], 138) == 10   # 144 allocated
    assert occupancy(ARCHES["gfx1102"], 138) == 7    # 1024-VGPR part, granule 16
    assert occupancy(ARCHES["gfx1201"], 24) == 16
    # RDNA2 has 16 wave slots per SIMD, not RDNA1's 20 (clang-19's occupancy remark).
    assert occupancy(ARCHES["gfx1030"], 46) == 16


def test_the_vgpr_budget_splits_the_file_among_a_workgroups_waves() -> None:
    """``vgpr_budget`` (the one bound rule (c) and the judge use): a workgroup's wave32
    waves share the WGP's 2 SIMDs, each gets its share of the VGPR file rounded down to
    the granule, at most 256."""
    from hqval.audit import MAX_VGPRS_WAVE32, vgpr_budget

    assert vgpr_budget(ARCHES["gfx1010"], 32) == MAX_VGPRS_WAVE32 == 256
    assert vgpr_budget(ARCHES["gfx1010"], 128) == 256   # 2 waves per SIMD: 512, capped
    assert vgpr_budget(ARCHES["gfx1010"], 1024) == 64   # 16 waves per SIMD of 1024
    assert vgpr_budget(ARCHES["gfx1100"], 1024) == 96   # 1536 / 16, granule 24
    assert vgpr_budget(ARCHES["gfx1100"], 480) == 192   # 15 waves: 8 per SIMD
    assert vgpr_budget(ARCHES["gfx1102"], 352) == 160   # 1024 / 6 = 170, granule 16
    assert vgpr_budget(ARCHES["gfx1100"], 1024, 64) == 192  # wave64: 8 per SIMD
    for flat, wave in ((0, 32), (32, 0), (-64, 32)):
        with pytest.raises(ValueError, match="at least one"):
            vgpr_budget(ARCHES["gfx1100"], flat, wave)


def test_rule_c_states_the_vgpr_budget_of_its_launch_bounds(tmp_path: Path,
                                                            cache: Path) -> None:
    """Rule (c)'s tolerance is ``vgpr_budget`` of the object's launch bounds: a real
    kernel of 32 threads and the same kernel built for 1024 (64 VGPRs on gfx1010, 96 on
    gfx1100), and one without launch bounds, which fails for 1024 != its block 32."""
    from hqval.audit import vgpr_budget

    (tmp_path / "wide").mkdir()
    wide = replace(tiny(tmp_path / "wide", "HQ_LAUNCH_BOUNDS(1024)"), block=1024)
    cases = [(REAL.by_name("gemv_mq4g256v2_r1"), 32, Status.PASS, (256, 256)),
             (wide, 1024, Status.PASS, (64, 96)), (tiny(tmp_path, ""), 1024, Status.FAIL,
                                                   (64, 96))]
    for spec, flat, status, budgets in cases:
        for arch, budget in zip(("gfx1010", "gfx1100"), budgets, strict=True):
            c = audit_row(spec, arch, cache, "audit_vgpr_budget")
            assert c.status is status, (spec.name, arch, c.message)
            assert c.details["max_flat_workgroup_size"] == flat
            assert c.tolerance == budget == vgpr_budget(ARCHES[arch], flat), (spec.name, arch)


def audit_row(spec: KernelSpec, arch: str, cache: Path, check: str) -> Row:
    res = compile_kernel(spec, arch, cache)
    assert res.code_object is not None, res.message
    code = analyze(res.code_object, arch)[spec.symbol]
    return next(r for r in audit_kernel(spec, ARCHES[arch], code) if r.check == check)


def test_notes_symbols_and_summary_of_a_real_object(cache: Path) -> None:
    spec = REAL.by_name("gemv_mq4g256v2_r2")
    res = compile_kernel(spec, "gfx1151", cache)
    assert res.code_object is not None
    syms = elf_symbols(res.code_object.read_bytes())
    assert {"gemv_mq4g256v2_r2", "gemv_mq4g256v2_r2.kd", "gemv_hfq4g256_r1"} <= syms
    kernels = analyze(res.code_object, "gfx1151")
    s = summary(kernels["gemv_mq4g256v2_r2"], ARCHES["gfx1151"])
    assert s["wave"] == 32 and s["vgpr"] > 0 and s["scratch"] == 0
    assert s["classes"]["smem"] > 0 and s["classes"]["vmem"] > 0
    assert s["loop_classes"]["valu"] > 0


def test_parse_disassembly_loops_and_dual_issue() -> None:
    text = """\
0000000000001000 <k>:
\ts_load_b64 s[2:3], s[0:1], null                          // 000000001000: F4040080 F8000000
\tv_dual_mov_b32 v1, s2 :: v_dual_mov_b32 v2, s3           // 000000001008: CA100002 01020003
\ts_add_i32 s4, s4, 1                                        // 00000000100C: 81048104
\ts_cbranch_scc0 65533                                       // 000000001010: BFA2FFFD <k+0x8>
\ts_endpgm                                                   // 000000001014: BFB00000
"""
    ins = parse_disassembly(text)["k"]
    assert [i.mnemonic for i in ins][:2] == ["s_load_b64", "v_dual_mov_b32"]
    assert ins[3].target == 0x1008 and ins[3].is_branch
    assert Instruction.of(0, "v_dual_mov_b32", "v1, s2 :: v_dual_mov_b32 v2, s3").valu_ops == 2
    assert ins[0].klass == "smem" and ins[2].klass == "salu" and ins[4].klass == "control"


def test_audit_matrix_finds_baselines_and_reports_compile_failures(cache: Path) -> None:
    arch = ARCHES["gfx1030"]
    specs = [REAL.by_name("gemv_mq4c_r1"), MUTANTS.by_name("gemv_mut_lane_header_address_r1")]
    cells = [(s, compile_kernel(s, arch.name, cache)) for s in specs]
    rows = audit_matrix(cells, arch, cache_dir=cache)
    by = {r.identity: r for r in rows}
    assert by["audit_header_scalar[gemv_mq4c_r1|gfx1030|isa]"].status is Status.PASS
    bad = by["audit_header_scalar[gemv_mut_lane_header_address_r1|gfx1030|isa]"]
    assert bad.status is Status.FAIL
    assert bad.details["decided_by"] == "executed" and "lane-dependent" in bad.message
    static = bad.details["static"]  # the static finding, kept as evidence, agrees
    assert static["status"] == "fail"
    assert static["details"]["baseline_vector_loads"] != static["details"]["vector_loads"]


# ---- other styles: the engine-style tree (tests/data/engine_tree) ------------------------

TREE = load_manifest(Path(__file__).resolve().parents[1] / "data" / "engine_tree" / "kernels.yaml")
TREE_MUTANTS = load_mutants(TREE.path.parent / "mutants.yaml")


def tree_audit(spec: KernelSpec, arch: str, cache: Path,
               baseline: KernelSpec | None = None) -> dict[str, Row]:
    res = compile_kernel(spec, arch, cache)
    assert res.ok and res.code_object is not None, res.message
    bspec = baseline or (TREE.by_name(spec.baseline) if spec.baseline else None)
    base = None
    if bspec is not None:
        bres = compile_kernel(bspec, arch, cache)
        assert bres.code_object is not None
        base = analyze(bres.code_object, arch)[bspec.symbol]
    code = analyze(res.code_object, arch)[spec.symbol]
    return {r.check.removeprefix("audit_"): r
            for r in audit_kernel(spec, ARCHES[arch], code, base)}


@pytest.mark.parametrize("arch", ["gfx1010", "gfx1100", "gfx1201"])
def test_correct_kernels_in_another_style_pass_every_rule(arch: str, cache: Path) -> None:
    """HIP-header kernels with +8 folded into base registers, per-lane header loads in
    row-per-lane GEMMs, a block-128 LDS GEMV and a fused QKV with bias arguments: nothing
    fails; a rule that cannot decide says why (only rules that do not apply here)."""
    for spec in TREE.kernels:
        if not spec.applies_to(ARCHES[arch]):
            continue
        rows = tree_audit(spec, arch, cache)
        bad = {k: r.message for k, r in rows.items() if not r.status.ok}
        assert bad == {}, spec.name
        for k, r in rows.items():
            if r.status is Status.UNSUPPORTED:
                # rules that do not apply, and static comparisons the rule refuses: loop
                # bodies of different nests, or a loop holding no W load it can follow
                # (the LDS-staged GEMM reads W through LDS); the executed facts decide those
                assert ("is for qt=44/45" in r.message or "not a v2 format" in r.message
                        or "is for prefill" in r.message or "loop nests" in r.message
                        or "nest" in r.message or "no load of W" in r.message
                        or "no vector load of W" in r.message
                        or "could not be counted" in r.message
                        or "unlike column tilings" in r.message
                        or "cannot follow" in r.message
                        or "is for WMMA prefill kernels" in r.message), (spec.name, k, r.message)


@pytest.mark.parametrize("arch", ["gfx1030", "gfx1100"])
def test_w_traffic_compares_per_group_row_when_a_pass_owns_two_rows(
        arch: str, cache: Path) -> None:
    """A dual-row v2 residual GEMV reads two rows' payload per pass of its group loop, its
    one-row v1 baseline one row's: per pass that is twice the vector W dwords, per
    group-row the same, and its headers come from scalar loads (pass).  Its copy reading
    each header word at a lane-dependent address fails (rule a)."""
    good = tree_audit(TREE.by_name("ew_gemv_mq4g256v2_dualrow_residual"), arch,
                      cache)["header_scalar"]
    assert good.status is Status.PASS, good.message
    assert good.details["group_rows_per_pass"] == 2
    assert good.details["baseline_group_rows_per_pass"] == 1
    bad = tree_audit(TREE_MUTANTS.by_name("ew_mut_gemv_dualrow_lane_header"), arch, cache,
                     baseline=TREE.by_name("ew_gemv_hfq4g256_residual"))["header_scalar"]
    assert bad.status is Status.FAIL and "read per lane" in bad.message, bad.message


def test_unlike_column_tilings_are_not_compared_by_the_static_valu_rule(cache: Path) -> None:
    """A BT=8 GEMM feeds eight WMMAs from each dequantised fragment, its BT=1 v1 baseline
    one: a pass of the BT=8 group loop holds seven tiles' operand addressing more, which is
    no header work (+14 VALU per pass counted so, +0.875 per group-row executed).  The
    static rule says unsupported and why; a GEMM of its baseline's tiling is compared."""
    bt = tree_audit(TREE.by_name("ew_gemm_mq4g256v2_residual_bt8_wmma_gfx11"), "gfx1100",
                    cache)["v2_valu_delta"]
    assert bt.status is Status.UNSUPPORTED, bt.message
    assert "unlike column tilings" in bt.message
    assert bt.details["wmma_per_group_row"] == 8 * bt.details["baseline_wmma_per_group_row"]
    same = tree_audit(TREE.by_name("ew_gemm_mq4g256v2_residual_wmma_gfx11"), "gfx1100",
                      cache)["v2_valu_delta"]
    assert same.status is Status.PASS, same.message


def test_an_offset_folded_into_the_base_counts_as_the_payload_offset(cache: Path) -> None:
    rows = tree_audit(TREE.by_name("ew_gemv_mq4g256v2"), "gfx1201", cache)
    f = rows["payload_offset"]
    assert f.status is Status.PASS
    assert 8 not in f.details["imm_offsets"]  # clang folded the +8 into the address
    assert f.details["offsets_mod_group"][0] == 8
    # the same folding with +4: every payload dword 4 bytes early -> a proven violation
    bad = tree_audit(TREE_MUTANTS.by_name("ew_mut_gemm12_payload_base4"), "gfx1201", cache,
                     TREE.by_name("ew_gemm_hfq4g256_wmma_gfx12"))["payload_offset"]
    assert bad.status is Status.FAIL and "+8" in bad.message and bad.details["evidence"]
    at4 = tree_audit(TREE_MUTANTS.by_name("ew_mut_gemv_mq4c_payload_at4"), "gfx1100", cache,
                     TREE.by_name("ew_gemv_hfq4g256"))["payload_offset"]
    assert at4.status is Status.FAIL and at4.details["evidence"]


def test_row_per_lane_headers_are_compared_with_the_baseline_not_required_scalar(
        cache: Path) -> None:
    spec = TREE.by_name("ew_gemm_mq4g256v2_wmma_gfx12")
    a = tree_audit(spec, "gfx1201", cache)["header_scalar"]
    assert a.status is Status.PASS and a.details["layout"] == "row-per-lane"
    assert not a.details["loop_scalar_loads"]  # per-lane header loads, by design
    # against a "baseline" that reads fewer W dwords (qt=45: one header dword), the same
    # kernel reads more than its baseline: that is the proven per-lane excess
    worse = tree_audit(spec, "gfx1201", cache, TREE.by_name("ew_gemm_mq4cg256_wmma_gfx12"))
    assert worse["header_scalar"].status is Status.FAIL
    assert "more per pass than its v1 baseline" in worse["header_scalar"].message
    # a row-per-wave GEMV of the same tree is held to scalar headers
    g = tree_audit(TREE.by_name("ew_gemv_mq4g256v2_lds128"), "gfx1100", cache)["header_scalar"]
    assert g.status is Status.PASS and g.details["layout"] == "row-per-wave"


def _code(body: str, name: str = "k") -> Any:
    from hqval.audit import KernelCode

    lines = [f"0000000000001000 <{name}>:"]
    addr = 0x1000
    labels: dict[str, int] = {}
    parsed = []
    for raw in body.strip().splitlines():
        raw = raw.strip()
        if raw.endswith(":"):
            labels[raw[:-1]] = addr
            continue
        parsed.append((addr, raw))
        addr += 8
    for a, text in parsed:
        target = ""
        if text.startswith(("s_cbranch", "s_branch")) and "@" in text:
            mnem, lab = text.split("@")
            text = f"{mnem.strip()} 0"
            target = f" <{name}+0x{labels[lab.strip()] - 0x1000:x}>"
            simm = ((labels[lab.strip()] - (a + 4)) // 4) & 0xFFFF
            lines.append(f"\t{text} // {a:012X}: {0xBFA20000 | simm:08X}{target}")
            continue
        lines.append(f"\t{text} // {a:012X}: 00000000{target}")
    ins = parse_disassembly("\n".join(lines) + "\n")[name]
    return KernelCode(name, "gfx1100", ins, {".vgpr_count": 8, ".max_flat_workgroup_size": 32,
                                              ".wavefront_size": 32})


# A row-per-wave qt=44 GEMV body: W at arg 0, scalar header, payload through a base that
# folds +8 (v2 = W + 4*lane + 8), the group pointer stepped by 136 per iteration.
_GEMV = """
s_load_b64 s[2:3], s[0:1], 0x0
v_lshlrev_b32_e32 v1, 2, v0
v_add_co_u32 v2, vcc_lo, s2, v1
v_add_co_ci_u32_e32 v3, vcc_lo, s3, 0, vcc_lo
v_add_co_u32 v2, vcc_lo, v2, 8
v_add_co_ci_u32_e32 v3, vcc_lo, 0, v3, vcc_lo
loop:
s_load_b64 s[4:5], s[2:3], 0x0
global_load_b32 v4, v[2:3], off
EXTRA
v_cvt_f32_f16_e32 v6, s4
v_add_co_u32 v2, vcc_lo, 0x88, v2
v_add_co_ci_u32_e32 v3, vcc_lo, 0, v3, vcc_lo
s_add_u32 s2, s2, 0x88
s_addc_u32 s3, s3, 0
s_cmp_eq_u32 s6, 0
s_cbranch_scc0 @loop
s_endpgm
"""


def _synthetic(extra: str, qt: int = 44) -> dict[str, Row]:
    spec = KernelSpec(name="k", source=Path("k.hip"), symbol="k", qt=qt, kind="gemv",
                      baseline="b")
    code = _code(_GEMV.replace("EXTRA", extra))
    base = _code(_GEMV.replace("EXTRA", ""), "k")
    return {r.check.removeprefix("audit_"): r for r in
            audit_kernel(spec, ARCHES["gfx1100"], code, base)}


def test_synthetic_flow_folded_offset_scratch_reload_and_unknown_arithmetic() -> None:
    ok = _synthetic("")
    assert ok["payload_offset"].status is Status.PASS
    assert ok["payload_offset"].details["offsets_mod_group"] == [8]
    assert ok["header_scalar"].status is Status.PASS
    # a spill reload in the loop is no header load (and no W load at all)
    spill = _synthetic("scratch_load_b32 v7, off, off offset:16")
    assert spill["header_scalar"].status is Status.PASS
    assert spill["payload_offset"].status is Status.PASS
    # a per-lane read of the header (group offset 0 by vector load) fails both rules
    lane = _synthetic("v_add_co_u32 v8, vcc_lo, s2, v1\n"
                      "v_add_co_ci_u32_e32 v9, vcc_lo, s3, 0, vcc_lo\n"
                      "global_load_b32 v5, v[8:9], off")
    assert lane["header_scalar"].status is Status.FAIL
    # offset 0 + 4*lane: a vector load at the group's header word in a row-per-wave kernel
    assert lane["payload_offset"].status is Status.FAIL
    # an address through an operation the flow does not model: unsupported, never fail
    perm = _synthetic("v_perm_b32 v10, v2, v1, 0x5040100\n"
                      "global_load_b32 v11, v[10:11], off")
    assert perm["payload_offset"].status is Status.PASS  # the known loads still decide
    only = _code("""
s_load_b64 s[2:3], s[0:1], 0x0
v_perm_b32 v2, s2, v0, 0x5040100
loop:
global_load_b32 v4, v[2:3], off
s_cmp_eq_u32 s6, 0
s_cbranch_scc0 @loop
s_endpgm
""")
    spec = KernelSpec(name="k", source=Path("k.hip"), symbol="k", qt=44, kind="gemv")
    rows = {r.check: r for r in audit_kernel(spec, ARCHES["gfx1100"], only)}
    assert rows["audit_payload_offset"].status is Status.UNSUPPORTED
    assert "cannot follow" in rows["audit_payload_offset"].message


def test_v2_valu_delta_is_unsupported_never_an_error_when_it_cannot_count() -> None:
    spec = KernelSpec(name="k", source=Path("k.hip"), symbol="k", qt=44, kind="gemv",
                      baseline="b")
    flat = _code("s_load_b64 s[2:3], s[0:1], 0x0\nglobal_load_b32 v4, v[2:3], off\ns_endpgm")
    rows = {r.check: r for r in audit_kernel(spec, ARCHES["gfx1100"], flat, flat)}
    d = rows["audit_v2_valu_delta"]
    assert d.status is Status.UNSUPPORTED and "no group loop" in d.message
    assert all(r.status is not Status.ERROR for r in rows.values())


def test_a_loop_closed_by_an_unconditional_back_edge_is_found() -> None:
    """An LDS-staged kernel's group loop tests its exit after a leading barrier and closes
    with s_branch back: it is a loop of the control-flow graph, and the one holding W."""
    code = _code("""
s_load_b64 s[2:3], s[0:1], 0x0
v_lshlrev_b32_e32 v1, 2, v0
head:
s_barrier
s_cmp_ge_i32 s6, s7
s_cbranch_scc1 @out
s_load_b64 s[4:5], s[2:3], 0x0
v_add_co_u32 v2, vcc_lo, s2, v1
v_add_co_ci_u32_e32 v3, vcc_lo, s3, 0, vcc_lo
global_load_b32 v4, v[2:3], off offset:8
v_cvt_f32_f16_e32 v6, s4
s_add_u32 s2, s2, 0x88
s_addc_u32 s3, s3, 0
s_add_i32 s6, s6, 1
s_branch @head
out:
s_endpgm
""")
    assert len(code.loops()) == 1
    first, last = code.loops()[0]
    assert code.instructions[first].mnemonic == "s_barrier"
    assert code.instructions[last].mnemonic == "s_branch"
    span = code.weight_loop_span(frozenset({"arg@0"}))
    assert span == (first, last)
    # a forward jump over code, or a branch back to a merge block, is no loop
    straight = _code("""
s_load_b64 s[2:3], s[0:1], 0x0
s_cbranch_scc1 @skip
v_mov_b32_e32 v1, 0
skip:
s_endpgm
""")
    assert straight.loops() == []


def test_a_rule_whose_loop_holds_no_weight_load_is_unsupported() -> None:
    spec = KernelSpec(name="k", source=Path("k.hip"), symbol="k", qt=44, kind="gemv",
                      baseline="b")
    code = _code("""
s_load_b64 s[2:3], s[0:1], 0x0
v_lshlrev_b32_e32 v1, 2, v0
v_add_co_u32 v2, vcc_lo, s2, v1
v_add_co_ci_u32_e32 v3, vcc_lo, s3, 0, vcc_lo
s_load_b64 s[4:5], s[2:3], 0x0
global_load_b32 v4, v[2:3], off offset:8
loop:
v_add_f32_e32 v5, v5, v4
s_cmp_eq_u32 s6, 0
s_cbranch_scc0 @loop
s_endpgm
""")
    rows = {r.check.removeprefix("audit_"): r
            for r in audit_kernel(spec, ARCHES["gfx1100"], code, code)}
    for rule in ("header_scalar", "payload_offset", "v2_valu_delta"):
        assert rows[rule].status is Status.UNSUPPORTED, (rule, rows[rule].message)
        assert "no load of W" in rows[rule].message


def test_v_wmma_is_not_counted_as_valu() -> None:
    code = _code("""
v_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]
v_add_f32_e32 v5, v5, v4
s_endpgm
""")
    assert code.classes() == {"wmma": 1, "valu": 1, "control": 1}


BUFFER_POLICY = """\
#define EW_GROUP_BYTES 136
#define EW_ROW_BYTES(groups) ((long long)(groups) * EW_GROUP_BYTES)
#define EW_RSRC(base) __builtin_amdgcn_make_buffer_rsrc(const_cast<char*>(base), 0, \\
                                                         0xffffffffu, 0x31004000u)
#define EW_LOAD_PK(ptr) __builtin_amdgcn_raw_buffer_load_b32(EW_RSRC(W), \\
                                                             (unsigned int)((ptr) - W), 0, 0)
#define EW_LOAD_HDR(ptr) EW_LOAD_PK((ptr) + HDR_LANE_OFFSET)
"""


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_uniform_buffer_loads_of_the_header_pass_lane_dependent_ones_fail(
        arch: str, tmp_path: Path, cache: Path) -> None:
    """An engine's cache policy may read the header by buffer load at a lane-invariant
    offset (a vector load all lanes share): that is how its v1 baseline reads it too, and
    passes.  The same policy with a lane-dependent header offset is the proven defect."""
    src = TREE.path.parent / "src"
    rows = {}
    for lane_dep in (False, True):
        d = tmp_path / ("lane" if lane_dep else "uniform")
        d.mkdir()
        (d / "policy.inc").write_text(BUFFER_POLICY.replace(
            "HDR_LANE_OFFSET", "(threadIdx.x & 1) * 0" if not lane_dep else
            "((threadIdx.x >> 4) & 1) * 4"))
        specs = []
        for name, qt, base in (("ew_gemv_hfq4g256", 6, None),
                               ("ew_gemv_mq4g256v2", 44, "ew_gemv_hfq4g256")):
            shutil.copy(src / f"{name}.hip", d / f"{name}.hip")
            specs.append(KernelSpec(name=name, source=d / f"{name}.hip", symbol=name, qt=qt,
                                    kind="gemv", baseline=base,
                                    preinclude=(d / "policy.inc",)))
        cells = [(s, compile_kernel(s, arch, cache)) for s in specs]
        assert all(c.ok for _, c in cells), [c.message for _, c in cells]
        got = {r.check: r for r in audit_matrix(cells, ARCHES[arch], cache_dir=cache)
               if r.kernel == "ew_gemv_mq4g256v2"}
        rows[lane_dep] = got
        assert any(i.mnemonic.startswith("buffer_load") for i in
                   analyze(cells[1][1].code_object, arch)["ew_gemv_mq4g256v2"].main_loop())
    ok = rows[False]
    assert ok["audit_header_scalar"].status is Status.PASS, ok["audit_header_scalar"].message
    assert ok["audit_payload_offset"].status is Status.PASS, ok["audit_payload_offset"].message
    bad = rows[True]["audit_header_scalar"]
    assert bad.status is Status.FAIL and "lane-dependent" in bad.message


def test_a_waived_rule_is_skipped_with_its_reason_and_finding() -> None:
    from dataclasses import replace as _replace

    from hqval.audit import apply_waivers
    from hqval.manifest import load_manifest
    from hqval.result import Row, Status

    spec = _replace(load_manifest().kernels[0], audit_waive=(("no_spill", "engine build"),))
    rows = [Row("audit", "audit_no_spill", spec.name, "gfx1100", "isa", Status.FAIL,
                message="3 VGPR spills"),
            Row("audit", "audit_vgpr_budget", spec.name, "gfx1100", "isa", Status.FAIL,
                message="over budget")]
    out = apply_waivers(spec, rows)
    assert out[0].status is Status.SKIPPED and out[0].details["waived"] == "engine build"
    assert out[0].details["waived_status"] == "fail" and "3 VGPR spills" in out[0].message
    assert out[1] == rows[1]  # a rule not waived keeps its failure


def test_a_v2_kernel_with_a_uniform_buffer_policy_against_a_plain_v1_passes(
        tmp_path: Path, cache: Path) -> None:
    """The engine may route only some kernels through its buffer-load policy: a v2 GEMV
    reading its header by uniform buffer loads against a v1 baseline that reads it by
    scalar loads reads nothing per lane more."""
    src = TREE.path.parent / "src"
    (tmp_path / "policy.inc").write_text(BUFFER_POLICY.replace("HDR_LANE_OFFSET", "0"))
    shutil.copy(src / "ew_gemv_mq4g256v2.hip", tmp_path / "v2.hip")
    v2 = KernelSpec(name="ew_gemv_mq4g256v2", source=tmp_path / "v2.hip",
                    symbol="ew_gemv_mq4g256v2", qt=44, kind="gemv",
                    baseline="ew_gemv_hfq4g256", preinclude=(tmp_path / "policy.inc",))
    rows = tree_audit(v2, "gfx1201", cache, TREE.by_name("ew_gemv_hfq4g256"))
    assert rows["header_scalar"].status is Status.PASS, rows["header_scalar"].message
    assert not rows["header_scalar"].details["loop_scalar_loads"]


TRIPS = Path(__file__).resolve().parents[1] / "data" / "engine_tree" / "tripcount.yaml"


def _trip_rows(name: str, tmp_path: Path) -> dict[str, Row]:
    from hqval.audit.cache import _audit_job, _Job

    m = load_manifest(TRIPS)
    spec = m.by_name(name)
    assert spec.baseline is not None
    base = m.by_name(spec.baseline)
    res, bres = compile_kernel(spec, "gfx1030", tmp_path), compile_kernel(base, "gfx1030",
                                                                           tmp_path)
    assert res.code_object is not None and bres.code_object is not None, res.message
    rows = _audit_job(_Job(spec, ARCHES["gfx1030"], Path(res.code_object),
                           (base, Path(bres.code_object))))
    return {r.check.removeprefix("audit_"): r for r in rows}


def test_a_constant_inner_trip_count_is_read_from_the_cfg(tmp_path: Path) -> None:
    """The v1 quad GEMV keeps its four-group inner loop rolled: s_mov_b64 s[2:3], 0 before
    it, s_add_u32 s2, s2, 0x88 and s_cmpk_eq_i32 s2, 0x220 closing it: four trips.  The
    outer loop (a run-time K) and the engine-style nest's inner loop (min(4, groups left))
    have no constant count."""
    from hqval.audit.static import constant_trip_count, find_loops
    from hqval.emu import Machine

    def counts(manifest: Path, name: str) -> list[int | None]:
        spec = load_manifest(manifest).by_name(name)
        co = compile_kernel(spec, "gfx1030", tmp_path).code_object
        assert co is not None
        ins = Machine("gfx1030").load(co.read_bytes()).program(spec.symbol).instructions
        return [constant_trip_count(ins, sp) for sp in find_loops(ins)]

    assert counts(TRIPS, "ew_gemv_hfq4g256_quad") == [None, 4]
    assert counts(TRIPS.parent / "kernels.yaml", "ew_gemv_hfq4g256_nest") == [None, None]


def test_unlike_nests_compare_with_their_inner_loops_multiplied_out(tmp_path: Path) -> None:
    """The v2 quad GEMV unrolls the inner loop its v1 sibling keeps rolled: the static VALU
    rule multiplies the rolled body by its four trips and decides, agreeing with the
    executed rule; ten extra VALU per group fail both."""
    rows = _trip_rows("ew_gemv_mq4g256v2_quad", tmp_path)["v2_valu_delta"]
    static = rows.details["static"]
    assert static["status"] == "pass" and rows.status is Status.PASS, (static, rows.message)
    assert "constant trip counts" in static["message"]
    bad = _trip_rows("ew_mut_gemv_quad_extra_work", tmp_path)["v2_valu_delta"]
    assert bad.details["static"]["status"] == "fail", bad.details["static"]
    assert bad.status is Status.FAIL, bad.message


def test_the_address_flow_is_shared_only_by_the_same_instructions() -> None:
    """The flow depends on the instructions alone: another arch's or name's kernel decoding
    to the same instructions shares it; one instruction more is another flow, and its
    verdict is its own (a per-lane header read still fails after the good flow is cached)."""
    from dataclasses import replace as dc_replace

    good = _code(_GEMV.replace("EXTRA", ""))
    other_arch = dc_replace(_code(_GEMV.replace("EXTRA", "")), arch="gfx1201", name="k2")
    assert good.address_flow() is other_arch.address_flow()
    lane = _code(_GEMV.replace("EXTRA", "v_add_co_u32 v8, vcc_lo, s2, v1\n"
                               "v_add_co_ci_u32_e32 v9, vcc_lo, s3, 0, vcc_lo\n"
                               "global_load_b32 v5, v[8:9], off"))
    assert lane.address_flow() is not good.address_flow()
    spec = KernelSpec(name="k", source=Path("k.hip"), symbol="k", qt=44, kind="gemv",
                      baseline="b")
    rows = {r.check.removeprefix("audit_"): r
            for r in audit_kernel(spec, ARCHES["gfx1100"], lane, good)}
    assert rows["header_scalar"].status is Status.FAIL
    rows = {r.check.removeprefix("audit_"): r
            for r in audit_kernel(spec, ARCHES["gfx1100"], other_arch, good)}
    assert rows["header_scalar"].status is Status.PASS


@pytest.mark.skipif(shutil.which("clang-19") is None, reason="needs clang-19")
@pytest.mark.parametrize("arch", ["gfx1010", "gfx1100"])
def test_rule_c_states_the_occupancy_lds_allows(arch: str, tmp_path: Path) -> None:
    """Rule (c)'s stated occupancy counts the LDS a workgroup takes (clang-19's own
    remark for the kernel), not the VGPR file alone, which admits more waves."""
    from ..conftest import clang19_occupancy  # type: ignore[import-not-found]
    from ..timing.test_cost import OCC_PROBES

    want, _, co = clang19_occupancy(arch, OCC_PROBES["lds"] + "\n", tmp_path)
    spec = KernelSpec(name="k", source=tmp_path / "k.hip", symbol="k", qt=44, kind="gemv")
    code = analyze(co, arch)["k"]
    row = next(r for r in audit_kernel(spec, ARCHES[arch], code)
               if r.check == "audit_vgpr_budget")
    vgprs, lds = row.details["vgpr_count"], row.details["lds_bytes"]
    assert lds == 16384
    assert row.details["occupancy_waves_per_simd"] == want
    assert f"occupancy {want} waves/SIMD" in row.message
    assert summary(code, ARCHES[arch])["occupancy"] == want
    assert occupancy(ARCHES[arch], vgprs) > want  # what the VGPRs alone would state
