"""Faults of class 'option values', second round: an environment value is held to the
option's choices as a command-line value is; a count is ASCII digits; timing counts have an
upper bound."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import (
    Result,
)

Hq = Callable[..., Result]


@pytest.mark.parametrize("var,value,argv", [
    ("HQVAL_BACKEND", "Emu", ["check", "--arch", "gfx1010"]),
    ("HQVAL_BACKEND", "emu ", ["mutants", "--arch", "gfx1010"]),
    ("HQVAL_BACKEND", "", ["bench", "--arch", "gfx1010"]),
], ids=["check-Emu", "mutants-trailing-space", "bench-empty"])
def test_an_environment_value_off_the_choices_is_a_usage_error(
        monkeypatch: pytest.MonkeyPatch, hqval: Hq, var: str, value: str,
        argv: list[str]) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(SystemExit) as exc:
        hqval(*argv)
    assert exc.value.code == 2


@pytest.mark.parametrize("argv", [
    ["run", "--arch", "gfx1010", "--seed", "\u0661"],
    ["run", "--arch", "gfx1010", "--seed", "1_000"],
    ["check", "--arch", "gfx1010", "--workers", "\u0662"],
    ["run", "--arch", "gfx1010", "--timing-iterations", "99999999999999999999"],
    ["run", "--arch", "gfx1010", "--timing-runs", "100000"],
    ["bench", "--iterations", "10000000"],
    ["compile", "--arch", "gfx1010", "--jobs", "+"],
], ids=["seed-arabic-digit", "seed-underscore", "workers-arabic-digit",
        "timing-iterations-huge", "timing-runs-huge", "bench-iterations-huge", "jobs-sign"])
def test_a_count_in_other_digits_or_beyond_reason_is_a_usage_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hqval: Hq, argv: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        hqval(*argv, *(["--out", str(tmp_path / "out")] if argv[0] == "run" else []))
    assert exc.value.code == 2
    assert not (tmp_path / "out").exists()
