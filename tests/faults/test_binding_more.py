"""Faults of class 'a run bound to its evidence', second round: envelope keys that the
binding checks read (``backends``, ``expected``, the kernel table's entries) deleted or of
the wrong type, and a passing check row that names no code object.  Each switched a check
off silently; each is damage now: exit 2, naming the key or the row."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import ARCH, Result, edit_envelope, rows

Admit = Callable[..., Result]
IDENT = f"bit_identity[gemv_mq4g256v2_r1|{ARCH}|emu]"


def _hip_twin(run: Path) -> None:
    """A passing row of the run's own kernel, stamped with its run id, on the hip backend."""
    row = dict(next(r for r in rows(run) if r["identity"] == IDENT))
    row.pop("identity")
    row["backend"] = "hip"
    with (run / "rows.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")


def _no_backend(e: dict[str, Any]) -> None:
    e.pop("backends")
    e.pop("backend")


@pytest.mark.parametrize("damage,named", [
    (lambda e: e.pop("backends"), f"backend hip is not the run's (emu) on {ARCH}"),
    (lambda e: e.update(backends=[]), f"backend hip is not the run's (emu) on {ARCH}"),
    (lambda e: e.update(backends={ARCH: "emu"}), f"backend hip is not the run's (emu) on {ARCH}"),
    (_no_backend, f"envelope.json has no backends entry naming the backend of {ARCH}"),
], ids=["deleted", "a-list", "entry-a-string", "both-deleted"])
def test_envelope_backends_damaged_with_a_hip_row_is_exit_2(
        copy_of: Callable[[], Path], hqval: Admit, damage: Callable[[dict[str, Any]], Any],
        named: str) -> None:
    """The backend a row must name comes from ``backends``, else from the envelope's single
    ``backend``; with neither the run is damaged (before: the backend check was skipped
    without ``backends``, and a hip row appended to the emu run admitted, exit 0)."""
    run = copy_of()
    edit_envelope(run, damage)
    _hip_twin(run)
    res = hqval("admit", str(run))
    assert res.code == 2
    assert named in res.err


def test_envelope_without_expected_counts_is_exit_2(copy_of: Callable[[], Path],
                                                    hqval: Admit) -> None:
    """``expected`` (each step's count of expected cells) deleted: the cross-check of the
    expected cells against their count was skipped (before: exit 0)."""
    run = copy_of()
    edit_envelope(run, lambda e: e.pop("expected"))
    res = hqval("admit", str(run))
    assert res.code == 2 and "envelope.json has no expected" in res.err


@pytest.mark.parametrize("entry,named", [
    (None, "is NoneType, not a mapping"),
    ({"qt": "44", "kind": "gemv"}, "qt '44' is not an integer"),
    ({"qt": 44, "kind": "gemvv"}, "kind 'gemvv' names no path"),
    ({"qt": 44, "kind": "gemv", "production": "no"}, "production 'no' is not true or false"),
    ({"qt": 44, "kind": "gemv", "built_for": "gfx1010"}, "built_for 'gfx1010' is not a list"),
], ids=["null", "qt-string", "unknown-kind", "production-string", "built-for-string"])
def test_a_kernel_table_entry_admission_cannot_read_is_exit_2(
        copy_of: Callable[[], Path], hqval: Admit, entry: Any, named: str) -> None:
    """An entry the kernel table reader skipped took its kernel out of every policy cell
    (before: the qt=44 entry set to null or its qt to "44" admitted, exit 0)."""
    run = copy_of()
    edit_envelope(run, lambda e: e["kernels"].update(gemv_mq4g256v2_r1=entry))
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"envelope.json kernels['gemv_mq4g256v2_r1']: {named}" in res.err


@pytest.mark.parametrize("ident", [IDENT, f"reference_parity[gemv_mq4g256v2_r1|{ARCH}|emu]"])
def test_a_passing_check_row_without_its_object_is_exit_2(
        copy_of: Callable[[], Path], hqval: Admit, ident: str) -> None:
    """A check row loads its own kernel's object and names it; one that passes without it
    may judge anything (before: only compile, audit and mutant rows owed it, exit 0)."""
    run = copy_of()
    data = rows(run)
    for r in data:
        if r["identity"] == ident:
            r["object_sha256"] = None
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"{ident}: passes without naming the code object it judged" in res.err


def test_a_compile_row_saying_unsupported_for_a_compiled_object_is_exit_2(
        copy_of: Callable[[], Path], hqval: Admit) -> None:
    """The compile row of a kernel the run compiled rewritten to "requires wmma_gfx11"
    (before: exit 0, the compile gate unread)."""
    run = copy_of()
    ident = f"compile[gemv_mq4g256v2_r1|{ARCH}|toolchain]"
    data = rows(run)
    for r in data:
        if r["identity"] == ident:
            r.update(status="unsupported", message="requires wmma_gfx11", object_sha256=None)
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    res = hqval("admit", str(run))
    assert res.code == 2
    assert f"{ident}: says the kernel is not built here, but the run compiled" in res.err
