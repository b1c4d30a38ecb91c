"""Faults of class 'causes kept apart', third round: a failure of hqval's own code inside
a check or the ISA audit is no verdict on the kernel.  A fixture that does not hold
(``FixtureError``: it would not discriminate) and a bug of hqval's Python (a
``ZeroDivisionError`` in the oracle, an ``AttributeError``, a ``KeyError`` in an audit
rule: ``errors.PROGRAM_ERRORS``) were error rows of the kernel, so every cell they
touched was rejected (exit 1); each is an infrastructure error (exit 2), and a resumed run
redoes it.  The kernel's own behaviour still fails its cell."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hqval.checks import inputs

from .conftest import ARCH, CLEAN, Result, admission, run_args

Hq = Callable[..., Result]


def _no_fixture(*a: Any, **k: Any) -> None:
    raise inputs.FixtureError("fixture disjoint_halves(seed=0) does not hold: no row differs")


def _zero(*a: Any, **k: Any) -> None:
    raise ZeroDivisionError("float division by zero")


def _attribute(*a: Any, **k: Any) -> None:
    raise AttributeError("'NoneType' object has no attribute 'values'")


FAULTS = {"fixture-does-not-hold": ("require_discriminating", _no_fixture),
          "oracle-zero-division": ("oracle", _zero),
          "oracle-attribute-error": ("oracle", _attribute)}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_failure_of_hqvals_own_code_in_a_check_is_infrastructure(
        tree: Path, tmp_path: Path, hqval: Hq, monkeypatch: pytest.MonkeyPatch,
        fault: str) -> None:
    name, fn = FAULTS[fault]
    monkeypatch.setattr(inputs, name, fn)
    monkeypatch.setenv("HQVAL_EMU_REPLAY", "off")  # (a remembered row would answer)
    out = tmp_path / "rows.json"
    res = hqval("check", "--arch", ARCH, "--backend", "emu", "--manifest", str(tree),
                "--check", "reference_parity", "--workers", "0", "--json", str(out))
    assert res.code == 2, res.out[-2000:] + res.err[-2000:]  # once: exit 1
    rows = [r for r in json.loads(out.read_text()) if r["status"] != "unsupported"]
    assert rows and all(r["status"] == "error" and r["details"]["infrastructure"]
                        for r in rows), rows


def test_a_run_meeting_a_bug_of_hqval_is_exit_2_and_resume_redoes_it(
        tree: Path, tmp_path: Path, hqval: Hq, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    monkeypatch.setenv("HQVAL_EMU_REPLAY", "off")
    with monkeypatch.context() as mp:
        mp.setattr(inputs, "oracle", _zero)
        first = hqval(*run_args(tree, run, "--no-mutants"))
    assert first.code == 2, first.out[-2000:] + first.err[-2000:]  # once: exit 1
    assert "rejected" not in admission(run).values()  # incomplete, never rejected
    resumed = hqval(*run_args(tree, run, "--no-mutants", "--resume"))
    assert resumed.code == 0, resumed.out[-2000:] + resumed.err[-2000:]
    assert admission(run) == CLEAN


@pytest.mark.parametrize("exc", [KeyError, TypeError], ids=["key-error", "type-error"])
def test_a_bug_of_hqvals_own_audit_code_is_infrastructure(
        tree: Path, tmp_path: Path, hqval: Hq, monkeypatch: pytest.MonkeyPatch,
        exc: type[Exception]) -> None:
    """Once: a KeyError was the kernels' audit error (exit 1), a TypeError crashed the
    step."""
    from hqval.audit import cache

    def broken(*a: Any, **k: Any) -> None:
        raise exc("rule_of_no_name")

    monkeypatch.setattr(cache, "audit_kernel", broken)
    monkeypatch.setattr(cache, "cached_rows", lambda *a, **k: None)  # (remembered rows)
    out = tmp_path / "rows.json"
    res = hqval("audit", "--arch", ARCH, "--manifest", str(tree), "--json", str(out))
    assert res.code == 2, res.out[-2000:] + res.err[-2000:]
    rows = [r for r in json.loads(out.read_text()) if r["status"] != "unsupported"]
    assert rows and all(r["status"] == "error" and r["details"]["infrastructure"]
                        and "hqval's own code failed auditing it" in r["message"]
                        for r in rows), rows
