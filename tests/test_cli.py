"""The command line: version, help in workflow order, every option documented."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import hqval
from hqval.cli import COMMANDS, build_parser, main


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"hqval {hqval.__version__}"


def test_help_lists_run_first_with_what_each_command_is_for(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "thin layer" not in text  # what it is for, not how it is built
    listed = [ln.split()[0] for ln in text.split("commands:", 1)[1].splitlines()
              if ln.startswith("    ") and not ln.startswith("      ")]
    assert listed == list(COMMANDS)
    assert listed[0] == "run"
    # the chain's steps follow it in the order the chain runs them
    order = [listed.index(c) for c in ("compile", "audit", "check", "mutants", "bench",
                                       "admit", "report")]
    assert order == sorted(order)
    for _, what in COMMANDS.values():
        assert what and "\n" not in what and len(what) <= 90


def _undocumented(parser: argparse.ArgumentParser) -> list[str]:
    return [a.dest if not a.option_strings else "/".join(a.option_strings)
            for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
            and (a.help is None or not a.help.strip() or a.help == argparse.SUPPRESS)]


def test_every_option_of_every_command_has_help() -> None:
    parser = build_parser()
    assert _undocumented(parser) == []
    subs = _subparsers(parser)
    assert set(subs) == set(COMMANDS)
    missing = {name: bad for name, p in subs.items() if (bad := _undocumented(p))}
    assert missing == {}


def test_the_option_walk_finds_an_undocumented_option() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--documented", help="says what it does")
    p.add_argument("--bare")
    p.add_argument("path")
    assert _undocumented(p) == ["--bare", "path"]


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "run" in capsys.readouterr().out


def _many_problems(tmp_path: Path, n: int) -> Path:
    entries = "".join(f"  - name: k{i}\n    source: src/k{i}.hip\n    qt: 44\n"
                      f"    kind: gemv\n    requires: any\n" for i in range(n))
    manifest = tmp_path / "kernels.yaml"
    manifest.write_text(f"schema: 2\nkernels:\n{entries}")
    return manifest


@pytest.mark.parametrize("command", ["compile", "run"])
def test_an_error_of_many_problems_shows_the_first_ones_and_a_count(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    manifest = _many_problems(tmp_path, 20)
    extra = ["--out", str(tmp_path / "run")] if command == "run" else []
    assert main([command, "--manifest", str(manifest), "--arch", "gfx1100", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"hqval {command}: error: ")
    assert "src/k0.hip does not exist" in err and "src/k7.hip does not exist" in err
    assert "src/k8.hip" not in err and "and 12 more (20 in all; hqval -v lists every one)" in err
    assert not (tmp_path / "run").exists()
    # -v: every problem, still one line
    assert main(["-v", command, "--manifest", str(manifest), "--arch", "gfx1100", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "src/k19.hip does not exist" in err and "more (" not in err


def test_an_error_of_few_problems_shows_every_one(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    manifest = _many_problems(tmp_path, 8)
    assert main(["compile", "--manifest", str(manifest), "--arch", "gfx1100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "src/k7.hip does not exist" in err and "more (" not in err
