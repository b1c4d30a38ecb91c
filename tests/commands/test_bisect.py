"""``hqval bisect`` on a small git repository built here from the suite's own kernel
headers: a decode GEMV whose history has a commit where the kernel is absent, one where it
does not compile, a commit that breaks it (scale and zero swapped), the fix, a second
break, and a timing regression (the simulated device reads ``HQ_TIMING_SLOW``).

One code object cache serves every test; one arch (gfx1100) and the emulator's small
shapes keep each step to a couple of seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hqval.cli import BISECT_SKIP, bisect_exit, main

SUITE = Path(__file__).resolve().parents[2]
HOLD_BISECT = Path(__file__).with_name("hold_bisect.py")
CELL = "reference_parity[tree_gemv_r1|gfx1100|emu]"
GOOD_SRC = '#include "hq4_gemv.h"\nHQ_GEMV(tree_gemv_r1, HdrMq4v2, 1, false)\n'
V1_SRC = '#include "hq4_gemv.h"\nHQ_GEMV(tree_gemv_v1_r1, HdrHfq4v1, 1, false)\n'
# scale and zero swapped inside qt=44's packed fp16 pair: wrong on every row
BAD_SRC = ('#include "hq4_gemv.h"\n'
           "struct Swapped : HdrMq4v2 {\n"
           "    static HQ_DEVICE void decode(Hq4Raw h, unsigned int boff, float& sc, "
           "float& zp) {\n"
           "        HdrMq4v2::decode(h, boff, zp, sc);\n"
           "    }\n"
           "};\n"
           "HQ_GEMV(tree_gemv_r1, Swapped, 1, false)\n")

# numerically right, but the header's two scalar loads become one vector load per lane:
# only the ISA audit's header_scalar rule can see it
LANE_HEADER_SRC = ('#include "hq4_gemv.h"\n'
                   "struct LaneHeader : HdrMq4v2 {\n"
                   "    static HQ_DEVICE Hq4Raw load(const unsigned char* __restrict__ gp, "
                   "unsigned int boff) {\n"
                   "        const unsigned int hs = hq_load_u32(gp + (boff < 64u ? 0u : 4u));\n"
                   "        return Hq4Raw{hs, hs};\n"
                   "    }\n"
                   "};\n"
                   "HQ_GEMV(tree_gemv_r1, LaneHeader, 1, false)\n")


def _manifest(kernel: bool = True, slow: int = 0) -> str:
    text = ("schema: 2\ninclude_dirs: [include]\nkernels:\n"
            "  - {name: tree_gemv_v1_r1, source: src/gemv_v1.hip, qt: 6, kind: gemv, "
            "requires: any}\n")
    if kernel:
        defines = f", defines: {{HQ_TIMING_SLOW: {slow}}}" if slow else ""
        text += ("  - {name: tree_gemv_r1, source: src/gemv.hip, qt: 44, kind: gemv, "
                 f"requires: any, baseline: tree_gemv_v1_r1{defines}}}\n")
    return text


@dataclass(frozen=True)
class Tree:
    root: Path
    commits: dict[str, str]  # label -> sha
    cache: Path


def _git(root: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("bisect")
    root = base / "engine"
    (root / "src").mkdir(parents=True)
    (root / "include").mkdir()
    for h in ("hq4_gemv.h", "hq4_header.h", "hqval_prelude.h"):
        shutil.copy(SUITE / "kernels" / "include" / h, root / "include" / h)
    (root / "src" / "gemv_v1.hip").write_text(V1_SRC)
    _git(root, "init", "-q", "-b", "main")
    commits: dict[str, str] = {}

    def commit(label: str, *, src: str | None = GOOD_SRC, manifest: str | None = None,
               note: str = "") -> None:
        gemv = root / "src" / "gemv.hip"
        if src is None:
            gemv.unlink(missing_ok=True)
        else:
            gemv.write_text(src)
        (root / "kernels.yaml").write_text(manifest if manifest is not None else _manifest())
        (root / "NOTES").write_text(f"{label} {note}\n")
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", label)
        commits[label] = _git(root, "rev-parse", "HEAD")

    commit("c0 good")
    commit("c1 kernel removed", src=None, manifest=_manifest(kernel=False))
    commit("c2 does not compile", src=GOOD_SRC + "this is not C++;\n")
    commit("c3 scale and zero swapped", src=BAD_SRC)
    commit("c4 unrelated", src=BAD_SRC, note="docs")
    commit("c5 fix: scale and zero in order")
    commit("c6 unrelated", note="docs")
    commit("c7 swapped again", src=BAD_SRC)
    commit("c8 unrelated", src=BAD_SRC, note="docs")
    commit("c9 good again")
    commit("c10 header read per lane", src=LANE_HEADER_SRC)
    # the redundant pass reads W twice: slower on the simulated device, and more W
    # traffic than the baseline for the audit
    commit("c11 slower: a redundant pass per group", manifest=_manifest(slow=64))
    yield Tree(root, commits, base / "cache")


def _untouched(tree: Tree) -> tuple[str, ...]:
    """What bisect must leave as it was in the user's checkout."""
    r = tree.root
    return (_git(r, "rev-parse", "HEAD"), _git(r, "status", "--porcelain"),
            (r / ".git" / "config").read_text(), _git(r, "worktree", "list"),
            _git(r, "for-each-ref", "refs/bisect"), str(sorted(p.name for p in r.iterdir())))


def _bisect(tree: Tree, out: Path, good: str, bad: str, *extra: str,
            cell: str = CELL) -> int:
    return main(["bisect", "--tree", str(tree.root), "--manifest", "kernels.yaml",
                 "--cell", cell, "--good", tree.commits[good], "--bad", tree.commits[bad],
                 "--out", str(out), "--cache-dir", str(tree.cache), *extra])


def test_names_the_first_bad_commit_with_both_sides_evidence(
        tree: Tree, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hqval.results.store import load

    before = _untouched(tree)
    code = _bisect(tree, tmp_path / "b", "c6 unrelated", "c8 unrelated")
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"first bad commit of {CELL}: {tree.commits['c7 swapped again']}" in out
    first = out.split("first bad: ", 1)[1]
    assert first.startswith(tree.commits["c7 swapped again"])
    assert f"{CELL} fail" in first.split("last good: ")[0]
    assert first.split("last good: ", 1)[1].startswith(tree.commits["c6 unrelated"])
    assert f"{CELL} pass" in first.split("last good: ", 1)[1]
    summary = json.loads((tmp_path / "b" / "bisect.json").read_text())
    assert summary["first"] == tree.commits["c7 swapped again"] and summary["done"]
    # every step is a run directory the store loads, its envelope naming the commit
    for step in summary["steps"]:
        run = load(step["run_dir"])
        assert run.envelope["bisect"]["commit"] == step["commit"]
        assert run.envelope["kernel_tree_commit"] == step["commit"]
        assert step["row"]["identity"] == CELL
        assert {r.identity for r in run.rows} >= {CELL, "compile[tree_gemv_r1|gfx1100|"
                                                  "toolchain]"}
    md = (tmp_path / "b" / "bisect.md").read_text()
    assert f"first bad: `{tree.commits['c7 swapped again']}`" in md
    assert md.count("| fail") == 0 and "| bad |" in md and "| good |" in md
    assert _untouched(tree) == before
    assert main(["report", "-o", str(tmp_path / "report"),
                 *(s["run_dir"] for s in summary["steps"])]) == 0


def test_fixed_names_the_first_good_commit(tree: Tree, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    code = _bisect(tree, tmp_path / "f", "c6 unrelated", "c4 unrelated", "--fixed",
                   "--work-dir", str(work))
    assert not any(work.iterdir())  # the worktree is gone ...
    summary = json.loads((tmp_path / "f" / "bisect.json").read_text())
    envelope = json.loads((Path(summary["steps"][0]["run_dir"]) / "envelope.json").read_text())
    assert envelope["kernel_tree"].startswith(str(work))  # ... and it was there
    out = capsys.readouterr().out
    assert code == 0, out
    fix = tree.commits["c5 fix: scale and zero in order"]
    assert f"first fixed commit of {CELL}: {fix}" in out
    assert out.split("last broken: ", 1)[1].startswith(tree.commits["c4 unrelated"])


def test_compile_cell_a_failed_build_is_bad(tree: Tree, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    cell = "compile[tree_gemv_r1|gfx1100|toolchain]"
    code = _bisect(tree, tmp_path / "c", "c3 scale and zero swapped", "c2 does not compile",
                   "--fixed", cell=cell)
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"first fixed commit of {cell}: {tree.commits['c3 scale and zero swapped']}" in out
    broken = out.split("last broken: ", 1)[1]
    assert broken.startswith(tree.commits["c2 does not compile"])
    assert f"{cell} fail" in broken


def test_audit_cell_names_the_commit_its_rule_fails_at(
        tree: Tree, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cell = "audit_header_scalar[tree_gemv_r1|gfx1100|isa]"
    code = _bisect(tree, tmp_path / "a", "c9 good again", "c10 header read per lane",
                   cell=cell)
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert f"first bad commit of {cell}: {tree.commits['c10 header read per lane']}" in out
    assert out.split("last good: ", 1)[1].startswith(tree.commits["c9 good again"])


def test_a_killed_bisect_leaves_the_checkout_and_the_next_one_removes_its_worktree(
        tree: Tree, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SIGKILL gives bisect no chance to remove its worktree: the checkout is still as it
    was, and the next bisect of the repository removes the dead one's worktree.  The
    bisect is held after its first step (``hold_bisect.py``), so it is killed mid-way
    however fast its steps run."""
    import signal

    from tests.guards import no_hang

    before = _untouched(tree)
    out, marker = tmp_path / "k", tmp_path / "held.pid"
    proc = subprocess.Popen(
        [sys.executable, str(HOLD_BISECT), str(marker), "bisect", "--tree", str(tree.root),
         "--manifest", "kernels.yaml", "--cell", CELL, "--good", tree.commits["c6 unrelated"],
         "--bad", tree.commits["c8 unrelated"], "--out", str(out),
         "--cache-dir", str(tree.cache)],
        env=dict(os.environ, PYTHONPATH=str(SUITE)), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        with no_hang():  # no clock decides anything: the held bisect waits to be killed
            while not marker.exists() and proc.poll() is None:
                time.sleep(0.05)
        assert marker.exists(), "bisect ended before its first step was held"
        assert proc.poll() is None and int(marker.read_text()) == proc.pid
        assert not json.loads((out / "bisect.json").read_text())["done"]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert "hqval-bisect-" in _git(tree.root, "worktree", "list")  # left behind
    assert _untouched(tree)[:3] == before[:3]  # HEAD, status, config
    code = _bisect(tree, tmp_path / "c", "c3 scale and zero swapped", "c2 does not compile",
                   "--fixed", cell="compile[tree_gemv_r1|gfx1100|toolchain]")
    capsys.readouterr()
    assert code == 0
    assert _untouched(tree) == before


def test_a_bare_copy_lacking_a_large_file_checks_out_the_manifests_paths(
        tree: Tree, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bare mirror has no checkout to protect, and one whose copy lacks a large file's
    contents (as fetched mirrors do) is checked out to the manifest's paths only."""
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(tree.root), str(work)], check=True)
    (work / "data").mkdir()
    (work / "data" / "weights.bin").write_bytes(os.urandom(4096))
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", "c13 weights")
    blob = _git(work, "rev-parse", "HEAD:data/weights.bin")
    bare = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    (bare / "objects" / blob[:2] / blob[2:]).unlink()
    code = main(["bisect", "--tree", str(bare), "--manifest", "kernels.yaml",
                 "--cell", "reference_parity[tree_gemv_r2|gfx1100|emu]",
                 "--good", tree.commits["c9 good again"], "--bad", "HEAD",
                 "--out", str(tmp_path / "o"), "--cache-dir", str(tree.cache)])
    out, err = capsys.readouterr()
    assert code == 2
    assert "lacks some files' contents; checking out only kernels.yaml, include, src" in out
    assert f"close matches: {CELL}" in err  # the manifest read from the bare repository
    assert not (bare / "worktrees").exists() or not any((bare / "worktrees").iterdir())


def test_an_infrastructure_error_stops_the_bisect_instead_of_skipping(
        tree: Tree, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cache that cannot be written says nothing about a commit: bisect stops (exit 2)
    at the first step rather than skip commits it could judge."""
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache directory should be\n")
    code = main(["bisect", "--tree", str(tree.root), "--manifest", "kernels.yaml",
                 "--cell", CELL, "--good", tree.commits["c6 unrelated"],
                 "--bad", tree.commits["c8 unrelated"], "--out", str(tmp_path / "o"),
                 "--cache-dir", str(cache)])
    err = capsys.readouterr().err
    assert code == 2
    assert "stopped at" in err and "infrastructure" in err, err
    summary = json.loads((tmp_path / "o" / "bisect.json").read_text())
    assert len(summary["steps"]) == 1 and summary["done"]


def test_commits_that_cannot_be_judged_are_skipped_with_the_reason(
        tree: Tree, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _bisect(tree, tmp_path / "s", "c0 good", "c3 scale and zero swapped")
    err = capsys.readouterr().err
    # c1 (absent) and c2 (no build) sit right before the break: no single commit is
    # provable, and bisect says which commits it could be
    assert code == 2, err
    assert "no single commit" in err
    for label in ("c1 kernel removed", "c2 does not compile", "c3 scale and zero swapped"):
        assert tree.commits[label][:12] in err.split("is one of", 1)[1].split(";")[0]
    summary = json.loads((tmp_path / "s" / "bisect.json").read_text())
    why = {s["commit"]: s["reason"] for s in summary["steps"] if s["verdict"] == "skip"}
    assert "not in the manifest" in why[tree.commits["c1 kernel removed"]]
    assert "does not compile" in why[tree.commits["c2 does not compile"]]


def test_timing_cell_on_the_simulated_device(tree: Tree, tmp_path: Path) -> None:
    """Through the library (the simulated device is no CLI backend): each step times the
    A/A control and then the kernel against its qt=6 baseline; the slowed commit fails
    the policy's gate and is named."""
    from hqval.bisect import Request, bisect
    from hqval.bisect.step import TimingSettings
    from hqval.timing.simulate import SimulatedDevice

    cell = "timing_hot[tree_gemv_r1@64x1024|gfx1100|sim]"
    result = bisect(Request(
        tree=str(tree.root), manifest="kernels.yaml", cell=cell,
        good=tree.commits["c9 good again"],
        bad=tree.commits["c11 slower: a redundant pass per group"],
        out=tmp_path / "t", cache_dir=str(tree.cache),
        timing=TimingSettings(iterations=30, runs=2, warmup=2),
        open_backend=lambda name, arch: SimulatedDevice(seed=7)))
    assert result.exit_code == 0, result.lines(False)
    assert result.first is not None and result.before is not None
    assert result.first.commit.sha == tree.commits["c11 slower: a redundant pass per group"]
    first_row, before_row = result.first.cell_row, result.before.cell_row
    assert first_row is not None and before_row is not None
    assert first_row.status.value == "fail" and before_row.status.value == "pass"
    # the A/A control ran at every step, before the cell
    ids = [r.identity for r in result.first.rows]
    assert "timing_aa_hot[tree_gemv_v1_r1@64x1024|gfx1100|sim]" in ids


@pytest.mark.parametrize("case", ["not_a_repo", "unknown_ref", "unknown_cell", "decoy_in_cwd",
                                  "out_not_empty", "dirty", "wrong_order", "fails_at_good"])
def test_bad_input_is_one_line_and_exit_2(tree: Tree, tmp_path: Path, case: str,
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    before = _untouched(tree)
    args = {"tree": str(tree.root), "cell": CELL, "good": tree.commits["c6 unrelated"],
            "bad": tree.commits["c8 unrelated"]}
    want = ""
    if case == "not_a_repo":
        (tmp_path / "plain").mkdir()
        args["tree"], want = str(tmp_path / "plain"), "not a git repository"
    elif case == "unknown_ref":
        args["good"], want = "no-such-branch", "--good no-such-branch: no such commit"
    elif case == "unknown_cell":
        args["cell"] = "reference_parity[tree_gemv_r2|gfx1100|emu]"
        want = f"close matches: {CELL}"
    elif case == "decoy_in_cwd":  # a relative --manifest is the tree's file first
        (tmp_path / "kernels.yaml").write_text(_manifest().replace("tree_gemv", "decoy"))
        monkeypatch.chdir(tmp_path)
        args["cell"] = "reference_parity[tree_gemv_r2|gfx1100|emu]"
        want = f"close matches: {CELL}"
    elif case == "out_not_empty":
        (tmp_path / "o").mkdir()
        (tmp_path / "o" / "00-0123456789ab").mkdir()  # a run left by an earlier attempt
        want = "is not an empty directory"
    elif case == "dirty":
        (tree.root / "NOTES").write_text("an edit\n")
        want = "uncommitted changes"
    elif case == "wrong_order":
        args["good"], args["bad"] = args["bad"], args["good"]
        want = "--good must be an ancestor of --bad"
    elif case == "fails_at_good":  # judged at --good (one step), which must pass
        args["good"], want = tree.commits["c7 swapped again"], "nothing to bisect"
    try:
        code = main(["bisect", "--tree", args["tree"], "--manifest", "kernels.yaml",
                     "--cell", args["cell"], "--good", args["good"], "--bad", args["bad"],
                     "--out", str(tmp_path / "o"), "--cache-dir", str(tree.cache)])
        err = capsys.readouterr().err
    finally:
        if case == "dirty":
            _git(tree.root, "checkout", "--", "NOTES")
    assert code == 2
    assert want in err
    if case != "fails_at_good":  # refused before any step: one line, nothing written
        assert len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "o").exists() or case == "out_not_empty"
    assert _untouched(tree) == before


def test_bisect_exit_maps_every_command_for_git_bisect_run(
        tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert [bisect_exit(c) for c in (0, 1, 2, 3)] == [0, 1, BISECT_SKIP, BISECT_SKIP]
    assert main(["--bisect-exit", "matrix", "--arch", "gfx1100"]) == 0
    assert main(["--bisect-exit", "matrix", "--arch", "gfx9999"]) == BISECT_SKIP  # bad input
    assert main(["--bisect-exit", "no-such-command"]) == BISECT_SKIP  # argparse's exit 2
    assert main(["matrix", "--arch", "gfx9999"]) == 2  # unchanged without the flag
    monkeypatch.setenv("HQVAL_BISECT_EXIT", "1")
    assert main(["matrix", "--arch", "gfx9999"]) == BISECT_SKIP
    monkeypatch.delenv("HQVAL_BISECT_EXIT")
    capsys.readouterr()
    # git bisect run itself, over a clone (the fixture's checkout stays as it is): the
    # check command's exit 1 at the swapped commit is git's "bad"
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(tree.root), str(clone)], check=True)
    _git(clone, "bisect", "start", tree.commits["c8 unrelated"], tree.commits["c6 unrelated"])
    env = dict(os.environ, PYTHONPATH=str(SUITE), HQVAL_BISECT_EXIT="1")
    proc = subprocess.run(
        ["git", "-C", str(clone), "bisect", "run", sys.executable, "-m", "hqval", "check",
         "--manifest", "kernels.yaml", "--arch", "gfx1100", "--backend", "emu",
         "--check", "reference_parity", "-k", "tree_gemv_r1", "--workers", "0",
         "--cache-dir", str(tree.cache)],
        capture_output=True, text=True, env=env, check=False)
    assert f"{tree.commits['c7 swapped again']} is the first bad commit" in proc.stdout, (
        proc.stdout + proc.stderr)


def test_a_noisy_timing_step_is_skipped_never_judged(tree: Tree, tmp_path: Path) -> None:
    """On a device too noisy to resolve the gate the cell's verdict is noisy: the step is
    skipped (here the --good end, so there is nothing to bisect), never good or bad."""
    from hqval.bisect import Request, bisect
    from hqval.bisect.step import TimingSettings
    from hqval.timing.simulate import SimulatedDevice

    result = bisect(Request(
        tree=str(tree.root), manifest="kernels.yaml",
        cell="timing_hot[tree_gemv_r1@64x1024|gfx1100|sim]",
        good=tree.commits["c9 good again"],
        bad=tree.commits["c11 slower: a redundant pass per group"],
        out=tmp_path / "n", cache_dir=str(tree.cache),
        timing=TimingSettings(iterations=30, runs=2, warmup=2),
        open_backend=lambda name, arch: SimulatedDevice(seed=7, jitter=0.3,
                                                        outlier_rate=0.3)))
    assert result.exit_code == 2
    assert [s.verdict for s in result.steps] == ["skip"]
    assert "noisy" in result.steps[0].reason, result.steps[0].reason
    row = result.steps[0].cell_row
    assert row is not None and row.status.value == "error"
    assert result.steps[0].rows[1].check == "timing_aa_hot"  # the A/A control ran first
