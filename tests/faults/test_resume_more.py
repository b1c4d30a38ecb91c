"""Faults of class 'resume', second round: ``--resume`` refuses an envelope that no longer
records what the run compiled (its sources, the files the compiler read), since no edit
could be seen against it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import (
    Result,
    edit_envelope,
    rows,
    run_args,
)

Hq = Callable[..., Result]


@pytest.mark.parametrize("edit", ["no-provenance", "no-provenance-files",
                                  "no-sources", "a-source-dropped"])
def test_resume_of_an_envelope_without_its_inputs_record_is_refused(
        tree: Path, golden: Path, tmp_path: Path, hqval: Hq, edit: str) -> None:
    mine = tmp_path / "tree"
    shutil.copytree(tree.parent, mine)
    run = tmp_path / "run"
    shutil.copytree(golden, run)

    def change(e: dict[str, Any]) -> None:
        if edit == "no-provenance":
            e.pop("provenance")
        elif edit == "no-provenance-files":
            e["provenance"]["files"] = {}
        elif edit == "no-sources":
            e.pop("sources")
        else:
            e["sources"].pop("gemv_hfq4g256.hip")
    edit_envelope(run, change)
    header = mine / "include" / "hq4_header.h"
    header.write_text(header.read_text() + "\n// an edit after the run\n")
    before = (run / "rows.jsonl").read_bytes()
    res = hqval(*run_args(mine / "kernels.yaml", run, "--resume"))
    assert res.code == 2, res.out[-2000:] + res.err
    assert "envelope is damaged" in res.err and "--resume" in res.err
    assert (run / "rows.jsonl").read_bytes() == before


def test_resume_of_a_complete_run_with_its_record_still_reruns_nothing(
        tree: Path, copy_of: Callable[[], Path], hqval: Hq) -> None:
    """The control, with the new check on: a resume of the untouched copy is exit 0."""
    run = copy_of()
    n = len(rows(run))
    res = hqval(*run_args(tree, run, "--resume"))
    assert res.code == 0, res.err
    assert all(r["kind"] in ("step", "admit") for r in rows(run)[n:])
