"""hqval.audit.executed: header_scalar, payload_offset and v2_valu_delta decided from what
the emulator executed, on the engine-style tree's kernels (tests/data/engine_tree) and its
broken copies; and where the static rules differ from the executed ones, why."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from hqval.audit.cache import _audit_job, _Job
from hqval.manifest import KernelSpec, Manifest, load_manifest, load_mutants
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
    # against a v1 of another batch tile the failure says why it is not divided by it
    assert bad.details["batch_tiles"] == [8, 1]
    assert "the baseline ew_gemm_hfq4g256_residual_wmma_gfx11 has batch tile 1" in \
        bad.message, bad.message
    assert "dequantising each group twice pass" in bad.message


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


def _audit_in(tree: Manifest, name: str, arch: str, cache: Path) -> dict[str, Row]:
    """The audit rows of ``tree``'s kernel ``name`` on ``arch`` against its baseline, by rule."""
    spec = tree.by_name(name)
    res = compile_kernel(spec, arch, cache)
    assert res.ok and res.code_object is not None, res.message
    assert spec.baseline is not None
    base = tree.by_name(spec.baseline)
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
    # the object's part is kept per (content, arch): each answer from the kept digests is
    # the one computed afresh, whatever was asked before
    asked = [(s, a, objs[(s.name, o)]) for s in (good, bad) for a in ("gfx1200", "gfx1201")
             for o in ("gfx1201", "gfx1200")] + [(good, "gfx1100", g0)]
    kept = [ident(*q) for q in asked]
    fresh = []
    for q in asked:
        executed._OBJECT_IDENTITY.clear()
        fresh.append(ident(*q))
    assert kept == fresh and len(set(kept)) == 3  # good gfx12, bad gfx12, good gfx11

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


def _per_wave_record(rec: Any, f: Any, ins: Any, addr: np.ndarray,
                     em: np.ndarray | None) -> None:
    """The recorder's facts of one load computed wave by wave, lane set by lane set: the
    oracle the vectorised ``_Recorder`` is held to."""
    from hqval.audit.executed import W_PAD, _nbytes

    nb = _nbytes(ins.mnemonic)
    scalar = em is None
    mask = np.ones(addr.shape, bool) if em is None else em
    gb = f.group_bytes
    for mi, (base, rows, row_bytes) in enumerate(rec.mats):
        rel = addr - base
        hit = mask & (rel >= 0) & (rel < rows * row_bytes + W_PAD)
        if not hit.any():
            continue
        entry = f.loads.setdefault(ins.addr, {"text": ins.text, "scalar": scalar,
                                              "uniform": True, "instances": 0,
                                              "max_rows": 0})
        for wi in range(addr.shape[0]):
            lanes = hit[wi]
            if not lanes.any():
                continue
            la = rel[wi][lanes]
            entry["instances"] += 1
            uniform = bool((la == la[0]).all())
            entry["uniform"] = entry["uniform"] and uniform
            b = np.unique((la[:, None] + np.arange(nb)[None, :]).reshape(-1))
            inside = b[b < rows * row_bytes]
            f.beyond += int(b.size - inside.size)
            row = inside // row_bytes + int(rec.row_base[mi])
            col = inside % row_bytes
            f.read[row, col // gb, col % gb] = True
            np.add.at(f.traffic, (row, col // gb), 1)
            if scalar or uniform:
                continue
            per_lane = la[:, None] + np.arange(nb)[None, :]
            inside_lane = per_lane < rows * row_bytes
            copies = (((per_lane % row_bytes) % gb >= rec.payload_offset)
                      & inside_lane).any(axis=1)
            lane_bytes = per_lane[inside_lane]
            lrow = lane_bytes // row_bytes + int(rec.row_base[mi])
            lbyte = (lane_bytes % row_bytes) % gb
            hdr = lbyte < rec.header_bytes
            decode = (~np.broadcast_to(copies[:, None], per_lane.shape))[inside_lane]
            if hdr.any():
                hrows = np.unique(lrow[hdr])
                entry["max_rows"] = max(entry["max_rows"], int(hrows.size))
                dec = hdr & decode
                shared = np.unique(lane_bytes[dec]).size < int(dec.sum())
                if hrows.size == 1 and shared:
                    if len(f.per_lane_header) < 8:
                        f.per_lane_header.append(
                            f"0x{ins.addr:x}: {ins.text} (row {int(hrows[0])}, header "
                            f"bytes {sorted({int(x) for x in lbyte[hdr]})} at "
                            f"{int(np.unique(la).size)} lane addresses)")
                elif hrows.size > 1:
                    f.multi_row_header += 1
                else:
                    f.staged_header += 1


def _twin(f: Any) -> Any:
    """A Facts like ``f`` with nothing recorded yet."""
    return dataclasses.replace(f, read=np.zeros_like(f.read), traffic=np.zeros_like(f.traffic),
                               beyond=0, per_lane_header=[], multi_row_header=0,
                               staged_header=0, loads={})


def test_the_recorder_records_a_load_of_many_waves_as_wave_by_wave(cache: Path) -> None:
    """Loads of many waves with inactive lanes, over two matrices, the pad past them and
    memory outside them: lane-uniform waves, lane-addressed header reads of one row and of
    several, staging copies, scalar loads.  The recorder, all waves at once, records the
    facts the per-wave oracle does, field by field, and the per-wave evidence in its order."""
    from hqval.audit.executed import Facts, _Recorder

    gb, groups = 136, 2
    row_bytes = gb * groups
    mats = [(1 << 20, 5, row_bytes), (1 << 22, 3, row_bytes)]
    rows = 8
    rng = np.random.default_rng(7)
    blank = Facts("k", (rows, 256 * groups, 1), (1, 1, 1), gb, rows, groups,
                  np.zeros((rows, groups, gb), bool), np.zeros((rows, groups), np.int64))
    mine, theirs = _twin(blank), _twin(blank)
    rec = _Recorder(mine, mats, 8, 8, 2, 3)
    inactive = 0  # loads of several waves with an inactive lane
    for i in range(400):
        mnemonic = ["global_load_b32", "global_load_b64", "global_load_b128",
                    "global_load_u8", "s_load_b64"][i % 5]
        waves = int(rng.integers(1, 9))
        base, mrows, _ = mats[int(rng.integers(0, 2))]
        kind = i % 4
        if kind == 0:  # each wave one address: lane-uniform
            addr = np.repeat(base + rng.integers(0, mrows * row_bytes, (waves, 1)), 32, axis=1)
        elif kind == 1:  # lanes on header dwords of one row (the per-lane header read)
            row = rng.integers(0, mrows, (waves, 1))
            addr = base + row * row_bytes + 4 * (np.arange(32)[None, :] // 16)
        elif kind == 2:  # staging vectors of 16 bytes, some lanes past the last row
            start = rng.integers(0, mrows * row_bytes, (waves, 1))
            addr = base + start + 16 * np.arange(32)[None, :]
        else:  # anywhere: before, inside, the pad, after
            addr = base + rng.integers(-512, mrows * row_bytes + 5000, (waves, 32))
        addr = addr.astype(np.int64)
        ins = SimpleNamespace(mnemonic=mnemonic, addr=0x100 + 4 * (i % 36), text=mnemonic)
        if mnemonic.startswith("s_"):
            addr, em = addr[:, :1], None
        else:
            em = rng.random((waves, 32)) < (1.0 if i % 3 == 0 else 0.6)
            inactive += int((~em).any() and waves > 1)
            if kind == 0:  # an inactive lane's address is not the load's: still uniform
                addr = np.where(em, addr, addr + 4 * rng.integers(1, 9, addr.shape))
        rec(ins, None, addr, em)  # type: ignore[arg-type]
        _per_wave_record(rec, theirs, ins, addr, em)
    for name in ("read", "traffic"):
        assert np.array_equal(getattr(mine, name), getattr(theirs, name)), name
    for name in ("beyond", "per_lane_header", "multi_row_header", "staged_header", "loads"):
        assert getattr(mine, name) == getattr(theirs, name), name
    # the loads exercised every path the oracle has
    assert inactive > 50 and theirs.beyond > 0 and theirs.per_lane_header
    assert theirs.multi_row_header > 0 and theirs.staged_header > 0
    assert {d["uniform"] for d in theirs.loads.values()} == {True, False}


@pytest.mark.parametrize(("kernel", "arch"), [
    ("gemv_mq4g256v2_residual_r2", "gfx1030"),           # the suite's, two rows per block
    ("gemm_mq4g256v2_moe_grouped_wmma_gfx11", "gfx1100"),  # slot tiles of routed experts
])
def test_a_launch_records_the_facts_the_per_wave_recorder_does(
        kernel: str, arch: str, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real launch of the suite's kernels, loads of several waves with inactive lanes
    among them: every load the emulator reports goes to the recorder and to the per-wave
    oracle, each with its own facts, and both record the same."""
    from hqval.audit import executed

    suite = load_manifest()
    spec = suite.by_name(kernel)
    base = suite.by_name(spec.baseline or "")
    co = compile_kernel(spec, arch, cache).code_object
    assert co is not None
    tees: list[Any] = []
    seen = {"multi_wave_inactive": 0}

    class Tee(executed._Recorder):
        def __init__(self, facts: Any, *args: Any, **kw: Any) -> None:
            super().__init__(facts, *args, **kw)
            self.oracle = _twin(facts)
            tees.append(self)

        def __call__(self, ins: Any, w: Any, addr: np.ndarray, em: Any) -> None:
            super().__call__(ins, w, addr, em)
            _per_wave_record(self, self.oracle, ins, addr, em)
            if em is not None and addr.shape[0] > 1 and (~em).any():
                seen["multi_wave_inactive"] += 1

    monkeypatch.setattr(executed, "_Recorder", Tee)
    got = executed.run_facts(spec, arch, co.read_bytes(), executed.problem_for(spec, base))
    assert not got.error and len(tees) == 1
    want = tees[0].oracle
    for name in ("read", "traffic"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    for name in ("beyond", "per_lane_header", "multi_row_header", "staged_header", "loads"):
        assert getattr(got, name) == getattr(want, name), name
    assert got.loads and got.read.any()
    assert seen["multi_wave_inactive"] > 0, "no load of several waves had an inactive lane"


def _facts_fields(f: object, counts_only: bool) -> dict[str, object]:
    names = ["read", "executed", "classes", "error", "problem", "grid", "row_tiles"]
    if not counts_only:
        names += ["traffic", "beyond", "per_lane_header", "multi_row_header", "staged_header",
                  "loads"]
    return {n: (getattr(f, n).tolist() if isinstance(getattr(f, n), np.ndarray)
                else getattr(f, n)) for n in names}


@pytest.mark.parametrize(("kernel", "arch"), [("ew_mut_gemv_lane_header", "gfx1030"),
                                              ("ew_gemm_mq4g256v2_lds_gfx11", "gfx1100")])
def test_a_launch_records_what_a_new_machine_would_and_counts_only_the_bytes_read(
        kernel: str, arch: str, cache: Path) -> None:
    """A launch on the machine that ran the kernel before (its translation reused, its
    memory new) and on its inputs made before records the facts of a launch on a new
    machine, load evidence included (the lane-addressed header read is still found); a
    counts-only recording (the marginal count's longer K) records the same bytes read and
    dynamic counts, and nothing else."""
    from hqval.audit import executed

    spec = _spec(kernel)
    base = REAL.by_name(spec.baseline or "")
    co = compile_kernel(spec, arch, cache).code_object
    assert co is not None
    raw = co.read_bytes()
    problem = executed.problem_for(spec, base)
    from hqval.checks import oracle

    executed._MACHINES.clear()
    with oracle.memoised():
        first = executed.run_facts(spec, arch, raw, problem)
        made = dict(oracle._MEMO or {})
        again = executed.run_facts(spec, arch, raw, problem)
        assert made and (oracle._MEMO or {}).keys() == made.keys()  # its case, built once
    assert list(executed._MACHINES) == [(arch, hashlib.sha256(raw).hexdigest())]
    assert _facts_fields(again, False) == _facts_fields(first, False)
    assert first.loads and not first.error
    if kernel == "ew_mut_gemv_lane_header":
        assert first.per_lane_header
    counts = executed.run_facts(spec, arch, raw, problem, counts_only=True)
    assert _facts_fields(counts, True) == _facts_fields(first, True)
    assert counts.counts_only and not counts.loads and not counts.traffic.any()
    assert counts.tile_units == first.tile_units > 0


def test_the_marginal_launches_run_only_where_the_rule_reads_them(cache: Path) -> None:
    """v2_valu_delta reads the launches on the longer K only when both kernels ran and
    read a group-row's payload: a kernel that read none is unsupported from the one K's
    facts (the longer K's launches, if made, would change nothing), and is still no pass."""
    import dataclasses

    from hqval.audit import executed

    spec, base = _spec("ew_gemv_mq4g256v2"), REAL.by_name("ew_gemv_hfq4g256")
    co = compile_kernel(spec, "gfx1030", cache).code_object
    bco = compile_kernel(base, "gfx1030", cache).code_object
    assert co is not None and bco is not None
    problem = executed.problem_for(spec, base)
    f = executed.facts_for(spec, "gfx1030", co.read_bytes(), problem)
    b = executed.facts_for(base, "gfx1030", bco.read_bytes(), problem)
    assert executed._marginal_needed(f, b)
    blind = dataclasses.replace(f, read=f.read & False)  # read no byte of W
    assert blind.tile_units == 0
    assert not executed._marginal_needed(blind, b)
    assert not executed._marginal_needed(f, dataclasses.replace(b, error="faulted"))
    row = executed.Executed(spec, "gfx1030", blind, b).v2_valu_delta()
    assert row.status is Status.UNSUPPORTED and "no group-row" in row.message
    # with the longer K's launches given, the rule still says so before reading them
    longer = executed.marginal_problem(spec, base, problem)
    assert longer is not None
    w = executed.facts_for(spec, "gfx1030", co.read_bytes(), longer, counts_only=True)
    bw = executed.facts_for(base, "gfx1030", bco.read_bytes(), longer, counts_only=True)
    assert executed.Executed(spec, "gfx1030", blind, b, wide=w, base_wide=bw
                             ).v2_valu_delta().to_dict() == row.to_dict()


BATCHED = load_manifest(TREE / "moe_batched.yaml")


def test_a_batched_routed_gemv_is_counted_per_routed_slot(cache: Path) -> None:
    """A batched MoE GEMV (grid (M, k_top, N)) reads each selected expert once per (token,
    rank) slot routed to it: the VALU and the W traffic are per (group-row, slot), not per
    group-row of the expert, else an expert routed to ten slots multiplies the true
    per-slot delta tenfold (the engine's batched gate/up GEMV: +10.67 for +1.0).  A copy
    spending ten VALU more per group still fails."""
    real = _audit_in(BATCHED, "ew_moe_batched_mq4g256v2", "gfx1100", cache)
    for rule in RULES:
        assert real[rule].status is Status.PASS, (rule, real[rule].message)
        assert real[rule].details["decided_by"] == "executed"
    d = real["v2_valu_delta"].details
    assert d["column_tiles"] > 1  # some expert is routed to several slots
    assert abs(real["v2_valu_delta"].measured or 0.0) <= 3.0
    extra = _audit_in(BATCHED, "ew_mut_moe_batched_extra_valu", "gfx1100", cache)
    r = extra["v2_valu_delta"]
    assert r.status is Status.FAIL and r.details["decided_by"] == "executed", r.message
    assert 9.0 <= (r.measured or 0.0) - (real["v2_valu_delta"].measured or 0.0) <= 11.0
