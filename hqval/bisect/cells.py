"""Which cell ``hqval bisect`` follows: its identity parsed, and the identities a manifest
makes that bisect can judge, for the error that names close matches.

A bisectable cell is one of

- ``compile[KERNEL|ARCH|toolchain]``: does the kernel build (a build failure is *bad*);
- ``audit_RULE[KERNEL|ARCH|isa]``: one ISA audit rule on the kernel's code object (the
  rules that compare with the v1 baseline audit the baseline's object too);
- ``CHECK[KERNEL|ARCH|BACKEND]`` for a check of ``hqval.checks.cell.CHECKS`` on ``emu``,
  ``hip`` or ``cuda``;
- ``timing_MODE[KERNEL@MxK|ARCH|BACKEND]`` (MODE hot or cold) on a hardware backend: the
  kernel against its qt=6 baseline at R rows per block, with the A/A control first.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hqval.checks.cell import CHECKS
from hqval.formats import HFQ4G256_QT
from hqval.result import cell_id

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec
    from hqval.matrix import Arch

IDENTITY = re.compile(r"^(?P<check>[A-Za-z0-9_]+)\[(?P<kernel>[^|\]]+)\|(?P<arch>[^|\]]+)\|"
                      r"(?P<backend>[^|\]]+)\]$")
TIMING = re.compile(r"^timing_(?P<mode>hot|cold)$")
SHAPE = re.compile(r"^(?P<kernel>[A-Za-z_][A-Za-z0-9_]*)@(?P<m>[0-9]+)x(?P<k>[0-9]+)$")
CHECK_BACKENDS = ("emu", "hip", "cuda")
TIMING_BACKENDS = ("hip", "cuda")
TIMING_MODES = ("hot", "cold")
# the shape a listed timing identity shows when the user gave none (the close-match list)
EXAMPLE_SHAPE = (4096, 4096)


@dataclass(frozen=True)
class Target:
    """The cell bisect follows."""

    identity: str
    check: str
    kernel: str  # the manifest kernel (a timing cell's shape taken off)
    arch: str
    backend: str
    kind: str  # compile | audit | check | timing
    mode: str = ""  # timing: hot or cold
    shape: tuple[int, int] = (0, 0)  # timing: (M, K)


def parse(identity: str) -> Target | None:
    """The target ``identity`` names, or None when it is no cell identity bisect knows."""
    m = IDENTITY.match(identity.strip())
    if m is None:
        return None
    check, kernel, arch, backend = m["check"], m["kernel"], m["arch"], m["backend"]
    if check == "compile" and backend == "toolchain":
        return Target(identity, check, kernel, arch, backend, "compile")
    if backend == "isa" and check.removeprefix("audit_") in audit_rules():
        return Target(identity, check, kernel, arch, backend, "audit")
    if check in CHECKS:
        return Target(identity, check, kernel, arch, backend, "check")
    t, s = TIMING.match(check), SHAPE.match(kernel)
    if t is not None and s is not None:
        return Target(identity, check, s["kernel"], arch, backend, "timing", t["mode"],
                      (int(s["m"]), int(s["k"])))
    return None


def made_by(specs: Iterable[KernelSpec], arches: Iterable[Arch],
            shape: tuple[int, int] = EXAMPLE_SHAPE) -> list[str]:
    """The bisectable identities ``specs`` make on ``arches`` (timing cells at ``shape``:
    any M x K is a cell, so the list shows one)."""
    out: list[str] = []
    specs = list(specs)
    for a in arches:
        for s in specs:
            if not s.applies_to(a):
                continue
            if a.is_amd:
                out.append(cell_id("compile", s.name, a.name, "toolchain"))
                out += [cell_id(f"audit_{rule}", s.name, a.name, "isa") for rule in audit_rules()]
            for b in CHECK_BACKENDS:
                if (b == "cuda" and a.is_amd) or (b == "hip" and not a.is_amd):
                    continue
                out += [cell_id(c, s.name, a.name, b) for c in CHECKS]
            if s.kind == "gemv" and s.qt != HFQ4G256_QT and not s.residual:
                b = "hip" if a.is_amd else "cuda"
                out += [cell_id(f"timing_{mode}", f"{s.name}@{shape[0]}x{shape[1]}", a.name, b)
                        for mode in TIMING_MODES]
    return out


def audit_rules() -> tuple[str, ...]:
    """The ISA audit's rule names (its cells are ``audit_<rule>``)."""
    from hqval import audit

    return tuple(audit.RULES)


def close_matches(identity: str, known: list[str], n: int = 5) -> list[str]:
    """The known identities nearest ``identity``: difflib's over the whole string, then
    those sharing its kernel, check or arch word."""
    close = difflib.get_close_matches(identity, known, n=n, cutoff=0.6)
    if len(close) < n:
        words = [w for w in re.split(r"[\[\]|@]", identity) if w]
        for k in known:
            if k not in close and sum(w in re.split(r"[\[\]|@]", k) for w in words) >= 2:
                close.append(k)
            if len(close) >= n:
                break
    return close[:n]
