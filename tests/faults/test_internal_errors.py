"""Fault class: an unexpected exception inside a command (a bug of hqval's).  It is one
line, "hqval: internal error: ...", exit 2 (never 1: a kernel never failed), with the
traceback only under -v."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from tests.faults.conftest import Result


def _boom(args: argparse.Namespace) -> int:
    raise KeyError("a bug")


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> None:
    import hqval.commands.matrix as matrix

    monkeypatch.setattr(matrix, "run", _boom)


@pytest.mark.usefixtures("broken")
def test_an_unexpected_exception_is_one_line_exit_2(hqval: Callable[..., Result]) -> None:
    r = hqval("matrix")
    assert r.code == 2
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("hqval: internal error: "), r.err
    assert "KeyError" in lines[0] and "-v" in lines[0] and "Traceback" not in r.err


@pytest.mark.usefixtures("broken")
def test_the_traceback_is_shown_with_v(hqval: Callable[..., Result]) -> None:
    r = hqval("-v", "matrix")
    assert r.code == 2 and "Traceback" in r.err and "internal error" in r.err


def test_an_interrupt_is_exit_130_without_a_traceback(monkeypatch: pytest.MonkeyPatch,
                                                      hqval: Callable[..., Result]) -> None:
    import hqval.commands.matrix as matrix

    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(matrix, "run", interrupted)
    r = hqval("matrix")
    assert r.code == 130 and "interrupted" in r.err and "Traceback" not in r.err
