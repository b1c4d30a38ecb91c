"""hqval.isa: notes, disassembly and the audit rules on real code objects (the suite's
kernels, its mutants, and small kernels written here to break one rule each)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from hqval.isa import (
    Instruction,
    analyze,
    audit_kernel,
    audit_matrix,
    elf_symbols,
    occupancy,
    parse_disassembly,
    summary,
)
from hqval.manifest import KernelSpec, load_manifest, load_mutants
from hqval.matrix import load_arches
from hqval.result import Row, Status
from hqval.toolchain import compile_kernel

pytestmark = pytest.mark.skipif(
    not (shutil.which("clang-19") and shutil.which("llvm-objdump-19")),
    reason="needs clang-19 and llvm-objdump-19 (apt-get install clang-19 llvm-19)")

PRELUDE = Path(__file__).resolve().parents[1] / "kernels" / "include"
ARCHES = load_arches()
REAL = load_manifest()
MUTANTS = load_mutants()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("isa-cache")


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
\ts_cbranch_scc0 65533                                       // 000000001010: BFA1FFFD <k+0x8>
\ts_endpgm                                                   // 000000001014: BFB00000
"""
    ins = parse_disassembly(text)["k"]
    assert [i.mnemonic for i in ins][:2] == ["s_load_b64", "v_dual_mov_b32"]
    assert ins[3].target == 0x1008 and ins[3].is_branch
    assert Instruction(0, "v_dual_mov_b32", "").valu_ops == 2
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
    assert bad.details["baseline_vector_loads"] != bad.details["vector_loads"]
