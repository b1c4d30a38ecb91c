"""Builds tests/emu/kernels/ops.hip (the interpreter's own test kernels) once per arch."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[1] / "emu" / "kernels"


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., bytes]:
    clang = shutil.which("clang-19")
    if clang is None or shutil.which("llvm-objdump-19") is None:
        pytest.skip("needs clang-19 and llvm-objdump-19 (apt-get install clang-19 llvm-19)")
    out = tmp_path_factory.mktemp("codeobject_kernels")
    cache: dict[tuple[str, str], bytes] = {}

    def compile_source(name: str, arch: str) -> bytes:
        if (name, arch) not in cache:
            co = out / f"{name}_{arch}.co"
            subprocess.run(
                [clang, "-x", "hip", f"--offload-arch={arch}", "-nogpulib", "-nogpuinc",
                 "--cuda-device-only", "--no-gpu-bundle-output", "-O3",
                 str(KERNELS / f"{name}.hip"), "-o", str(co)],
                check=True, capture_output=True, timeout=300)
            cache[(name, arch)] = co.read_bytes()
        return cache[(name, arch)]
    return compile_source
