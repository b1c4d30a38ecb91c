"""The entry points: nox sessions per arch, the README's two commands, .ci/run and the
nightly workflow stay consistent with each other and with matrices/arches.yaml."""

from __future__ import annotations

import functools
import importlib.util
import inspect
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from hqval.matrix import load_arches

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def _noxfile() -> ModuleType:
    """Loaded once: loading registers the sessions in nox's global registry."""
    spec = importlib.util.spec_from_file_location("hqval_noxfile", ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _readme_commands() -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)


def test_one_session_per_arch_in_arches_yaml() -> None:
    nf = _noxfile()
    assert nf.arch_names() == list(load_arches())
    out = subprocess.run([sys.executable, "-m", "nox", "-l", "-f", str(ROOT / "noxfile.py")],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    listed = re.findall(r"^[*-] (\S+) ->", out, re.M)
    assert listed == [*load_arches(), "matrix", "tests", "lint"]


def test_arch_names_reads_only_the_arches_mapping(tmp_path: Path) -> None:
    f = tmp_path / "a.yaml"
    f.write_text("schema_version: 1\narches:\n  gfx1100:  # rdna3\n    family: rdna3\n"
                 "    nested:\n      gfx_not_an_arch: 1\n  gfx1201:\n    wmma: gfx12\n"
                 "devices:\n  h200:\n    arch: sm_90\n")
    assert _noxfile().arch_names(f) == ["gfx1100", "gfx1201"]
    f.write_text("devices: {}\n")
    with pytest.raises(RuntimeError, match="no arches"):
        _noxfile().arch_names(f)


class _Session:
    """Records what a nox session was told to do (stands in for nox.Session, whose real
    methods would run apt-get on this machine)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def error(self, msg: str) -> None:
        self.calls.append(("error", msg))
        raise SystemExit(msg)

    def warn(self, msg: str) -> None:
        self.calls.append(("warn", msg))

    def log(self, msg: str) -> None:
        self.calls.append(("log", msg))

    def run(self, *args: str, **kw: Any) -> None:
        self.calls.append(("run", args))


def test_missing_toolchain_without_root_fails_with_the_install_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    nf = _noxfile()
    tools = {"definitely-not-a-tool-19": "clang-19", "sh": "dash"}
    assert nf.missing_packages(tools) == ["clang-19"]
    monkeypatch.setattr(nf.os, "geteuid", lambda: 1000)
    s = _Session()
    with pytest.raises(SystemExit):
        nf.ensure_apt(s, tools, "compiling")
    assert s.calls == [("error", "compiling: clang-19 missing. Install them with:\n"
                                 "    sudo apt-get install -y clang-19")]
    s = _Session()
    nf.ensure_apt(s, tools, "browser test", required=False)
    assert s.calls[0][0] == "warn" and "will skip" in s.calls[0][1]


def test_missing_toolchain_as_root_installs_with_apt(monkeypatch: pytest.MonkeyPatch) -> None:
    nf = _noxfile()
    monkeypatch.setattr(nf.os, "geteuid", lambda: 0)
    monkeypatch.setattr(nf.shutil, "which",
                        lambda tool: None if tool == "nope-19" else f"/usr/bin/{tool}")
    s = _Session()
    with pytest.raises(SystemExit, match="still missing"):  # which() never finds it
        nf.ensure_apt(s, {"nope-19": "lld-19"}, "compiling")
    assert ("log", "compiling: lld-19 missing; installing with "
                   "`apt-get install -y lld-19`") in s.calls
    assert ("run", ("apt-get", "install", "-y", "-qq", "lld-19")) in s.calls


def test_toolchain_table_names_the_debian_packages() -> None:
    nf = _noxfile()
    assert sorted(set(nf.TOOLCHAIN.values())) == ["clang-19", "lld-19", "llvm-19"]
    for tool in nf.TOOLCHAIN:  # the tools this machine has are where the table says
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed here")


def test_readme_gives_exactly_two_commands() -> None:
    run_cmd, test_cmd = _readme_commands()
    prefix = ("apt-get update && apt-get install -y python3-venv && python3 -m venv .venv "
              "&& .venv/bin/pip install nox && ")
    assert run_cmd == prefix + ".venv/bin/nox -s gfx1100"
    assert test_cmd == prefix + ".venv/bin/nox -s tests"


def test_ci_runs_the_readme_test_command_and_nothing_weaker() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.startswith("#!/usr/bin/env bash")
    assert "set -euo pipefail" in ci
    (command,) = re.findall(r"^TEST_COMMAND='(.*)'$", ci, re.M)
    assert command == _readme_commands()[1]
    assert re.search(r'^exec timeout \d+ bash -c "set -euo pipefail; \$TEST_COMMAND"$', ci,
                     re.M)
    assert re.search(r"apt-get install .*\bchromium\b", ci)  # the browser test runs in CI
    # the tests session runs the whole suite; nothing narrows it
    source = inspect.getsource(_noxfile().tests)
    assert ('session.run("pytest", "-n", "auto", "--durations=25", "tests/", '
            '*session.posargs)') in source
    assert not re.search(r"-k |-m |--deselect|--ignore", source)
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111


def test_nightly_workflow() -> None:
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads the key `on` as true
    assert "schedule" in triggers
    arch_job = wf["jobs"]["arch"]
    assert arch_job["strategy"]["matrix"]["arch"] == list(load_arches())
    assert arch_job["runs-on"] == ["self-hosted", "${{ matrix.arch }}"]
    steps = "\n".join(str(s.get("run", "")) for s in arch_job["steps"])
    assert "nox -s ${{ matrix.arch }}" in steps
    assert any("upload-artifact" in str(s.get("uses")) for s in arch_job["steps"])
    merge = wf["jobs"]["merge"]
    assert merge["needs"] == "arch" and merge["if"] == "always()"
    merge_runs = [str(s.get("run", "")) for s in merge["steps"]]
    # the hardware backend is named, never auto
    assert '--backend "$BACKEND"' in steps and "vars.HQVAL_BACKEND || 'hip'" in str(
        arch_job["steps"][1]["env"]["BACKEND"])
    admit = [r for r in merge_runs if "hqval admit" in r]
    report = [r for r in merge_runs if "hqval report" in r]
    assert admit and report and merge_runs.index(admit[0]) < merge_runs.index(report[0])
    assert "|| true" not in admit[0] and not any(
        s.get("continue-on-error") for s in merge["steps"])
    # every arch expected, judged against the last successful night's artifacts
    assert "--expect-arch all" in admit[0] and "--baseline" in admit[0]
    assert '"${base[@]}" -o report' in report[0]
    downloads = [s for s in merge["steps"] if "download-artifact" in str(s.get("uses"))]
    assert any("run-id" in (s.get("with") or {}) for s in downloads)
    assert "/var/lib/hqval" not in (ROOT / ".github" / "workflows" / "nightly.yml").read_text()
    assert wf["concurrency"]["group"] and wf["concurrency"]["cancel-in-progress"] is False
