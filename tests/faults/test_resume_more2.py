"""Faults of class 'a run bound to its evidence', resume, third round: the compiler that
builds a run's objects, and hqval's own code and matrices, are part of what makes it one
run.  ``--resume`` under another
compiler binary (``HQVAL_CLANG``: another clang, or a wrapper of the same one) or another
environment the compiler reads (``CPATH``, ...) would compile the cells still missing with
it, judging objects the run never compiled (the envelope then said damaged for ever); it is
refused before anything is written, naming the compiler."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Result, edit_envelope, run_args
from .test_toolchain_faults import CLANG

Hq = Callable[..., Result]


@pytest.mark.parametrize("change", ["another-binary", "compiler-env"])
def test_resume_under_another_compiler_is_refused(
        copy_of: Callable[[], Path], tree: Path, tmp_path: Path, hqval: Hq,
        monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    run = copy_of()
    if change == "another-binary":
        # the same clang behind another binary: as a clang upgraded or swapped between
        # the kill and the resume (once: the resume went on)
        wrapper = tmp_path / "clang"
        wrapper.write_text(f'#!/bin/sh\nexec {CLANG} "$@"\n')
        wrapper.chmod(0o755)
        monkeypatch.setenv("HQVAL_CLANG", str(wrapper))
        named = f"this invocation by '{wrapper}'"
    else:
        monkeypatch.setenv("CPATH", str(tmp_path))
        named = f"compiler_env: the run has {{}}, this invocation {{'CPATH': '{tmp_path}'}}"
    before = (run / "rows.jsonl").read_bytes()
    res = hqval(*run_args(tree, run, "--resume"))
    assert res.code == 2, res.out[-2000:] + res.err[-2000:]
    assert "not the same run" in res.err and named in res.err, res.err
    assert (run / "rows.jsonl").read_bytes() == before


def test_resume_under_another_hqval_of_the_same_commit_is_refused(
        copy_of: Callable[[], Path], tree: Path, hqval: Hq) -> None:
    """The run was made by an hqval whose code or matrices differ though its commit is the
    same (an installed hqval has none; a checkout with edits is "+dirty" whatever the
    edit), as its envelope's suite_sha256 says (once: no such record, the resume went on)."""
    run = copy_of()
    edit_envelope(run, lambda e: e.__setitem__("suite_sha256", "0" * 64))
    before = (run / "rows.jsonl").read_bytes()
    res = hqval(*run_args(tree, run, "--resume"))
    assert res.code == 2, res.out[-2000:] + res.err[-2000:]
    assert "not the same run (suite_sha256: the run has '0000" in res.err, res.err
    assert (run / "rows.jsonl").read_bytes() == before
