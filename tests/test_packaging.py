"""A plain (non-editable) install carries the suite's own files: setup.py's build step
copies ``matrices/`` and ``kernels/`` into the package as ``hqval/_suite/``, and
``hqval.suite_dir`` finds them there, so an installed hqval runs from any directory.

The build step runs here as pip runs it for ``pip install .`` (``build_py`` into a build
directory; no network), and the built package runs from outside the checkout.  A fresh
venv with ``pip install .`` was measured by hand (docs/faults.md, "Packaging")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _built(tmp_path: Path) -> Path:
    pytest.importorskip("setuptools", reason="the build step needs setuptools")
    lib = tmp_path / "build-lib"
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib",
                           str(lib)], cwd=REPO, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return lib


def _outside(lib: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` importing hqval from ``lib`` only, in ``cwd`` (not the checkout)."""
    env = {**os.environ, "PYTHONPATH": str(lib), "HQVAL_CACHE": str(cwd / "cache")}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def test_an_installed_hqval_finds_its_files_and_runs_a_cell_from_anywhere(
        tmp_path: Path) -> None:
    lib = _built(tmp_path)
    shipped = lib / "hqval" / "_suite"
    for f in ("matrices/policy.yaml", "matrices/arches.yaml", "kernels/kernels.yaml",
              "kernels/mutants/mutants.yaml", "kernels/include/hipcompat/hip/hip_runtime.h"):
        assert (shipped / f).is_file(), f
    work = tmp_path / "elsewhere"
    work.mkdir()
    where = _outside(lib, work, "-c", "import hqval, hqval.admission as a, hqval.manifest as m;"
                     "print(hqval.__file__); print(a.POLICY_PATH); print(m.KERNELS_DIR)")
    assert where.returncode == 0, where.stderr
    assert [Path(p) for p in where.stdout.split()] == [
        lib / "hqval" / "__init__.py", shipped / "matrices" / "policy.yaml",
        shipped / "kernels"]
    out = work / "rows.json"
    cell = _outside(lib, work, "-m", "hqval", "check", "--arch", "gfx1100", "--backend", "emu",
                    "--workers", "0", "--check", "reference_parity", "-k", "gemv_hfq4g256_r1",
                    "--json", str(out))
    assert cell.returncode == 0, cell.stderr[-2000:]
    assert [(r["kernel"], r["status"]) for r in json.loads(out.read_text())] == [
        ("gemv_hfq4g256_r1", "pass")]


def test_an_install_without_the_suite_files_says_so_in_one_line(tmp_path: Path) -> None:
    """What ``pip install .`` gave before the build step: the package alone."""
    lib = _built(tmp_path)
    import shutil

    shutil.rmtree(lib / "hqval" / "_suite")
    res = _outside(lib, tmp_path, "-m", "hqval", "check", "--arch", "gfx1100", "--backend",
                   "emu", "--workers", "0")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "arches.yaml" in lines[0] and "Traceback" not in res.stderr


def test_the_newest_changelog_section_is_the_version() -> None:
    """The version changes when users see a change: the newest released section of
    CHANGELOG.md names ``hqval.__version__`` (pyproject.toml reads the same attribute)."""
    import re

    import hqval

    root = Path(__file__).resolve().parents[1]
    sections = re.findall(r"^## (\d+\.\d+\.\d+) \(\d{4}-\d\d-\d\d\)$",
                          (root / "CHANGELOG.md").read_text(), re.M)
    assert sections and sections[0] == hqval.__version__, sections[:3]
    assert len(set(sections)) == len(sections)
    assert 'attr = "hqval.__version__"' in (root / "pyproject.toml").read_text()
