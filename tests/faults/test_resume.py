"""Faults of class 'resume': ``--resume`` refuses a run directory made
with another manifest, arches, backend, suite commit, seed, policy or mutant or timing
options, names the difference and writes
nothing; it redoes what a run did not finish (the kill cases in test_steps)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import REPO, Result, run_args

Hq = Callable[..., Result]


def _refused(hqval: Hq, run: Path, args: list[str], names: str) -> None:
    before = (run / "rows.jsonl").read_bytes()
    res = hqval(*args)
    assert res.code == 2
    err = res.err.strip().splitlines()
    assert len(err) == 1 and "not the same run" in err[0] and names in err[0], res.err
    assert (run / "rows.jsonl").read_bytes() == before


def test_resume_with_another_arch(tree: Path, copy_of: Callable[[], Path], hqval: Hq) -> None:
    run = copy_of()
    args = run_args(tree, run, "--resume")
    args[args.index("--arch") + 1] = "gfx1100"
    _refused(hqval, run, args, "arch: the run has ['gfx1010'], this invocation ['gfx1100']")


def test_resume_with_another_manifest(tree: Path, copy_of: Callable[[], Path], hqval: Hq,
                                      tmp_path: Path) -> None:
    other = tmp_path / "tree2"
    shutil.copytree(tree.parent, other)
    (other / "kernels.yaml").write_text((other / "kernels.yaml").read_text() + "# edited\n")
    run = copy_of()
    _refused(hqval, run, run_args(other / "kernels.yaml", run, "--resume"), "manifest_sha256")


def test_resume_with_another_backend(tree: Path, copy_of: Callable[[], Path],
                                     hqval: Hq) -> None:
    run = copy_of()
    args = run_args(tree, run, "--resume")
    args[args.index("--backend") + 1] = "auto"
    _refused(hqval, run, args, "requested_backend: the run has 'emu', this invocation 'auto'")


def test_resume_of_another_suite_commit(tree: Path, copy_of: Callable[[], Path],
                                        hqval: Hq) -> None:
    run = copy_of()
    env = json.loads((run / "envelope.json").read_text())
    env["suite_commit"] = "0" * 40
    (run / "envelope.json").write_text(json.dumps(env))
    _refused(hqval, run, run_args(tree, run, "--resume"), "suite_commit: the run has '000")


@pytest.mark.parametrize("extra,names", [
    (("--seed", "5"), "seed: the run has 0, this invocation 5"),
    (("--no-mutants",), "mutants_manifest: the run has '"),
    (("--timing-runs", "5"), "timing: the run has {'enabled': True, 'iterations': 100, "
     "'runs': 3}, this invocation {'enabled': True, 'iterations': 100, 'runs': 5}"),
    (("--policy", "EDITED"), "policy_sha256: the run has '"),
])
def test_resume_with_other_options(tree: Path, copy_of: Callable[[], Path], hqval: Hq,
                                   tmp_path: Path, extra: tuple[str, ...], names: str) -> None:
    """A resume under another seed, without the mutants step, with another timing plan or
    policy would add rows made under those to the run's own (once: accepted; a resume
    with the mutants step on a run made without it wrote mutant rows its kernel table
    does not hold, and the run was damaged for good)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text((REPO / "matrices" / "policy.yaml").read_text() + "# edited\n")
    run = copy_of()
    args = run_args(tree, run, "--resume", *[str(policy) if e == "EDITED" else e
                                             for e in extra])
    _refused(hqval, run, args, names)


def test_resume_of_a_damaged_envelope(tree: Path, copy_of: Callable[[], Path],
                                      hqval: Hq) -> None:
    run = copy_of()
    (run / "envelope.json").write_text("{}")
    res = hqval(*run_args(tree, run, "--resume"))
    assert res.code == 2 and "envelope is damaged" in res.err


def test_resume_of_a_complete_run_reruns_nothing(tree: Path, copy_of: Callable[[], Path],
                                                 hqval: Hq) -> None:
    """A complete run resumed re-runs no evidence cell (admission is recomputed)."""
    run = copy_of()
    n = len((run / "rows.jsonl").read_text().splitlines())
    res = hqval(*run_args(tree, run, "--resume"))
    assert res.code == 0
    added = [json.loads(x) for x in (run / "rows.jsonl").read_text().splitlines()[n:]]
    assert {d["kind"] for d in added} <= {"step", "admit"}
