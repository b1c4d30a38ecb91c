"""``hqval bisect``: the commit of a kernel tree that broke (or fixed) one cell.

``bisect(request)`` checks its input against the user's repository without touching the
checkout (``hqval.bisect.git``), judges the cell at both ends (``hqval.bisect.step``: the
good end must pass and the bad end fail, else there is nothing to bisect), then drives
``git bisect`` in a worktree of its own, one step per commit git checks out, and names
the first bad commit (the first fixed one with ``fixed``) with the evidence of both sides:
its cell row and that of its parent.  ``out`` holds one run directory per step and
``bisect.json``, the steps and the result.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hqval.bisect.cells import Target, close_matches, made_by, parse
from hqval.bisect.git import Bisect, Commit, Repo, TreeError, Worktree
from hqval.bisect.step import (
    BackendOpener,
    Job,
    Outcome,
    Placement,
    TimingSettings,
    _placed,
    describe,
    evaluate,
)

MANIFEST_LIMIT = 1 << 20
SUMMARY = "bisect.json"
SUMMARY_MD = "bisect.md"


class BisectInputError(ValueError):
    """Bad input: one line naming the problem and the fix (the command exits 2)."""


@dataclass
class Request:
    tree: str
    manifest: str
    cell: str
    good: str
    bad: str
    out: Path
    fixed: bool = False
    cache_dir: str | None = None
    paths: Sequence[str] = ()
    seed: int = 0
    timing: TimingSettings = field(default_factory=TimingSettings)
    open_backend: BackendOpener | None = None  # timing cells: default hqval.backends.get
    argv: Sequence[str] = ()
    work_dir: str | None = None  # where the worktree's temporary directory goes
    log: Callable[[str], None] = lambda line: None


@dataclass
class Result:
    exit_code: int  # 0 a commit named; 2 bad range or only unjudgeable commits left
    message: str
    first: Outcome | None = None  # the first bad (fixed) commit's step
    before: Outcome | None = None  # its parent's step: the last good (broken) one
    steps: list[Outcome] = field(default_factory=list)
    candidates: tuple[Commit, ...] = ()

    def lines(self, fixed: bool) -> list[str]:
        out = [self.message]
        if self.first is not None:
            word = "first fixed" if fixed else "first bad"
            before = "last broken" if fixed else "last good"
            for label, o in ((word, self.first), (before, self.before)):
                if o is None:
                    continue
                out.append(f"{label}: {o.commit.sha} {o.commit.subject}")
                out += [f"  {describe(r)}" for r in o.rows]
                if o.run_dir is not None:
                    out.append(f"  run directory: {o.run_dir}")
        skipped = [o for o in self.steps if o.verdict == "skip" and not o.infrastructure]
        if skipped:
            out.append(f"skipped {len(skipped)} commit(s) that could not be judged:")
            out += [f"  {o.commit.short} {o.reason}" for o in skipped]
        return out


def _placement(repo: Repo, manifest: str, at: str) -> Placement:
    path = Path(manifest).expanduser()
    if repo.bare and not path.is_absolute() and _git_show(repo, at, path):
        return Placement(Path(os.path.normpath(path)), in_tree=True)
    # a relative path names the tree's own file when the tree has one there (the version
    # of each commit is used), else a file from the current directory
    candidates = [path] if path.is_absolute() else [repo.root / path, Path.cwd() / path]
    found = next((p.resolve() for p in candidates if p.is_file()), None)
    if found is None:
        raise BisectInputError(f"--manifest {manifest}: no such file (give a kernels.yaml "
                               f"of the tree, relative to {repo.root}, or an external one)")
    if found.is_relative_to(repo.root):
        return Placement(found.relative_to(repo.root), in_tree=True)
    from hqval.safeio import SafeIOError, read_bytes

    try:
        data = read_bytes(found, limit=MANIFEST_LIMIT, what="the manifest")
    except SafeIOError as exc:
        raise BisectInputError(str(exc)) from None
    return Placement(Path(found.name), in_tree=False, data=data)


def _manifest_paths(repo: Repo, placement: Placement, sha: str) -> list[str]:
    """The top-level directories (or files) of the tree the manifest names at ``sha``: its
    own directory, every kernel's source, include dirs and preincludes.  What a checkout
    needs when the repository cannot give every file (a copy without large files)."""
    if placement.in_tree:
        shown = _git_show(repo, sha, placement.rel)
        base = placement.rel.parent
    else:
        shown, base = placement.data, Path()
    from hqval.safeio import SafeIOError, loads_yaml

    # the manifest at that commit, read as every manifest is (depth and aliases bounded);
    # one that does not parse names no paths here, and its step says why it cannot load
    try:
        doc = loads_yaml(shown.decode(), what=f"{placement.rel} at {sha[:12]}") \
            if shown else None
    except (SafeIOError, UnicodeDecodeError):
        doc = None
    names: list[str] = [str(placement.rel)] if placement.in_tree else []
    entries = [doc] if isinstance(doc, dict) else []
    if isinstance(doc, dict) and isinstance(doc.get("kernels"), list):
        entries += [k for k in doc["kernels"] if isinstance(k, dict)]
    for e in entries:
        for key in ("source", "include_dirs", "preinclude", "mutants"):
            v = e.get(key)
            names += [str(x) for x in (v if isinstance(v, list) else [v]) if x]
    tops: list[str] = []
    for n in names:
        rel = Path(os.path.normpath(base / n))
        if rel.parts and rel.parts[0] not in ("..", *tops) and not rel.is_absolute():
            tops.append(rel.parts[0])
    return tops


def _git_show(repo: Repo, sha: str, rel: Path) -> bytes:
    """The blob ``rel`` at ``sha``, or b"" where there is none or it is larger than a
    manifest may be (``safeio.YAML_LIMIT``): its size is asked first, so a huge blob is
    never read into memory."""
    import subprocess

    from hqval.safeio import YAML_LIMIT

    spec = f"{sha}:{rel.as_posix()}"
    size = subprocess.run(["git", "-C", str(repo.root), "cat-file", "-s", spec],
                          capture_output=True, timeout=60, check=False)
    if size.returncode != 0 or not size.stdout.strip().isdigit() \
            or int(size.stdout) > YAML_LIMIT:
        return b""
    proc = subprocess.run(["git", "-C", str(repo.root), "cat-file", "blob", spec],
                          capture_output=True, timeout=60, check=False)
    return proc.stdout if proc.returncode == 0 else b""


def _known_cells(job: Job, ends: Sequence[Commit], target: Target | None
                 ) -> tuple[set[str], list[str]]:
    """The bisectable identities the manifest makes at ``ends`` (the worktree checks
    each out), and why it did not load at any of them."""
    from hqval.manifest import load_manifest
    from hqval.matrix import load_arches
    from hqval.schema import SchemaError

    arches = list(load_arches().values())
    known: set[str] = set()
    problems: list[str] = []
    shape = target.shape if target is not None and target.kind == "timing" else None
    for c in ends:
        job.worktree.checkout(c.sha)
        placed, why = _placed(job, c)
        if placed is None:
            problems.append(f"at {c.short}: {why}")
            continue
        try:
            specs = load_manifest(placed).kernels
            known.update(made_by(specs, arches, *([shape] if shape else [])))
        except (SchemaError, UnicodeDecodeError) as exc:
            problems.append(f"at {c.short}: {' '.join(str(exc).split())[:300]}")
        finally:
            placed.unlink(missing_ok=True)
    return known, problems


def _check_backend(target: Target, request: Request) -> None:
    if target.kind in ("compile", "audit") or request.open_backend is not None:
        return
    from hqval.backends import BackendUnavailable, get

    try:
        get(target.backend, target.arch, request.cache_dir)
    except BackendUnavailable as exc:
        raise BisectInputError(f"--cell {target.identity}: backend {target.backend} cannot "
                               f"run here ({' '.join(str(exc).split())})") from None
    except ValueError as exc:
        raise BisectInputError(f"--cell {target.identity}: {exc}") from None


def bisect(request: Request) -> Result:
    """Validate, judge both ends, bisect.  Bad input raises ``BisectInputError`` before
    any step runs (and before ``out`` is written)."""
    try:
        repo = Repo(request.tree)
        dirty = repo.dirty()
        if dirty:
            raise BisectInputError(
                f"--tree {repo.root}: the checkout has uncommitted changes to tracked files "
                f"({', '.join(dirty[:3])}{', ...' if len(dirty) > 3 else ''}); bisect tests "
                "commits, not edits: commit or stash them first")
        good = repo.resolve(request.good, "--good")
        bad = repo.resolve(request.bad, "--bad")
    except TreeError as exc:
        raise BisectInputError(str(exc)) from None
    old, new = (bad, good) if request.fixed else (good, bad)
    if old.sha == new.sha:
        raise BisectInputError(f"--good and --bad are the same commit ({old.short})")
    if not repo.is_ancestor(old.sha, new.sha):
        order = ("--bad must be an ancestor of --good when looking for the fix (--fixed)"
                 if request.fixed else
                 "--good must be an ancestor of --bad (to find the commit that fixed the "
                 "cell, pass --fixed)")
        raise BisectInputError(f"{order}: {old.short} is not an ancestor of {new.short}")
    placement = _placement(repo, request.manifest, new.sha)
    target = parse(request.cell)
    out = Path(request.out)
    if (out / SUMMARY).exists():
        raise BisectInputError(f"--out {out} already holds a bisect ({SUMMARY}); choose a "
                               "new directory")
    if (out.is_dir() and any(out.iterdir())) or (out.exists() and not out.is_dir()):
        raise BisectInputError(f"--out {out} exists and is not an empty directory; choose a "
                               "new one (each step makes a run directory in it)")
    fallback = _manifest_paths(repo, placement, new.sha) if not request.paths else []
    with Worktree(repo, new.sha, request.paths, request.work_dir, fallback) as wt:
        if wt.note:
            request.log(f"hqval bisect: {wt.note}")
        job = Job(wt, placement, target or Target(request.cell, "", "", "", "", "check"),
                  out, request.cache_dir, request.seed, tuple(request.argv), request.timing,
                  request.open_backend, request.log)
        known, problems = _known_cells(job, [new, old], target)
        if not known:
            raise BisectInputError(f"--manifest {request.manifest} does not load at either "
                                   f"end: {'; '.join(problems)}")
        probe = target.identity if target is not None else ""
        if target is not None and target.kind == "timing" and request.open_backend:
            # a backend the caller opens (a simulated device) times what hardware would
            probe = probe.replace(f"|{target.backend}]", "|hip]")
        if target is None or probe not in known:
            close = close_matches(request.cell, sorted(known))
            what = ("is not a cell identity bisect can follow (compile[K|ARCH|toolchain], "
                    "audit_RULE[K|ARCH|isa], CHECK[K|ARCH|BACKEND] or "
                    "timing_MODE[K@MxK|ARCH|BACKEND])"
                    if target is None else "is not a cell the manifest makes at either end")
            raise BisectInputError(
                f"--cell {request.cell} {what}"
                + (f"; close matches: {', '.join(close)}" if close else
                   "; `hqval matrix --manifest M` lists the kernels"))
        _check_backend(target, request)
        return _run(job, repo, old, new, request)


def _run(job: Job, repo: Repo, old: Commit, new: Commit, request: Request) -> Result:
    steps: list[Outcome] = []
    by_sha: dict[str, Outcome] = {}
    t0 = time.monotonic()
    job.out.mkdir(parents=True, exist_ok=True)

    def step(commit: Commit) -> Outcome:
        o = evaluate(job, commit, len(steps))
        steps.append(o)
        by_sha[commit.sha] = o
        word = "NO VERDICT" if o.infrastructure else o.verdict.upper()
        request.log(f"hqval bisect: step {len(steps)}: {commit.short} {word} "
                    f"({o.reason}) {o.seconds:.1f} s  {commit.subject[:60]}")
        _summary(job, steps, None, request, time.monotonic() - t0)
        if o.infrastructure:
            raise _Stop(o)
        return o

    try:
        return _search(job, repo, old, new, request, step, steps, by_sha, t0)
    except _Stop as stop:
        o = stop.outcome
        res = Result(2, f"hqval bisect: stopped at {o.commit.short}: {o.reason}; that says "
                        "nothing about the commit (fix this machine, then bisect again)",
                     steps=steps)
        _summary(job, steps, res, request, time.monotonic() - t0)
        return res


class _Stop(Exception):
    """An infrastructure error at a step: the bisect cannot go on honestly."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


def _search(job: Job, repo: Repo, old: Commit, new: Commit, request: Request,
            step: Callable[[Commit], Outcome], steps: list[Outcome],
            by_sha: dict[str, Outcome], t0: float) -> Result:
    fixed = request.fixed
    term = ({"bad": "old", "good": "new", "skip": "skip"} if fixed else
            {"good": "old", "bad": "new", "skip": "skip"})
    old_word, new_word = ("bad", "good") if fixed else ("good", "bad")
    flag = {"good": "--good", "bad": "--bad"}
    for commit, want in ((old, old_word), (new, new_word)):
        o = step(commit)
        if o.verdict != want:
            what = {"skip": f"cannot be judged there ({o.reason})",
                    "good": f"passes there ({o.reason})",
                    "bad": f"fails there ({o.reason})"}[o.verdict]
            res = Result(2, f"hqval bisect: nothing to bisect: the cell {what}, at "
                            f"{flag[want]} {commit.short}; {flag[want]} must be a commit "
                            f"where the cell is {want}", steps=steps)
            _summary(job, steps, res, request, time.monotonic() - t0)
            return res
    total = repo.count(old.sha, new.sha)
    request.log(f"hqval bisect: {total} commits between {old.short} and {new.short}")
    b = Bisect(job.worktree, old.sha, new.sha, fixed)
    mark = b.first_mark
    for _ in range(total + 2):  # every commit at most once, and git's own end
        if mark.next_sha is None:
            break
        o = by_sha.get(mark.next_sha) or step(repo.commit(mark.next_sha))
        mark = b.mark(term[o.verdict])
    first_word = "first fixed" if fixed else "first bad"
    if mark.first is not None:
        first = by_sha.get(mark.first) or step(repo.commit(mark.first))
        parent = job.worktree.git("rev-parse", f"{mark.first}^", check=False).stdout.strip()
        before = None
        if parent:
            before = by_sha.get(parent) or step(repo.commit(parent))
        res = Result(0, f"hqval bisect: {first_word} commit of {job.target.identity}: "
                        f"{first.commit.sha} ({len(steps)} steps, "
                        f"{time.monotonic() - t0:.0f} s)", first, before, steps)
    else:
        cands = tuple(repo.commit(s) for s in mark.candidates)
        res = Result(2, f"hqval bisect: no single commit: the {first_word} commit is one of "
                        f"{', '.join(c.short for c in cands) or '(git named none)'}; the "
                        "commits between could not be judged (see the skipped steps)",
                     steps=steps, candidates=cands)
    _summary(job, steps, res, request, time.monotonic() - t0)
    return res


def _summary(job: Job, steps: list[Outcome], res: Result | None, request: Request,
             seconds: float) -> None:
    from hqval.safeio import write_atomic

    def one(o: Outcome) -> dict[str, object]:
        row = o.cell_row
        return {"commit": o.commit.sha, "subject": o.commit.subject, "verdict": o.verdict,
                "reason": o.reason, "seconds": round(o.seconds, 2),
                "run_dir": str(o.run_dir) if o.run_dir else None,
                "row": row.to_dict() if row is not None else None}

    doc: dict[str, object] = {
        "cell": job.target.identity, "tree": str(job.worktree.repo.root),
        "manifest": request.manifest, "good": request.good, "bad": request.bad,
        "fixed": request.fixed, "seconds": round(seconds, 1),
        "steps": [one(o) for o in steps], "done": res is not None}
    if res is not None:
        doc["exit_code"] = res.exit_code
        doc["message"] = res.message
        doc["first"] = res.first.commit.sha if res.first else None
        doc["candidates"] = [c.sha for c in res.candidates]
    write_atomic(job.out / SUMMARY, json.dumps(doc, indent=2) + "\n")
    write_atomic(job.out / SUMMARY_MD, _markdown(job, steps, res, request.fixed))


def _markdown(job: Job, steps: list[Outcome], res: Result | None, fixed: bool) -> str:
    """``bisect.md``: the result, then the steps in the order they ran (through the one
    markdown printer: subjects, reasons and messages are data, never markup)."""
    from hqval import markdown as md

    where = "the tree's own" if job.placement.in_tree else "external"
    lines = [f"# hqval bisect: {md.code(job.target.identity)}", "",
             f"Tree {md.code(job.worktree.repo.root)}, manifest {md.code(job.placement.rel)} "
             f"({where}).", ""]
    if res is None:
        lines += ["**Not finished**: the steps so far.", ""]
    else:
        lines += [md.bold(res.message.removeprefix("hqval bisect: ")), ""]
        sides = (("first fixed" if fixed else "first bad", res.first),
                 ("last broken" if fixed else "last good", res.before))
        lines += [f"- {label}: {md.code(o.commit.sha)} {md.text(o.commit.subject)}"
                  for label, o in sides if o is not None]
        lines.append("")
    rows = []
    for i, o in enumerate(steps, 1):
        row = o.cell_row
        bound = ""
        if row is not None and isinstance(row.measured, float | int) \
                and isinstance(row.tolerance, float | int):
            bound = f"{row.measured:.3g} / {row.tolerance:.3g}"
        rows.append([str(i), md.code(o.commit.short), o.commit.subject[:60], o.verdict, bound,
                     o.reason[:160], md.code(o.run_dir.name) if o.run_dir else ""])
    lines.append(md.table(["step", "commit", "subject", "verdict", "measured / tolerance",
                           "reason", "run directory"], rows))
    return "\n".join(lines) + "\n"
