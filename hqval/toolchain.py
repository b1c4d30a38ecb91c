"""Compiler discovery, device-only code object builds and a validated content-addressed cache.

A code object is keyed by everything that decides its bytes: the compiler (path and
version string), the flags, the target, the defines, and the contents of the source and of
every file it includes.  Every cached object is re-hashed when read; a corrupt, truncated or
stale entry is rebuilt, never used (precompiled kernels that silently produced garbage are
the failure this guards against).  Every entry and dependency record carries a tag made
with a key outside the cache (``hqval.cacheauth``): an entry another job made, however
self-consistent, is rebuilt, never used.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import os
import re
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hqval import cacheauth, safeio, suite_dir
from hqval.containment import (
    DIAGNOSTIC_FLAGS,
    ContainmentError,
    check_dependencies,
    diagnostics,
    flag_problem,
    occupancy_misses,
    private_dir,
    run_contained,
    special_files,
)
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec
    from hqval.matrix import Arch

# 2: the key covers clang's -M dependency list and the compiler binary's identity
CACHE_LAYOUT = 2
EM_AMDGPU = 224
DEFAULT_CACHE = Path.home() / ".cache" / "hqval"
COMPILE_TIMEOUT_S = 300
# the preprocessor's dependency run reads headers only; a minute is far more than it takes
DEPS_TIMEOUT_S = 60
# The dependency run: the preprocessor alone, its make rule (system headers included, as
# -M lists them) written to stdout by the device compile itself.  The driver's -M -MF -
# did that up to LLVM 19; from LLVM 20 (Debian's clang-22 here) a --cuda-device-only HIP
# compile drops -MF (clang warns it unused) and writes no rule at all, so the rule is asked
# of the device cc1 job directly.
DEPS_FLAGS = ("-E", "-o", os.devnull, "-Xclang", "-dependency-file", "-Xclang", "-",
              "-Xclang", "-MT", "-Xclang", "hqval-deps", "-Xclang", "-sys-header-deps")
# a source, header or device library hqval hashes is read through safeio with this cap
MAX_INPUT_BYTES = 256 << 20
_CANDIDATES = ("clang-20", "clang-19")
# The oldest LLVM that targets every arch of the matrix (gfx1150/1151 and gfx12 need 19).
MIN_LLVM_MAJOR = 19
# HIP compatibility headers (<hip/hip_runtime.h>, <hip/hip_fp16.h>) for builds without
# ROCm's: on the include path only when the compiler does not bring ROCm's headers.
HIPCOMPAT_DIR = suite_dir("kernels") / "include" / "hipcompat"


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
    # The ROCm install the compiler came from (``--rocm-path``), when known: its device
    # libraries are linked when its HIP headers are used.
    rocm_root: str | None = None

    @property
    def hip_headers(self) -> bool:
        return self.kind in ("rocm-clang", "hipcc")

    @property
    def environment(self) -> dict[str, str]:
        """The compiler process's environment: the caller's, plus HIP_PLATFORM=amd for
        hipcc (which otherwise builds for NVIDIA when nvcc is on PATH)."""
        env = dict(os.environ)
        if self.kind == "hipcc":
            env["HIP_PLATFORM"] = "amd"
        return env

    @property
    def compat_includes(self) -> tuple[Path, ...]:
        """System include dirs the suite supplies: the HIP compatibility headers when ROCm's
        headers are not used (ROCm's win when present)."""
        return () if self.hip_headers else (HIPCOMPAT_DIR,)

    def flags(self, arch: str) -> list[str]:
        # -fuse-cuid=none: no per-output-path __hip_cuid symbol, so a rebuild of the same
        # inputs is byte-identical (the cache can be checked against a fresh build).
        # ROCm's HIP headers implement threadIdx, blockDim, expf ... with calls into its
        # device libraries (__ockl_get_local_id, __ocml_exp_f32), so a build with them
        # links those libraries, as hipcc does; the bare-LLVM build has neither (the
        # compatibility headers use the builtins).
        # hipcc spells a device-only build --genco: with --cuda-device-only it still adds
        # its host link flags (-lamdhip64 ...) and clang refuses "-o with multiple outputs"
        device_only = "--genco" if self.kind == "hipcc" else "--cuda-device-only"
        # the diagnostics flags: SARIF locations and no quoted source lines
        # (hqval.containment.diagnostics reads them)
        f = ["-x", "hip", f"--offload-arch={arch}", device_only,
             "--no-gpu-bundle-output", "-O3", "-std=c++17", "-fuse-cuid=none",
             *DIAGNOSTIC_FLAGS]
        if not self.hip_headers:
            f += ["-nogpulib", "-nogpuinc"]
        elif self.rocm_root:
            f.append(f"--rocm-path={self.rocm_root}")
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
    # (path, sha256) of every file the compiler read (provenance; not in the row)
    dependencies: tuple[tuple[str, str], ...] = ()
    # the sha256 of the object's bytes as validated (or built) here: the compile row and
    # the run's objects table record this digest, never a later re-read of the file
    sha256: str | None = None
    # the compiler's occupancy findings of the object's build, for every kernel in it
    # (symbol -> [desired, final] waves per EU; ``occupancy_misses``), as its entry records
    misses: dict[str, list[int]] = field(default_factory=dict)


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


def _llvm_major(hipcc: str) -> int | None:
    """The LLVM major version behind a hipcc (its ``--version`` names the clang it drives,
    e.g. "Debian clang version 15.0.6"); None when it does not say."""
    st = os.stat(hipcc)
    return _llvm_major_of(os.path.realpath(hipcc), st.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _llvm_major_of(path: str, mtime_ns: int) -> int | None:
    env = {**os.environ, "HIP_PLATFORM": "amd"}  # else it describes nvcc where one is
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, env=env,
                             timeout=60, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"clang version (\d+)\.", out)
    return int(m.group(1)) if m else None


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
            return Compiler(exe, _version(exe), "rocm-clang", f"ROCm at {root}", root)
    for root in roots:
        exe = str(Path(root) / "bin" / "hipcc")
        searched.append(exe)
        if os.access(exe, os.X_OK):
            return Compiler(exe, _version(exe), "hipcc", f"ROCm at {root}")
    hipcc = shutil.which("hipcc", path=path_env)
    searched.append("hipcc on PATH")
    if hipcc:
        major = _llvm_major(hipcc)
        newer = next(((n, e) for n in _CANDIDATES if (e := shutil.which(n, path=path_env))),
                     None)
        if major is not None and major < MIN_LLVM_MAJOR and newer is not None:
            # a distribution's old hipcc (Debian 12's ROCm 5.2 is LLVM 15: no gfx115x, no
            # gfx12) must not shadow the LLVM the suite asks for
            name, exe = newer
            return Compiler(exe, _version(exe), "clang",
                            f"{name} on PATH (the hipcc on PATH is LLVM {major}, older than "
                            f"{MIN_LLVM_MAJOR})")
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
    (``ROCM_PATH`` or /opt/rocm, then hipcc on PATH unless its LLVM is older than
    ``MIN_LLVM_MAJOR`` and a clang-20 / clang-19 is on PATH), then clang-20 / clang-19 on
    PATH."""
    e = os.environ if env is None else env
    return _search(e.get("HQVAL_CLANG") or None, e.get("ROCM_PATH") or None, e.get("PATH"))


# ---- content addressing ------------------------------------------------------------------
#
# The key is built from the compiler's own dependency list (clang -M over the exact compile
# command), so whatever the preprocessor reads is in it: a header reached through
# ``#include MACRO``, a conditional include, one found through -I or a system header
# directory.  Running the preprocessor costs ~0.1 s; within one process a dependency list is
# reused while nothing it depends on has changed (the stat of every listed file and of every
# directory the lookups searched, so a new header that would shadow a listed one forces a
# new list), and contents are always re-hashed.


# What clang prints when it crashed rather than diagnosed the source (its own bug report
# request, a frontend that died by a signal, a subprocess it could not run).
CRASH_MARKERS = ("PLEASE submit a bug report", "command failed due to signal",
                 "unable to execute command", "Stack dump:")


def compiler_crash(returncode: int, stderr: str) -> str:
    """Why the compiler process died instead of judging the source ('' when it judged
    it): killed by a signal (a negative code, or 128+N from a shell), clang's crash exit
    codes (254, 255), or clang's own crash report.  hqval's toolchain, not the kernel: an
    infrastructure error (exit 2) whatever the source."""
    if returncode < 0:
        return f"the compiler was killed by signal {-returncode}"
    if returncode > 128:
        return f"the compiler crashed (exit {returncode})"
    marker = next((m for m in CRASH_MARKERS if m in stderr), "")
    return f"the compiler crashed ({marker!r})" if marker and returncode != 0 else ""


def _crash_message(path: str, why: str) -> str:
    return (f"{why}: {path} is broken, not the kernel; fix: install a working clang "
            "(apt-get install clang-19 lld-19) or point HQVAL_CLANG at one")


class DependencyError(RuntimeError):
    """The preprocessor could not list the dependencies (the compile would fail too)."""


class CompilerCrash(DependencyError):
    """The preprocessor run crashed or wrote no dependency rule (``compiler_crash``):
    hqval's toolchain, an infrastructure error."""


class CompilerTimeout(CompilerCrash):
    """The preprocessor or the compiler did not finish within its time limit: no verdict
    on the kernel (a loaded or stalled machine, a blocked read), an infrastructure error
    that a resumed run redoes."""


def _timeout_message(path: str, what: str, seconds: float) -> str:
    return (f"{what} {path} did not finish in {seconds:g} s: no verdict on the kernel "
            "(a loaded or stalled machine, or an input that blocks it); fix: rerun with "
            "--resume on an idle machine, and include only regular files of the kernel tree")


@functools.lru_cache(maxsize=4096)
def _file_sha256(path: str, mtime_ns: int, size: int, ino: int) -> str:
    data = safeio.read_bytes(path, limit=MAX_INPUT_BYTES, what="compiler input")
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's contents (memoised on its stat, re-read when it changes), read
    through ``hqval.safeio``: a FIFO or device is refused (``SafeIOError``), never read."""
    st = safeio.check_regular(path, what="compiler input")
    return _file_sha256(str(path), st.st_mtime_ns, st.st_size, st.st_ino)


@functools.lru_cache(maxsize=16)
def _identity_of(path: str, mtime_ns: int, size: int) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60,
                         check=False)
    return hashlib.sha256(f"{path}\0{size}\0{mtime_ns}\0{out.stdout}".encode()).hexdigest()


# Environment variables that change what clang reads or links for a device compile.
_COMPILER_ENV = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "HIP_PATH", "ROCM_PATH",
                 "HIP_DEVICE_LIB_PATH", "HIP_CLANG_PATH")


def compiler_env() -> dict[str, str]:
    return {k: os.environ[k] for k in _COMPILER_ENV if k in os.environ}


def compiler_identity(compiler: Compiler) -> str:
    """The compiler binary itself (resolved path, size, mtime) and its whole --version
    text: a rebuilt or replaced compiler of the same version string is another compiler."""
    real = os.path.realpath(compiler.path)
    st = os.stat(real)
    return _identity_of(real, st.st_mtime_ns, st.st_size)


def compile_command(spec: KernelSpec, arch: str, compiler: Compiler) -> tuple[str, ...]:
    """The compile command without its output: what the key covers and what runs.  The
    manifest's flags come after the suite's (so -O2 overrides -O3), preincluded files are
    ``-include``d in order (the engine's build prepends them), and the source is the
    arch's variant when the tree has one."""
    return (compiler.path, *compiler.flags(arch), *spec.flags,
            *include_flags(spec, compiler), *spec.define_flags(), str(spec.source_for(arch)))


def include_flags(spec: KernelSpec, compiler: Compiler) -> list[str]:
    """-I for the manifest's include dirs, -isystem for the suite's HIP compatibility
    headers (only without ROCm's), -include for each pre-included file in order."""
    return [*(f"-I{d}" for d in spec.include_dirs),
            *(a for d in compiler.compat_includes for a in ("-isystem", str(d))),
            *(a for f in spec.preinclude for a in ("-include", str(f)))]


def _parse_make_rule(text: str) -> list[str]:
    """The prerequisites of clang's ``-M`` rule (``target: dep dep \\``, with ``\\ ``
    for a space in a path and ``$$`` for ``$``)."""
    body = text.replace("\\\n", " ")
    _, sep, deps = body.partition(": ")
    if not sep:
        raise DependencyError(f"unreadable dependency output: {text[:200]!r}")
    out, cur, i = [], [], 0
    while i < len(deps):
        ch = deps[i]
        if ch == "\\" and i + 1 < len(deps) and deps[i + 1] in " #\\":
            cur.append(deps[i + 1])
            i += 2
            continue
        if ch == "$" and deps[i + 1: i + 2] == "$":
            cur.append("$")
            i += 2
            continue
        if ch.isspace():
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
        i += 1
    if cur:
        out.append("".join(cur))
    return out


def _stat_sig(path: str) -> tuple[str, int, int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (path, -1, -1, -1)
    return (path, st.st_mtime_ns, st.st_size, st.st_ino)


_deps_memo: dict[tuple[str, ...], tuple[tuple[tuple[str, int, int, int], ...], list[str]]] = {}
_deps_guard = threading.Lock()


def _dir_mtimes(dirs: Iterable[str]) -> dict[str, int]:
    out = {}
    for d in sorted(set(dirs)):
        try:
            out[d] = os.stat(d).st_mtime_ns
        except OSError:
            out[d] = -1
    return out


def _recorded_deps(record: Path) -> list[str] | None:
    """A dependency list an earlier process recorded for the same command and compiler,
    if it still holds: every listed file has the recorded contents (re-hashed, not
    stat'ed) and no directory the lookups searched gained or lost an entry (its mtime).
    Same command, same compiler, same bytes read, same directory listings: the
    preprocessor would read the same files."""
    try:
        info = safeio.load_json(record, what="dependency record")
        deps = [str(p) for p in info["deps"]]
        if not cacheauth.usable(info.get("mac"), record.parents[3],
                                "deps", record.stem, json.dumps(deps),
                                json.dumps(info["sha256"], sort_keys=True),
                                json.dumps(info["dirs"], sort_keys=True)):
            return None  # not made under this machine's cache key
        if any(file_sha256(p) != info["sha256"][p] for p in deps):
            return None
        if _dir_mtimes(info["dirs"]) != info["dirs"]:
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return deps


def dependencies(spec: KernelSpec, arch: str, compiler: Compiler,
                 cache_dir: str | Path | None = None) -> list[str]:
    """Absolute paths of every file the preprocessor reads for this compile (the source
    first), from clang's own ``-M`` output, which is recorded in the cache and reused
    while it provably still holds (``_recorded_deps``).  Raises ``DependencyError`` with
    the compiler's message when it cannot preprocess."""
    contain(spec, arch, compiler)
    cmd = compile_command(spec, arch, compiler)
    roots = trusted_roots(spec, compiler)
    with _deps_guard:
        memo = _deps_memo.get(cmd)
    if memo is not None and all(_stat_sig(p[0]) == p for p in memo[0]):
        return memo[1]
    name = hashlib.sha256(json.dumps([compiler_identity(compiler), compiler_env(),
                                      cmd]).encode()).hexdigest()
    record = cache_root(cache_dir) / "deps" / name[:2] / f"{name}.json"
    recorded = _recorded_deps(record)
    if recorded is not None:
        check_dependencies(recorded, roots)
        _remember(spec, cmd, recorded)
        return recorded
    with private_dir() as private:
        try:
            proc = run_contained([*cmd, *DEPS_FLAGS],
                                 env=compiler.environment, private=private, roots=roots,
                                 timeout=DEPS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CompilerTimeout(_timeout_message(compiler.path, "the preprocessor",
                                                   DEPS_TIMEOUT_S)) from None
        except (OSError, subprocess.SubprocessError) as exc:
            raise DependencyError(f"{compiler.path} -M failed: {exc}") from exc
        crash = compiler_crash(proc.returncode, proc.stderr)
        if crash:
            raise CompilerCrash(_crash_message(compiler.path, crash))
        if proc.returncode != 0:
            raise DependencyError(diagnostics(proc.stderr, roots)
                                  or f"preprocessor exited {proc.returncode}")
        try:
            rule = _parse_make_rule(proc.stdout)
        except DependencyError:
            # it exited 0 without writing the rule -M asks for: the compiler is broken
            raise CompilerCrash(_crash_message(
                compiler.path, "the compiler's -M output is no dependency rule")) from None
        deps = [os.path.normpath(os.path.join(private, d)) for d in rule]
    check_dependencies(deps, roots)
    searched = _remember(spec, cmd, deps)
    try:
        # (the directory first: making it may change a searched directory's mtime)
        record.parent.mkdir(parents=True, exist_ok=True)
        sums, dirs = {p: file_sha256(p) for p in deps}, _dir_mtimes(searched)
        mac = cacheauth.seal_or_none(cache_base(cache_dir), "deps", name, json.dumps(deps),
                                     json.dumps(sums, sort_keys=True),
                                     json.dumps(dirs, sort_keys=True))
        if mac is not None:
            _write_json(record, {"command": list(cmd), "deps": deps, "sha256": sums,
                                 "dirs": dirs, "mac": mac})
    except (OSError, safeio.SafeIOError):
        pass  # an unwritable cache only costs the next process a preprocessor run
    return deps


def _remember(spec: KernelSpec, cmd: tuple[str, ...], deps: list[str]) -> list[str]:
    """Memoise ``deps`` in this process; returns the directories the lookups searched."""
    searched = sorted({str(d) for d in spec.include_dirs} | {os.path.dirname(d) for d in deps})
    sig = tuple(_stat_sig(p) for p in [*deps, *searched])
    with _deps_guard:
        _deps_memo[cmd] = (sig, deps)
    return searched


def source_closure(spec: KernelSpec, arch: str, compiler: Compiler,
                   cache_dir: str | Path | None = None) -> list[tuple[str, str]]:
    """(path, sha256) of the source and of every file the compiler reads for it: the
    preprocessor's dependencies, then the device-library bitcode the build links."""
    return [(p, file_sha256(p)) for p in
            [*dependencies(spec, arch, compiler, cache_dir), *device_libraries(compiler, arch)]]


_BITCODE = re.compile(r'"-mlink-builtin-bitcode" "([^"]+)"')


def device_libraries(compiler: Compiler, arch: str) -> tuple[str, ...]:
    """The device-library bitcode files a build links (none with ``-nogpulib``), from the
    driver's own ``-###`` plan, so the cache key and provenance cover them."""
    flags = compiler.flags(arch)
    if "-nogpulib" in flags:
        return ()
    return _bitcode_of(compiler.path, compiler_identity(compiler), tuple(flags),
                       tuple(sorted(compiler.environment.items())))


@functools.lru_cache(maxsize=64)
def _bitcode_of(path: str, identity: str, flags: tuple[str, ...],
                env: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    try:
        proc = subprocess.run([path, *flags, "-###", "-o", os.devnull, os.devnull],
                              env=dict(env), capture_output=True, text=True, timeout=60,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise DependencyError(f"{path} -### failed: {exc}") from exc
    if proc.returncode != 0:
        raise DependencyError(diagnostics(proc.stderr, ())
                              or f"{path} -### exited {proc.returncode}")
    return tuple(dict.fromkeys(os.path.abspath(p) for p in _BITCODE.findall(proc.stderr)))


def cache_key(spec: KernelSpec, arch: str, compiler: Compiler,
              cache_dir: str | Path | None = None) -> str:
    """Everything that decides the object's bytes: the compiler's identity, the whole
    command (flags, target, defines, include dirs) and the contents of every dependency.
    Paths under the source's directory are kept relative so two checkouts share entries."""
    return _keyed_closure(spec, arch, compiler, cache_dir)[0]


def _keyed_closure(spec: KernelSpec, arch: str, compiler: Compiler,
                   cache_dir: str | Path | None = None
                   ) -> tuple[str, list[tuple[str, str]]]:
    """``cache_key`` and the ``source_closure`` it was computed from."""
    closure = source_closure(spec, arch, compiler, cache_dir)
    root = (spec.manifest or spec.source).resolve().parent
    # spec.* paths are resolved absolute; the key holds them relative to the tree

    def rel(p: str | Path) -> str:
        r = os.path.relpath(p, root)
        return str(p) if r.startswith("..") and os.path.isabs(p) else r

    material = {
        "layout": CACHE_LAYOUT,
        "compiler": [compiler.kind, compiler.version, compiler_identity(compiler)],
        "environment": compiler_env(),
        "flags": compiler.flags(arch),
        "arch": arch,
        "defines": spec.define_flags(),
        "includes": [rel(d) for d in spec.include_dirs],
        "manifest_flags": list(spec.flags),
        "preinclude": [rel(p) for p in spec.preinclude],
        "source": rel(spec.source_for(arch)),
        "system_includes": [rel(d) for d in compiler.compat_includes],
        "files": [(rel(p), d) for p, d in closure],
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest(), closure


_selected: list[Path] = []  # the command's --cache-dir (``selected_cache``), innermost last


def cache_base(cache_dir: str | Path | None = None) -> Path:
    """THE cache location, for every command and step and every cache (code objects,
    dependency lists, disassemblies, audit rows, the emulator's compiled FMA): the
    ``cache_dir`` given, else the command's ``--cache-dir`` (``selected_cache``), else
    ``$HQVAL_CACHE``, else ~/.cache/hqval."""
    if cache_dir is None or str(cache_dir) == "":
        if _selected:
            return _selected[-1]
        cache_dir = os.environ.get("HQVAL_CACHE") or DEFAULT_CACHE
    return Path(cache_dir)


@contextlib.contextmanager
def selected_cache(cache_dir: str | Path | None) -> Iterator[Path]:
    """While the block runs, ``cache_dir`` (when given) is the cache of every cache of this
    process and of the processes it starts (``$HQVAL_CACHE``, which xdist workers and
    subprocesses inherit): a command's ``--cache-dir`` reaches every writer, not only
    the code objects.  Yields the cache in effect."""
    if cache_dir is None or str(cache_dir) == "":
        yield cache_base()
        return
    path = Path(cache_dir)
    saved = os.environ.get("HQVAL_CACHE")
    _selected.append(path)
    os.environ["HQVAL_CACHE"] = str(path)
    try:
        yield path
    finally:
        _selected.pop()
        if saved is None:
            os.environ.pop("HQVAL_CACHE", None)
        else:
            os.environ["HQVAL_CACHE"] = saved


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """Where code objects live inside ``cache_base``."""
    return cache_base(cache_dir) / f"co-v{CACHE_LAYOUT}"


def _entry(root: Path, key: str) -> tuple[Path, Path]:
    d = root / key[:2]
    return d / f"{key}.co", d / f"{key}.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def code_object_target(data: bytes) -> str:
    """The processor a code object was built for, from its NT_AMDGPU_METADATA note
    (``amdhsa.target`` = ``amdgcn-amd-amdhsa--gfx1100[:feature...]``); "" if unreadable."""
    from hqval.codeobject import load

    try:
        target = load(data).target
    except (ValueError, IndexError, KeyError, struct.error, UnicodeDecodeError):
        return ""
    return target.rpartition("--")[2].split(":")[0]


_parsed: dict[tuple[str, str], Any] = {}  # (what, sha256 of the bytes) -> parsed fact


def _parsed_once(what: str, digest: str, data: bytes) -> Any:
    """``target`` or ``symbols`` of the object whose contents hash to ``digest``: a
    function of the bytes alone, so each content is parsed once per process (a parse
    that raises is not remembered)."""
    got = _parsed.get((what, digest))
    if got is None:
        from hqval.codeobject import elf_symbols

        got = code_object_target(data) if what == "target" else frozenset(elf_symbols(data))
        if len(_parsed) > 4096:
            _parsed.clear()
        _parsed[(what, digest)] = got
    return got


def object_mac(cache: Path, key: str, digest: str, size: int, arch: str,
               misses: dict[str, list[int]]) -> str:
    """The tag an entry's record in ``cache`` (a ``cache_root``) carries: the cache key it
    is filed under, the object's digest, size and processor and the compiler's occupancy
    findings of its build, under this machine's cache key (``hqval.cacheauth``)."""
    return cacheauth.seal(cache.parent, "object", key, digest, str(size), arch,
                          _misses_text(misses))


def _misses_text(misses: dict[str, list[int]]) -> str:
    return json.dumps(misses, sort_keys=True, separators=(",", ":"))


def _recorded_misses(value: object) -> dict[str, list[int]] | None:
    """An entry record's ``occupancy_misses`` (symbol -> [desired, final]), or None when
    it is absent or malformed."""
    if not isinstance(value, dict):
        return None
    out: dict[str, list[int]] = {}
    for sym, pair in value.items():
        if not (isinstance(sym, str) and isinstance(pair, list) and len(pair) == 2
                and all(type(v) is int for v in pair)):
            return None
        out[sym] = [int(pair[0]), int(pair[1])]
    return out


def validate_entry(co: Path, meta: Path, key: str, arch: str | None = None) -> str | None:
    """None if the cached object may be used, else why not."""
    return validated(co, meta, key, arch)[0]


def validated(co: Path, meta: Path, key: str, arch: str | None = None
              ) -> tuple[str | None, str | None]:
    """(None, the object's sha256) if the cached object may be used, else (why not,
    None).  With ``arch``, the object's own metadata note must name that processor, and
    the record's tag must be this machine's cache key's for (key, sha256, size, arch): an
    entry another job made is never used, however self-consistent.  The object is read
    and hashed on every call; what is parsed out of its bytes is memoised by that hash.
    A cache key that cannot be used raises ``cacheauth.CacheKeyError``."""
    problem, digest, _ = _check_entry(co, meta, key, arch)
    return (problem, None) if problem is not None else (None, digest)


def _check_entry(co: Path, meta: Path, key: str, arch: str | None
                 ) -> tuple[str | None, str, dict[str, list[int]]]:
    """(None, the object's sha256, the compiler's occupancy findings of its build) for a
    usable entry, else (why not, "", {})."""
    if not co.is_file() or not meta.is_file():
        return "missing", "", {}
    try:
        info = safeio.load_json(meta, what="cache record", limit=1 << 20)
    except safeio.SafeIOError as exc:
        return f"unreadable metadata ({exc})", "", {}
    if not isinstance(info, dict):
        return "unreadable metadata (not a JSON object)", "", {}
    if info.get("key") != key:
        return "stale: metadata is for another key", "", {}
    misses = _recorded_misses(info.get("occupancy_misses"))
    if misses is None:
        # the build's warnings are gone with it: an entry without them is built again
        return ("stale: no record of the compiler's occupancy findings (an entry an "
                "older hqval wrote)"), "", {}
    try:
        data = safeio.read_bytes(co, limit=MAX_INPUT_BYTES, what="cached object")
    except safeio.SafeIOError as exc:
        return f"unreadable object ({exc})", "", {}
    if len(data) != info.get("size"):
        return f"size {len(data)} != recorded {info.get('size')}", "", {}
    digest = hashlib.sha256(data).hexdigest()
    if digest != info.get("sha256"):
        return "sha256 mismatch (corrupt entry)", "", {}
    if data[:4] != b"\x7fELF" or int.from_bytes(data[18:20], "little") != EM_AMDGPU:
        return "not an AMDGPU ELF", "", {}
    if arch is not None and (target := _parsed_once("target", digest, data)) != arch:
        return f"built for {target or 'an unreadable target'}, not {arch}", "", {}
    mine = object_mac(co.parent.parent, key, digest, len(data), str(info.get("arch")),
                      misses)
    if not isinstance(info.get("mac"), str) or not hmac.compare_digest(info["mac"], mine) \
            or (arch is not None and info.get("arch") != arch):
        return ("not authenticated by this machine's cache key (an entry another job, "
                "another key or an older hqval wrote)"), "", {}
    return None, digest, misses


def object_symbols(co: Path) -> frozenset[str]:
    """ELF symbols of a code object (read and hashed now, parsed once per content)."""
    data = safeio.read_bytes(co, limit=MAX_INPUT_BYTES, what="code object")
    symbols: frozenset[str] = _parsed_once("symbols", hashlib.sha256(data).hexdigest(), data)
    return symbols


_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()


def _lock_for(key: str) -> threading.Lock:
    with _key_locks_guard:
        return _key_locks.setdefault(key, threading.Lock())


def _special_sig(roots: tuple[Path, ...]) -> tuple[tuple[str, int], ...]:
    sig = []
    for r in roots:
        try:
            sig.append((str(r), os.stat(r).st_mtime_ns))
        except OSError:
            sig.append((str(r), -1))
    return tuple(sig)


@functools.lru_cache(maxsize=256)
def _specials(roots: tuple[Path, ...], sig: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    return tuple(special_files([r for r in roots if r.is_dir()]))


def contain(spec: KernelSpec, arch: str, compiler: Compiler) -> None:
    """What is checked before clang runs at all: the manifest's flags are on the allow-list,
    the source is a regular file, and the kernel tree's directories on the include path
    hold no FIFO, device (a preprocessor opening one would block or read without end) or
    symbolic-link loop.
    Raises ``ContainmentError`` (one line naming the flag or file and the fix)."""
    for flag in spec.flags:
        why = flag_problem(flag)
        if why:
            raise ContainmentError(f"{spec.name}: {why}")
    os.stat(spec.source_for(arch))  # a missing source is an OSError naming it
    try:
        safeio.check_regular(spec.source_for(arch), what="source")
    except safeio.SafeIOError as exc:
        raise ContainmentError(f"{spec.name}: {exc}") from None
    tree = tuple(dict.fromkeys(Path(os.path.realpath(d)) for d in (
        spec.source.parent, *spec.include_dirs, *(p.parent for p in spec.preinclude))))
    found = _specials(tree, _special_sig(tree))
    if found:
        from hqval.containment import printable

        raise ContainmentError(
            f"{spec.name}: the kernel tree holds {len(found)} FIFO or device file(s) or "
            f"symbolic-link loop(s) on the include path (first: {printable(found[0])}); fix: "
            "remove them, a compiler that opened one would hang or fail")


def _infrastructure(what: str, exc: OSError | safeio.SafeIOError, details: dict[str, Any]
                    ) -> dict[str, Any]:
    """``details`` of a compile that failed in hqval's own machinery (the cache), not in
    the kernel: the row is an infrastructure error, and a resumed run redoes it."""
    return {**details, "infrastructure": True, "infrastructure_cause": what,
            "error_type": type(exc).__name__}


def _details(spec: KernelSpec, arch: str, compiler: Compiler) -> dict[str, Any]:
    """A compile result's own details: the compiler, and the arch's variant source."""
    details: dict[str, Any] = {"compiler": compiler.version, "compiler_path": compiler.path}
    if spec.source_for(arch) != spec.source:
        details["source"] = str(spec.source_for(arch))  # the arch's variant
    return details


def _missing_symbol(spec: KernelSpec, arch: str, symbols: frozenset[str]) -> str:
    return (f"symbol {spec.symbol!r} is not in the code object of "
            f"{spec.source_for(arch).name} "
            f"(kernels: {', '.join(sorted(s for s in symbols if not s.endswith('.kd')))}); "
            "fix the manifest's symbol or the source's extern \"C\" name")


def compile_kernel(spec: KernelSpec, arch: str, cache_dir: str | Path | None = None,
                   compiler: Compiler | None = None) -> CompileResult:
    """Build (or fetch from the validated cache) the code object holding ``spec.symbol``
    for ``arch``.  Never raises for a compile error: that is ``ok=False`` with the
    compiler's message.  A refused input (a flag off the allow-list, a dependency outside
    the tree or not a regular file) and a cache hqval cannot use are ``ok=False`` with
    ``details["infrastructure"]``: not the kernel's failure (exit 2)."""
    t0 = time.perf_counter()
    try:
        compiler = compiler or find_compiler()
    except ToolchainError as exc:
        # no usable compiler: hqval's toolchain, not the kernel
        return CompileResult(False, None, str(exc), False, time.perf_counter() - t0,
                             details={"infrastructure": True,
                                      "infrastructure_cause": "compiler",
                                      "error_type": type(exc).__name__})
    base: dict[str, Any] = {"compiler": compiler.version, "compiler_path": compiler.path}
    try:
        key, closure = _keyed_closure(spec, arch, compiler, cache_dir)
    except (ContainmentError, safeio.SafeIOError) as exc:
        return CompileResult(False, None, " ".join(str(exc).split()), False,
                             time.perf_counter() - t0,
                             details={**base, "infrastructure": True, "refused": True})
    except OSError as exc:
        return CompileResult(False, None, f"cannot read {exc.filename}: {exc.strerror}; fix the "
                             "manifest's source path or restore the file", False,
                             time.perf_counter() - t0)
    except CompilerCrash as exc:
        return CompileResult(False, None, str(exc), False, time.perf_counter() - t0,
                             command=compile_command(spec, arch, compiler),
                             details={**base, "infrastructure": True,
                                      "infrastructure_cause": "compiler",
                                      "error_type": type(exc).__name__})
    except DependencyError as exc:
        return CompileResult(False, None, str(exc), False, time.perf_counter() - t0,
                             command=compile_command(spec, arch, compiler), details=base)
    root = cache_root(cache_dir)
    co, meta = _entry(root, key)
    cmd = compile_command(spec, arch, compiler)
    details = _details(spec, arch, compiler)
    deps = tuple(closure)
    roots = trusted_roots(spec, compiler)
    with _lock_for(key):
        try:
            problem, digest, misses = _check_entry(co, meta, key, arch)
        except cacheauth.CacheKeyError as exc:
            return CompileResult(False, None, str(exc), False, time.perf_counter() - t0, key,
                                 cmd, {**details, "infrastructure": True,
                                       "infrastructure_cause": "cache key",
                                       "error_type": type(exc).__name__})
        except (OSError, safeio.SafeIOError) as exc:
            return CompileResult(False, None, f"the code-object cache {root} cannot be read "
                                 f"({exc}); fix: repair or remove it, or give --cache-dir",
                                 False, time.perf_counter() - t0, key, cmd,
                                 _infrastructure("cache", exc, details))
        cached = problem is None
        if not cached:
            if problem != "missing":
                details["rebuilt"] = problem
            try:
                co.parent.mkdir(parents=True, exist_ok=True)
                private_cm = private_dir(co.parent)
                private = private_cm.__enter__()
            except OSError as exc:
                return CompileResult(False, None, f"the code-object cache {root} is not "
                                     f"writable ({exc.strerror or exc}); fix: give a writable "
                                     "--cache-dir", False, time.perf_counter() - t0, key, cmd,
                                     _infrastructure("cache", exc, details))
            try:
                out = private / "object.co"
                try:
                    proc = run_contained([*cmd, "-o", str(out)], env=compiler.environment,
                                         private=private, roots=roots,
                                         timeout=COMPILE_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    # no verdict on the kernel: hqval's machinery did not get one in time
                    return CompileResult(False, None, _timeout_message(
                                             compiler.path, "the compiler", COMPILE_TIMEOUT_S),
                                         False, time.perf_counter() - t0, key, cmd,
                                         {**details, "infrastructure": True,
                                          "infrastructure_cause": "compiler",
                                          "error_type": "CompilerTimeout"})
                crash = compiler_crash(proc.returncode, proc.stderr)
                if crash or (proc.returncode == 0 and (not out.is_file()
                                                       or out.stat().st_size == 0)):
                    why = crash or "the compiler exited 0 without writing the code object"
                    return CompileResult(False, None, _crash_message(compiler.path, why),
                                         False, time.perf_counter() - t0, key, cmd,
                                         {**details, "infrastructure": True,
                                          "infrastructure_cause": "compiler",
                                          "error_type": "CompilerCrash"})
                if proc.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
                    msg = (diagnostics(proc.stderr, roots)
                           or f"compiler exited {proc.returncode}")
                    return CompileResult(False, None, msg, False, time.perf_counter() - t0,
                                         key, cmd, details)
                misses = occupancy_misses(proc.stderr)
                try:
                    digest = _sha256(out)
                    size = out.stat().st_size
                    mac = object_mac(root, key, digest, size, arch, misses)
                    os.replace(out, co)
                    _write_json(meta, {"key": key, "sha256": digest, "size": size,
                                       "compiler": compiler.version, "arch": arch,
                                       "source": str(spec.source_for(arch)),
                                       "command": list(cmd), "created": time.time(),
                                       "occupancy_misses": misses, "mac": mac})
                except cacheauth.CacheKeyError as exc:
                    return CompileResult(False, None, str(exc), False,
                                         time.perf_counter() - t0, key, cmd,
                                         {**details, "infrastructure": True,
                                          "infrastructure_cause": "cache key",
                                          "error_type": type(exc).__name__})
                except (OSError, safeio.SafeIOError) as exc:
                    return CompileResult(False, None, f"the code-object cache {root} cannot "
                                         f"be written ({exc}); fix: free space or give a "
                                         "writable --cache-dir", False,
                                         time.perf_counter() - t0, key, cmd,
                                         _infrastructure("cache", exc, details))
            finally:
                private_cm.__exit__(None, None, None)
    try:
        symbols = object_symbols(co)
    except (OSError, safeio.SafeIOError) as exc:
        return CompileResult(False, None, f"the cached object {co} cannot be read ({exc}); "
                             "fix: repair or remove the cache", cached,
                             time.perf_counter() - t0, key, cmd,
                             _infrastructure("cache", exc, details))
    if spec.symbol not in symbols:
        return CompileResult(False, co, _missing_symbol(spec, arch, symbols), cached,
                             time.perf_counter() - t0, key, cmd, details, deps, digest)
    return CompileResult(True, co, "cached" if cached else "compiled", cached,
                         time.perf_counter() - t0, key, cmd,
                         _with_occupancy(details, misses, spec.symbol), deps, digest, misses)


def _with_occupancy(details: dict[str, Any], misses: dict[str, list[int]], symbol: str
                    ) -> dict[str, Any]:
    """``details`` with the kernel's own occupancy finding, if its build reported one."""
    if (miss := misses.get(symbol)) is not None:
        # clang's -Wpass-failed: the declared minimum waves per EU was not met (the audit's
        # vgpr_budget judges it; the object does not record the request)
        details["occupancy_target_missed"] = {"desired": miss[0], "final": miss[1]}
    return details


def _write_json(path: Path, data: dict[str, Any]) -> None:
    safeio.write_atomic(path, json.dumps(data, indent=1), what="cache record")



def trusted_roots(spec: KernelSpec, compiler: Compiler) -> tuple[Path, ...]:
    """The allowed roots: what the compiler may read and its messages may locate.  The
    kernel tree (the manifest's directory, the source's and its include dirs: the manifest
    loader keeps those inside the tree unless the manifest allows otherwise), the suite's
    include dirs, the compiler's installation (its resource headers), and for a build
    with ROCm's headers the system include trees they include."""
    roots = [spec.source.parent, *(p for _, p in spec.variants), *spec.include_dirs,
             *(p.parent for p in spec.preinclude), HIPCOMPAT_DIR.parent,
             Path(os.path.realpath(compiler.path)).parent.parent]
    if spec.manifest is not None:
        roots.append(spec.manifest.parent)
    if compiler.hip_headers:
        # ROCm's headers include the system's C and C++ headers (hip_runtime.h: stdint.h,
        # the libstdc++ headers), so a build with them reads the system include trees
        roots += [Path("/opt/rocm"), Path("/usr/include/hip"), Path("/usr/include"),
                  Path("/usr/local/include"), Path("/usr/lib/gcc")]
        if compiler.rocm_root:
            roots.append(Path(compiler.rocm_root))
    return tuple(dict.fromkeys(Path(os.path.realpath(r)) for r in roots))


# ---- the matrix --------------------------------------------------------------------------

# clang's words for an --offload-arch it does not know (LLVM 15-20), the arch named in them
_UNKNOWN_TARGET = ("invalid target ID '{a}'", "unsupported CUDA gpu architecture: {a}",
                   "unsupported HIP gpu architecture: {a}", "unknown target CPU '{a}'",
                   "'{a}' is not a recognized processor")


def unknown_target(message: str, arch: str) -> str | None:
    """The phrase of a compile error saying the compiler does not know ``arch`` at all (an
    older LLVM: Debian 12's ROCm 5.2 hipcc has no gfx115x or gfx12), or None."""
    for pattern in _UNKNOWN_TARGET:
        phrase = pattern.format(a=arch)
        if phrase in message:
            return phrase
    return None


_MISSING_BUILTIN = re.compile(r"(?:use of undeclared identifier|unknown builtin) "
                              r"'(__builtin_amdgcn_[A-Za-z0-9_]+)'")


def missing_builtin(message: str) -> str | None:
    """The AMDGPU target builtin a compile error says the compiler does not know, or None.
    ``__builtin_amdgcn_*`` is the compiler's own namespace: a kernel calling one this clang
    lacks (``__builtin_amdgcn_s_prefetch_data`` before LLVM 20) is correct source this
    toolchain cannot build, neither the kernel's failure nor a pass."""
    m = _MISSING_BUILTIN.search(message)
    return m.group(1) if m else None


class ToolchainGap(RuntimeError):
    """A kernel this toolchain cannot build for an arch: its compiler lacks a target
    builtin the source calls (``builtin``).  No verdict either way."""

    def __init__(self, message: str, builtin: str) -> None:
        super().__init__(message)
        self.builtin = builtin


def toolchain_gap_message(compiler: str, builtin: str, arch: str) -> str:
    return (f"untested: {compiler} has no {builtin} for {arch} (a newer LLVM's or ROCm's "
            f"clang has it): this toolchain cannot build the kernel, so nothing is judged "
            f"on {arch}; fix: HQVAL_CLANG=<a clang that has {builtin}> (Debian 12: "
            f"apt-get install clang-22 lld-22 llvm-22, HQVAL_CLANG=clang-22)")


@dataclass(frozen=True)
class CompileCell:
    spec: KernelSpec
    arch: str
    result: CompileResult | None  # None: the kernel does not apply to the arch
    reason: str = ""  # why not (KernelSpec.not_for), where result is None

    def row(self) -> Row:
        if self.result is None:
            return Row(kind="compile", check="compile", kernel=self.spec.name, arch=self.arch,
                       backend="toolchain", status=Status.UNSUPPORTED,
                       message=f"not built for {self.arch}: "
                               f"{self.reason or f'requires {self.spec.requires}'}")
        r = self.result
        status, message = Status.PASS if r.ok else Status.FAIL, r.message
        if not r.ok and r.details.get("infrastructure"):
            # hqval's machinery (the cache) or a refused input, never the kernel's failure
            status = Status.ERROR
        if not r.ok and (gap := missing_builtin(r.message)):
            # correct source this compiler cannot build: no verdict on the kernel
            return Row(kind="compile", check="compile", kernel=self.spec.name, arch=self.arch,
                       backend="toolchain", status=Status.SKIPPED,
                       measured=round(r.seconds, 4),
                       message=toolchain_gap_message(
                           str(r.details.get("compiler") or "the compiler"), gap, self.arch)
                       + f" ({r.message.splitlines()[0] if r.message else ''})",
                       details={"toolchain_gap": gap, "key": r.key, **r.details})
        if not r.ok and (why := unknown_target(r.message, self.arch)):
            # the compiler, not the kernel: an error of this machine, with its fix
            status = Status.ERROR
            message = (f"{r.details.get('compiler') or 'the compiler'} does not target "
                       f"{self.arch} ({why}); fix: build with LLVM 19 or newer "
                       "(apt-get install clang-19 lld-19, then HQVAL_CLANG=clang-19) or "
                       "a ROCm that knows the arch")
        return Row(
            kind="compile", check="compile", kernel=self.spec.name, arch=self.arch,
            backend="toolchain", status=status,
            measured=round(r.seconds, 4), message=message,
            object_sha256=(r.sha256 or file_sha256(r.code_object))
            if r.ok and r.code_object else None,
            details={"code_object": str(r.code_object) if r.code_object else None,
                     "cached": r.cached, "key": r.key, **r.details},
        )


def _shared_compile(first: CompileResult, spec: KernelSpec, arch: str,
                    compiler: Compiler) -> CompileResult | None:
    """The result of a cell whose cache key is ``first``'s (a compile or a validated cache
    hit of this process, just now), without validating the same entry again: the same key
    is the same compiler, command material and dependency contents, so the same object.
    Its own symbol is looked up in the bytes ``first`` validated (read again, and used
    only while they still hash to ``first``'s digest).  None (compile the cell itself)
    when ``first`` has no validated object or the cell's command differs."""
    t0 = time.perf_counter()
    co, digest = first.code_object, first.sha256
    if co is None or digest is None or first.details.get("infrastructure") \
            or compile_command(spec, arch, compiler) != first.command:
        return None
    details = _details(spec, arch, compiler)
    if {k: v for k, v in first.details.items()
            if k not in ("rebuilt", "occupancy_target_missed")} != details:
        return None
    try:
        data = safeio.read_bytes(co, limit=MAX_INPUT_BYTES, what="cached object")
    except safeio.SafeIOError:
        return None
    if hashlib.sha256(data).hexdigest() != digest:
        return None
    symbols: frozenset[str] = _parsed_once("symbols", digest, data)
    cmd = first.command
    if spec.symbol not in symbols:
        return CompileResult(False, co, _missing_symbol(spec, arch, symbols), True,
                             time.perf_counter() - t0, first.key, cmd, details,
                             first.dependencies, digest, first.misses)
    return CompileResult(True, co, "cached", True, time.perf_counter() - t0, first.key, cmd,
                         _with_occupancy(details, first.misses, spec.symbol),
                         first.dependencies, digest, first.misses)


def compile_matrix(specs: Iterable[KernelSpec], arches: Iterable[Arch],
                   jobs: int | None = None, cache_dir: str | Path | None = None,
                   include_unsupported: bool = False,
                   on_cell: Callable[[CompileCell], None] | None = None) -> list[CompileCell]:
    """Compile every spec for every arch it applies to, ``jobs`` compiler processes at a
    time.  Specs sharing one code object (same source, defines, arch) build it once.
    ``on_cell`` hears of each cell as it is done (a progress display)."""
    compiler = find_compiler()
    cells: list[tuple[KernelSpec, str]] = []
    skipped: list[CompileCell] = []
    for arch in arches:
        for spec in specs:
            why = spec.not_for(arch)
            if not why:
                cells.append((spec, arch.name))
            elif include_unsupported:
                skipped.append(CompileCell(spec, arch.name, None, why))
    # One representative per key compiles first; the rest then hit the cache.
    def key_of(cell: tuple[KernelSpec, str]) -> str:
        try:
            return cache_key(cell[0], cell[1], compiler, cache_dir)
        except (OSError, DependencyError, ContainmentError, safeio.SafeIOError):
            return f"unreadable:{cell[0].name}:{cell[1]}"  # compile_kernel reports it

    if on_cell is not None:
        for c in skipped:
            on_cell(c)
    workers = max(1, jobs or os.cpu_count() or 1)
    by_key: dict[str, list[tuple[KernelSpec, str]]] = {}
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        # the keys run the preprocessor (clang -M), so they are computed in parallel too
        for cell, key in zip(cells, pool.map(key_of, cells), strict=True):
            by_key.setdefault(key, []).append(cell)
        firsts = {k: pool.submit(compile_kernel, group[0][0], group[0][1], cache_dir, compiler)
                  for k, group in by_key.items()}
        done: dict[tuple[str, str], CompileResult] = {}
        for k, group in by_key.items():
            first = firsts[k].result()
            done[(group[0][0].name, group[0][1])] = first
            for spec, arch_name in group[1:]:
                done[(spec.name, arch_name)] = (
                    _shared_compile(first, spec, arch_name, compiler)
                    or compile_kernel(spec, arch_name, cache_dir, compiler))
            if on_cell is not None:
                for spec, arch_name in group:
                    on_cell(CompileCell(spec, arch_name, done[(spec.name, arch_name)]))
    except BaseException:
        # an interrupt (SIGINT) stops the queue: the running compiles finish, none starts
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    out = [CompileCell(spec, arch_name, done[(spec.name, arch_name)])
           for spec, arch_name in cells]
    return out + skipped

