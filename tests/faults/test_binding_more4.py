"""Faults of class 'a run bound to its evidence', fifth round: tampering the first rounds'
mechanisms already hold (each held on main; kept so they stay held).  A row naming the
code object of another kernel the run compiled, a duplicate key inside a row's details or
inside the envelope, integers beyond what a row or envelope holds, and the control: a run
directory with files of its user's beside the run's, or its rows with CRLF line ends.
And one that got through: a kernel unbound from its object (its entry in the envelope's
``objects`` removed or null, and ``object_sha256`` dropped from its rows) was admitted."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import (
    ARCH,
    BIT_IDENTITY,
    PARITY,
    Result,
    assert_damaged,
    edit_envelope,
    rewrite_each,
    set_fields,
)

Hq = Callable[..., Result]


def test_a_row_naming_another_kernels_object_is_damage(copy_of: Callable[[], Path],
                                                       hqval: Hq) -> None:
    """A pass of the qt=44 kernel naming a mutant's object, which the run compiled on the
    same arch: the envelope binds each (kernel, arch) to its own object."""
    run = copy_of()
    objects = json.loads((run / "envelope.json").read_text())["objects"]
    # (the suite's GEMVs share one object: another kernel's that differs is a mutant's)
    own = objects[f"gemv_mq4g256v2_r1|{ARCH}"]
    other = next(v for k, v in sorted(objects.items()) if v != own and k.endswith(ARCH))
    rewrite_each(run, set_fields(PARITY, object_sha256=other))
    assert_damaged(hqval("admit", str(run)), f"{PARITY}: judged code object {other[:12]}, "
                                             "not the one the run compiled")


def _raw(run: Path, ident: str, edit: Callable[[str], str]) -> None:
    lines = (run / "rows.jsonl").read_text().splitlines()
    hit = [i for i, x in enumerate(lines) if json.loads(x)["identity"] == ident]
    assert hit
    for i in hit:
        lines[i] = edit(lines[i])
    (run / "rows.jsonl").write_text("\n".join(lines) + "\n")


def test_a_duplicate_key_inside_a_rows_details_is_damage(copy_of: Callable[[], Path],
                                                         hqval: Hq) -> None:
    """A failing row whose details say qt 999 first (a reader keeping the first would
    move the failure out of its cell)."""
    run = copy_of()
    rewrite_each(run, set_fields(BIT_IDENTITY, status="fail", measured=7.0))
    _raw(run, BIT_IDENTITY, lambda x: x.replace('"details": {', '"details": {"qt": 999, ', 1))
    assert hqval("admit", str(run)).code == 2


@pytest.mark.parametrize("key,value", [("seed", "5"), ("gemv_mq4g256v2_r1", "null")],
                         ids=["top-level-seed", "kernel-table-entry"])
def test_a_duplicate_key_inside_the_envelope_is_damage(copy_of: Callable[[], Path],
                                                       hqval: Hq, key: str, value: str) -> None:
    run = copy_of()
    text = (run / "envelope.json").read_text()
    where = "{" if key == "seed" else '"kernels": {'
    assert where in text
    (run / "envelope.json").write_text(text.replace(where, f'{where}"{key}": {value}, ', 1))
    assert_damaged(hqval("admit", str(run)), "envelope.json", f"the key '{key}' twice")


@pytest.mark.parametrize("where", ["row-seed", "row-measured", "envelope-seed"])
def test_an_integer_of_5000_digits_is_one_line(copy_of: Callable[[], Path], hqval: Hq,
                                               where: str) -> None:
    run = copy_of()
    huge = "1" + "0" * 5000
    if where == "envelope-seed":
        text = (run / "envelope.json").read_text()
        assert '"seed": 0' in text
        (run / "envelope.json").write_text(text.replace('"seed": 0', f'"seed": {huge}', 1))
        named = "envelope.json"
    else:
        field = where.split("-")[1]
        rewrite_each(run, set_fields(PARITY, **{field: "@huge@"}))
        _raw(run, PARITY, lambda x: x.replace('"@huge@"', huge))
        named = "rows.jsonl:"
    res = hqval("admit", str(run))
    assert_damaged(res, named, "4300 digits")
    assert len(res.err.strip().splitlines()) == 1, res.err


def test_files_beside_the_run_and_crlf_rows_change_nothing(copy_of: Callable[[], Path],
                                                           hqval: Hq) -> None:
    """The control: a user's notes and a copy of the rows in the run directory, and its
    rows.jsonl with CRLF line ends (a checkout's autocrlf), are not evidence: exit 0."""
    run = copy_of()
    (run / "notes.txt").write_text("looked at it\n")
    (run / "rows.jsonl.orig").write_bytes((run / "rows.jsonl").read_bytes())
    (run / "extra").mkdir()
    text = (run / "rows.jsonl").read_text()
    (run / "rows.jsonl").write_bytes(text.replace("\n", "\r\n").encode())
    assert hqval("admit", str(run)).code == 0




@pytest.mark.parametrize("how", ["entry-removed", "entry-null", "compile-row-only"])
def test_a_kernel_unbound_from_its_object_is_damage(copy_of: Callable[[], Path], hqval: Hq,
                                                    how: str) -> None:
    """Once: with the entry removed or null and every row of the kernel naming no object,
    no row of it was bound to anything and the run was admitted (exit 0); a compile pass
    naming no object where the entry is there held."""
    run = copy_of()
    kernel = "gemv_mq4g256v2_r1"
    key = f"{kernel}|{ARCH}"
    if how == "entry-removed":
        edit_envelope(run, lambda e: e["objects"].pop(key))
    elif how == "entry-null":
        edit_envelope(run, lambda e: e["objects"].__setitem__(key, None))

    def unbind(r: dict[str, object]) -> None:
        if r["kernel"] == kernel and (how != "compile-row-only" or r["kind"] == "compile"):
            r.pop("object_sha256", None)
    rewrite_each(run, unbind)
    compile_row = f"compile[{kernel}|{ARCH}|toolchain]"
    assert_damaged(hqval("admit", str(run)), f"{compile_row}: passes ")
