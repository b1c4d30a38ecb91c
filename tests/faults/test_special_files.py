"""Fault class: special files where hqval expects a source or header.  A FIFO in the kernel
tree or an ``#include "/dev/zero"`` never hangs ``compile`` or exhausts memory: the cell is
refused in one line, exit 2, before clang could block."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.faults.conftest import Result
from tests.guards import no_hang

KERNEL = 'extern "C" __attribute__((global)) void k(float* y) { y[0] = 1.0f; }\n'


def _tree(tmp_path: Path, source: str, name: str = "k") -> Path:
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "k.hip").write_text(source)
    manifest = tree / "kernels.yaml"
    manifest.write_text(yaml.safe_dump({"schema": 1, "kernels": [
        {"name": name, "source": "k.hip", "qt": 6, "kind": "gemv", "requires": "any"}]}))
    return manifest


def test_include_of_dev_zero_is_one_line_exit_2(tmp_path: Path,
                                                hqval: Callable[..., Result]) -> None:
    manifest = _tree(tmp_path, '#include "/dev/zero"\n' + KERNEL)
    r = hqval("compile", "--arch", "gfx1010", "--manifest", str(manifest), "--cache-dir",
              str(tmp_path / "cache"))
    assert r.code == 2, r.out + r.err
    assert "/dev/zero is a character device, not a regular file" in r.out
    assert "MemoryError" not in r.out + r.err and "Traceback" not in r.out + r.err


def test_a_fifo_in_the_kernel_tree_never_hangs_compile(tmp_path: Path,
                                                       hqval: Callable[..., Result]) -> None:
    manifest = _tree(tmp_path, '#include "pipe.h"\n' + KERNEL)
    os.mkfifo(manifest.parent / "pipe.h")
    with no_hang():  # a FIFO opened for reading blocks until a writer comes: never
        r = hqval("compile", "--arch", "gfx1010", "--manifest", str(manifest), "--cache-dir",
                  str(tmp_path / "cache"))
    assert r.code == 2 and "FIFO or device" in r.out and "pipe.h" in r.out
