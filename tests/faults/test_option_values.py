"""Fault class: a bad option value.  Each is a usage error, one line naming the option,
exit 2, before anything runs (validated once, in hqval/options.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.conftest import Result

BAD = [
    (["run", "--arch", "gfx1010", "--seed", "-1"], "--seed"),
    (["run", "--arch", "gfx1010", "--workers", "banana"], "--workers"),
    (["run", "--arch", "gfx1010", "--timing-iterations", "-5"], "--timing-iterations"),
    (["run", "--arch", "gfx1010", "--timing-runs", "0"], "--timing-runs"),
    (["bench", "--iterations", "-1"], "--iterations"),
    (["bench", "--runs", "-2"], "--runs"),
    (["check", "--arch", "gfx1010", "--seed", "99999999999"], "--seed"),
    (["compile", "--arch", "gfx1010", "--jobs", "0"], "--jobs"),
    (["emu", "--arch", "gfx1010", "-M", "100000000"], "-M"),
]


@pytest.mark.parametrize("argv, option", BAD, ids=lambda v: " ".join(v) if isinstance(v, list)
                         else v)
def test_a_bad_option_value_is_a_usage_error_before_anything_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], option: str,
        hqval: Callable[..., Result]) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        hqval(*argv, *(["--out", str(tmp_path / "out")] if argv[0] == "run" else []))
    assert exc.value.code == 2


def test_a_bad_option_value_is_one_line_as_a_process(tmp_path: Path) -> None:
    from tests.faults.conftest import hqval_process

    r = hqval_process(["run", "--arch", "gfx1010", "--seed", "-1", "--out",
                       str(tmp_path / "out")])
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert r.code == 2 and len(lines) == 1 and "--seed" in lines[0]
    assert not (tmp_path / "out").exists()


def test_a_bad_environment_value_is_a_usage_error_too(monkeypatch: pytest.MonkeyPatch,
                                                      hqval: Callable[..., Result]) -> None:
    monkeypatch.setenv("HQVAL_SEED", "-3")
    with pytest.raises(SystemExit) as exc:
        hqval("check", "--arch", "gfx1010")
    assert exc.value.code == 2
