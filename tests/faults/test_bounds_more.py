"""Faults of class 'one bounded reader', second round: the run directory's own files
(rows.jsonl, envelope.json) as a FIFO, a directory or a sparse multi-GB file, a row nested
100,000 deep, and a measured value beyond a float.  Exit 2 at once, one line naming the
file (before: a FIFO hung admit, a 3 GB sparse rows.jsonl was read whole, deep nesting
and the overflow were 'internal error' lines naming no file)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.guards import cpu_seconds, no_hang

from .conftest import Result

Admit = Callable[..., Result]


def _one_line(res: Result, *words: str) -> None:
    lines = [x for x in res.err.splitlines() if x.strip()]
    assert len(lines) == 1, res.err
    assert "Traceback" not in res.err and "internal error" not in res.err
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.parametrize("name", ["rows.jsonl", "envelope.json"])
@pytest.mark.parametrize("special", ["fifo", "directory", "sparse"])
def test_a_run_file_that_is_special_or_huge_is_refused_at_once(
        copy_of: Callable[[], Path], hqval: Admit, name: str, special: str) -> None:
    run = copy_of()
    path = run / name
    if special == "sparse":
        with path.open("ab") as f:
            f.truncate(3 << 30)
        why = "byte limit"
    else:
        path.unlink()
        os.mkfifo(path) if special == "fifo" else path.mkdir()
        why = "FIFO" if special == "fifo" else "a directory"
    # a FIFO would block its reader forever; the 3 GiB file is refused by its size, so
    # the whole admit stays far below reading it (seconds of CPU)
    with no_hang(), cpu_seconds() as cpu:
        res = hqval("admit", str(run))
    assert res.code == 2 and cpu.seconds < 20
    _one_line(res, str(path), why)


@pytest.mark.parametrize("line", [
    "[" * 100_000 + "]" * 100_000,
    '{"kind": "check", "details": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}",
    # deeper than the limit, not past the parser's recursion limit: refused all the same
    '{"kind": "check", "details": ' + '{"a": ' * 100 + "1" + "}" * 100 + "}",
], ids=["array", "details", "details-100"])
def test_a_deeply_nested_row_names_the_file_and_line(copy_of: Callable[[], Path],
                                                     hqval: Admit, line: str) -> None:
    run = copy_of()
    n = len((run / "rows.jsonl").read_text().splitlines())
    with (run / "rows.jsonl").open("a") as f:
        f.write(line + "\n")
    res = hqval("admit", str(run))
    assert res.code == 2
    _one_line(res, f"rows.jsonl:{n + 1}: unreadable row (nested deeper than")


def test_a_measured_value_beyond_a_float_names_the_row(copy_of: Callable[[], Path],
                                                       hqval: Admit) -> None:
    run = copy_of()
    lines = (run / "rows.jsonl").read_text().splitlines()
    i = next(k for k, x in enumerate(lines) if '"kind": "check"' in x)
    row = json.loads(lines[i])
    row["measured"] = 10 ** 400
    lines[i] = json.dumps(row)
    (run / "rows.jsonl").write_text("\n".join(lines) + "\n")
    res = hqval("admit", str(run))
    assert res.code == 2
    _one_line(res, f"rows.jsonl: row {i + 1} is not a valid result row", "OverflowError")
