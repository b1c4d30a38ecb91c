"""The git side of ``hqval bisect``: the user's repository, read only, and a worktree of
it in a temporary directory where ``git bisect`` runs.

The user's checkout is never touched: refs are resolved there (``rev-parse``) and nothing
else runs in it.  The bisect worktree is ``git worktree add --detach`` into a fresh
temporary directory; its bisect state (``refs/bisect/*``, ``BISECT_LOG``) is per worktree,
so it lives in the worktree's own git directory and goes with it when the worktree is
removed (always, also after an error or Ctrl-C).  With ``paths`` the worktree checks out
only those paths (a sparse checkout whose pattern file is the worktree's own and whose
switch is passed on each git command line: the repository's config is not edited), which
keeps a checkout of a tree with large data files to its kernels.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hqval.errors import InfrastructureError

GIT_TIMEOUT_S = 300


class GitError(InfrastructureError):
    """A git command failed where it should not have (the machinery, not the input)."""


class TreeError(ValueError):
    """Bad input about the tree: not a repository, an unknown ref, a dirty checkout."""


def _git(cwd: Path, *args: str, check: bool = True,
         config: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    argv = ["git", *(x for c in config for x in ("-c", c)), "-C", str(cwd), *args]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                              check=False)
    except FileNotFoundError:
        raise TreeError("git is not installed; install git (apt-get install git)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"`git {' '.join(args)}` took over {GIT_TIMEOUT_S} s") from None
    if check and proc.returncode != 0:
        text = (proc.stderr or proc.stdout).strip()
        tail = text.splitlines()
        hint = ("; the repository lacks that file's contents (a partial or shallow copy): "
                "pass --paths with the kernels' directories to check out only those"
                if lacks_blob(text) else "")
        raise GitError(f"`git {' '.join(args)}` failed in {cwd}: "
                       f"{tail[0] if tail else f'exit {proc.returncode}'}{hint}")
    return proc


def lacks_blob(text: str) -> bool:
    """Whether git's message says the repository lacks an object's contents."""
    return "unable to read sha1 file" in text or "missing blob" in text


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:12]


class Repo:
    """The user's repository: only read (refs resolved, history walked, status read)."""

    def __init__(self, tree: str | Path) -> None:
        path = Path(tree).expanduser()
        if not path.is_dir():
            raise TreeError(f"--tree {tree}: no such directory; pass the kernel tree's git "
                            "checkout")
        bare = _git(path, "rev-parse", "--is-bare-repository", check=False)
        # a bare repository (a mirror) has no checkout to protect: its git directory
        self.bare = bare.returncode == 0 and bare.stdout.strip() == "true"
        top = _git(path, "rev-parse", "--absolute-git-dir" if self.bare else "--show-toplevel",
                   check=False)
        if top.returncode != 0 or not top.stdout.strip():
            raise TreeError(f"--tree {tree}: not a git repository (bisect walks its history); "
                            "pass the checkout of the kernel tree's repository")
        self.root = Path(top.stdout.strip()).resolve()

    def resolve(self, ref: str, flag: str) -> Commit:
        proc = _git(self.root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
                    check=False)
        sha = proc.stdout.strip()
        if proc.returncode != 0 or not sha:
            raise TreeError(f"{flag} {ref}: no such commit in {self.root}; give a branch, tag "
                            "or commit of that repository (git log --oneline lists them)")
        return self.commit(sha)

    def commit(self, sha: str) -> Commit:
        out = _git(self.root, "log", "-1", "--format=%H%x00%s", sha).stdout.strip()
        full, _, subject = out.partition("\x00")
        return Commit(full, subject)

    def is_ancestor(self, old: str, new: str) -> bool:
        return _git(self.root, "merge-base", "--is-ancestor", old, new,
                    check=False).returncode == 0

    def count(self, old: str, new: str) -> int:
        return int(_git(self.root, "rev-list", "--count", f"{old}..{new}").stdout.strip())

    def dirty(self) -> list[str]:
        """Tracked files with uncommitted changes (untracked files are not the tree's)."""
        if self.bare:
            return []
        out = _git(self.root, "status", "--porcelain", "--untracked-files=no").stdout
        return [ln[3:] for ln in out.splitlines() if ln.strip()]


PREFIX = "hqval-bisect-"
OWNER = "owner.pid"  # beside the worktree: "PID HOST" of the process that made it


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, not ours to remove
    return True


def remove_stale(repo: Repo) -> list[Path]:
    """Remove the bisect worktrees of ``repo`` whose process is gone (a bisect killed with
    SIGKILL cannot remove its own), and git's entries for worktrees whose directory is
    gone.  Only worktrees this module made are touched (their directory is
    ``hqval-bisect-*/tree`` beside an ``owner.pid``).  Returns the ones removed."""
    out = _git(repo.root, "worktree", "list", "--porcelain", check=False).stdout
    removed: list[Path] = []
    for line in out.splitlines():
        if not line.startswith("worktree "):
            continue
        path = Path(line.removeprefix("worktree "))
        owner = path.parent / OWNER
        if path.name != "tree" or not path.parent.name.startswith(PREFIX) \
                or not owner.is_file():
            continue
        try:
            pid_text, _, host = owner.read_text().strip().partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        # a process of another host (a repository on a shared disk) is not ours to judge
        if host == socket.gethostname() and pid != os.getpid() and not _alive(pid):
            _git(repo.root, "worktree", "remove", "--force", str(path), check=False)
            shutil.rmtree(path.parent, ignore_errors=True)
            removed.append(path)
    _git(repo.root, "worktree", "prune", check=False)
    return removed


class Worktree:
    """A detached worktree of ``repo`` in a new temporary directory, removed on close (or,
    when its process was killed, by the next bisect of the repository)."""

    def __init__(self, repo: Repo, start: str, paths: Sequence[str] = (),
                 parent: str | Path | None = None, fallback: Sequence[str] = ()) -> None:
        self.repo = repo
        self.paths = tuple(paths)
        self.note = ""
        remove_stale(repo)
        self._tmp = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
        (self._tmp / OWNER).write_text(f"{os.getpid()} {socket.gethostname()}\n")
        self.path = self._tmp / "tree"
        self._config: tuple[str, ...] = ()
        try:
            _git(repo.root, "worktree", "add", "--detach", "--no-checkout", str(self.path),
                 start)
            if self.paths:
                self._sparse(self.paths)
            try:
                self.checkout(start)
            except GitError as exc:
                # a copy of the repository without some large files' contents: check out
                # only what the manifest names, when the caller said what that is
                if self.paths or not fallback or not lacks_blob(str(exc)):
                    raise
                self.paths = tuple(fallback)
                self._sparse(self.paths)
                self.checkout(start)
                self.note = (f"the repository lacks some files' contents; checking out only "
                             f"{', '.join(self.paths)} (the manifest's paths; --paths sets "
                             "them)")
        except BaseException:
            self.close()
            raise

    def _sparse(self, paths: Sequence[str]) -> None:
        gitdir = Path(_git(self.path, "rev-parse", "--absolute-git-dir").stdout.strip())
        (gitdir / "info").mkdir(parents=True, exist_ok=True)
        patterns = "".join(f"/{p.strip('/')}/\n/{p.strip('/')}\n" for p in paths)
        (gitdir / "info" / "sparse-checkout").write_text(patterns)
        self._config = ("core.sparseCheckout=true",)

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _git(self.path, *args, check=check, config=self._config)

    def checkout(self, sha: str) -> None:
        self.git("checkout", "--quiet", "--force", "--detach", sha)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").stdout.strip()

    def close(self) -> None:
        """Remove the worktree and its git metadata (its bisect state with it)."""
        if self.path.exists():
            _git(self.repo.root, "worktree", "remove", "--force", str(self.path), check=False)
        shutil.rmtree(self._tmp, ignore_errors=True)
        _git(self.repo.root, "worktree", "prune", check=False)

    def __enter__(self) -> Worktree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Mark:
    """What git said after a mark: the commit it checked out next, or the end."""

    next_sha: str | None = None
    first: str | None = None  # the first new-term commit, when git named it
    candidates: tuple[str, ...] = ()  # only skipped commits left: the first is one of these
    output: str = ""


class Bisect:
    """``git bisect`` in a worktree, with terms old/new (``good``/``bad``, or ``broken``/
    ``fixed`` when looking for the commit that fixed something)."""

    def __init__(self, wt: Worktree, old_sha: str, new_sha: str, fixed: bool) -> None:
        self.wt = wt
        self.old, self.new = ("broken", "fixed") if fixed else ("good", "bad")
        out = wt.git("bisect", "start", f"--term-old={self.old}", f"--term-new={self.new}",
                     new_sha, old_sha).stdout
        self.first_mark = self._parse(out)

    def _parse(self, out: str) -> Mark:
        lines = out.strip().splitlines()
        for ln in lines:
            if ln.endswith(f" is the first {self.new} commit"):
                return Mark(first=ln.split()[0], output=out)
        if any("only 'skip'ped commits left" in ln for ln in lines):
            shas = tuple(ln.split()[0] for ln in lines
                         if ln and len(ln.split()[0]) == 40
                         and all(c in "0123456789abcdef" for c in ln.split()[0]))
            return Mark(candidates=shas, output=out)
        return Mark(next_sha=self.wt.head(), output=out)

    def mark(self, term: str) -> Mark:
        """``term``: ``old``, ``new`` or ``skip`` (of the checked-out commit)."""
        word = {"old": self.old, "new": self.new, "skip": "skip"}[term]
        proc = self.wt.git("bisect", word, check=False)
        if proc.returncode != 0 and "skip" not in proc.stdout:
            raise GitError(f"`git bisect {word}` failed: "
                           f"{(proc.stderr or proc.stdout).strip()}")
        return self._parse(proc.stdout)
