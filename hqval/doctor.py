"""What this machine can run: each piece hqval uses outside Python, found or not, and what
its absence disables.  ``hqval doctor`` prints these; nothing here changes the machine.

A probe never raises: a missing or broken piece is a ``Finding`` with ``found=False`` and
the reason, so one absent tool cannot hide what the others report.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import importlib.metadata
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# The LLVM release the suite's flags and audit rules are written against (the toolchain
# also accepts clang-20 and ROCm's clang; older ones miss gfx12 and WMMA builtins).
LLVM_MAJOR = 19


@dataclass(frozen=True)
class Finding:
    piece: str  # what is looked for, in the user's words
    found: bool
    detail: str  # where and which version, or why it is missing
    disables: str  # what cannot run without it
    required: bool = False  # True: nothing compiles without it (doctor exits 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _first_line(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if out.returncode == 0 and text else None


def _package(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


COMPILE_DISABLES = ("compile, audit, check, mutants, bench and run: no code object can be "
                    "built")


def compiler() -> Finding:
    from hqval.toolchain import ToolchainError, find_compiler

    try:
        c = find_compiler()
    except ToolchainError as exc:
        return Finding("HIP-capable clang (LLVM 19)", False, str(exc), COMPILE_DISABLES, True)
    m = re.search(r"version (\d+)\.", c.version)
    major = int(m.group(1)) if m else None
    ok = major is None or major >= LLVM_MAJOR or c.kind != "clang"
    detail = f"{c.path} ({c.version}; found by {c.found_by})"
    if not ok:
        detail += f"; LLVM {major} is older than {LLVM_MAJOR}: apt-get install clang-19 lld-19"
    return Finding("HIP-capable clang (LLVM 19)", ok, detail, COMPILE_DISABLES, True)


def linker() -> Finding:
    """clang links AMDGPU code objects with ld.lld: next to the compiler or on PATH."""
    from hqval.toolchain import ToolchainError, find_compiler

    names = [f"ld.lld-{LLVM_MAJOR}", "ld.lld"]
    dirs: list[str | None] = [None]
    with contextlib.suppress(ToolchainError):  # no compiler: PATH alone
        dirs.insert(0, str(Path(find_compiler().path).parent))
    for d in dirs:
        for n in names:
            exe = shutil.which(n, path=d) if d else shutil.which(n)
            if exe:
                return Finding("ld.lld (LLVM 19)", True,
                               f"{exe} ({_first_line([exe, '--version']) or 'version unknown'})",
                               COMPILE_DISABLES, True)
    return Finding("ld.lld (LLVM 19)", False,
                   f"none of {', '.join(names)} next to the compiler or on PATH; fix: "
                   "apt-get install lld-19", COMPILE_DISABLES, True)


def llvm_tool(name: str) -> Finding:
    from hqval.isa import IsaError, find_llvm_tool

    disables = "audit (ISA rules, registers, occupancy), so run stops after compile"
    try:
        exe = find_llvm_tool(name)
    except IsaError as exc:
        return Finding(name, False, str(exc), disables, True)
    return Finding(name, True, f"{exe} ({_first_line([exe, '--version']) or 'version unknown'})"
                   .replace("\n", " "), disables, True)


HIP_DISABLES = ("--backend hip: measured cells and timing on AMD GPUs (the emulator still "
                "runs every gfx arch)")


def rocm() -> Finding:
    roots = [r for r in (os.environ.get("ROCM_PATH"), "/opt/rocm") if r]
    for root in roots:
        info = Path(root) / ".info" / "version"
        if info.is_file():
            return Finding("ROCm", True, f"{root} (version {info.read_text().strip()})",
                           HIP_DISABLES)
        if Path(root).is_dir():
            return Finding("ROCm", True, f"{root} (no .info/version)", HIP_DISABLES)
    lib = ctypes.util.find_library("amdhip64")
    if lib:
        # a distribution's HIP runtime (Debian's libamdhip64-5): its package names the version
        pkg = _first_line(["dpkg-query", "-W", "-f", "${Package} ${Version}\n",
                           "libamdhip64*"]) if shutil.which("dpkg-query") else None
        return Finding("ROCm", True, f"HIP runtime {lib}" + (f", package {pkg}" if pkg else "")
                       + f" (no ROCm directory at {', '.join(roots)})", HIP_DISABLES)
    return Finding("ROCm", False, f"no ROCm at {', '.join(roots)} and no libamdhip64 on the "
                   "library path", HIP_DISABLES)


def hip_python() -> Finding:
    v = _package("hip-python")
    if v is None:
        return Finding("hip-python", False, "not installed; fix: pip install 'hqval[hip]'",
                       HIP_DISABLES)
    from hqval.backends.hip import visible_devices

    n = visible_devices()
    seen = f"{n} AMD GPU(s) visible" if n else \
        "no AMD GPU visible, so --backend hip cannot run here"
    return Finding("hip-python", True, f"{v}; {seen}", HIP_DISABLES)


CUDA_DISABLES = "--backend cuda: sm_* checks and NVIDIA timing"


def cuda_driver() -> Finding:
    lib = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        cuda = ctypes.CDLL(lib)
    except OSError as exc:
        return Finding("CUDA driver", False, f"{lib} does not load ({exc})", CUDA_DISABLES)
    version = ctypes.c_int(0)
    err = cuda.cuDriverGetVersion(ctypes.byref(version))
    if err != 0:
        return Finding("CUDA driver", False, f"{lib}: cuDriverGetVersion returned {err}",
                       CUDA_DISABLES)
    v = version.value
    return Finding("CUDA driver", True, f"{lib} (CUDA {v // 1000}.{v % 1000 // 10})",
                   CUDA_DISABLES)


def nvrtc() -> Finding:
    disables = "the CUDA builds of the kernels (--backend cuda and the SASS tests)"
    if _package("cuda-bindings") is None:
        return Finding("NVRTC", False, "cuda-bindings not installed; fix: pip install "
                       "'hqval[cuda]'", disables)
    try:
        from cuda.bindings import nvrtc as nv

        err, major, minor = nv.nvrtcVersion()
    except Exception as exc:  # a missing libnvrtc raises from inside the bindings
        return Finding("NVRTC", False, f"cuda-bindings {_package('cuda-bindings')}: "
                       f"NVRTC does not load ({exc}); fix: pip install nvidia-cuda-nvrtc",
                       disables)
    if int(err) != 0:
        return Finding("NVRTC", False, f"nvrtcVersion returned {err}", disables)
    return Finding("NVRTC", True, f"{major}.{minor} (cuda-bindings "
                   f"{_package('cuda-bindings')})", disables)


def chromium() -> Finding:
    disables = ("the headless-browser report test (tests/report/test_render.py); reports "
                "still render")
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        exe = shutil.which(name)
        if exe:
            return Finding("Chromium", True, f"{exe} ({_first_line([exe, '--version']) or '?'})",
                           disables)
    return Finding("Chromium", False, "no chromium on PATH; fix: apt-get install chromium",
                   disables)


def _entries(root: Path) -> tuple[int, int]:
    """Files and bytes under the cache, counted while other runs may be writing it: an
    in-flight ``*.tmp`` (a compile or record being written, renamed into place when done)
    is not an entry, and a file renamed or removed between the listing and its ``stat``
    is simply not counted."""
    files = size = 0
    for p in root.rglob("*"):
        if p.suffix.startswith(".tmp"):  # .tmp, and a record's .tmp<pid>
            continue
        try:
            st = p.stat()
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            files += 1
            size += st.st_size
    return files, size


def cache(cache_dir: str | None = None) -> Finding:
    from hqval.toolchain import cache_root

    root = cache_root(cache_dir)
    disables = "nothing (every code object is rebuilt each time: slower)"
    if not root.is_dir():
        return Finding("code object cache", True, f"{root} (empty: not created yet)", disables)
    files, size = _entries(root)
    writable = os.access(root, os.W_OK)
    detail = f"{root} ({files} files, {size / 2**20:.1f} MiB)"
    if not writable:
        detail += "; not writable: set HQVAL_CACHE or --cache-dir to a writable directory"
    return Finding("code object cache", writable, detail, disables)


def sandbox() -> Finding:
    """Whether clang runs inside bubblewrap (hqval.containment): off, it still runs in a
    private directory with its flags allow-listed and its dependency list checked."""
    from hqval.containment import sandbox as probe

    box = probe()
    return Finding("compiler sandbox (bubblewrap)", box.on,
                   ("on: " if box.on else "off: ") + box.detail,
                   "clang reads only the kernel tree and the system's program directories "
                   "(without it, the dependency check alone keeps other files out)")


PROBES: tuple[Callable[[], Finding], ...] = (
    compiler, linker, lambda: llvm_tool("llvm-objdump"), lambda: llvm_tool("llvm-readelf"),
    rocm, hip_python, cuda_driver, nvrtc, chromium, sandbox,
)


def diagnose(cache_dir: str | None = None) -> list[Finding]:
    return [*(probe() for probe in PROBES), cache(cache_dir)]
