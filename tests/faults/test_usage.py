"""Faults of class 'bad input and unusable backends': an empty
or unknown --arch, and a hip or cuda backend that cannot run here, are one line and exit
2 at once, before anything is compiled or written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hqval.backends import BackendUnavailable, get

from .conftest import Result, run_args

Hq = Callable[..., Result]


@pytest.mark.parametrize("arch, why", [(",", "names no arch"), ("", "names no arch"),
                                       (" , ", "names no arch"),
                                       ("gfx1010,", "has an empty entry"),
                                       ("gfx1010,,gfx1030", "has an empty entry"),
                                       ("gfx9999", "unknown arch gfx9999"),
                                       ("gfx1100,sm_x", "unknown arch sm_x")])
def test_bad_arch_is_a_usage_error(tree: Path, tmp_path: Path, hqval: Hq, arch: str,
                                   why: str) -> None:
    args = run_args(tree, tmp_path / "run")
    args[args.index("--arch") + 1] = arch
    res = hqval(*args)
    assert res.code == 2 and why in res.err and len(res.err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_an_arch_list_with_an_empty_entry_from_the_environment_is_a_usage_error(
        tree: Path, tmp_path: Path, hqval: Hq, monkeypatch: pytest.MonkeyPatch) -> None:
    """HQVAL_ARCH=gfx1010,$OTHER with OTHER unset: the other arch would vanish from the
    run; it is refused, naming the empty entry (once: gfx1010 alone ran, exit 0)."""
    args = run_args(tree, tmp_path / "run")
    i = args.index("--arch")
    del args[i:i + 2]
    monkeypatch.setenv("HQVAL_ARCH", "gfx1010,,")
    res = hqval(*args)
    assert res.code == 2 and "has an empty entry" in res.err, res.err
    assert len(res.err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flag", ["--out", "--manifest", "--cache-dir", "--policy",
                                  "--baseline"])
def test_an_empty_path_is_a_usage_error(tree: Path, tmp_path: Path, hqval: Hq, flag: str,
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """An empty path would mean the default (``--manifest ''``: the suite's own kernels
    instead of the tree; ``--out ''``: runs/ in the working directory): refused in one line
    naming the option, before anything is written (once: the defaults ran)."""
    args = run_args(tree, tmp_path / "run")
    if flag in args:
        args[args.index(flag) + 1] = ""
    else:
        args += [flag, ""]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        hqval(*args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "an empty path" in err and flag in err, err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("backend, arch", [("hip", "gfx1010"), ("cuda", "sm_90")])
def test_unavailable_backend_fails_fast(tree: Path, tmp_path: Path, hqval: Hq, backend: str,
                                        arch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        get(backend, arch)
    except BackendUnavailable:
        pass
    else:
        pytest.skip(f"a {backend} device is present here")
    args = run_args(tree, tmp_path / "run")
    args[args.index("--arch") + 1] = arch
    args[args.index("--backend") + 1] = backend
    # fast: refused before anything is compiled (asserted by what happened, not by a
    # wall time a loaded host can exceed)
    from hqval import toolchain

    def compiled(*args: object, **kwargs: object) -> None:
        raise AssertionError("a kernel was compiled before the backend was refused")

    monkeypatch.setattr(toolchain, "compile_matrix", compiled)
    monkeypatch.setattr(toolchain, "compile_kernel", compiled)
    res = hqval(*args)
    assert res.code == 2, res.err
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "backend unavailable" in lines[0]
    assert not (tmp_path / "run").exists()


def test_resume_without_out_is_a_usage_error(tree: Path, hqval: Hq) -> None:
    res = hqval("run", "--arch", "gfx1010", "--resume")
    assert res.code == 2 and "--resume needs the --out DIR" in res.err
