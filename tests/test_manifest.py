"""hqval.manifest: the suite's kernels.yaml, the mutants, and the errors a user sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from hqval.manifest import (
    DEFAULT_MANIFEST,
    KernelSpec,
    ManifestError,
    load_manifest,
    load_mutants,
)
from hqval.matrix import load_arches

GOOD_ENTRY = """\
  - name: k1
    source: k.hip
    qt: 44
    kind: gemv
    requires: any
"""


def write_tree(tmp_path: Path, entries: str, header: str = "schema: 1\nkernels:\n") -> Path:
    (tmp_path / "k.hip").write_text("// kernel\n")
    path = tmp_path / "kernels.yaml"
    path.write_text(header + entries)
    return path


def test_suite_manifest_covers_the_port_surface() -> None:
    m = load_manifest()
    assert m.path == DEFAULT_MANIFEST.resolve()
    names = set(m.names())
    for prefix in ("gemv_hfq4g256", "gemv_mq4g256v2", "gemv_mq4c"):
        for variant in ("r1", "r2", "r4", "r8", "residual_r1", "residual_r2", "qkv_r1"):
            assert f"{prefix}_{variant}" in names
    for qt_prefix in ("gemm_hfq4g256", "gemm_mq4g256v2"):
        for suffix in ("", "_bt4", "_bt6", "_bt8", "_residual"):
            assert f"{qt_prefix}_wmma_gfx11{suffix}" in names
        assert f"{qt_prefix}_wmma_gfx12" in names
    assert "gemm_mq4c_wmma_gfx12" in names
    # Section 9: no qt=45 gfx11 WMMA sibling.
    assert not [k for k in m.kernels if k.qt == 45 and k.requires == "wmma_gfx11"]


def test_every_v2_kernel_has_a_v1_baseline_of_the_same_shape() -> None:
    m = load_manifest()
    for spec in m.kernels:
        assert spec.source.is_file()
        if spec.qt == 6:
            assert spec.baseline is None
            continue
        base = m.by_name(spec.baseline or "")
        assert base.qt == 6
        assert (base.kind, base.rows_per_block, base.batch_tile, base.residual,
                base.requires) == (spec.kind, spec.rows_per_block, spec.batch_tile,
                                   spec.residual, spec.requires)


def test_wmma_kernels_are_amd_only_and_apply_by_generation() -> None:
    m = load_manifest()
    arches = load_arches()
    gemv = m.by_name("gemv_mq4g256v2_r1")
    gfx11 = m.by_name("gemm_mq4g256v2_wmma_gfx11")
    gfx12 = m.by_name("gemm_mq4c_wmma_gfx12")
    assert not gemv.amd_only and gfx11.amd_only and gfx12.amd_only
    assert all(gemv.applies_to(a) for a in arches.values())
    assert [n for n, a in arches.items() if gfx11.applies_to(a)] == [
        "gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151"]
    assert [n for n, a in arches.items() if gfx12.applies_to(a)] == ["gfx1200", "gfx1201"]


def test_mutants_name_their_real_kernel_and_killer() -> None:
    real = load_manifest()
    mutants = load_mutants()
    assert len(mutants.kernels) >= 10
    for m in mutants.kernels:
        assert m.is_mutant and m.mutation and m.expected_killer
        target = real.by_name(m.mutant_of or "")
        assert (target.kind, target.qt, target.requires) == (m.kind, m.qt, m.requires)
        assert real.by_name(m.baseline or "").qt == 6
    lane_addr = mutants.by_name("gemv_mut_lane_header_address_r1")
    assert lane_addr.expected_killer == "audit_header_scalar"


def test_external_manifest_paths_are_relative_to_it(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    path = write_tree(tmp_path, GOOD_ENTRY + "    defines: {HQ_X: 3, HQ_FLAG: null}\n",
                      header="schema: 1\ninclude_dirs: [inc]\nkernels:\n")
    spec = load_manifest(path).kernels[0]
    assert spec.source == (tmp_path / "k.hip").resolve()
    assert spec.include_dirs == ((tmp_path / "inc").resolve(),)
    assert spec.symbol == "k1" and spec.block == 32 and spec.baseline is None
    assert spec.define_flags() == ["-DHQ_FLAG", "-DHQ_X=3"]


@pytest.mark.parametrize(("entries", "header", "needle"), [
    (GOOD_ENTRY + "    rows_per_blok: 2\n", None, ":8: kernels[0].rows_per_blok: unknown key "
                                                  "'rows_per_blok'; fix: rename it to "
                                                  "'rows_per_block'"),
    ("  - name: k1\n    source: k.hip\n    kind: gemv\n    requires: any\n", None,
     ":3: kernels[0]: k1: no qt and no format; fix: add 'qt: <id>' or 'format: <name>'"),
    (GOOD_ENTRY.replace("qt: 44", "qt: 1"), None,
     "kernels[0].qt: unknown qt=1; qt=1 is the engine's F16, HFQ4G256 is qt=6; known "
     "formats: 6 (hfq4g256), 13 (mq4g256), 44 (mq4g256v2), 45 (mq4cg256)"),
    (GOOD_ENTRY.replace("qt: 44", "qt: 43"), None, "kernels[0].qt: unknown qt=43; known"),
    (GOOD_ENTRY.replace("qt: 44", "format: mq5"), None,
     "kernels[0].format: unknown format name 'mq5'; known names:"),
    (GOOD_ENTRY + "    format: mq4c\n", None,
     "kernels[0].qt: qt=44 but format 'mq4c' is qt=45"),
    (GOOD_ENTRY.replace("gemv", "gemx"), None, ":6: kernels[0].kind: 'gemx' is not one of"),
    (GOOD_ENTRY.replace("k.hip", "nope.hip"), None, "nope.hip does not exist"),
    (GOOD_ENTRY + GOOD_ENTRY, None, "'k1' repeats the entry at line 3"),
    (GOOD_ENTRY + "    baseline: k0\n", None, "kernels[0].baseline: 'k0' is not a kernel"),
    (GOOD_ENTRY.replace("qt: 44", "qt: '44'"), None,
     "kernels[0].qt: expected an integer, got str '44'"),
    (GOOD_ENTRY + "    extra_args: [null, x]\n", "schema: 2\nkernels:\n",
     "kernels[0].extra_args[1]: 'x' is not null (a null pointer), an int"),
    (GOOD_ENTRY + "    preinclude: [nope.inc]\n", "schema: 2\nkernels:\n",
     "nope.inc does not exist"),
    (GOOD_ENTRY + "    block: 64\n", None, "block: 64 needs schema 2; fix: set 'schema: 2'"),
    (GOOD_ENTRY + "    block: 48\n", "schema: 2\nkernels:\n", "not a multiple of 32"),
    (GOOD_ENTRY + "    block: 2048\n", "schema: 2\nkernels:\n", "not a multiple of 32"),
    (GOOD_ENTRY + "    preinclude: [x.inc]\n", None,
     "kernels[0].preinclude: 'preinclude' is a schema 2 key; fix: set 'schema: 2'"),
    (GOOD_ENTRY.replace("kind: gemv", "kind: gemm"), None, "a gemm kernel is a WMMA kernel"),
    (GOOD_ENTRY, "schema: 3\nkernels:\n",
     ":1: schema: 3 is not one of [1, 2]; fix: set 'schema: 2' (1 still loads)"),
    (GOOD_ENTRY, "schema: 1\nkernel:\n",
     "kernel: unknown key 'kernel'; fix: rename it to 'kernels'"),
])
def test_bad_manifests_name_file_line_key_and_fix(
        tmp_path: Path, entries: str, header: str | None, needle: str) -> None:
    path = write_tree(tmp_path, entries, **({"header": header} if header else {}))
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    text = str(err.value)
    assert text.startswith(str(path.resolve()))
    assert needle in text
    assert "; fix: " in text


def test_missing_manifest_is_an_error_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="pass --manifest"):
        load_manifest(tmp_path / "absent.yaml")


def test_mutant_keys_are_required_in_a_mutant_manifest(tmp_path: Path) -> None:
    path = write_tree(tmp_path, GOOD_ENTRY + "    mutant_of: k0\n    mutation: broken\n")
    with pytest.raises(ManifestError, match="missing required key 'expected_killer'"):
        load_manifest(path, mutants=True)
    # Detected from the first entry when not said.
    with pytest.raises(ManifestError, match="missing required key 'expected_killer'"):
        load_manifest(path)
    with pytest.raises(ManifestError, match="unknown key 'mutant_of'"):
        load_manifest(path, mutants=False)


def test_the_mutant_manifest_loads_by_path_alone() -> None:
    from hqval.manifest import DEFAULT_MUTANTS

    m = load_manifest(DEFAULT_MUTANTS)
    assert m.kernels and all(k.is_mutant for k in m.kernels)


def test_applies_to_accepts_anything_with_wmma() -> None:
    class Fake:
        wmma = "gfx12"

    spec = KernelSpec(name="x", source=Path("x.hip"), symbol="x", qt=6, kind="gemm",
                      requires="wmma_gfx12")
    assert spec.applies_to(Fake())
    Fake.wmma = "gfx11"
    assert not spec.applies_to(Fake())


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = write_tree(tmp_path, GOOD_ENTRY.replace("k.hip", "gone.hip") +
                      GOOD_ENTRY.replace("name: k1", "name: k2").replace("qt: 44", "qt: x"))
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    assert len(err.value.problems) == 1  # types first: qt of k2
    fixed = write_tree(tmp_path, GOOD_ENTRY.replace("k.hip", "gone.hip") +
                       GOOD_ENTRY.replace("name: k1", "name: k2") + "    baseline: kk\n")
    with pytest.raises(ManifestError) as err:
        load_manifest(fixed)
    assert [p.key for p in err.value.problems] == ["kernels[0].source", "kernels[1].baseline"]


def test_a_format_may_be_named_instead_of_its_qt(tmp_path: Path) -> None:
    path = write_tree(tmp_path, GOOD_ENTRY.replace("qt: 44", "format: mq4c") + GOOD_ENTRY
                      .replace("k1", "k2").replace("qt: 44", "format: hfq4g256\n    qt: 6"))
    m = load_manifest(path)
    assert [k.qt for k in m.kernels] == [45, 6]


@pytest.mark.parametrize(("header", "entry", "message"), [
    ("schema: 1\nkernels:\n", GOOD_ENTRY.replace("k.hip", "../outside/k.hip"),
     "outside the manifest's directory"),
    ("schema: 1\nkernels:\n", GOOD_ENTRY.replace("k.hip", "/etc/passwd"),
     "outside the manifest's directory"),
    ("schema: 1\ninclude_dirs: [../outside]\nkernels:\n", GOOD_ENTRY,
     "outside the manifest's directory"),
    ("schema: 1\nkernels:\n", GOOD_ENTRY + "    include_dirs: [/usr/include]\n",
     "outside the manifest's directory"),
])
def test_paths_stay_inside_the_tree(tmp_path: Path, header: str, entry: str,
                                    message: str) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "k.hip").write_text("// kernel\n")
    path = write_tree(tree, entry, header=header)
    with pytest.raises(ManifestError, match=message) as info:
        load_manifest(path)
    assert "allow_outside_tree: true" in str(info.value)
    # the manifest may say so explicitly
    path.write_text(header.replace("schema: 1\n", "schema: 1\nallow_outside_tree: true\n")
                    + entry)
    assert load_manifest(path).kernels


def test_a_symlink_out_of_the_tree_is_outside(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tmp_path / "secret.hip").write_text("// not yours\n")
    (tree / "link.hip").symlink_to(tmp_path / "secret.hip")
    path = write_tree(tree, GOOD_ENTRY.replace("k.hip", "link.hip"))
    with pytest.raises(ManifestError, match="outside the manifest's directory"):
        load_manifest(path)


@pytest.mark.parametrize("key,value", [
    ("name", "'k1; rm -rf /'"), ("name", "'1k'"), ("name", "'k-1'"), ("name", "'k|x'"),
    ("name", "'k\u00e9'"), ("symbol", "'sym bol'"),
])
def test_kernel_names_are_c_identifiers(tmp_path: Path, key: str, value: str) -> None:
    entry = GOOD_ENTRY.replace("name: k1", f"{key}: {value}") if key == "name" else \
        GOOD_ENTRY + f"    {key}: {value}\n"
    with pytest.raises(ManifestError, match="not a C identifier"):
        load_manifest(write_tree(tmp_path, entry))


def test_defines_are_c_identifiers(tmp_path: Path) -> None:
    entry = GOOD_ENTRY + "    defines: {'A-B': 1}\n"
    with pytest.raises(ManifestError, match="bad define"):
        load_manifest(write_tree(tmp_path, entry))
def test_preinclude_extra_args_and_block_are_read(tmp_path: Path) -> None:
    path = write_tree(tmp_path, GOOD_ENTRY + "    block: 128\n    preinclude: [pre.inc]\n"
                      "    extra_args: [null, 3, 0.5]\n", header="schema: 2\nkernels:\n")
    (tmp_path / "pre.inc").write_text("#define X 1\n")
    spec = load_manifest(path).kernels[0]
    assert spec.block == 128 and spec.extra_args == (None, 3, 0.5)
    assert spec.preinclude == ((tmp_path / "pre.inc").resolve(),)


# ---- schema 2 ----------------------------------------------------------------------------

TREE2 = Path(__file__).resolve().parent / "data" / "schema2_tree" / "kernels.yaml"


def test_schema2_tree_loads_every_key() -> None:
    m = load_manifest(TREE2)
    k, wrong, waived = (m.by_name(n) for n in
                        ("gemv_tree_r1", "gemv_tree_wrong_args_r1", "gemv_tree_waived_r1"))
    assert k.qt == 6 and k.extra_args == (None, 1.0, 7) and k.k_multiple == 512
    assert [p.name for p in k.preinclude] == ["policy.inc"] and k.flags == ("-ffp-contract=fast",)
    assert dict(k.variants).keys() == {"gfx11", "gfx1100", "gfx12"}
    assert not wrong.production and k.production
    assert waived.shapes == ((9, 768), (33, 4096)) and waived.arches == ("gfx1100", "gfx1201")
    assert waived.audit_waive[0][0] == "no_spill"


def test_variant_precedence_is_the_engines() -> None:
    """chip (name.gfx1100.hip) over family (name.gfx11.hip, the first five characters of
    the arch) over the default source."""
    k = load_manifest(TREE2).by_name("gemv_tree_r1")
    assert k.source_for("gfx1100").name == "gemv_tree.gfx1100.hip"
    assert k.source_for("gfx1101").name == "gemv_tree.gfx11.hip"
    assert k.source_for("gfx1151").name == "gemv_tree.gfx11.hip"
    assert k.source_for("gfx1201").name == "gemv_tree.gfx12.hip"
    assert k.source_for("gfx1030").name == "gemv_tree.hip"


def test_a_variant_named_as_the_source_applies_only_to_its_tag(tmp_path: Path) -> None:
    (tmp_path / "k.gfx12.hip").write_text("// gfx12 only\n")
    spec = load_manifest(write_tree(tmp_path, GOOD_ENTRY.replace("k.hip", "k.gfx12.hip"),
                                    header="schema: 2\nkernels:\n")).kernels[0]
    arches = load_arches()
    assert [a for a in arches if spec.applies_to(arches[a])] == ["gfx1200", "gfx1201"]
    assert spec.source_for("gfx1201").name == "k.gfx12.hip" and spec.variants == ()


def test_arches_restricts_where_a_kernel_applies(tmp_path: Path) -> None:
    spec = load_manifest(write_tree(tmp_path, GOOD_ENTRY + "    arches: [gfx1030]\n",
                                    header="schema: 2\nkernels:\n")).kernels[0]
    arches = load_arches()
    assert [a for a in arches if spec.applies_to(arches[a])] == ["gfx1030"]


@pytest.mark.parametrize(("extra", "message"), [
    ("    flags: [-o, /tmp/x]\n", "flag '-o' is not one a manifest may set"),
    ("    flags: [-fplugin=evil.so]\n", "flag '-fplugin=evil.so' is not one"),
    ("    flags: ['-include /etc/passwd']\n", "is not one a manifest may set"),
    ("    extra_args: [null, abc]\n", "'abc' is not null (a null pointer), an int"),
    ("    extra_args: [true]\n", "True is not null"),
    ("    extra_args: [4294967296]\n", "does not fit the i32"),
    ("    k_multiple: 300\n", "k_multiple 300 is not a positive multiple of 256"),
    ("    shapes: [[8, 300]]\n", "K=300 is not a multiple of 256"),
    ("    shapes: [[8]]\n", "is not [M, K]"),
    ("    arches: [gfx9999]\n", "'gfx9999' is not an arch of matrices/arches.yaml"),
    ("    production: maybe\n", "expected a boolean"),
    ("    audit_waive: [{rule: no_spil, reason: x}]\n", "did you mean 'no_spill'?"),
    ("    audit_waive: [{rule: no_spill, reason: ' '}]\n", "a waiver needs a one-line reason"),
    ("    audit_waive: [{rule: no_spill}]\n", "missing required key 'reason'"),
    ("    preinclude: [missing.inc]\n", "missing.inc does not exist"),
    ("    preinclude: [../../x.inc]\n", "outside the manifest's directory"),
])
def test_schema2_errors_name_file_line_key_and_fix(tmp_path: Path, extra: str,
                                                   message: str) -> None:
    path = write_tree(tmp_path, GOOD_ENTRY + extra, header="schema: 2\nkernels:\n")
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    text = str(info.value)
    assert message in text, text
    assert f"{path}:" in text and "fix:" in text


def test_not_for_gives_the_one_reason_a_kernel_is_not_built(tmp_path: Path) -> None:
    """``KernelSpec.not_for``: the WMMA generation, the ``arches`` list or the source's
    variant tag, whichever keeps the kernel off the arch, and '' where it is built; every
    'not built' / 'does not apply' message uses it (a kernel limited by ``arches:`` was
    said to be 'requires any' where it was not built)."""
    arches = load_arches()
    m = load_manifest()
    gfx12 = m.by_name("gemm_mq4c_wmma_gfx12")
    assert gfx12.not_for(arches["gfx1100"]) == "requires wmma_gfx12; gfx1100 has gfx11 WMMA"
    assert gfx12.not_for(arches["gfx1030"]) == "requires wmma_gfx12; gfx1030 has no WMMA"
    assert gfx12.not_for(arches["gfx1201"]) == ""
    listed = load_manifest(write_tree(tmp_path, GOOD_ENTRY + "    arches: [gfx1030]\n",
                                      header="schema: 2\nkernels:\n")).kernels[0]
    assert listed.not_for(arches["gfx1100"]) == "its arches are gfx1030"
    assert listed.not_for(arches["gfx1030"]) == ""
    (tmp_path / "k.gfx12.hip").write_text("// gfx12 only\n")
    tagged = load_manifest(write_tree(tmp_path, GOOD_ENTRY.replace("k.hip", "k.gfx12.hip"),
                                      header="schema: 2\nkernels:\n")).kernels[0]
    assert tagged.not_for(arches["gfx1100"]) == "its source k.gfx12.hip is for gfx12 only"
    for spec in (gfx12, listed, tagged):
        for a in arches.values():
            assert spec.applies_to(a) == (not spec.not_for(a))


def test_a_compile_row_not_built_names_the_reason(tmp_path: Path) -> None:
    from hqval.toolchain import CompileCell

    arches = load_arches()
    listed = load_manifest(write_tree(tmp_path, GOOD_ENTRY + "    arches: [gfx1030]\n",
                                      header="schema: 2\nkernels:\n")).kernels[0]
    row = CompileCell(listed, "gfx1100", None, listed.not_for(arches["gfx1100"])).row()
    assert row.message == "not built for gfx1100: its arches are gfx1030"
    assert str(row.status) == "unsupported"
