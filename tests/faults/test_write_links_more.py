"""Faults of class 'writes', run files: an output a user names (``--json``, ``-o``) never
replaces a run directory's own evidence (envelope.json, rows.jsonl, its lock); every such
output goes through ``hqval.safeio.write_atomic``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import (
    Result,
    assert_damaged,
)

Hq = Callable[..., Result]


@pytest.mark.parametrize("name", ["envelope.json", "rows.jsonl", ".hqval-lock"])
def test_admit_json_over_a_run_file_is_refused(copy_of: Callable[[], Path], hqval: Hq,
                                               name: str) -> None:
    run = copy_of()
    before = (run / name).read_bytes()
    res = hqval("admit", str(run), "--json", str(run / name))
    assert_damaged(res, f"{run / name}", "is a file of the hqval run directory")
    assert (run / name).read_bytes() == before
    assert hqval("admit", str(run)).code == 0


@pytest.mark.parametrize("argv", [
    ["compare", "{g}", "{g}", "-o", "{r}/rows.jsonl"],
    ["compile", "--arch", "gfx1010", "--manifest", "{t}", "--json", "{r}/envelope.json"],
], ids=["compare-o", "compile-json"])
def test_another_output_over_a_run_file_is_refused(tree: Path, golden: Path,
                                                   copy_of: Callable[[], Path], hqval: Hq,
                                                   argv: list[str]) -> None:
    """``compare -o RUN/rows.jsonl`` (once: the run's rows replaced by markdown) and
    ``compile --json RUN/envelope.json``."""
    run = copy_of()
    before = {n: (run / n).read_bytes() for n in ("rows.jsonl", "envelope.json")}
    res = hqval(*[a.format(g=golden, r=run, t=tree) for a in argv])
    assert res.code == 2, res.err
    assert "is a file of the hqval run directory" in res.err
    assert {n: (run / n).read_bytes() for n in before} == before


def test_admit_json_to_a_fresh_file_is_written(copy_of: Callable[[], Path], hqval: Hq,
                                               tmp_path: Path) -> None:
    """The control: --json beside the run (or in a directory of its own) is written."""
    run = copy_of()
    res = hqval("admit", str(run), "--json", str(run / "admission-copy.json"))
    assert res.code == 0, res.err
    assert json.loads((run / "admission-copy.json").read_text())["exit_code"] == 0
