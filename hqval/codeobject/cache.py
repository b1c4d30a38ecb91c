"""llvm-objdump's text of a code object, kept per (object sha256, disassembler identity,
processor): in process, and on disk under ``<cache>/disasm-v1`` (checked on read: an
entry whose key, text digest or cache-key tag (``hqval.cacheauth``) does not match is
decoded again)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from hqval import cacheauth, safeio
from hqval.codeobject.disasm import find_objdump, objdump_text, tool_identity

LAYOUT = 1
_TEXT: dict[str, str] = {}
_TEXT_LIMIT = 256


def key(sha256: str, mcpu: str, tool: str) -> str:
    return hashlib.sha256(f"{LAYOUT}\0{sha256}\0{mcpu}\0{tool}".encode()).hexdigest()


def _base(cache_dir: str | None) -> Path:
    from hqval.toolchain import cache_base

    return cache_base(cache_dir)


def _file(cache_dir: str | None, k: str) -> Path:
    return _base(cache_dir) / f"disasm-v{LAYOUT}" / k[:2] / f"{k}.json"


def disassembly_text(raw: bytes, sha256: str, mcpu: str, cache_dir: str | None) -> str:
    tool = find_objdump()
    k = key(sha256, mcpu, tool_identity(tool))
    text = _TEXT.get(k)
    if text is not None:
        return text
    path = _file(cache_dir, k)
    try:
        entry = safeio.load_json(path, what="disassembly cache entry", limit=256 << 20)
        digest = hashlib.sha256(entry["text"].encode()).hexdigest()
        if entry.get("key") == k and digest == entry.get("sha256") and cacheauth.usable(
                entry.get("mac"), _base(cache_dir), "disasm", k, digest):
            # (an entry without this machine's cache key's tag, another job's, is decoded
            # again: a forged text would make the audit and the emulator read other code)
            text = str(entry["text"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        text = None
    if text is None:
        text = objdump_text(raw, mcpu, tool)
        _store(path, k, text, _base(cache_dir))
    if len(_TEXT) >= _TEXT_LIMIT:
        _TEXT.pop(next(iter(_TEXT)))
    _TEXT[k] = text
    return text


def _store(path: Path, k: str, text: str, base: Path) -> None:
    digest = hashlib.sha256(text.encode()).hexdigest()
    mac = cacheauth.seal_or_none(base, "disasm", k, digest)
    if mac is None:
        return  # no usable cache key: nothing is stored that could not be vouched for
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".json.tmp", dir=path.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump({"key": k, "sha256": digest, "text": text, "mac": mac}, fh)
        os.replace(tmp, path)
    except OSError:  # an unwritable or full cache only costs the next process the decode
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
