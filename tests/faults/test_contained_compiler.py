"""Fault class: a kernel tree that tries to make the compiler read, write or tell what it
must not.  clang gets allow-listed flags only, runs in a private directory (inside
bubblewrap where installed), its dependency list is checked before compiling, and no
compiler message that reaches rows, JUnit or a report quotes a file outside the tree."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.faults.conftest import Result

SECRET = "hunter2-root-password"
TEMPLATE_ERROR = ('constexpr char data[] = {\n#embed "%s"\n};\n'
                  "template <int N> struct T { static_assert(N == 0, \"shown\"); };\n"
                  'extern "C" __attribute__((global)) void k(float* y) '
                  "{ T<data[0]> t; T<data[1]> u; (void)t; (void)u; }\n")


def _tree(root: Path, source: str, **entry: object) -> Path:
    tree = root / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "k.hip").write_text(source)
    manifest = tree / "kernels.yaml"
    manifest.write_text(yaml.safe_dump({"schema": 2, "kernels": [
        {"name": "k", "source": "k.hip", "qt": 6, "kind": "gemv", "requires": "any",
         **entry}]}))
    return manifest


@pytest.mark.parametrize("sandbox", ["off", "auto"])
def test_an_embedded_outside_file_never_reaches_rows_junit_or_report(
        tmp_path: Path, sandbox: str, monkeypatch: pytest.MonkeyPatch,
        hqval: Callable[..., Result]) -> None:
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(SECRET)
    manifest = _tree(tmp_path, TEMPLATE_ERROR % secret)
    if sandbox == "off":
        monkeypatch.setenv("HQVAL_SANDBOX", "off")
    out = tmp_path / "run"
    r = hqval("run", "--arch", "gfx1010", "--backend", "emu", "--manifest", str(manifest),
              "--out", str(out), "--workers", "0", "--no-mutants",
              "--cache-dir", str(tmp_path / "cache"))
    assert r.code != 0
    leaked = [p for p in out.rglob("*") if p.is_file() and
              (SECRET.encode() in p.read_bytes() or b"104, 117" in p.read_bytes())]
    assert leaked == [] and SECRET not in r.out + r.err
    assert (out / "report" / "report.html").is_file()


@pytest.mark.parametrize("flag", ["-ftime-trace", "-save-temps", "-fsave-optimization-record",
                                  "-Wl,-o,evil", "-MD", "-fdiagnostics-format=clang"])
def test_a_flag_off_the_allow_list_is_refused_before_clang_runs(
        tmp_path: Path, flag: str, monkeypatch: pytest.MonkeyPatch,
        hqval: Callable[..., Result]) -> None:
    manifest = _tree(tmp_path, 'extern "C" __attribute__((global)) void k(float* y) {}\n',
                     flags=[flag])
    monkeypatch.chdir(tmp_path)
    r = hqval("compile", "--arch", "gfx1010", "--manifest", str(manifest),
              "--cache-dir", str(tmp_path / "cache"))
    assert r.code == 2 and "is not one a manifest may set" in r.err
    assert sorted(os.listdir(tmp_path)) == ["tree"]  # clang never ran: nothing written


def test_a_function_like_define_in_flags_builds(tmp_path: Path,
                                                hqval: Callable[..., Result]) -> None:
    manifest = _tree(tmp_path, "struct ALIGN(16) q { float x; };\n"
                     "static_assert(alignof(q) == 16, \"aligned\");\n"
                     'extern "C" __attribute__((global)) void k(q* y) { y[0].x = 1.0f; }\n',
                     flags=["-DALIGN(x)=__attribute__((aligned(x)))"])
    r = hqval("compile", "--arch", "gfx1010", "--manifest", str(manifest),
              "--cache-dir", str(tmp_path / "cache"))
    assert r.code == 0, r.out + r.err


def test_a_missing_macro_is_named_in_the_compile_row(tmp_path: Path,
                                                     hqval: Callable[..., Result]) -> None:
    manifest = _tree(tmp_path, "struct __align__(16) q { float x; };\n"
                     'extern "C" __attribute__((global)) void k(q* y) { y[0].x = 1.0f; }\n')
    r = hqval("compile", "--arch", "gfx1010", "--manifest", str(manifest),
              "--cache-dir", str(tmp_path / "cache"))
    assert r.code == 1
    first = next(ln for ln in r.out.splitlines() if "compile[k|gfx1010" in ln)
    assert "undeclared identifier '__align__'" in first
