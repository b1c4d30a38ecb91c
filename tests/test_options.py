"""Shared CLI options: one definition each, environment variables as defaults, argparse
types applied to those defaults, ``--json`` with or without a path."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from hqval import options


def _parser(*opts: options.Option) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    for o in opts:
        o.add_to(p)
    return p


def test_environment_value_is_the_default_and_is_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HQVAL_SEED", "7")
    monkeypatch.setenv("HQVAL_JOBS", "3")
    args = _parser(options.SEED, options.JOBS).parse_args([])
    assert args.seed == 7 and args.jobs == 3
    assert _parser(options.SEED).parse_args(["--seed", "9"]).seed == 9


def test_defaults_without_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HQVAL_SEED", "HQVAL_JOBS", "HQVAL_WORKERS", "HQVAL_ARCH"):
        monkeypatch.delenv(var, raising=False)
    args = _parser(options.SEED, options.JOBS, options.WORKERS, options.ARCH).parse_args([])
    assert (args.seed, args.jobs, args.workers, args.arch) == (0, None, "2", [])


def test_repeatable_option_collects_and_reads_a_comma_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HQVAL_ARCH", raising=False)
    p = _parser(options.ARCH, options.BASELINE)
    args = p.parse_args(["--arch", "gfx1100", "--arch", "gfx1201", "--baseline", "runs/a"])
    assert args.arch == ["gfx1100", "gfx1201"] and args.baseline == ["runs/a"]
    monkeypatch.setenv("HQVAL_ARCH", "gfx1030,gfx1151")
    assert _parser(options.ARCH).parse_args([]).arch == ["gfx1030", "gfx1151"]


def test_json_print_without_a_path_means_stdout() -> None:
    p = _parser(options.JSON_PRINT)
    assert p.parse_args(["--json"]).json == "-"
    assert p.parse_args(["--json", "out.json"]).json == "out.json"
    assert p.parse_args([]).json is None


def test_a_bad_choice_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        _parser(options.BACKEND).parse_args(["--backend", "vulkan"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_write_json_to_a_file_whole_and_to_stdout(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "out.json"
    options.write_json({"a": [1, 2]}, str(dest))
    assert json.loads(dest.read_text()) == {"a": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no partial file left
    options.write_json({"b": 3}, "-")
    assert json.loads(capsys.readouterr().out) == {"b": 3}


def test_the_command_line_overrides_the_environment_for_every_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``HQVAL_ARCH=gfx1030 hqval run --arch gfx1100`` runs gfx1100 only: a value given on
    the command line replaces its variable's, for a repeatable option as for a single one;
    without the flag the variable's values stay."""
    from hqval.cli import build_parser

    monkeypatch.setenv("HQVAL_ARCH", "gfx1030")
    monkeypatch.setenv("HQVAL_BACKEND", "hip")
    monkeypatch.setenv("HQVAL_SEED", "7")
    parser = build_parser()
    args = parser.parse_args(["run", "--arch", "gfx1100", "--backend", "emu", "--seed", "3"])
    assert (args.arch, args.backend, args.seed) == (["gfx1100"], "emu", 3)
    args = parser.parse_args(["run", "--arch", "gfx1100", "--arch", "gfx1201"])
    assert args.arch == ["gfx1100", "gfx1201"]
    args = parser.parse_args(["run"])
    assert (args.arch, args.backend, args.seed) == (["gfx1030"], "hip", 7)
    # every repeatable option with a variable behaves so
    for opt in (o for o in vars(options).values() if isinstance(o, options.Option)):
        if not (opt.repeat and opt.env):
            continue
        monkeypatch.setenv(opt.env, "from-env")
        p = _parser(opt)
        dest = opt.flags[0].lstrip("-").replace("-", "_")
        assert getattr(p.parse_args([opt.flags[0], "given"]), dest) == ["given"], opt.flags
        assert getattr(p.parse_args([]), dest) == ["from-env"], opt.flags
