"""The admission policy (``matrices/policy.yaml``): per format and path, which arch
capabilities the path needs (and what happens when one is missing: ``fallback`` to
per-token decode or ``unsupported``), which checks must pass, and which gates (audit,
mutants, timing) apply.  Parsed once per run (``load_policy``) and carried in the run's
context; every judgement of the run's rows uses that one ``Policy``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hqval import suite_dir
from hqval.matrix import Arch, load_arches
from hqval.signature import PATHS
from hqval.signature import builtin as builtin_signatures
from hqval.timing.gate import Gate, GateError, TimingPolicy, parse_timing

POLICY_PATH = suite_dir("matrices") / "policy.yaml"
HARDWARE_EMULATOR = "emu"
class _PathOfKind(Mapping[str, str]):
    """signature name -> policy path (``hqval.signature``), read from the suite's
    signatures on first use, not at import (an install without the suite's files says so
    in one line).  A tree's own signatures record their path in the run's kernel table."""

    def _table(self) -> dict[str, str]:
        return {name: sig.path for name, sig in builtin_signatures().items()}

    def __getitem__(self, kind: str) -> str:
        return self._table()[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


PATH_OF_KIND: Mapping[str, str] = _PathOfKind()


class AdmissionStatus(enum.StrEnum):
    MEASURED = "measured"
    EMULATED = "emulated"
    # an expected cell of the path has no row (a killed step, a crashed worker, rows lost):
    # never emulated or measured, and exit 2
    INCOMPLETE = "incomplete"
    COMPILED = "compiled"
    FALLBACK = "fallback"
    UNSUPPORTED = "unsupported"
    REJECTED = "rejected"
    UNTESTED = "untested"

    @property
    def admitted(self) -> bool:
        return self in (AdmissionStatus.MEASURED, AdmissionStatus.EMULATED,
                        AdmissionStatus.COMPILED, AdmissionStatus.FALLBACK)


class PolicyError(ValueError):
    """policy.yaml does not follow its schema; the message names the file, key and fix."""


# ---------------------------------------------------------------------------- policy


@dataclass(frozen=True)
class Need:
    cap: str
    allowed: tuple[str, ...]
    otherwise: AdmissionStatus  # FALLBACK or UNSUPPORTED
    why: str


@dataclass(frozen=True)
class PathPolicy:
    format: str
    qt: int
    path: str
    kinds: tuple[str, ...]
    needs: tuple[Need, ...]
    checks: tuple[str, ...]
    fallback_checks: tuple[str, ...] = ()
    audit: bool = True
    mutants: bool = True
    # The timing gate per cache mode (hqval.timing.gate), None: timing not gated.
    timing: TimingPolicy | None = None

    @property
    def timing_required(self) -> bool:
        """measured needs hardware timing rows too (GEMV paths have timing cells; a path
        without timing cells would otherwise never reach measured)."""
        return self.timing.required if self.timing is not None else True

    def gate(self, mode: str) -> Gate | None:
        return self.timing.gate(mode) if self.timing is not None else None

    @property
    def max_ratio(self) -> float | None:
        """The largest ratio_max over the modes (for a plot's single gate line)."""
        if self.timing is None:
            return None
        return max(g.ratio_max for g in self.timing.gates.values())


@dataclass(frozen=True)
class Policy:
    paths: tuple[PathPolicy, ...]
    notes: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def gate(self, qt: int, path: str, mode: str) -> Gate | None:
        """The timing gate of (qt, path) in cache mode ``mode``; None where ungated."""
        for pp in self.paths:
            if pp.qt == qt and pp.path == path:
                return pp.gate(mode)
        return None


CAPS = ("wmma", "wave_size", "family")


def _need(src: str, where: str, d: Any) -> Need:
    if not isinstance(d, dict):
        raise PolicyError(f"{src}: {where}: expected a mapping with cap, in, otherwise, why")
    cap = d.get("cap")
    if cap not in CAPS:
        raise PolicyError(f"{src}: {where}.cap: {cap!r} is not one of {', '.join(CAPS)}")
    allowed = d.get("in")
    if not isinstance(allowed, list) or not allowed:
        raise PolicyError(f"{src}: {where}.in: give a non-empty list of allowed {cap} values")
    otherwise = d.get("otherwise")
    if otherwise not in ("fallback", "unsupported"):
        raise PolicyError(
            f"{src}: {where}.otherwise: {otherwise!r}; use 'fallback' or 'unsupported'")
    return Need(str(cap), tuple(str(a) for a in allowed), AdmissionStatus(otherwise),
                str(d.get("why", "")))


def parse_policy(data: Any, source: str = "policy.yaml") -> Policy:
    if not isinstance(data, dict) or not isinstance(data.get("formats"), dict):
        raise PolicyError(f"{source}: top level needs a 'formats' mapping (format -> qt, paths)")
    if data.get("schema") != 1:
        raise PolicyError(f"{source}: schema: {data.get('schema')!r}; this hqval reads schema 1")
    paths: list[PathPolicy] = []
    for fmt, fd in data["formats"].items():
        where = f"formats.{fmt}"
        if not isinstance(fd, dict) or not isinstance(fd.get("qt"), int):
            raise PolicyError(f"{source}: {where}.qt: give the format's integer qt")
        if not isinstance(fd.get("paths"), dict) or not fd["paths"]:
            raise PolicyError(f"{source}: {where}.paths: give at least one of decode, prefill")
        for pname, pd in fd["paths"].items():
            pw = f"{where}.paths.{pname}"
            if pname not in PATHS:
                raise PolicyError(f"{source}: {pw}: unknown path; use one of {', '.join(PATHS)}")
            if not isinstance(pd, dict):
                raise PolicyError(f"{source}: {pw}: expected a mapping")
            unknown = set(pd) - {"kinds", "needs", "checks", "fallback_checks", "audit",
                                 "mutants", "timing"}
            if unknown:
                raise PolicyError(f"{source}: {pw}: unknown key(s) {sorted(unknown)}")
            kinds = pd.get("kinds")
            if not isinstance(kinds, list) or not kinds:
                raise PolicyError(f"{source}: {pw}.kinds: list the kernel kinds (gemv, gemm)")
            # a kernel's path is its signature's: the list must say what the signatures say
            placed = sorted(n for n, sig in builtin_signatures().items() if sig.path == pname)
            if sorted(map(str, kinds)) != placed:
                raise PolicyError(
                    f"{source}: {pw}.kinds: {sorted(map(str, kinds))} is not the suite's "
                    f"signatures of path {pname} ({', '.join(placed) or 'none'}); a kernel's "
                    f"path is its signature's (matrices/signatures.yaml): list exactly those")
            checks = pd.get("checks")
            if not isinstance(checks, list) or not checks:
                raise PolicyError(f"{source}: {pw}.checks: list at least one required check")
            needs = tuple(_need(source, f"{pw}.needs[{i}]", n)
                          for i, n in enumerate(pd.get("needs") or []))
            fb = tuple(str(c) for c in pd.get("fallback_checks") or [])
            if any(n.otherwise is AdmissionStatus.FALLBACK for n in needs) and not fb:
                raise PolicyError(
                    f"{source}: {pw}.fallback_checks: a need falls back, so name the checks "
                    "that verify the fallback (e.g. [fallback])")
            try:
                timing = parse_timing(pd.get("timing"), f"{pw}.timing")
            except GateError as exc:
                raise PolicyError(f"{source}: {exc}") from None
            paths.append(PathPolicy(
                format=str(fmt), qt=int(fd["qt"]), path=str(pname),
                kinds=tuple(str(k) for k in kinds), needs=needs,
                checks=tuple(str(c) for c in checks), fallback_checks=fb,
                audit=bool(pd.get("audit", True)), mutants=bool(pd.get("mutants", True)),
                timing=timing,
            ))
    notes = data.get("notes") or {}
    if not isinstance(notes, dict):
        raise PolicyError(f"{source}: notes: expected a mapping arch -> text")
    return Policy(tuple(paths), {str(k): str(v) for k, v in notes.items()}, source)



def load_policy(path: str | Path | None = None) -> Policy:
    """The policy file, read as every YAML input is (``hqval.schema.load_yaml``: the one
    bounded reader, each value's line kept); an error names the file, the line, the key
    and the fix."""
    from hqval import schema

    p = Path(path) if path else POLICY_PATH
    try:
        doc = schema.load_yaml(p)
    except schema.SchemaError as exc:
        raise PolicyError(f"{exc}; pass --policy FILE (or HQVAL_POLICY) naming a policy "
                          "YAML") from None
    try:
        return parse_policy(doc.data, str(p))
    except PolicyError as exc:
        raise PolicyError(_located(str(exc), str(p), doc)) from None


def _located(message: str, source: str, doc: Any) -> str:
    """``source: key.path: text`` as ``source:LINE: key.path: text``, the line the key is
    on in ``doc`` (a ``hqval.schema.YamlDoc``)."""
    head = f"{source}: "
    if not message.startswith(head):
        return message
    rest = message[len(head):]
    dotted = rest.split(": ", 1)[0]
    key: list[str | int] = []
    for part in dotted.split("."):
        name, _, index = part.partition("[")
        key.append(name)
        if index.rstrip("]").isdigit():
            key.append(int(index.rstrip("]")))
    return f"{source}:{doc.line(tuple(key))}: {rest}"


# ---------------------------------------------------------------------------- arch caps


def arch_caps_from_matrix(path: str | Path | None = None) -> dict[str, Arch]:
    """Every arch of matrices/arches.yaml (its capabilities are what the policy names)."""
    return load_arches(path)


# ---------------------------------------------------------------------------- evidence

