"""The one row type every step of the suite produces.

A matrix cell has one identity string, ``check[kernel|arch|backend]``, used as the pytest
id, the report row key, the ``-k`` filter and the failure-list entry.  Every printer
(console, JSONL, HTML, markdown) works from these rows.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_ATOMS = (str, int, float, bool, type(None))


def _plain(x: Any) -> Any:
    """``x`` as ``dataclasses.asdict`` copies a field's value (dicts, lists and tuples
    rebuilt, a nested dataclass made a dict, anything else deep-copied), without its
    generic recursion: the rows' details are JSON data, mostly strings and numbers, and
    asdict took 1.45 s over a matrix's 9,620 rows where this takes 0.28 s."""
    if isinstance(x, _ATOMS):
        return x
    if isinstance(x, dict):
        return type(x)((_plain(k), _plain(v)) for k, v in x.items())
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # a named tuple, as asdict
        return type(x)(*[_plain(v) for v in x])
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.asdict(x)
    return copy.deepcopy(x)


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
    data and must be JSON-serialisable.  ``run_id`` is the id of the run that wrote the
    row (its envelope's ``run_id``; stamped by ``hqval.results.store.RunWriter``) and
    ``object_sha256`` the sha256 of the code object a compile, audit, check or mutant row
    judged: admission accepts a row only when the run's envelope vouches for both.
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
    run_id: str = ""
    object_sha256: str | None = None

    @property
    def identity(self) -> str:
        return cell_id(self.check, self.kernel, self.arch, self.backend)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: _plain(getattr(self, f.name)) for f in _FIELDS}
        d["status"] = str(self.status)
        d["identity"] = self.identity
        for key in ("measured", "tolerance"):
            v = d[key]
            if isinstance(v, float) and not math.isfinite(v):
                d[key] = repr(v)  # JSON has no NaN/Inf; keep them visible as strings
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Row:
        """The row a JSON object holds; a field of the wrong type is a ``TypeError`` naming
        it (a row is data from a file, never trusted to be what it claims)."""
        def num(key: str) -> float | None:
            v = d.get(key)
            if v is None:
                return None
            if isinstance(v, str):
                # to_dict writes a non-finite number as its repr, and only that: any other
                # text ("0.0", " 1e-4", "١") is no row hqval wrote
                if v not in _NON_FINITE:
                    raise TypeError(f"{key} is the text {v!r}, not a number (a row states "
                                    "a number, or nan, inf or -inf as text)")
                return float(v)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError(f"{key} is {type(v).__name__}, not a number")
            return float(v)

        def text(key: str, default: str | None = None) -> str:
            v = d[key] if default is None else d.get(key, default)
            if not isinstance(v, str):
                raise TypeError(f"{key} is {type(v).__name__}, not a string")
            return v

        if not isinstance(d, dict):
            raise TypeError(f"a row is a JSON object, not {type(d).__name__}")
        seed = d.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed is {type(seed).__name__}, not an integer")
        details = d.get("details", {})
        if not isinstance(details, dict):
            raise TypeError(f"details is {type(details).__name__}, not an object")
        sha = d.get("object_sha256")
        if sha is not None and not isinstance(sha, str):
            raise TypeError(f"object_sha256 is {type(sha).__name__}, not a string")
        return cls(
            kind=text("kind"),
            check=text("check"),
            kernel=text("kernel"),
            arch=text("arch"),
            backend=text("backend"),
            status=Status(text("status")),
            measured=num("measured"),
            tolerance=num("tolerance"),
            derivation=text("derivation", ""),
            seed=seed,
            message=text("message", ""),
            details=dict(details),
            run_id=text("run_id", ""),
            object_sha256=sha,
        )


_FIELDS = dataclasses.fields(Row)
# the text Row.to_dict gives a non-finite measured value or tolerance (JSON has none)
_NON_FINITE = frozenset(repr(v) for v in (math.nan, math.inf, -math.inf))


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


def rows_exit_code(rows: Sequence[Row], what: str) -> int:
    """A command's exit code over its rows: 2 when a row is an infrastructure error
    (hqval's machinery: the cache, I/O, a fixture, a tool; never the kernels' failure),
    said on stderr naming the first; else 1 when a row did not pass; else 0."""
    import sys

    infra = [r for r in rows if r.status is Status.ERROR and r.details.get("infrastructure")]
    if infra:
        first = (infra[0].message.splitlines() or [""])[0]
        print(f"hqval {what}: infrastructure error in {len(infra)} cell(s) (first: "
              f"{infra[0].identity}: {first})", file=sys.stderr)
        return 2
    return 0 if all(r.status.ok for r in rows) else 1
