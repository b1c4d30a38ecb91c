"""``hqval mutants``: every mutant killed on an arch with no WMMA (so only the GEMV mutants
are built), and a run whose checks cannot kill them exits 1 naming the survivors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hqval.cli import main


@pytest.mark.slow
def test_every_mutant_is_killed_and_real_kernels_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "mutants.json"
    code = main(["mutants", "--arch", "gfx1030", "--backend", "emu", "--workers", "0",
                 "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    rows = json.loads(out.read_text())
    verdicts = [r for r in rows if r["kind"] == "mutant"]
    built = [r for r in verdicts if r["status"] != "unsupported"]
    assert built and all(r["status"] == "pass" for r in built)
    assert all(r["details"]["killed_by"] for r in built)
    # GEMM mutants need WMMA: not built on RDNA2.
    assert all(r["status"] == "unsupported" for r in verdicts if r["kernel"].startswith("gemm_"))
    assert "SURVIVED" not in text and "0 survived" in text
    assert "real kernels: 0 failing or erroring cells" in text


def test_survivors_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    # Only the fallback check runs: it applies to no GEMV mutant, so the mutants the audit
    # rules do not catch survive, and the command must say so and exit 1.
    code = main(["mutants", "--arch", "gfx1030", "--backend", "emu", "--workers", "0",
                 "--check", "fallback"])
    text = capsys.readouterr().out
    assert code == 1
    assert "SURVIVED mutant[gemv_mut_halves_swapped_r1|gfx1030|emu]" in text


def test_a_tree_with_its_own_mutants_gets_them_as_hqval_run_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--manifest TREE`` whose kernels.yaml names ``mutants:``: the kill matrix is of the
    tree's own broken copies (``manifest.mutants_file``, the one hqval run uses), not of
    the suite's (once: the suite's, a self-test of other kernels)."""
    from hqval.manifest import load_manifest, mutants_file

    tree = Path(__file__).resolve().parents[1] / "data" / "engine_tree" / "kernels.yaml"
    own = mutants_file(load_manifest(tree))
    assert own is not None and own.parent == tree.parent
    out = tmp_path / "mutants.json"
    main(["mutants", "--arch", "gfx1030", "--backend", "emu", "--workers", "0",
          "--manifest", str(tree), "--check", "fallback", "--json", str(out),
          "--cache-dir", str(tmp_path / "cache")])
    capsys.readouterr()
    verdicts = {r["kernel"] for r in json.loads(out.read_text()) if r["kind"] == "mutant"}
    from hqval.manifest import load_mutants
    assert verdicts == {k.name for k in load_mutants(own).kernels}


def test_mutants_compile_and_audit_into_the_cache_dir(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from hqval.checks.mutation import build
    from hqval.manifest import Manifest, load_mutants
    from hqval.matrix import resolve_arch

    env_cache, flag_cache = tmp_path / "env", tmp_path / "flag"
    monkeypatch.setenv("HQVAL_CACHE", str(env_cache))
    muts = load_mutants()
    one = Manifest(path=muts.path, kernels=[k for k in muts.kernels if k.requires == "any"][:1])
    built, audit_rows = build(one, [resolve_arch("gfx1030")], str(flag_cache))
    assert all(b.ok for b in built.values()) and audit_rows
    assert list(flag_cache.rglob("*.co"))
    assert not env_cache.exists() or not list(env_cache.rglob("*.co"))
