"""Fault class: one bounded reader at every boundary, fifth round: YAML tags.  hqval's YAML
inputs hold plain mappings, lists and scalars; the schema reader (``hqval.schema``), which
builds mappings and lists itself to keep each value's line, took any tag on them
(``!!python/object/apply:...``, ``!!set``, ``!!omap``) as a plain one, silently.  A tag
asking for another type is refused, naming the file and line (exit 2).  And
``HQVAL_POLICY`` naming no regular file is one line (held).  A merge key (``<<``)
overridden by a key of the mapping's own is YAML's rule, not a duplicate."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from hqval.matrix import MATRICES_DIR as MATRICES

from .conftest import ARCH, Result

Hq = Callable[..., Result]
TAGS = {"python-object-apply": "!!python/object/apply:os.system",
        "set": "!!set", "omap": "!!omap"}


@pytest.mark.parametrize("tag", list(TAGS))
def test_a_policy_collection_of_another_type_is_refused(copy_of: Callable[[], Path],
                                                        tmp_path: Path, hqval: Hq,
                                                        tag: str) -> None:
    text = (MATRICES / "policy.yaml").read_text()
    assert "\nx-gates:\n" in text
    policy = tmp_path / "policy.yaml"
    policy.write_text(text.replace("\nx-gates:\n", f"\nx-gates: {TAGS[tag]}\n", 1))
    res = hqval("admit", str(copy_of()), "--policy", str(policy))
    assert res.code == 2, res.err  # once: exit 0, the tag ignored
    assert f"{policy}:" in res.err and "asks for a type no hqval YAML holds" in res.err
    assert len(res.err.strip().splitlines()) == 1, res.err


def test_a_manifest_collection_of_another_type_is_refused(tree: Path, tmp_path: Path,
                                                          hqval: Hq) -> None:
    shutil.copytree(tree.parent, tmp_path / "t")
    manifest = tmp_path / "t" / "kernels.yaml"
    text = manifest.read_text()
    assert "\nkernels:\n" in text
    manifest.write_text(text.replace("\nkernels:\n",
                                     "\nkernels: !!python/object/apply:os.system\n"))
    res = hqval("compile", "--arch", ARCH, "--manifest", str(manifest), "--cache-dir",
                str(tmp_path / "cache"))
    assert res.code == 2, res.out + res.err  # once: compiled, exit 0
    assert "kernels.yaml" in res.err and "asks for a type no hqval YAML holds" in res.err


def test_a_policy_with_a_merge_key_still_reads(copy_of: Callable[[], Path], tmp_path: Path,
                                               hqval: Hq) -> None:
    """YAML's merge key with a key of the mapping's own after it, which overrides the
    merged one (YAML's rule): read as YAML reads it (once: refused, "duplicate key
    'ratio_max'", so a policy written so could not gate at all)."""
    text = (MATRICES / "policy.yaml").read_text()
    old = "timing: {hot: *gemv_gate, cold: *gemv_gate,"
    assert old in text
    policy = tmp_path / "policy.yaml"
    policy.write_text(text.replace(old, "timing: {hot: {<<: *gemv_gate, ratio_max: 1.05}, "
                                        "cold: *gemv_gate,", 1))
    assert hqval("admit", str(copy_of()), "--policy", str(policy)).code == 0


@pytest.mark.parametrize("kind", ["dir", "fifo"])
def test_hqval_policy_naming_no_regular_file_is_one_line(
        copy_of: Callable[[], Path], tmp_path: Path, hqval: Hq,
        monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    target = tmp_path / "policy.yaml"
    if kind == "dir":
        target.mkdir()
    else:
        os.mkfifo(target)
    monkeypatch.setenv("HQVAL_POLICY", str(target))
    res = hqval("admit", str(copy_of()))
    assert res.code == 2, res.err  # (held on main)
    assert str(target) in res.err and "not a regular file" in res.err
    assert "HQVAL_POLICY" in res.err and len(res.err.strip().splitlines()) == 1
