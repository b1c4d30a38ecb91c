"""hqval.audit.executed: header_scalar, payload_offset and v2_valu_delta decided from what
the emulator executed, on the engine-style tree's kernels (tests/data/engine_tree) and its
broken copies; and where the static rules differ from the executed ones, why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hqval.audit.cache import _audit_job, _Job
from hqval.manifest import KernelSpec, load_manifest, load_mutants
from hqval.matrix import load_arches
from hqval.result import Row, Status
from hqval.toolchain import compile_kernel

pytestmark = pytest.mark.skipif(
    not (shutil.which("clang-19") and shutil.which("llvm-objdump-19")),
    reason="needs clang-19 and llvm-objdump-19 (apt-get install clang-19 llvm-19)")

TREE = Path(__file__).resolve().parents[1] / "data" / "engine_tree"
REAL = load_manifest(TREE / "kernels.yaml")
MUTANTS = load_mutants(TREE / "mutants.yaml")
ARCHES = load_arches()
RULES = ("header_scalar", "payload_offset", "v2_valu_delta")


def _spec(name: str) -> KernelSpec:
    return REAL.by_name(name) if name in REAL.names() else MUTANTS.by_name(name)


def audit(name: str, arch: str, cache: Path) -> dict[str, Row]:
    spec = _spec(name)
    res = compile_kernel(spec, arch, cache)
    assert res.ok and res.code_object is not None, res.message
    assert spec.baseline is not None
    base = REAL.by_name(spec.baseline)
    bres = compile_kernel(base, arch, cache)
    assert bres.code_object is not None
    rows = _audit_job(_Job(spec, ARCHES[arch], Path(res.code_object),
                           (base, Path(bres.code_object))))
    return {r.check.removeprefix("audit_"): r for r in rows}


@pytest.mark.parametrize(("kernel", "arch"), [
    ("ew_gemv_mq4g256v2_unroll4", "gfx1030"),       # v2/v1 siblings unrolled differently
    ("ew_gemm_mq4g256v2_bt2_wmma_gfx11", "gfx1100"),  # batch-tiled, no v1 sibling
    ("ew_gemm_mq4g256v2_lds_gfx11", "gfx1100"),      # LDS-staged, unconditional back edge
])
def test_each_style_passes_from_executed_facts(kernel: str, arch: str, cache: Path) -> None:
    rows = audit(kernel, arch, cache)
    for rule in RULES:
        r = rows[rule]
        assert r.status is Status.PASS, (rule, r.message)
        assert r.details["decided_by"] == "executed" and "static" in r.details
        assert "executed on M=" in r.message
    assert rows["v2_valu_delta"].details["wmma"] == 0 or kernel.startswith("ew_gemm")
    if kernel.startswith("ew_gemm"):
        # v_wmma is counted apart from VALU, in both kernels
        assert rows["v2_valu_delta"].details["wmma"] > 0
        assert rows["v2_valu_delta"].details["baseline_wmma"] > 0


@pytest.mark.parametrize(("kernel", "rule", "words"), [
    ("ew_mut_gemv_lane_header", "header_scalar", "lane-dependent addresses"),
    ("ew_mut_gemv_mq4c_payload_at4", "payload_offset", "[132,136) left unread"),
    ("ew_mut_gemv_stride132", "payload_offset", "left unread"),
    ("ew_mut_gemv_extra_work", "v2_valu_delta", "VALU per group-row"),
])
def test_broken_copies_are_rejected_by_the_rule_expected(kernel: str, rule: str, words: str,
                                                         cache: Path) -> None:
    r = audit(kernel, "gfx1030", cache)[rule]
    assert r.status is Status.FAIL and r.details["decided_by"] == "executed", r.message
    assert words in r.message


def test_a_batch_tiled_gemm_is_charged_the_marginal_cost_of_a_group_row(cache: Path) -> None:
    """A BT=8 GEMM's prologue and epilogue (a token index and eight bounds-checked Y +=
    stores per tile) are spent once per block: at the problem's two groups they add more
    than the budget per group-row over the BT=1 v1 GEMM, though its group loop costs what
    v1's does plus the header.  The rule charges the VALU a longer K adds per group-row it
    adds: the correct kernel passes, and a copy that dequantises each k-tile twice fails."""
    good = audit("ew_gemm_mq4g256v2_residual_bt8_wmma_gfx11", "gfx1100", cache)["v2_valu_delta"]
    assert good.status is Status.PASS, good.message
    assert "marginal from K=512 to K=1536" in good.message
    assert good.details["marginal_k"] == [512, 1536]
    # the per-block costs the single-K count charged to two groups
    assert good.details["single_k_delta"] > 3.0, good.details
    bad = audit("ew_mut_gemm_bt8_extra_dequant", "gfx1100", cache)["v2_valu_delta"]
    assert bad.status is Status.FAIL and bad.details["decided_by"] == "executed", bad.message
    assert bad.measured is not None and bad.measured > 3.0


def test_one_k_fixed_by_the_manifest_is_counted_at_that_k() -> None:
    """A build for one K (explicit shapes of one K) has no longer K to run: the rule
    counts at that K and says so; a longer K must be one every kernel of the pair accepts."""
    import dataclasses

    from hqval.audit.executed import marginal_problem, problem_for

    plain, base = REAL.by_name("ew_gemv_mq4g256v2"), REAL.by_name("ew_gemv_hfq4g256")
    p = problem_for(plain, base)
    assert marginal_problem(plain, base, p) == (p[0], p[1] + 1024, p[2])
    one = dataclasses.replace(plain, shapes=((16, 512),))
    assert marginal_problem(one, base, problem_for(one, base)) is None
    two = dataclasses.replace(plain, shapes=((16, 512), (16, 1536)))
    assert marginal_problem(two, base, problem_for(two, base)) == (p[0], 1536, 1)
    trips = load_manifest(TREE / "tripcount.yaml")
    quad, quad_v1 = trips.by_name("ew_gemv_mq4g256v2_quad"), trips.by_name(
        "ew_gemv_hfq4g256_quad")
    assert marginal_problem(quad, quad_v1, problem_for(quad, quad_v1))[1] == 2048 + 1024


def test_a_layout_drift_names_the_bytes_read_and_left_unread(cache: Path) -> None:
    r = audit("ew_mut_gemv_stride132", "gfx1030", cache)["payload_offset"]
    assert "in another layout" in r.message
    assert r.details["unread"] != "none" and r.details["read"] != "none"
    row, group = r.details["first_cell"]
    assert f"(row {row}, group {group})" in r.message


def test_the_v1_header_decode_on_v2_data_reads_the_right_bytes(cache: Path) -> None:
    """The v1 decoder on v2 data reads exactly v2's bytes (the same layout): the executed
    audit cannot see it, and says pass; it is reference_parity's to kill."""
    rows = audit("ew_mut_gemv_v1_header", "gfx1030", cache)
    assert rows["payload_offset"].status is Status.PASS


def test_where_static_and_executed_differ_and_why(cache: Path) -> None:
    """The v2 sibling unrolls its group loop by 4, its v1 baseline keeps a rolled inner
    loop: the static rule refuses to compare different loop nests (unsupported), the
    executed facts decide.  Where both decide, they agree."""
    rows = audit("ew_gemv_mq4g256v2_unroll4", "gfx1030", cache)
    d = rows["v2_valu_delta"]
    assert d.details["static"]["status"] == "unsupported"
    assert "loop nests differ" in d.details["static"]["message"]
    assert d.status is Status.PASS
    for name, arch in (("ew_gemv_mq4g256v2", "gfx1030"), ("ew_mut_gemv_lane_header", "gfx1030"),
                       ("ew_mut_gemv_extra_work", "gfx1030")):
        for rule, r in audit(name, arch, cache).items():
            if rule in RULES and r.details["static"]["status"] in ("pass", "fail"):
                assert r.details["static"]["status"] == str(r.status), (name, rule)
                assert "static_disagrees" not in r.details


def test_code_the_problem_does_not_run_is_unsupported_never_a_pass(cache: Path) -> None:
    from hqval.audit.executed import Executed, facts_for, problem_for

    spec, base = _spec("ew_gemv_mq4g256v2"), REAL.by_name("ew_gemv_hfq4g256")
    co = compile_kernel(spec, "gfx1030", cache).code_object
    bco = compile_kernel(base, "gfx1030", cache).code_object
    assert co is not None and bco is not None
    problem = problem_for(spec, base)
    ex = Executed(spec, "gfx1030", facts_for(spec, "gfx1030", co.read_bytes(), problem),
                  facts_for(base, "gfx1030", bco.read_bytes(), problem),
                  ["0x1234: global_load_b32 v1, v[2:3], off"])
    for rule, r in ex.rows().items():
        assert r.status is Status.UNSUPPORTED, rule
        assert "did not execute" in r.message


ROUTED = load_manifest(TREE / "moe_fused.yaml")


def _audit_in(_tree: object, name: str, arch: str, cache: Path) -> dict[str, Row]:
    spec = ROUTED.by_name(name)
    res = compile_kernel(spec, arch, cache)
    assert res.ok and res.code_object is not None, res.message
    assert spec.baseline is not None
    base = ROUTED.by_name(spec.baseline)
    bres = compile_kernel(base, arch, cache)
    assert bres.code_object is not None
    rows = _audit_job(_Job(spec, ARCHES[arch], Path(res.code_object),
                           (base, Path(bres.code_object))))
    return {r.check.removeprefix("audit_"): r for r in rows}


@pytest.mark.parametrize("kernel", ["ew_moe_gate_up_mq4g256v2", "ew_fused_gate_up_mq4g256v2"])
def test_routed_and_fused_kernels_are_launched_through_their_signature(kernel: str,
                                                                        cache: Path) -> None:
    """A pointer table, top-k indices and two outputs (the MoE gate/up GEMV), two weight
    matrices (the fused gate/up GEMV): the executed rules run the launch the signature
    describes and decide, where the single-matrix launch they used to make did not run
    ('takes 7 arguments, got 6': every rule unsupported)."""
    rows = _audit_in(ROUTED, kernel, "gfx1100", cache)
    for rule in RULES:
        r = rows[rule]
        assert r.status is Status.PASS, (rule, r.message)
        assert r.details["decided_by"] == "executed"
    po = rows["payload_offset"].details
    if kernel.startswith("ew_moe"):
        # eight selected experts of 16 rows, 5 groups each: every cell read, the
        # unselected (poisoned) experts no cell of the audit
        assert po["cells"] == 8 * 16 * 5
        # grid.y is the rank, not a column tile: the VALU budget is per group-row
        assert rows["v2_valu_delta"].details["column_tiles"] == 1
    else:
        assert po["cells"] == (16 + 19) * 5


def test_a_routed_kernel_reading_its_header_at_lane_addresses_is_rejected(cache: Path) -> None:
    """The engine's own MoE gate/up form: hoff = lane < 16 ? 0 : 4, one vector load of the
    header where the design note wants two scalar ones."""
    r = _audit_in(ROUTED, "ew_mut_moe_gate_up_lane_header", "gfx1100", cache)["header_scalar"]
    assert r.status is Status.FAIL and r.details["decided_by"] == "executed", r.message
    assert "lane-dependent addresses" in r.message


def test_a_fixed_top_k_gets_experts_left_unselected() -> None:
    """k_top: 8 with the default table of 4 experts left the checks no expert to poison
    (an error on every cell); the table now holds k_top + 2."""
    from hqval.checks.cell import Sizes
    from hqval.checks.oracle import dims_for

    spec = ROUTED.by_name("ew_moe_gate_up_mq4g256v2")
    sizes = Sizes(gemv_m=16, gemv_k=1280, gemm_m=16, gemm_k=512, prefill_n=(8,), padded_m=8)
    dims = dims_for(spec.signature, spec, sizes)
    assert dims["k_top"] == 8 and dims["E"] == 10
    two = REAL.by_name("ew_gemv_mq4g256v2")  # no routing: nothing changes
    assert "E" not in dims_for(two.signature, two, sizes)


def test_a_k_specialised_build_runs_on_a_k_it_accepts() -> None:
    """The executed problem's K follows the manifest: the smallest explicit shape's K (the
    engine's K=512 MoE down GEMV has only a two-group body, and read past its matrix at
    the default K=1280), else the default rounded up to k_multiple."""
    import dataclasses

    from hqval.audit.executed import K_DEFAULT, problem_for

    trips = load_manifest(TREE / "tripcount.yaml")
    quad, quad_v1 = trips.by_name("ew_gemv_mq4g256v2_quad"), trips.by_name(
        "ew_gemv_hfq4g256_quad")
    assert problem_for(quad, quad_v1)[1] == 2048  # 1280 rounded up to k_multiple 1024
    plain = REAL.by_name("ew_gemv_mq4g256v2")
    assert problem_for(plain)[1] == K_DEFAULT
    shaped = dataclasses.replace(plain, shapes=((64, 512), (16, 512)))
    assert problem_for(shaped, REAL.by_name("ew_gemv_hfq4g256"))[1] == 512


def test_facts_are_reused_only_for_the_same_execution_identity(cache: Path) -> None:
    """gfx1200 and gfx1201 build the v2 kernel to objects that differ only in the target
    they name: one execution identity, so the second arch's audit reuses the first's
    launch and its rows are the first's with the arch's name.  A broken copy whose code
    differs has another identity and is still run and rejected after the good kernel's
    facts are cached; so is the same object on an arch of another generation."""
    from hqval.audit import executed
    from hqval.codeobject import load

    good, bad = _spec("ew_gemv_mq4g256v2"), _spec("ew_mut_gemv_lane_header")
    objs = {}
    for spec in (good, bad):
        for arch in ("gfx1200", "gfx1201"):
            res = compile_kernel(spec, arch, cache)
            assert res.code_object is not None, res.message
            objs[(spec.name, arch)] = res.code_object.read_bytes()
    g0, g1 = objs[(good.name, "gfx1200")], objs[(good.name, "gfx1201")]
    assert g0 != g1 and load(g0).code_identity == load(g1).code_identity
    ident = executed.execution_identity
    assert ident(good, "gfx1200", g0) == ident(good, "gfx1201", g1)
    assert ident(bad, "gfx1201", objs[(bad.name, "gfx1201")]) != ident(good, "gfx1201", g1)
    # the same bytes on an arch of another generation run other semantics: not shared
    assert ident(good, "gfx1200", g0) != ident(good, "gfx1100", g0)

    executed._FACTS.clear()
    first = audit(good.name, "gfx1200", cache)
    ran = dict(executed._FACTS)
    second = audit(good.name, "gfx1201", cache)
    assert executed._FACTS.keys() == ran.keys()  # no new launch: the facts were reused
    for rule in RULES:
        a, b = first[rule].to_dict(), second[rule].to_dict()
        assert b.pop("arch") == "gfx1201" and a.pop("arch") == "gfx1200"
        a.pop("identity"), b.pop("identity")
        assert a == b and first[rule].status is Status.PASS
    broken = audit(bad.name, "gfx1201", cache)["header_scalar"]
    assert len(executed._FACTS) > len(ran)  # its own launch
    assert broken.status is Status.FAIL and broken.details["decided_by"] == "executed"
    assert "lane-dependent addresses" in broken.message


def test_a_staging_copy_of_clamped_rows_is_no_per_lane_header_read() -> None:
    """The recorder's header evidence, load by load (one wave of 32 lanes, qt=44 groups of
    136 B, rows of two groups): lanes reading a header dword at their own addresses
    (lane < 16 ? +0 : +4, the design note's forbidden form) or both header dwords per lane
    are the per-lane header read; a staging copy of 16-byte vectors spanning header and
    payload, whose lanes past the matrix's last row all read that row again (a partial
    tile's clamp, the engine's LDS-staged gate/up GEMM), copies the group and is none."""
    from types import SimpleNamespace

    import numpy as np

    from hqval.audit.executed import Facts, _Recorder

    gb, groups, rows = 136, 2, 4
    row_bytes = gb * groups
    base = 1 << 20

    def record(mnemonic: str, offsets: list[int]) -> Facts:
        facts = Facts("k", (rows, 256 * groups, 1), (1, 1, 1), gb, rows, groups,
                      np.zeros((rows, groups, gb), bool), np.zeros((rows, groups), np.int64))
        rec = _Recorder(facts, [(base, rows, row_bytes)], 8, 8, 1, 1)
        ins = SimpleNamespace(mnemonic=mnemonic, addr=0x100, text=mnemonic)
        addr = base + np.array([offsets], np.int64)
        rec(ins, None, addr, np.ones(addr.shape, bool))  # type: ignore[arg-type]
        return facts

    last = (rows - 1) * row_bytes
    lane_dword = record("global_load_b32", [last + (0 if lane < 16 else 4) for lane in range(32)])
    assert lane_dword.per_lane_header and "row 3" in lane_dword.per_lane_header[0]
    both = record("global_load_b64", [last + (0 if lane < 16 else gb) for lane in range(32)])
    assert both.per_lane_header  # each lane reads a group's whole header: still per lane
    vectors = row_bytes // 16  # 17 vectors of 16 B cover the row's two groups
    staged = record("global_load_b128", [last + 16 * (lane % vectors) for lane in range(32)])
    assert not staged.per_lane_header and staged.staged_header > 0
    assert staged.read[rows - 1].all()  # every byte of the clamped row was read
