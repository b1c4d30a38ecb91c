"""Compiles the interpreter's own test kernels (tests/emu/kernels/*.hip) once per arch."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from hqval.emu import Machine, Module

KERNELS = Path(__file__).parent / "kernels"
ARCHES = ("gfx1010", "gfx1030", "gfx1100", "gfx1151", "gfx1201")


def _clang() -> str | None:
    return shutil.which("clang-19") or shutil.which("clang")


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., bytes]:
    clang = _clang()
    if clang is None or shutil.which("llvm-objdump-19") is None:
        pytest.skip("needs clang-19 and llvm-objdump-19 (apt-get install clang-19 llvm-19)")
    out = tmp_path_factory.mktemp("emu_kernels")
    cache: dict[tuple[str, ...], bytes] = {}

    def compile_source(name: str, arch: str, *flags: str) -> bytes:
        key = (name, arch, *flags)
        if key not in cache:
            co = out / f"{name}_{arch}_{len(cache)}.co"
            subprocess.run(
                [clang, "-x", "hip", f"--offload-arch={arch}", "-nogpulib", "-nogpuinc",
                 "--cuda-device-only", "--no-gpu-bundle-output", "-O3", *flags,
                 str(KERNELS / f"{name}.hip"), "-o", str(co)],
                check=True, capture_output=True, timeout=300)
            cache[key] = co.read_bytes()
        return cache[key]
    return compile_source


@pytest.fixture(scope="session")
def ops(build: Callable[..., bytes]) -> Callable[[str], tuple[Machine, Module]]:
    """A fresh Machine with tests/emu/kernels/ops.hip loaded, for one arch."""
    def load(arch: str) -> tuple[Machine, Module]:
        m = Machine(arch)
        return m, m.load(build("ops", arch))
    return load
