"""``hqval.admission.policy``: the policy read as every YAML input is, its errors naming
the file, the line, the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from hqval.admission import POLICY_PATH, PolicyError, load_policy


def test_a_bad_key_is_named_with_its_line(tmp_path: Path) -> None:
    text = POLICY_PATH.read_text()
    line = next(i for i, x in enumerate(text.splitlines(), 1) if "- cap: wave_size" in x)
    bad = tmp_path / "policy.yaml"
    bad.write_text(text.replace("- cap: wave_size", "- cap: wave_sise", 1))
    with pytest.raises(PolicyError) as exc:
        load_policy(bad)
    assert str(exc.value).startswith(f"{bad}:{line}: formats.")
    assert "cap: 'wave_sise' is not one of wmma, wave_size, family" in str(exc.value)


@pytest.mark.parametrize("make", [
    lambda p: p,  # absent
    lambda p: (p.mkdir(), p)[1],  # a directory
    lambda p: (p.write_text("a: [1, 2"), p)[1],  # not YAML
], ids=["absent", "directory", "syntax"])
def test_an_unreadable_policy_is_one_line_naming_the_file(tmp_path: Path, make: object) -> None:
    path = make(tmp_path / "p.yaml")  # type: ignore[operator]
    with pytest.raises(PolicyError, match=rf"^{tmp_path / 'p.yaml'}:\d+: ") as exc:
        load_policy(path)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(("old", "new", "named"), [
    ("kinds: [gemv]", "kinds: [gemv, gemv_qkv]", "['gemv', 'gemv_qkv'] is not the suite's "
     "signatures of path decode (gemv)"),
    ("kinds: [gemv_qkv, gemv_gate_up, gemv_qkvza]", "kinds: [gemv_gate_up, gemv_qkvza]",
     "['gemv_gate_up', 'gemv_qkvza'] is not the suite's signatures of path fused_decode "
     "(gemv_gate_up, gemv_qkv, gemv_qkvza)"),
    ("kinds: [gemm]", "kinds: [gemm, gemv_qkv]", "['gemm', 'gemv_qkv'] is not the suite's "
     "signatures of path prefill (gemm)"),
])
def test_kinds_must_be_the_signatures_of_the_path(tmp_path: Path, old: str, new: str,
                                                  named: str) -> None:
    """A kernel's path is its signature's; a policy listing other kinds for a path would
    say one thing while admission does another (once: decode listed gemv alone, and a
    tree's fused QKV GEMVs alone admitted its decode cell)."""
    text = POLICY_PATH.read_text()
    assert old in text
    bad = tmp_path / "policy.yaml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(PolicyError, match="kinds") as exc:
        load_policy(bad)
    assert named in str(exc.value)
