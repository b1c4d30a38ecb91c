"""The one row type every step of the suite produces.

A matrix cell has one identity string, ``check[kernel|arch|backend]``, used as the pytest
id, the report row key, the ``-k`` filter and the failure-list entry.  Every printer
(console, JSONL, HTML, markdown) works from these rows.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


class Status(enum.StrEnum):
    PASS = "pass"
    FAIL = "fail"
    # The cell does not apply (for example qt=45 WMMA on gfx11); never a failure.
    UNSUPPORTED = "unsupported"
    # The cell applies but was not run (a missing optional tool); the reason says why.
    SKIPPED = "skipped"
    # The check could not reach a verdict (compile error, emulator gap, fixture that does
    # not discriminate).  Fails closed: admission treats it like a failure.
    ERROR = "error"

    @property
    def ok(self) -> bool:
        return self in (Status.PASS, Status.UNSUPPORTED, Status.SKIPPED)


@dataclass(frozen=True)
class Row:
    """One result: a compile, an audit rule, a check, a mutant verdict or a timing cell.

    ``kind`` says which step produced it: compile | audit | check | mutant | timing | admit.
    ``measured`` and ``tolerance`` are the metric and its bound (None where not numeric);
    ``derivation`` is the one-line reason for the bound.  ``details`` holds step-specific
    data and must be JSON-serialisable.
    """

    kind: str
    check: str
    kernel: str
    arch: str
    backend: str
    status: Status
    measured: float | None = None
    tolerance: float | None = None
    derivation: str = ""
    seed: int | None = None
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def identity(self) -> str:
        return cell_id(self.check, self.kernel, self.arch, self.backend)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = str(self.status)
        d["identity"] = self.identity
        for key in ("measured", "tolerance"):
            v = d[key]
            if isinstance(v, float) and not math.isfinite(v):
                d[key] = repr(v)  # JSON has no NaN/Inf; keep them visible as strings
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Row:
        def num(v: Any) -> float | None:
            if v is None:
                return None
            return float(v)

        return cls(
            kind=d["kind"],
            check=d["check"],
            kernel=d["kernel"],
            arch=d["arch"],
            backend=d["backend"],
            status=Status(d["status"]),
            measured=num(d.get("measured")),
            tolerance=num(d.get("tolerance")),
            derivation=d.get("derivation", ""),
            seed=d.get("seed"),
            message=d.get("message", ""),
            details=dict(d.get("details", {})),
        )


def cell_id(check: str, kernel: str, arch: str, backend: str) -> str:
    return f"{check}[{kernel}|{arch}|{backend}]"


def row_lines(rows: Sequence[Row], verbose: bool, what: str) -> list[str]:
    """The console listing of a step's rows: every row that did not pass (every row with
    ``verbose``), its message's first lines, then the counts by status."""
    from collections import Counter

    lines: list[str] = []
    for r in rows:
        if verbose or not r.status.ok:
            first = r.message.splitlines()[0] if r.message else ""
            lines.append(f"{r.status.upper():11} {r.identity}  {first}")
            if not r.status.ok:
                lines += [f"{'':12}{line}" for line in r.message.splitlines()[1:6]]
    counts = Counter(str(r.status) for r in rows)
    lines.append(f"hqval {what}: {len(rows)} cells: "
                 + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return lines
