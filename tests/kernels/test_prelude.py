"""The portability prelude: one source for bare clang, ROCm's HIP headers and NVRTC."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hqval.manifest import load_manifest, load_mutants

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "kernels" / "include"
CLANG = shutil.which("clang-19")
OBJDUMP = shutil.which("llvm-objdump-19")


def rocm_root() -> Path | None:
    # /usr: Debian's libamdhip64-dev (ROCm 5.2 headers), which nox's tests session installs
    for cand in (os.environ.get("HQVAL_ROCM_PATH"), os.environ.get("ROCM_PATH"), "/opt/rocm",
                 "/usr"):
        if cand and (Path(cand) / "include" / "hip" / "hip_runtime.h").is_file():
            return Path(cand)
    return None


def sources() -> list[Path]:
    specs = [*load_manifest().kernels, *load_mutants().kernels]
    return sorted({s.source for s in specs})


def build(src: Path, arch: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    assert CLANG is not None
    return subprocess.run(
        [CLANG, "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only",
         "--no-gpu-bundle-output", "-O3", "-std=c++17", "-nogpulib", "-fuse-cuid=none",
         f"-I{INCLUDE}", *extra, str(src), "-o", str(out)],
        capture_output=True, text=True, timeout=300, check=False)


def code(path: Path, arch: str) -> str:
    assert OBJDUMP is not None
    text = subprocess.run([OBJDUMP, "-d", f"--mcpu={arch}", str(path)], capture_output=True,
                          text=True, timeout=300, check=True).stdout
    return re.sub(r"//.*", "", text.split("Disassembly of section", 1)[1])


@pytest.mark.skipif(CLANG is None or OBJDUMP is None, reason="needs clang-19 and llvm-objdump-19")
@pytest.mark.skipif(rocm_root() is None,
                    reason="needs ROCm's HIP headers "
                           "(apt-get install libamdhip64-dev, or set HQVAL_ROCM_PATH)")
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_hip_headers_build_the_same_machine_code(arch: str, tmp_path: Path) -> None:
    rocm = rocm_root()
    for src in sources():
        bare = build(src, arch, tmp_path / "bare.co", "-nogpuinc")
        assert bare.returncode == 0, bare.stderr
        hip = build(src, arch, tmp_path / "hip.co", f"--rocm-path={rocm}")
        assert hip.returncode == 0, hip.stderr
        assert code(tmp_path / "hip.co", arch) == code(tmp_path / "bare.co", arch), src.name


@pytest.mark.skipif(CLANG is None, reason="needs clang-19")
def test_wave64_is_refused_with_the_reason(tmp_path: Path) -> None:
    src = ROOT / "kernels" / "gemv_hfq4g256.hip"
    r = build(src, "gfx1100", tmp_path / "w64.co", "-nogpuinc", "-mwavefrontsize64")
    assert r.returncode != 0 and "hqval kernels are wave32" in r.stderr


def nvrtc_available() -> bool:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not nvrtc_available(), reason="needs NVRTC (pip install cuda-bindings "
                                                   "nvidia-cuda-nvrtc)")
def test_nvrtc_builds_every_cross_vendor_source_and_refuses_wmma() -> None:
    from hqval.backends.cuda import CompileError, compile_source

    specs = [*load_manifest().kernels, *load_mutants().kernels]
    portable = sorted({s.source for s in specs if not s.amd_only})
    amd_only = sorted({s.source for s in specs if s.amd_only} - set(portable))
    assert portable and amd_only
    for src in portable:
        cubin = compile_source(src.read_text(), "sm_90", name=src.name)
        assert len(cubin.image) > 0
    for src in amd_only:
        with pytest.raises(CompileError, match="AMD-only"):
            compile_source(src.read_text(), "sm_90", name=src.name)
