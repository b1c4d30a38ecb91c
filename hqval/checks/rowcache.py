"""Check rows remembered across runs: a cell identical in everything its verdict depends on
is not run again on the emulator; its row is the one an earlier run computed.

A cell's row on the emulator is a function of its inputs.  The interpreter is deterministic
(a launch identical in everything it depends on leaves the same memory: the launch replay
of ``hqval.emu.replay`` rests on the same fact), and so are the fixtures and the oracles.
Its inputs are:

- hqval's own code, all of it (the checks, the fixtures, the oracles, the emulator and the
  code-object reader), the Python, numpy and msgpack versions, the emulator's identity
  (its FMA implementation chosen) and the disassembler's;
- the cell (check, kernel, arch, backend), the arch's definition, the seed;
- every kernel of the manifests the cell's session collects, as loaded (a cell routes to
  other kernels of its manifest: a v1 baseline, a per-token reference);
- every ``HQVAL_*`` variable of the environment, and the variables pytest reads to load
  plugins into the check session;
- the code objects the cell loaded, by sha256.

The first six make the entry's name (``CellKey.key``).  The code objects are recorded when
the cell runs (the worker reports the sha256 of every program the cell loaded) and checked
when the entry is read: an entry is used only when each of its objects is the object this
run compiled for that (kernel, arch) (the envelope's ``objects``, the one record of what a
run built).

Only rows a kernel's code decided are kept: pass, fail and unsupported rows of a cell whose
check returned or whose kernel faulted (a trap, a memory fault, a guard).  Errors, untested
cells (an emulator or compiler gap), hqval's own failures and cells that loaded a program
this run did not compile are run again every time.  Hardware backends are never
remembered: a device is not a function of its inputs.

The cache may be shared with or poisoned by another job (``hqval.cacheauth``): every entry
carries an HMAC over its name, its row and its objects, and one without a valid tag is not
used.  ``HQVAL_EMU_REPLAY=off`` (the switch of the emulator's launch replay) and
``hqval run --fresh-cache`` run every cell again.  A row taken from here says so:
``details.cell_cache`` holds the entry's name.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hqval.result import Row, Status

LAYOUT = "cell-rows-v1"
_KIND = "cell-rows"
# the statuses a remembered row may have: what the kernel's code decided
KEPT = (Status.PASS, Status.FAIL, Status.UNSUPPORTED)
# the detail a row taken from the cache carries: the entry's name
DETAIL = "cell_cache"
# no row of the suite's is near this size; a larger file is not an entry hqval wrote
_ENTRY_LIMIT = 4 << 20


@functools.lru_cache(maxsize=1)
def _code_identity() -> str:
    import msgpack
    import numpy as np

    from hqval import cacheauth

    return cacheauth.source_identity(
        ("hqval",), f"{LAYOUT}\0{sys.version}\0{np.__version__}\0{msgpack.version}\0"
                    f"{platform.machine()}")


def _tools_identity() -> str:
    from hqval.codeobject import find_objdump, tool_identity
    from hqval.emu.replay import emulator_identity

    return f"{emulator_identity()}\0{tool_identity(find_objdump())}"


def canonical(value: Any) -> Any:
    """``value`` (a dataclass, a container, a path, a scalar) as JSON-able data that is the
    same in every process: dataclasses by their fields, sets sorted (a frozenset's repr
    follows string hashing, which every process seeds anew)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, {f.name: canonical(getattr(value, f.name))
                                       for f in dataclasses.fields(value)}]
    if isinstance(value, (set, frozenset)):
        return ["set", sorted((canonical(v) for v in value), key=repr)]
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return [type(value).__name__, str(value)]


def _spec_text(spec: Any) -> str:
    # every field (the tree's own signature among them) and the signature in effect
    return json.dumps([canonical(spec), canonical(spec.signature)], sort_keys=True)


def manifests_identity(manifests: Iterable[Any]) -> str:
    """sha256 over every kernel of ``manifests`` (loaded ``Manifest`` objects: each
    session manifest as the cells see it, and the manifest its kernels resolve in)."""
    h = hashlib.sha256()
    for m in manifests:
        h.update(f"\0manifest\0{m.path}\0".encode())
        for spec in m.kernels:
            h.update(_spec_text(spec).encode() + b"\n")
    return h.hexdigest()


# pytest reads these in the check session too: a plugin they load runs inside it
PYTEST_ENV = ("PYTEST_PLUGINS", "PYTEST_ADDOPTS")


def environment() -> dict[str, str]:
    """The ``HQVAL_*`` variables and pytest's ``PYTEST_ENV``: any of them may change what
    a cell does."""
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith("HQVAL_") or k in PYTEST_ENV}


@dataclass(frozen=True)
class CellKey:
    """What a session's cells share in their key; ``key(identity, arch)`` names one."""

    manifests: str  # manifests_identity
    seed: int
    code: str
    tools: str
    env: str

    @classmethod
    def of(cls, manifests: Iterable[Any], seed: int) -> CellKey:
        return cls(manifests_identity(manifests), seed, _code_identity(), _tools_identity(),
                   json.dumps(environment(), sort_keys=True))

    def key(self, identity: str, arch: Any) -> str:
        """``arch``: the ``Arch``, or its ``canonical`` form made once for many cells."""
        arch_form = arch if isinstance(arch, list) else canonical(arch)
        material = json.dumps({"layout": LAYOUT, "cell": identity, "arch": arch_form,
                               "seed": self.seed, "manifests": self.manifests,
                               "code": self.code, "tools": self.tools, "env": self.env},
                              sort_keys=True)
        return hashlib.sha256(material.encode()).hexdigest()


def enabled(backend: str) -> bool:
    """Rows are remembered for the emulator only, and only while its replay is on."""
    if backend != "emu":
        return False
    from hqval.emu.replay import choice

    return choice() == "cache"


def recordable(row: Row, objects: Mapping[str, str | None] | None) -> bool:
    """Whether a cell's row may be remembered: a status its kernel's code decided, and the
    sha256 of every object it loaded known."""
    return (objects is not None and row.backend == "emu" and row.status in KEPT
            and all(isinstance(v, str) and len(v) == 64 for v in objects.values()))


class RowCache:
    """Remembered rows under ``<cache>/cell-rows-v1``, one file per cell."""

    def __init__(self, cache: str | Path) -> None:
        self.cache = Path(cache)
        self.root = self.cache / LAYOUT
        self.hits = 0
        self.stored = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    @staticmethod
    def _vouched(key: str, row: str, objects: str) -> tuple[str, ...]:
        return (key, row, objects)

    def get(self, key: str, built: Mapping[str, str]) -> Row | None:
        """The row stored under ``key`` when every object it loaded is the one this run
        built (``built``: "kernel|arch" -> sha256, the envelope's objects), else None:
        absent, unreadable, malformed, not vouched for by this cache's key, or made from
        another object."""
        from hqval import cacheauth, safeio

        try:
            raw = safeio.read_bytes(self._path(key), limit=_ENTRY_LIMIT,
                                    what="check row cache entry", follow_symlinks=False)
            entry = json.loads(raw.decode("utf-8"))
            row_text, objects_text = entry["row"], entry["objects"]
            if entry.get("key") != key or not isinstance(row_text, str) or \
                    not isinstance(objects_text, str):
                return None
            if not cacheauth.usable(entry.get("mac"), self.cache, _KIND,
                                    *self._vouched(key, row_text, objects_text)):
                return None
            objects = json.loads(objects_text)
            if not isinstance(objects, dict) or \
                    any(built.get(k) != v for k, v in objects.items()):
                return None
            row = Row.from_dict(json.loads(row_text))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if row.status not in KEPT:
            return None
        self.hits += 1
        return dataclasses.replace(row, details={**row.details, DETAIL: key})

    def put(self, key: str, row: Row, objects: Mapping[str, str]) -> None:
        """Store ``row`` (as its cell made it, without the run's id) with the objects it
        loaded; nothing where the cache key cannot be used or the cache cannot be written
        (the next run computes the row again)."""
        from hqval import cacheauth, safeio

        data = row.to_dict()
        data.pop("run_id", None)
        row_text = json.dumps(data, sort_keys=True)
        objects_text = json.dumps(dict(objects), sort_keys=True)
        mac = cacheauth.seal_or_none(self.cache, _KIND,
                                     *self._vouched(key, row_text, objects_text))
        if mac is None:
            return
        body = json.dumps({"key": key, "row": row_text, "objects": objects_text, "mac": mac})
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            safeio.write_atomic(path, body, what="check row cache entry", fsync=False)
        except (OSError, ValueError):
            return
        self.stored += 1


def _arch_of(identity: str) -> str:
    return identity.rsplit("|", 2)[-2]


class SessionCache:
    """The row cache for one check session's emulator cells: the rows it remembers for the
    session's cells (``remembered``), the rows of the cells it runs kept (``keep``), and
    the JUnit test cases of the cells it answered (``junit_cases``)."""

    def __init__(self, cache: str | Path, manifests: list[Path], seed: int,
                 arches: Mapping[str, Any], built: Mapping[str, Any]) -> None:
        from hqval.checks import plugin

        manifests = [Path(m).resolve() for m in manifests]
        kernel_manifests = [m for m in manifests if not plugin.is_mutant_manifest(m)]
        real = kernel_manifests[0] if len(set(kernel_manifests)) == 1 else None
        loaded: list[Any] = []
        root = Path(os.path.commonpath([m.parent for m in manifests]))
        # kernel -> the JUnit classname prefix of its manifest, as pytest names it
        self._classes: dict[str, str] = {}
        for m in manifests:
            subject, context = plugin.load_for_cells(m, real)
            loaded += [subject, context]
            prefix = str(m.relative_to(root)).replace(os.sep, ".")
            for spec in subject.kernels:
                self._classes.setdefault(spec.name, prefix)
        self.rows = RowCache(cache)
        self.key = CellKey.of(loaded, seed)
        self.arches = {name: canonical(a) for name, a in arches.items()}
        self.built = {str(k): v for k, v in built.items() if isinstance(v, str)}
        self.answered: list[Row] = []

    def _key(self, identity: str) -> str:
        return self.key.key(identity, self.arches[_arch_of(identity)])

    def remembered(self, identities: Iterable[str]) -> list[Row]:
        """The remembered rows of ``identities`` (emulator cells of the session's arches)
        whose objects are this run's."""
        out = []
        for identity in identities:
            if not identity.endswith("|emu]") or _arch_of(identity) not in self.arches:
                continue
            row = self.rows.get(self._key(identity), self.built)
            if row is not None and row.identity == identity:
                out.append(row)
        self.answered.extend(out)
        return out

    def keep(self, row: Row, objects: Mapping[str, str | None]) -> None:
        """Remember a row the session computed, with the objects its cell loaded, when it
        may be (``recordable``) and every object is one this run built."""
        loaded = dict(objects)
        if row.object_sha256 is not None:
            # the object the row names is one its entry vouches for, loaded or not
            own = f"{row.kernel}|{row.arch}"
            if loaded.setdefault(own, row.object_sha256) != row.object_sha256:
                return
        if not recordable(row, loaded) or _arch_of(row.identity) not in self.arches or \
                any(self.built.get(k) != v for k, v in loaded.items()):
            return
        self.rows.put(self._key(row.identity), row, {k: str(v) for k, v in loaded.items()})

    def junit_cases(self) -> list[tuple[str, str, str, str]]:
        """(classname, name, outcome, message) of every cell answered from the cache, as
        the session's own report would hold it."""
        cases = []
        for r in self.answered:
            classname = f"{self._classes.get(r.kernel, 'cells')}.{r.check}.{r.arch}"
            text = f"{r.status}: {r.message}"
            if r.status is Status.PASS:
                cases.append((classname, r.identity, "", ""))
            elif r.status is Status.FAIL:
                cases.append((classname, r.identity, "failure", f"{r.identity}: {text}"))
            else:
                cases.append((classname, r.identity, "skipped", text))
        return cases
