"""hqval.provenance: the manifest, the tree's commit and dirty flag, the files' sha256."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from hqval import provenance

GIT = shutil.which("git")


@pytest.mark.skipif(GIT is None, reason="needs git")
def test_tree_names_the_commit_and_whether_it_is_dirty(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    manifest = tree / "kernels.yaml"
    manifest.write_text("schema: 2\nkernels: []\n")
    (tree / "k.hip").write_text("// v1\n")
    run = {"cwd": tree, "check": True, "capture_output": True}
    subprocess.run(["git", "init", "-q"], **run)  # type: ignore[call-overload]
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=t", "commit", "-qam",
                    "init", "--allow-empty"], **run)  # type: ignore[call-overload]
    subprocess.run(["git", "add", "."], **run)  # type: ignore[call-overload]
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=t", "commit", "-qm",
                    "tree"], **run)  # type: ignore[call-overload]
    head = subprocess.run(["git", "rev-parse", "HEAD"], **run).stdout.decode().strip()  # type: ignore[call-overload]
    p = provenance.tree(manifest)
    assert p["kernel_tree_commit"] == head and p["kernel_tree_dirty"] is False
    assert p["manifest_sha256"] == hashlib.sha256(manifest.read_bytes()).hexdigest()
    (tree / "k.hip").write_text("// v2, not committed\n")
    assert provenance.tree(manifest)["kernel_tree_dirty"] is True


def test_outside_a_git_tree_the_commit_is_none(tmp_path: Path) -> None:
    manifest = tmp_path / "kernels.yaml"
    manifest.write_text("schema: 2\n")
    p = provenance.tree(manifest)
    assert p["kernel_tree_commit"] is None and p["kernel_tree_dirty"] is None


def test_files_are_relative_to_the_tree_when_inside_it(tmp_path: Path) -> None:
    out = provenance.files([(str(tmp_path / "src" / "k.hip"), "aa"), ("/usr/include/x.h", "bb"),
                            (str(tmp_path / "src" / "k.hip"), "aa")], tmp_path)
    assert out == {"/usr/include/x.h": "bb", "src/k.hip": "aa"}


def test_compile_results_carry_every_file_the_compiler_read(tmp_path: Path) -> None:
    from hqval.manifest import load_manifest
    from hqval.toolchain import compile_kernel

    tree = Path(__file__).resolve().parent / "data" / "schema2_tree" / "kernels.yaml"
    spec = load_manifest(tree).by_name("gemv_tree_r1")
    r = compile_kernel(spec, "gfx1201", tmp_path / "cache")
    assert r.ok, r.message
    names = {Path(p).name: d for p, d in r.dependencies}
    assert {"gemv_tree.gfx12.hip", "gemv_tree.hip", "policy.inc", "hq4_gemv.h"} <= set(names)
    inc = tree.parent / "policy.inc"
    assert names["policy.inc"] == hashlib.sha256(inc.read_bytes()).hexdigest()


def test_a_run_records_and_prints_its_provenance(tmp_path: Path) -> None:
    """hqval run on the schema-2 tree: the envelope names the manifest, the tree's commit
    and every file the compiler read (the gfx1100 variant, the preinclude, the headers)."""
    import json

    from hqval.cli import main

    tree = Path(__file__).resolve().parent / "data" / "schema2_tree" / "kernels.yaml"
    out = tmp_path / "run"
    code = main(["run", "--arch", "gfx1100", "--backend", "emu", "--manifest", str(tree),
                 "--out", str(out), "--no-mutants", "--no-timing",
                 "--cache-dir", str(tmp_path / "cache")])
    assert code in (0, 1, 2)
    env = json.loads((out / "envelope.json").read_text())
    p = env["provenance"]
    assert p["manifest"] == str(tree) and len(p["manifest_sha256"]) == 64
    assert {"gemv_tree.gfx1100.hip", "gemv_tree.hip", "policy.inc"} <= set(p["files"])
    assert all(len(d) == 64 for d in p["files"].values())
    assert env["kernels"]["gemv_tree_wrong_args_r1"]["production"] is False
    md = next(out.rglob("checkpoint.md")).read_text()
    assert "## Provenance" in md and p["manifest_sha256"] in md
    assert "## Not gating (production: false)" in md and "gemv_tree_wrong_args_r1" in md
