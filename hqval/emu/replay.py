"""Launches remembered for replay, in a process and across processes.

A launch's outcome is a function of what ``Machine._launch_key`` hashes: the code as
decoded, the generation whose semantics run it, the kernel, grid, block, arguments, step
limit, and the layout, windows and bytes of every live allocation.  A launch with a key
seen before leaves the same memory and the same counts, so it is replayed: the
allocations it changed are written back and its stats handed out.

``ReplayStore`` remembers launches in the process (the emu backend's machines share one,
so an arch whose code object is identical to another's, apart from the target it names,
runs each launch once).  ``DiskReplay`` keeps them in the cache directory, so a later
process (another xdist worker, the next ``hqval run``) replays what an earlier one ran.

A disk entry is named by a sha256 over the emulator's own identity (``emulator_identity``:
the source of every module that decides what a launch does, the Python and numpy
versions, the FMA implementation chosen) and the launch key, so an entry made by other
emulator code is never found.  The cache may be shared with or poisoned by another job
(``hqval.cacheauth``): every entry carries an HMAC over its name, the arch that ran it,
its stats and its payload's digest, and one without a valid tag is not used.  Launches
that ran with a trace or a memory recorder (the executed audit's: they must see every
access) and launches that failed are never stored.  ``HQVAL_EMU_REPLAY=off`` turns the disk
layer off (``cache``, the default, keeps it on).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hqval.emu.errors import EmuError
from hqval.emu.stats import LaunchStats

# launches a replay store remembers (oldest dropped first)
REPLAY_LIMIT = 512

ENV = "HQVAL_EMU_REPLAY"
CHOICES = ("cache", "off")
# what a launch's outcome depends on beyond its key: the interpreter and the decoder
EMU_MODULES = ("hqval.emu", "hqval.codeobject")
LAYOUT = "emu-replay-v1"
_MAGIC = b"HQVAL-EMU-REPLAY 1\n"
_KIND = "emu-replay"
# no launch of the suite's sizes changes anywhere near this much memory; a larger file
# is not an entry hqval wrote
_ENTRY_LIMIT = 256 << 20


@dataclass(frozen=True)
class Replayed:
    """One remembered launch: the bytes of each allocation it changed (by index in the
    machine's allocation order), its stats, and the arch whose machine ran it."""

    changed: dict[int, bytes]
    stats: LaunchStats
    arch: str


class ReplayStore:
    """Launches remembered in this process: launch key -> ``Replayed``.  A machine has a
    store of its own unless it is given one."""

    def __init__(self, limit: int = REPLAY_LIMIT) -> None:
        self.limit = limit
        self._runs: dict[bytes, Replayed] = {}

    def get(self, key: bytes) -> Replayed | None:
        return self._runs.get(key)

    def put(self, key: bytes, entry: Replayed) -> None:
        if len(self._runs) >= self.limit:
            self._runs.pop(next(iter(self._runs)))
        self._runs[key] = entry

    def clear(self) -> None:
        self._runs.clear()

    def __len__(self) -> int:
        return len(self._runs)


# the store the emu backend's machines share in a process (``hqval.backends.emu``): a check
# cell of one arch replays another arch's identical launches (room for the launches of a
# few cells on every arch)
SHARED_REPLAY = ReplayStore(limit=2 * REPLAY_LIMIT)


def choice() -> str:
    """``$HQVAL_EMU_REPLAY`` (``cache`` when unset); another value raises ``EmuError``."""
    mode = os.environ.get(ENV, "cache").strip().lower() or "cache"
    if mode not in CHOICES:
        raise EmuError(f"{ENV}={mode!r}: use one of {', '.join(CHOICES)}")
    return mode


@functools.lru_cache(maxsize=4)
def _identity(salt: str) -> str:
    from hqval import cacheauth

    return cacheauth.source_identity(EMU_MODULES, salt)


def emulator_identity() -> str:
    """A sha256 of everything besides the launch key that decides a launch's outcome: the
    source of ``EMU_MODULES`` (the interpreter, its FMA, the code-object reader and the
    disassembly parser), the cache layout, the Python and numpy versions and the FMA
    implementation asked for (the compiled one is used only where it equals numpy's)."""
    import sys

    import numpy as np

    from hqval.emu import fastfma

    return _identity(f"{LAYOUT}\0{sys.version}\0{np.__version__}\0{fastfma.choice()}")


class DiskReplay:
    """Remembered launches under ``<cache>/emu-replay-v1``, one file per launch."""

    def __init__(self, cache: str | Path) -> None:
        self.cache = Path(cache)
        self.root = self.cache / LAYOUT
        self.hits = 0
        self.stored = 0

    def _name(self, key: bytes) -> str:
        return hashlib.sha256(emulator_identity().encode() + b"\0" + key).hexdigest()

    def _path(self, name: str) -> Path:
        return self.root / name[:2] / name

    @staticmethod
    def _vouched(name: str, arch: str, stats: str, changed: str, payload: str
                 ) -> tuple[str, ...]:
        return (name, arch, stats, changed, payload)

    def get(self, key: bytes) -> Replayed | None:
        """The launch stored under ``key``, or None: absent, unreadable, malformed, torn,
        another emulator's, or not vouched for by this cache's key."""
        from hqval import cacheauth, safeio

        name = self._name(key)
        try:
            raw = safeio.read_bytes(self._path(name), limit=_ENTRY_LIMIT,
                                    what="emulator replay entry", follow_symlinks=False)
        except (OSError, ValueError):
            return None
        try:
            entry = _parse(raw, name)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None
        header, payload = entry
        digest = hashlib.sha256(payload).hexdigest()
        stats_text = json.dumps(header["stats"], sort_keys=True)
        changed_text = json.dumps(header["changed"])
        if digest != header["payload_sha256"] or not cacheauth.usable(
                header["mac"], self.cache, _KIND,
                *self._vouched(name, header["arch"], stats_text, changed_text, digest)):
            return None
        try:
            stats = LaunchStats.from_json(header["stats"])
            changed: dict[int, bytes] = {}
            at = 0
            for index, size in header["changed"]:
                if type(index) is not int or type(size) is not int or index < 0 or size < 0:
                    return None
                changed[index] = payload[at:at + size]
                at += size
            if at != len(payload):
                return None
        except (ValueError, TypeError):
            return None
        self.hits += 1
        return Replayed(changed=changed, stats=stats, arch=str(header["arch"]))

    def put(self, key: bytes, entry: Replayed) -> None:
        """Store ``entry``; nothing where the cache key cannot be used (no entry that could
        not be vouched for) or the cache cannot be written (the next process runs the
        launch again)."""
        from hqval import cacheauth, safeio

        name = self._name(key)
        order = sorted(entry.changed)
        payload = b"".join(entry.changed[k] for k in order)
        digest = hashlib.sha256(payload).hexdigest()
        stats = entry.stats.to_json()
        changed = [[k, len(entry.changed[k])] for k in order]
        mac = cacheauth.seal_or_none(self.cache, _KIND, *self._vouched(
            name, entry.arch, json.dumps(stats, sort_keys=True), json.dumps(changed), digest))
        if mac is None:
            return
        header = json.dumps({"name": name, "arch": entry.arch, "stats": stats,
                             "changed": changed, "payload_sha256": digest, "mac": mac},
                            sort_keys=True).encode()
        path = self._path(name)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            safeio.write_atomic(path, _MAGIC + len(header).to_bytes(8, "little") + header
                                + payload, what="emulator replay entry", fsync=False)
        except (OSError, ValueError):
            return
        self.stored += 1


def _parse(raw: bytes, name: str) -> tuple[dict[str, Any], bytes]:
    if not raw.startswith(_MAGIC):
        raise ValueError("not a replay entry")
    at = len(_MAGIC)
    size = int.from_bytes(raw[at:at + 8], "little")
    at += 8
    if size > len(raw) - at:
        raise ValueError("torn replay entry")
    header = json.loads(raw[at:at + size].decode("utf-8"))
    if not isinstance(header, dict) or header.get("name") != name or \
            not isinstance(header.get("arch"), str) or \
            not isinstance(header.get("changed"), list) or \
            not all(isinstance(c, list) and len(c) == 2 for c in header["changed"]):
        raise ValueError("malformed replay entry")
    return header, raw[at + size:]
