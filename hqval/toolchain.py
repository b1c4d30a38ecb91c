"""Compiler discovery, device-only code object builds and a validated content-addressed cache.

A code object is keyed by everything that decides its bytes: the compiler (path and
version string), the flags, the target, the defines, and the contents of the source and of
every file it includes.  Every cached object is re-hashed when read; a corrupt, truncated or
stale entry is rebuilt, never used (precompiled kernels that silently produced garbage are
the failure this guards against).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec
    from hqval.matrix import Arch

CACHE_LAYOUT = 1
EM_AMDGPU = 224
DEFAULT_CACHE = Path.home() / ".cache" / "hqval"
COMPILE_TIMEOUT_S = 300
_CANDIDATES = ("clang-20", "clang-19")


class ToolchainError(RuntimeError):
    """No usable compiler; the message names what was searched and how to fix it."""


@dataclass(frozen=True)
class Compiler:
    path: str
    version: str
    # clang (bare LLVM: -nogpuinc, the prelude supplies the keywords), rocm-clang or hipcc
    # (ROCm's HIP headers are used).
    kind: str
    found_by: str

    @property
    def hip_headers(self) -> bool:
        return self.kind in ("rocm-clang", "hipcc")

    def flags(self, arch: str) -> list[str]:
        # -fuse-cuid=none: no per-output-path __hip_cuid symbol, so a rebuild of the same
        # inputs is byte-identical (the cache can be checked against a fresh build).
        f = ["-x", "hip", f"--offload-arch={arch}", "--cuda-device-only",
             "--no-gpu-bundle-output", "-O3", "-std=c++17", "-nogpulib", "-fuse-cuid=none"]
        if not self.hip_headers:
            f.append("-nogpuinc")
        return f


@dataclass(frozen=True)
class CompileResult:
    ok: bool
    code_object: Path | None
    message: str
    cached: bool
    seconds: float
    key: str = ""
    command: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


def _version(path: str) -> str:
    st = os.stat(path)
    return _version_of(os.path.realpath(path), st.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _version_of(path: str, mtime_ns: int) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True,
                             timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainError(f"{path} --version failed: {exc}") from exc
    text = (out.stdout or out.stderr).strip()
    if out.returncode != 0 or not text:
        raise ToolchainError(f"{path} --version exited {out.returncode}: {out.stderr.strip()}")
    return text.splitlines()[0]


def _search(hqval_clang: str | None, rocm_path: str | None,
                          path_env: str | None) -> Compiler:
    searched: list[str] = []
    if hqval_clang:
        exe = shutil.which(hqval_clang, path=path_env)
        if exe is None:
            raise ToolchainError(f"HQVAL_CLANG={hqval_clang} is not an executable; fix: point "
                                 "it at a clang with the AMDGPU target, or unset it")
        version = _version(exe)
        kind = "hipcc" if Path(exe).name.startswith("hipcc") else (
            "rocm-clang" if "roc" in version.lower() else "clang")
        return Compiler(exe, version, kind, "HQVAL_CLANG")
    roots = [r for r in (rocm_path, "/opt/rocm") if r]
    for root in roots:
        exe = str(Path(root) / "llvm" / "bin" / "clang")
        searched.append(exe)
        if os.access(exe, os.X_OK):
            return Compiler(exe, _version(exe), "rocm-clang", f"ROCm at {root}")
    for root in roots:
        exe = str(Path(root) / "bin" / "hipcc")
        searched.append(exe)
        if os.access(exe, os.X_OK):
            return Compiler(exe, _version(exe), "hipcc", f"ROCm at {root}")
    hipcc = shutil.which("hipcc", path=path_env)
    searched.append("hipcc on PATH")
    if hipcc:
        return Compiler(hipcc, _version(hipcc), "hipcc", "hipcc on PATH")
    for name in _CANDIDATES:
        searched.append(f"{name} on PATH")
        exe = shutil.which(name, path=path_env)
        if exe:
            return Compiler(exe, _version(exe), "clang", f"{name} on PATH")
    raise ToolchainError(
        "no HIP-capable compiler found (searched " + ", ".join(searched) + "); fix: "
        "apt-get install clang-19 lld-19, install ROCm, or set HQVAL_CLANG=/path/to/clang"
    )


def find_compiler(env: Mapping[str, str] | None = None) -> Compiler:
    """The compiler the suite builds with: ``HQVAL_CLANG``, ROCm's clang or hipcc
    (``ROCM_PATH`` or /opt/rocm, then hipcc on PATH), then clang-20 / clang-19 on PATH."""
    e = os.environ if env is None else env
    return _search(e.get("HQVAL_CLANG") or None, e.get("ROCM_PATH") or None, e.get("PATH"))


# ---- content addressing ------------------------------------------------------------------

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^">]+)[">]', re.MULTILINE)


@functools.lru_cache(maxsize=1024)
def _file_digest(path: Path, mtime_ns: int, size: int) -> tuple[str, tuple[tuple[bool, str], ...]]:
    data = path.read_bytes()
    incs = tuple((m.group(1) == b'"', m.group(2).decode()) for m in _INCLUDE.finditer(data))
    return hashlib.sha256(data).hexdigest(), incs


def _digest(path: Path) -> tuple[str, tuple[tuple[bool, str], ...]]:
    st = path.stat()
    return _file_digest(path, st.st_mtime_ns, st.st_size)


def source_closure(source: Path, include_dirs: Sequence[Path]) -> list[tuple[str, str]]:
    """(path, sha256) of the source and every file it includes that resolves to a file in
    its own directory or an include dir (system headers are covered by the compiler
    version).  Conditional includes are over-approximated: every one is hashed."""
    out: dict[Path, str] = {}
    stack = [source.resolve()]
    while stack:
        path = stack.pop()
        if path in out:
            continue
        digest, incs = _digest(path)
        out[path] = digest
        for quoted, name in incs:
            dirs = ([path.parent] if quoted else []) + list(include_dirs)
            for d in dirs:
                cand = (d / name).resolve()
                if cand.is_file():
                    stack.append(cand)
                    break
    return sorted((str(p), d) for p, d in out.items())


def cache_key(spec: KernelSpec, arch: str, compiler: Compiler) -> str:
    closure = source_closure(spec.source, spec.include_dirs)
    root = spec.source.resolve().parent
    material = {
        "layout": CACHE_LAYOUT,
        "compiler": [compiler.path, compiler.version, compiler.kind],
        "flags": compiler.flags(arch),
        "arch": arch,
        "defines": spec.define_flags(),
        # Contents decide the bytes; paths are kept relative so two checkouts share entries.
        "files": [(os.path.relpath(p, root), d) for p, d in closure],
        "includes": [os.path.relpath(d, root) for d in spec.include_dirs],
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def cache_root(cache_dir: str | Path | None = None) -> Path:
    if cache_dir is None:
        cache_dir = os.environ.get("HQVAL_CACHE") or DEFAULT_CACHE
    return Path(cache_dir) / f"co-v{CACHE_LAYOUT}"


def _entry(root: Path, key: str) -> tuple[Path, Path]:
    d = root / key[:2]
    return d / f"{key}.co", d / f"{key}.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def validate_entry(co: Path, meta: Path, key: str) -> str | None:
    """None if the cached object may be used, else why not."""
    if not co.is_file() or not meta.is_file():
        return "missing"
    try:
        info = json.loads(meta.read_text())
    except (OSError, ValueError) as exc:
        return f"unreadable metadata ({exc})"
    if info.get("key") != key:
        return "stale: metadata is for another key"
    if co.stat().st_size != info.get("size"):
        return f"size {co.stat().st_size} != recorded {info.get('size')}"
    if _sha256(co) != info.get("sha256"):
        return "sha256 mismatch (corrupt entry)"
    head = co.read_bytes()[:20]
    if head[:4] != b"\x7fELF" or int.from_bytes(head[18:20], "little") != EM_AMDGPU:
        return "not an AMDGPU ELF"
    return None


_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()


def _lock_for(key: str) -> threading.Lock:
    with _key_locks_guard:
        return _key_locks.setdefault(key, threading.Lock())


def compile_kernel(spec: KernelSpec, arch: str, cache_dir: str | Path | None = None,
                   compiler: Compiler | None = None) -> CompileResult:
    """Build (or fetch from the validated cache) the code object holding ``spec.symbol``
    for ``arch``.  Never raises for a compile error: that is ``ok=False`` with the
    compiler's message."""
    t0 = time.perf_counter()
    try:
        compiler = compiler or find_compiler()
    except ToolchainError as exc:
        return CompileResult(False, None, str(exc), False, time.perf_counter() - t0)
    try:
        key = cache_key(spec, arch, compiler)
    except OSError as exc:
        return CompileResult(False, None, f"cannot read {exc.filename}: {exc.strerror}; fix the "
                             "manifest's source path or restore the file", False,
                             time.perf_counter() - t0)
    root = cache_root(cache_dir)
    co, meta = _entry(root, key)
    cmd = (compiler.path, *compiler.flags(arch),
           *(f"-I{d}" for d in spec.include_dirs), *spec.define_flags(), str(spec.source))
    details: dict[str, Any] = {"compiler": compiler.version, "compiler_path": compiler.path}
    with _lock_for(key):
        problem = validate_entry(co, meta, key)
        cached = problem is None
        if not cached:
            if problem != "missing":
                details["rebuilt"] = problem
            co.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(suffix=".co.tmp", dir=co.parent)
            os.close(fd)
            tmp = Path(tmp_name)
            try:
                proc = subprocess.run([*cmd, "-o", str(tmp)], capture_output=True, text=True,
                                      timeout=COMPILE_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:
                tmp.unlink(missing_ok=True)
                return CompileResult(False, None, f"compiler timed out after "
                                     f"{COMPILE_TIMEOUT_S} s", False,
                                     time.perf_counter() - t0, key, cmd, details)
            if proc.returncode != 0 or tmp.stat().st_size == 0:
                tmp.unlink(missing_ok=True)
                msg = _first_errors(proc.stderr) or f"compiler exited {proc.returncode}"
                return CompileResult(False, None, msg, False, time.perf_counter() - t0,
                                     key, cmd, details)
            digest = _sha256(tmp)
            os.replace(tmp, co)
            _write_json(meta, {"key": key, "sha256": digest, "size": co.stat().st_size,
                               "compiler": compiler.version, "arch": arch,
                               "source": str(spec.source), "command": list(cmd),
                               "created": time.time()})
    from hqval.elf import elf_symbols

    symbols = elf_symbols(co.read_bytes())
    if spec.symbol not in symbols:
        return CompileResult(
            False, co, f"symbol {spec.symbol!r} is not in the code object of {spec.source.name} "
            f"(kernels: {', '.join(sorted(s for s in symbols if not s.endswith('.kd')))}); "
            "fix the manifest's symbol or the source's extern \"C\" name",
            cached, time.perf_counter() - t0, key, cmd, details)
    return CompileResult(True, co, "cached" if cached else "compiled", cached,
                         time.perf_counter() - t0, key, cmd, details)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(suffix=".json.tmp", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1)
    os.replace(tmp, path)


def _first_errors(stderr: str, limit: int = 12) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln]
    picked = errors or lines
    return "\n".join(picked[:limit])


# ---- the matrix --------------------------------------------------------------------------

@dataclass(frozen=True)
class CompileCell:
    spec: KernelSpec
    arch: str
    result: CompileResult | None  # None: the kernel does not apply to the arch

    def row(self) -> Row:
        if self.result is None:
            return Row(kind="compile", check="compile", kernel=self.spec.name, arch=self.arch,
                       backend="toolchain", status=Status.UNSUPPORTED,
                       message=f"requires {self.spec.requires}")
        r = self.result
        return Row(
            kind="compile", check="compile", kernel=self.spec.name, arch=self.arch,
            backend="toolchain", status=Status.PASS if r.ok else Status.FAIL,
            measured=round(r.seconds, 4), message=r.message,
            details={"code_object": str(r.code_object) if r.code_object else None,
                     "cached": r.cached, "key": r.key, **r.details},
        )


def compile_matrix(specs: Iterable[KernelSpec], arches: Iterable[Arch],
                   jobs: int | None = None, cache_dir: str | Path | None = None,
                   include_unsupported: bool = False) -> list[CompileCell]:
    """Compile every spec for every arch it applies to, ``jobs`` compiler processes at a
    time.  Specs sharing one code object (same source, defines, arch) build it once."""
    compiler = find_compiler()
    cells: list[tuple[KernelSpec, str]] = []
    skipped: list[CompileCell] = []
    for arch in arches:
        for spec in specs:
            if spec.applies_to(arch):
                cells.append((spec, arch.name))
            elif include_unsupported:
                skipped.append(CompileCell(spec, arch.name, None))
    # One representative per key compiles first; the rest then hit the cache.
    by_key: dict[str, list[tuple[KernelSpec, str]]] = {}
    for spec, arch_name in cells:
        try:
            key = cache_key(spec, arch_name, compiler)
        except OSError:
            key = f"unreadable:{spec.name}:{arch_name}"  # compile_kernel reports it
        by_key.setdefault(key, []).append((spec, arch_name))
    workers = max(1, jobs or os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        firsts = {k: pool.submit(compile_kernel, group[0][0], group[0][1], cache_dir, compiler)
                  for k, group in by_key.items()}
        done: dict[tuple[str, str], CompileResult] = {}
        for k, group in by_key.items():
            first = firsts[k].result()
            done[(group[0][0].name, group[0][1])] = first
            for spec, arch_name in group[1:]:
                done[(spec.name, arch_name)] = compile_kernel(spec, arch_name, cache_dir,
                                                              compiler)
    out = [CompileCell(spec, arch_name, done[(spec.name, arch_name)])
           for spec, arch_name in cells]
    return out + skipped

