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
                                       ("gfx9999", "unknown arch gfx9999"),
                                       ("gfx1100,sm_x", "unknown arch sm_x")])
def test_bad_arch_is_a_usage_error(tree: Path, tmp_path: Path, hqval: Hq, arch: str,
                                   why: str) -> None:
    args = run_args(tree, tmp_path / "run")
    args[args.index("--arch") + 1] = arch
    res = hqval(*args)
    assert res.code == 2 and why in res.err and len(res.err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


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
