"""matrices/*.yaml: loaded through their schemas, consistent with the code, and the VGPR
facts re-derived from the real compiler."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hqval import matrix
from hqval.formats import all_formats, by_name
from hqval.schema import SchemaError

from .conftest import clang19_occupancy  # type: ignore[import-not-found]

ARCHES = ("gfx1010", "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151",
          "gfx1200", "gfx1201")


def test_arches_load_with_section6_rows() -> None:
    arches = matrix.load_arches()
    assert tuple(arches) == ARCHES
    # section 6: 1 if wave64-native, RDNA2 or RDNA3 dGPU, else 2
    want = {"gfx1010": 2, "gfx1030": 1, "gfx1100": 1, "gfx1101": 1, "gfx1102": 1,
            "gfx1150": 2, "gfx1151": 2, "gfx1200": 2, "gfx1201": 2}
    assert {n: a.gemv_rows_default for n, a in arches.items()} == want
    assert {n: a.wmma for n, a in arches.items()} == {
        "gfx1010": "none", "gfx1030": "none", **{n: "gfx11" for n in ARCHES[2:7]},
        "gfx1200": "gfx12", "gfx1201": "gfx12"}
    a = arches["gfx1030"]
    assert a.infinity_cache_bytes == 128 * 2**20 and a.vram_gbps == 576  # the note's figures
    assert arches["gfx1100"].peak_f32_gflops == pytest.approx(61440)


def test_gemv_rows_default_is_computed_not_stored() -> None:
    a = matrix.load_arches()["gfx1100"]
    assert "gemv_rows_default" not in matrix.ARCH_SPEC.fields  # type: ignore[operator]
    import dataclasses

    wave64 = dataclasses.replace(a, wave_size=64, is_rdna3_dgpu=False)
    apu = dataclasses.replace(a, is_rdna3_dgpu=False)
    assert wave64.gemv_rows_default == 1 and apu.gemv_rows_default == 2


def test_every_arch_fact_has_a_source_comment() -> None:
    lines = (matrix.MATRICES_DIR / "arches.yaml").read_text().splitlines()
    facts = [ln for ln in lines if re.match(r"^\s{4}\w+:\s*\S", ln)]
    assert len(facts) >= 9 * 15
    missing = [ln for ln in facts if "#" not in ln]
    assert missing == []


def _edit(tmp_path: Path, old: str, new: str, after: str = "  gfx1100:") -> tuple[Path, int]:
    text = (matrix.MATRICES_DIR / "arches.yaml").read_text()
    start = text.index(after)
    i = text.index(old, start)
    line = text[:i].count("\n") + 1
    p = tmp_path / "arches.yaml"
    p.write_text(text[:i] + new + text[i + len(old):])
    return p, line


def test_contradicting_flag_names_file_line_key(tmp_path: Path) -> None:
    p, line = _edit(tmp_path, "is_rdna2: false", "is_rdna2: true")
    with pytest.raises(SchemaError, match=rf"arches.yaml:{line}: arches.gfx1100.is_rdna2: "
                                          r"True contradicts family=rdna3.*fix: set False"):
        matrix.load_arches(p)


def test_typo_names_file_line_key_and_fix(tmp_path: Path) -> None:
    p, line = _edit(tmp_path, "wmma: gfx11", "wmma: gfx13")
    with pytest.raises(SchemaError, match=rf"arches.yaml:{line}: arches.gfx1100.wmma: 'gfx13' "
                                          r"is not one of .*did you mean"):
        matrix.load_arches(p)
    p, line = _edit(tmp_path, "cu_count: 96", "cu_cout: 96")
    with pytest.raises(SchemaError, match=rf":{line}: arches.gfx1100.cu_cout: unknown key"
                                          r".*rename it to 'cu_count'"):
        matrix.load_arches(p)


def test_formats_yaml_agrees_with_registry() -> None:
    entries = matrix.load_formats()
    assert set(entries) == {f.name for f in all_formats()}
    for name, e in entries.items():
        f = by_name(name)
        assert (e.qt, e.group_bytes, e.sub_block, e.payload_offset, e.rotated, e.status) == (
            f.qt, f.group_bytes, f.sub_block, f.payload_offset, f.rotated, f.status), name
        assert set(e.aliases) == set(f.aliases)


def test_duplicate_qt_refused(tmp_path: Path) -> None:
    text = (matrix.MATRICES_DIR / "formats.yaml").read_text().replace("qt: 13", "qt: 6")
    p = tmp_path / "formats.yaml"
    p.write_text(text)
    with pytest.raises(SchemaError, match=r"formats.mq4g256.qt: qt=6 already used"):
        matrix.load_formats(p)


def test_shapes() -> None:
    shapes = matrix.load_shapes()
    dims = {(s.M, s.K) for s in shapes}
    assert {(4096, 5120), (4096, 17408), (5120, 5120), (17408, 5120), (5120, 17408),
            (27648, 5120)} <= dims
    assert all(s.K % 256 == 0 for s in shapes)
    assert matrix.load_shapes(set="emu") and all(s.set == "emu"
                                                  for s in matrix.load_shapes(set="emu"))


def test_bad_shape_k_refused(tmp_path: Path) -> None:
    text = (matrix.MATRICES_DIR / "shapes.yaml").read_text().replace("K: 512,", "K: 500,")
    p = tmp_path / "shapes.yaml"
    p.write_text(text)
    with pytest.raises(SchemaError, match=r"shapes\[6\].K: K=500 is not a multiple of 256"):
        matrix.load_shapes(p)


def test_devices_and_resolve() -> None:
    h200 = matrix.load_devices()["h200"]
    assert h200.arch == "sm_90" and h200.l2_bytes == 50 * 2**20 and h200.hbm_gbps == 4800
    assert [a.name for a in matrix.resolve_arches(["gfx1151"])] == ["gfx1151"]
    assert len(matrix.resolve_arches(["all"])) == 9
    with pytest.raises(ValueError, match="unknown arch gfx9999; known: gfx1010"):
        matrix.resolve_arches(["gfx9999"])


def test_one_arch_resolver_takes_lists_all_and_sm_targets() -> None:
    """The one --arch resolver: comma lists, repeats, 'all', sm_XX (an Arch of vendor
    nvidia), no duplicates; empty or unknown values are an ArchError naming the fix."""
    names = [a.name for a in matrix.resolve_arches(["gfx1100,gfx1201", "gfx1100", "sm_90"])]
    assert names == ["gfx1100", "gfx1201", "sm_90"]
    sm = matrix.resolve_arch("sm_90")
    assert not sm.is_amd and sm.wmma == "none" and sm.gemv_rows_default == 1
    assert matrix.resolve_arch("gfx1100").is_amd
    assert len(matrix.resolve_arches(["all"])) == len(matrix.load_arches())
    for bad, why in (([], "no --arch given"), ([","], "names no arch"),
                     ([" , "], "names no arch"), (["gfx9000"], "unknown arch gfx9000"),
                     (["sm_x"], "unknown arch sm_x")):
        with pytest.raises(matrix.ArchError, match=why):
            matrix.resolve_arches(bad)
    with pytest.raises(matrix.ArchError, match="compile takes gfx targets"):
        matrix.gfx_arches(["sm_90"], "compile")


PROBE = ('extern "C" __attribute__((global)) void k(float* p) '
         '{ asm volatile("" ::: "v95"); p[__builtin_amdgcn_workitem_id_x()] = 1.0f; }\n')


@pytest.mark.skipif(shutil.which("clang-19") is None,
                    reason="needs clang-19 (apt-get install clang-19 lld-19)")
@pytest.mark.parametrize("arch", ARCHES)
def test_vgpr_file_matches_compiler_occupancy(arch: str, tmp_path: Path) -> None:
    """A 96-VGPR wave32 kernel gets 1536 // 96 = 16 waves per SIMD on a full VGPR file and
    1024 // 96 = 10 on the smaller one: the compiler's occupancy remark tells them apart."""
    occ, remark, _ = clang19_occupancy(arch, PROBE, tmp_path)
    vgprs = re.search(r"VGPRs: (\d+)", remark)
    assert vgprs and int(vgprs.group(1)) == 96
    file_size = matrix.load_arches()[arch].vgprs_per_simd
    assert occ == min(16, file_size // 96)


SLOTS_PROBE = ('extern "C" __attribute__((global, amdgpu_flat_work_group_size(1, 32))) '
               'void k(float* p) '
               '{ p[__builtin_amdgcn_workitem_id_x()] = 1.0f; }\n')


@pytest.mark.skipif(shutil.which("clang-19") is None,
                    reason="needs clang-19 (apt-get install clang-19 lld-19)")
@pytest.mark.parametrize("arch", ARCHES)
def test_wave_slots_match_compiler_occupancy(arch: str, tmp_path: Path) -> None:
    """A kernel too small for its VGPRs to limit it gets the SIMD's wave slots: the
    compiler's occupancy remark is what hqval.isa.max_waves_per_simd says (20 on RDNA1,
    16 from RDNA2 on)."""
    from hqval.isa import max_waves_per_simd

    occ, _, _ = clang19_occupancy(arch, SLOTS_PROBE, tmp_path)
    assert occ == max_waves_per_simd(matrix.load_arches()[arch])


MCA_PROBE = {  # latency class -> one instruction of it (gfx10 and gfx11/12 spellings)
    "valu": ("v_fma_f32 v1, v2, v3, v4", "v_fma_f32 v1, v2, v3, v4"),
    "trans": ("v_exp_f32 v1, v2", "v_exp_f32 v1, v2"),
    "salu": ("s_and_b32 s0, s1, s2", "s_and_b32 s0, s1, s2"),
    "smem": ("s_load_dword s0, s[2:3], 0x0", "s_load_b32 s0, s[2:3], 0x0"),
    "lds": ("ds_read_b32 v1, v2", "ds_load_b32 v1, v2"),
    "vmem": ("global_load_dword v1, v[2:3], off", "global_load_b32 v1, v[2:3], off"),
}


@pytest.mark.skipif(shutil.which("llvm-mca-19") is None, reason="needs llvm-mca-19 (llvm-19)")
@pytest.mark.parametrize("arch", ARCHES)
def test_latencies_are_llvm_mca_figures(arch: str, tmp_path: Path) -> None:
    """arches.yaml's [mca] latencies are what LLVM 19's scheduling model says for one
    instruction of each class on the family's targets."""
    a = matrix.load_arches()[arch]
    lat = matrix.load_latencies()[a.family]
    gfx10 = a.gfx_major == 10
    src = tmp_path / "p.s"
    src.write_text("".join(v[0 if gfx10 else 1] + "\n" for v in MCA_PROBE.values()))
    out = subprocess.run(["llvm-mca-19", "-mtriple=amdgcn", f"-mcpu={arch}", "-iterations=1",
                          str(src)], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    table = out[out.index("[6]    Instructions:"):]  # the instruction-info table
    got = [int(line.split()[1]) for line in table.splitlines()[1:len(MCA_PROBE) + 1]]
    assert got == [getattr(lat, c) for c in MCA_PROBE]


def test_an_edited_arches_file_is_read_again(tmp_path: Path) -> None:
    """load_arches keeps what a file of a given content holds: the same file gives equal
    arches (a dict of its own), an edit is read and checked again, a bad edit is refused."""
    p, _ = _edit(tmp_path, "cu_count: 96", "cu_count: 95")
    first = matrix.load_arches(p)
    again = matrix.load_arches(p)
    assert first == again and first is not again and first["gfx1100"].cu_count == 95
    again.pop("gfx1100")
    assert "gfx1100" in matrix.load_arches(p)
    p.write_text(p.read_text().replace("cu_count: 95", "cu_count: 94", 1))
    assert matrix.load_arches(p)["gfx1100"].cu_count == 94
    p.write_text(p.read_text().replace("wmma: gfx11", "wmma: gfx13", 1))
    with pytest.raises(SchemaError, match="wmma: 'gfx13' is not one of"):
        matrix.load_arches(p)
