"""Kernel signatures: the suite's, a tree's own, and the errors of bad ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from hqval.manifest import ManifestError, load_manifest
from hqval.signature import SignatureError, builtin, load_signatures

HIP = 'extern "C" __global__ void k() {}\n'


def test_suite_signatures_describe_the_engine_abis() -> None:
    sigs = builtin()
    assert {"gemv", "gemv_qkv", "gemm"} <= set(sigs)
    gu = sigs["gemv_moe_gate_up"]
    assert gu.arg_names()[:3] == ["expert_ptrs", "topk_indices", "x"]
    assert gu.launch({"M": 8, "K": 512, "E": 4, "k_top": 2, "R": 1, "BT": 1,
                      "block": 32}) == ((8, 2, 1), (32, 1, 1))
    grouped = sigs["gemm_moe_grouped"]
    assert grouped.arg_names() == ["expert_weight_ptrs", "expert_tile_ids",
                                   "sorted_slot_index", "X_src", "Y_grouped", "M", "K",
                                   "x_row_div", "m_total"]
    assert grouped.kernarg_offsets()["M"] == 40 and grouped.kernarg_offsets()["m_total"] == 52
    assert sigs["gemm_gate_up"].per_token == "gemv_gate_up"
    assert sigs["gemm"].launch({"M": 20, "K": 512, "N": 21, "R": 1, "BT": 1,
                                "block": 32}) == ((2, 2, 1), (32, 1, 1))


def _tree(tmp_path: Path, signatures: str, kind: str = "my_gemv") -> Path:
    (tmp_path / "k.hip").write_text(HIP)
    (tmp_path / "kernels.yaml").write_text(
        "schema: 2\nsignatures:\n" + signatures
        + f"kernels:\n  - name: k\n    source: k.hip\n    qt: 44\n    kind: {kind}\n"
        "    requires: any\n")
    return tmp_path / "kernels.yaml"


GOOD = """\
  my_gemv:
    path: decode
    dims: {M: rows, K: k}
    args:
      - {name: x, role: activation, dtype: f32, shape: [K]}
      - {name: W, role: weight, rows: M}
      - {name: y, role: output, shape: [M], op: matvec, weight: W, x: x}
      - {name: K, role: scalar, value: K}
      - {name: M, role: scalar, value: M}
    grid: ["cdiv(M, R)", 1, 1]
    block: 64
"""


def test_a_tree_declares_its_own_signature(tmp_path: Path) -> None:
    spec = load_manifest(_tree(tmp_path, GOOD)).kernels[0]
    assert spec.signature.name == "my_gemv" and spec.path == "decode"
    assert spec.signature.arg_names() == ["x", "W", "y", "K", "M"]
    assert spec.signature.launch({"M": 9, "K": 256, "R": 2, "BT": 1, "block": 32}) == \
        ((5, 1, 1), (64, 1, 1))


@pytest.mark.parametrize(("change", "where", "says"), [
    (("cdiv(M, R)", "cdiv(M, Q)"), ":12: signatures.my_gemv.grid[0]", "Q, not a name here"),
    (('["cdiv(M, R)", 1, 1]', "[cdiv(M, R), 1, 1]"), ":12: signatures.my_gemv.grid",
     "quote an expression"),
    (("role: weight, rows: M", "role: wieght, rows: M"), ":8: signatures.my_gemv.args[1].role",
     "'wieght' is not one of"),
    (("weight: W, x: x", "weight: x, x: x"), ":9: signatures.my_gemv.args[2].weight",
     "'x' is not a weight or weight_table argument"),
    (("path: decode", "path: prefill"), ":3: signatures.my_gemv", "names no per_token"),
    (("{M: rows, K: k}", "{M: rows}"), ":5: signatures.my_gemv.dims", "no dim with role k"),
    (("my_gemv:", "gemv:"), ":3: signatures.gemv", "is the suite's own"),
    (("shape: [M], op", "shape: [M], opp"), ":9: signatures.my_gemv.args[2].opp",
     "unknown key 'opp'"),
])
def test_bad_signatures_name_file_line_key_fix(tmp_path: Path, change: tuple[str, str],
                                               where: str, says: str) -> None:
    path = _tree(tmp_path, GOOD.replace(*change),
                 "gemv" if change[1] == "gemv:" else "my_gemv")
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    text = str(err.value)
    assert f"kernels.yaml{where}" in text and says in text and "fix:" in text, text


def test_unknown_kind_lists_the_tree_signatures(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"'my_gemx' is not one of .*'my_gemv'"):
        load_manifest(_tree(tmp_path, GOOD, "my_gemx"))


def test_a_kernel_fixes_dims_of_its_signature(tmp_path: Path) -> None:
    path = _tree(tmp_path, GOOD)
    path.write_text(path.read_text() + "    dims: {K: 512}\n")
    assert load_manifest(path).kernels[0].dims == (("K", 512),)
    path.write_text(path.read_text().replace("{K: 512}", "{k_top: 8}"))
    with pytest.raises(ManifestError, match="'k_top' is not a dim of signature my_gemv"):
        load_manifest(path)


def test_signature_file_errors(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("schema: 1\nsignatures:\n  a:\n    path: decode\n")
    with pytest.raises(SignatureError, match="missing required key 'dims'"):
        load_signatures(f)


def test_a_prefill_signature_falls_back_to_its_own_decode_path(tmp_path: Path) -> None:
    """A prefill path's fallback evidence is its decode path's kernels (DECODE_OF): a
    multi-matrix GEMM whose per_token decode lay on the dense decode path would have its
    fallback and per-token reference from one path and its cells on another (once: the
    suite's gemv_qkv was a decode signature, serving fused_prefill's gemm_qkv)."""
    assert builtin()["gemv_qkv"].path == "fused_decode"
    assert builtin()["gemm_qkv"].per_token == "gemv_qkv"
    text = (Path(__file__).resolve().parents[1] / "matrices" / "signatures.yaml").read_text()
    old = "  gemv_qkv:\n    path: fused_decode\n"
    assert old in text
    bad = tmp_path / "signatures.yaml"
    bad.write_text(text.replace(old, "  gemv_qkv:\n    path: decode\n"))
    with pytest.raises(SignatureError) as err:
        load_signatures(bad, builtin=True)
    assert "signatures.gemm_qkv.per_token" in str(err.value)
    assert "gemv_qkv is a decode signature; a fused_prefill signature falls back to a " \
        "fused_decode one" in str(err.value)
    # a tree's own fused GEMM naming the dense GEMV as its per-token decode
    mine = GOOD.replace("my_gemv:", "my_gemm:").replace("path: decode",
                                                        "path: fused_prefill\n    per_token: gemv")
    with pytest.raises(ManifestError, match="gemv is a decode signature; a fused_prefill "
                                            "signature falls back to a fused_decode one"):
        load_manifest(_tree(tmp_path, mine, "my_gemm"))


def test_the_engine_tree_doc_has_a_manifest_example_for_each_signature() -> None:
    """docs/engine-tree.md's "One entry per signature" block: one kernel entry of each of the
    suite's signatures (no more, no fewer), each a manifest entry that names a source, a
    format and what it requires."""
    import re

    import yaml

    doc = (Path(__file__).resolve().parents[1] / "docs" / "engine-tree.md").read_text()
    section = doc.split("### One entry per signature", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    entries = yaml.safe_load(block.group(1))["kernels"]
    kinds = [e["kind"] for e in entries]
    assert sorted(kinds) == sorted(builtin()), kinds
    for e in entries:
        assert {"name", "source", "qt", "kind", "requires"} <= set(e), e
