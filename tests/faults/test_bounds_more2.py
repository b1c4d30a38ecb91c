"""Faults of class 'one bounded reader at every boundary', second round: files hqval
reads that the first rounds did not reach: ``hqval emu --coverage`` code objects and a
FIFO where a cache entry is read.  Each is refused at once, one line, never read whole or
waited on."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Result

Admit = Callable[..., Result]


@pytest.mark.parametrize("kind", ["fifo", "sparse-3-gb"])
def test_an_emu_coverage_object_that_is_special_or_huge_is_refused_unread(
        tmp_path: Path, hqval: Admit, kind: str) -> None:
    """``hqval emu --coverage OBJ`` with OBJ a 3 GB sparse file (once: read whole) or a
    FIFO (once: "no such code object file")."""
    obj = tmp_path / "k.co"
    if kind == "fifo":
        os.mkfifo(obj)
    else:
        with obj.open("wb") as f:
            f.truncate(3 << 30)
    res = hqval("emu", "--coverage", str(obj))
    assert res.code == 2
    line = res.err.strip()
    assert "\n" not in line and str(obj) in line
    assert ("a FIFO" if kind == "fifo" else "over the 268435456 byte limit") in line


@pytest.mark.parametrize("which", ["disasm", "audit"])
def test_a_fifo_where_a_cache_entry_is_read_never_blocks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str) -> None:
    """A FIFO planted at the path of a disassembly or audit-rows cache entry (once: the
    read blocked for ever): the entry is taken as absent, computed again."""
    import hashlib

    if which == "disasm":
        from hqval.codeobject import cache as dcache

        monkeypatch.setattr(dcache, "find_objdump", lambda: "objdump")
        monkeypatch.setattr(dcache, "tool_identity", lambda tool: "tool")
        monkeypatch.setattr(dcache, "objdump_text", lambda raw, mcpu, tool: "decoded")
        k = dcache.key("0" * 64, "gfx1010", "tool")
        path = dcache._file(str(tmp_path), k)
        path.parent.mkdir(parents=True)
        os.mkfifo(path)
        dcache._TEXT.pop(k, None)
        assert dcache.disassembly_text(b"raw", "0" * 64, "gfx1010", str(tmp_path)) == "decoded"
    else:
        from hqval.audit import cache as acache

        key = hashlib.sha256(b"k").hexdigest()
        path = acache._cache_file(tmp_path, key)
        path.parent.mkdir(parents=True)
        os.mkfifo(path)
        assert acache.cached_rows(tmp_path, key) is None


@pytest.mark.parametrize("command", ["admit", "compile"])
def test_a_policy_or_manifest_linked_to_dev_zero_is_refused_unread(
        golden: Path, tmp_path: Path, hqval: Admit, command: str) -> None:
    """``--policy`` and ``--manifest`` naming a symbolic link to /dev/zero: the link is
    followed by ``stat`` only, the character device refused without reading it."""
    link = tmp_path / "linked.yaml"
    link.symlink_to("/dev/zero")
    args = (["admit", str(golden), "--policy", str(link)] if command == "admit" else
            ["compile", "--arch", "gfx1010", "--manifest", str(link)])
    res = hqval(*args)
    assert res.code == 2 and "is a character device, not a regular file" in res.err
    assert len(res.err.strip().splitlines()) == 1
