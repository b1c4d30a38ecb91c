"""Where a run's kernels came from: the manifest, the kernel tree's git commit (and whether
the tree had edits), and the sha256 of every file the compiler read for them.

The file list is the compiler's own dependency list (``hqval.toolchain.dependencies``,
clang ``-M``), so a header reached through ``#include MACRO`` or a preincluded ``.inc`` is
named as surely as the source itself.  The envelope records it (``provenance``) and the
checkpoint prints it, so a result can be tied to the exact bytes that produced it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hqval import safeio
from hqval.results.store import git_commit


def tree(manifest: str | Path) -> dict[str, Any]:
    """The manifest (path, sha256) and its kernel tree (directory, commit, dirty)."""
    path = Path(manifest).resolve()
    root = path.parent
    commit = git_commit(root)
    return {
        "manifest": str(path),
        "manifest_sha256": hashlib.sha256(
            safeio.read_bytes(path, limit=safeio.YAML_LIMIT, what="manifest")).hexdigest(),
        "kernel_tree": str(root),
        "kernel_tree_commit": commit.removesuffix("+dirty") if commit else None,
        "kernel_tree_dirty": commit.endswith("+dirty") if commit else None,
    }


def files(dependencies: Iterable[tuple[str, str]], root: str | Path) -> dict[str, str]:
    """path -> sha256 of every file in ``dependencies`` ((path, sha256) pairs from the
    compile results), paths relative to ``root`` when inside it, sorted."""
    base = Path(root).resolve()
    out: dict[str, str] = {}
    for p, digest in dependencies:
        rel = os.path.relpath(p, base)
        out[p if rel.startswith("..") else rel] = digest
    return dict(sorted(out.items()))
