"""The contained compiler: what clang may be told, what it may read, where it may write and
what of its messages may leave.

- **Flags** (``flag_problem``): an allow-list, never a deny-list.  A manifest may set
  optimisation (``-O0..3 -Os -Oz``), warnings (``-W...`` without a comma: ``-Wl,``,
  ``-Wa,`` and ``-Wp,`` hand options to other tools), ``-w``, ``-g0``, the language
  standard (``-std=c++NN``/``gnu++NN``), defines and undefines (``-DNAME``, ``-DNAME=V``,
  the function-like ``-DNAME(a,b)=body``, ``-UNAME``), include dirs inside the kernel tree
  (``-I``, checked by the manifest loader) and a known set of ``-f`` and ``-m`` code
  generation options.  Everything else (output, dump, plugin, profile, module-cache,
  diagnostics and driver options) is refused before anything runs.
- **Dependencies** (``check_dependencies``): clang's own ``-M`` list is checked before a
  compile: every file must be a regular file inside the allowed roots (the kernel tree,
  the suite's include dirs, the compiler's installation).  A dependency that is not a
  file on disk (a name the make-rule parse split, a FIFO, ``/dev/zero``) is refused too,
  so the check fails closed.
- **Where it runs** (``run_contained``): in a private temporary working directory (its
  ``TMPDIR`` too), removed afterwards, with stdin closed; where bubblewrap is installed,
  inside a sandbox that sees the system's program directories, the allowed roots
  (read-only) and the private directory (read-write) only, with no network.
- **Messages** (``diagnostics``): clang reports in SARIF (JSON, ``-fdiagnostics-format=
  sarif``) with no quoted source lines (``-fno-caret-diagnostics``), so a location is
  read from JSON, never parsed out of prose a file's name could forge.  A diagnostic
  located outside the trusted roots keeps its location and loses its text.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

# ---- flags -------------------------------------------------------------------------------

# -f options that change code generation or language rules and nothing else: no output,
# dump, plugin, profile, cache or diagnostics option is among them.
SAFE_F = frozenset({
    "-ffast-math", "-fno-fast-math", "-funroll-loops", "-fno-unroll-loops",
    "-ffinite-math-only", "-fno-finite-math-only", "-fno-signed-zeros", "-fsigned-zeros",
    "-freciprocal-math", "-fno-reciprocal-math", "-fapprox-func", "-fno-approx-func",
    "-fassociative-math", "-fno-associative-math", "-fno-math-errno", "-fmath-errno",
    "-fhonor-nans", "-fno-honor-nans", "-fhonor-infinities", "-fno-honor-infinities",
    "-fstrict-aliasing", "-fno-strict-aliasing", "-fno-exceptions", "-fno-rtti",
    "-fgpu-flush-denormals-to-zero", "-fno-gpu-flush-denormals-to-zero",
    "-fcuda-flush-denormals-to-zero", "-fno-cuda-flush-denormals-to-zero",
    "-fhip-fp32-correctly-rounded-divide-sqrt", "-fno-hip-fp32-correctly-rounded-divide-sqrt",
    "-fgpu-approx-transcendentals", "-fno-gpu-approx-transcendentals",
    "-fgpu-allow-device-init", "-fno-gpu-allow-device-init",
    "-fhip-new-launch-api", "-fno-hip-new-launch-api", "-fgpu-default-stream=legacy",
    "-fgpu-default-stream=per-thread", "-fno-builtin", "-fbuiltin", "-fno-inline",
    "-finline-functions", "-fno-inline-functions", "-finline-hint-functions",
    "-fvectorize", "-fno-vectorize", "-fslp-vectorize", "-fno-slp-vectorize",
    "-fno-delete-null-pointer-checks", "-fwrapv", "-fno-wrapv", "-fchar8_t",
    "-fno-char8_t", "-fms-extensions", "-fno-ms-extensions", "-fgnu-keywords",
    "-fno-gnu-keywords", "-fdeclspec", "-fno-declspec", "-fno-threadsafe-statics",
    "-fomit-frame-pointer", "-fno-omit-frame-pointer", "-fno-zero-initialized-in-bss",
    "-fconvergent-functions", "-fno-convergent-functions", "-fno-limit-debug-info",
})
_F_VALUE = re.compile(
    r"-f(?:fp-contract=(?:fast|on|off|fast-honor-pragmas)"
    r"|denormal-fp-math(?:-f32)?=(?:ieee|preserve-sign|positive-zero|dynamic)"
    r"(?:,(?:ieee|preserve-sign|positive-zero|dynamic))?"
    r"|fp-model=(?:precise|strict|fast)|(?:no-)?fp-exception-behavior=(?:ignore|maytrap|strict)"
    r"|(?:template|constexpr|bracket)-depth=\d{1,6}|constexpr-steps=\d{1,9}"
    r"|(?:no-)?finite-loops)")
SAFE_M = frozenset({
    "-mwavefrontsize64", "-mno-wavefrontsize64", "-mcumode", "-mno-cumode",
    "-munsafe-fp-atomics", "-mno-unsafe-fp-atomics", "-mamdgpu-ieee", "-mno-amdgpu-ieee",
    "-mcode-object-version=4", "-mcode-object-version=5", "-mcode-object-version=6",
    "-mxnack", "-mno-xnack", "-msram-ecc", "-mno-sram-ecc", "-mtgsplit", "-mno-tgsplit",
    "-mamdgpu-precise-memory-op", "-mno-amdgpu-precise-memory-op",
})
_OTHER = (
    re.compile(r"-O(?:[0-3sz])?"),
    # a define: object-like, or function-like with a parameter list; the body may hold any
    # character but NUL and line breaks (clang gets it as one argument, no shell)
    re.compile(r"-D[A-Za-z_][A-Za-z0-9_]*(?:\([A-Za-z0-9_ ,.]*\))?(?:=[^\0\r\n]*)?"),
    re.compile(r"-U[A-Za-z_][A-Za-z0-9_]*"),
    re.compile(r"-std=(?:c|gnu)\+\+(?:11|14|17|20|2a|2b|23|2c|26)"),
    # warnings; no comma (-Wl, -Wa, -Wp, pass options to the linker, assembler and
    # preprocessor), and not the diagnostics-format warnings hqval relies on
    re.compile(r"-W(?!(?:no-)?(?:error=)?sarif)[a-z0-9][a-z0-9+_-]*(?:=[a-z0-9+_-]+)?"),
    re.compile(r"-w|-g0|-pedantic|-pedantic-errors"),
)
# -I is a path: the manifest loader resolves it against the manifest and keeps it inside
# the tree, then passes it on absolute
_INCLUDE = re.compile(r"-I(?P<dir>[^\0\r\n]+)")


def flag_problem(flag: object) -> str | None:
    """None when a manifest may pass ``flag`` to clang, else why not (one line)."""
    if not isinstance(flag, str):
        return f"flag {flag!r} is not a string"
    if flag in SAFE_F or flag in SAFE_M or _F_VALUE.fullmatch(flag):
        return None
    if any(p.fullmatch(flag) for p in _OTHER) or _INCLUDE.fullmatch(flag):
        return None
    kind = ("; it is a -f option outside the known safe set" if flag.startswith("-f") else
            "; it is a -m option outside the known safe set" if flag.startswith("-m") else "")
    return (f"flag {flag!r} is not one a manifest may set{kind} (allowed: -O, -W..., -w, "
            "-std=, -D/-U, -I inside the tree, and the safe -f/-m code-generation options "
            "of hqval.containment)")


def include_dir_of(flag: str) -> str | None:
    """The directory of an ``-I`` flag, else None."""
    m = _INCLUDE.fullmatch(flag)
    return m["dir"] if m else None


# ---- dependencies ------------------------------------------------------------------------


class ContainmentError(ValueError):
    """The compile would read what it may not: a file outside the allowed roots or one that
    is not a regular file.  The message names the file (never its contents) and the fix."""


def inside(path: str | Path, roots: Sequence[Path]) -> bool:
    real = Path(os.path.realpath(path))
    return any(real == r or real.is_relative_to(r) for r in roots)


def printable(path: str) -> str:
    """``path`` with control characters escaped (a file's name may hold line breaks)."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in path)


def check_dependencies(deps: Sequence[str], roots: Sequence[Path]) -> None:
    """Refuse, before compiling, a dependency that is not a regular file inside ``roots``."""
    for dep in deps:
        shown = printable(dep)
        try:
            st = os.stat(dep)
        except OSError as exc:
            raise ContainmentError(
                f"the compiler's dependency {shown!r} is not a file on disk "
                f"({exc.strerror}); fix: give the included files plain names inside the "
                "kernel tree") from None
        if not stat.S_ISREG(st.st_mode):
            from hqval.safeio import kind_of

            raise ContainmentError(
                f"the compiler's dependency {shown} is {kind_of(st.st_mode)}, not a regular "
                "file; fix: include only regular files of the kernel tree")
        if not inside(dep, roots):
            raise ContainmentError(
                f"the compiler's dependency {shown} is outside the kernel tree and the "
                "suite's include dirs; fix: keep every #include and #embed inside the tree")


def special_files(roots: Sequence[Path], limit: int = 50_000) -> list[str]:
    """FIFOs, device files and symbolic-link loops under ``roots`` (walked without
    following links, ``.git`` skipped, at most ``limit`` entries): a preprocessor that opens
    one would block, read without end or fail, so a tree holding one is refused before
    clang runs."""
    found: list[str] = []
    seen = 0
    for root in dict.fromkeys(roots):
        stack = [str(root)]
        while stack and seen < limit:
            d = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except OSError:
                continue
            for e in entries:
                seen += 1
                if e.name == ".git":
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    stack.append(e.path)
                elif stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode) or \
                        stat.S_ISBLK(st.st_mode):
                    found.append(e.path)
                elif stat.S_ISLNK(st.st_mode):
                    try:
                        t = os.stat(e.path)
                    except OSError as exc:
                        if exc.errno == errno.ELOOP:  # opening it fails with ELOOP: refused
                            found.append(e.path)  # like a FIFO, not a kernel's compile error
                        continue
                    if stat.S_ISFIFO(t.st_mode) or stat.S_ISCHR(t.st_mode) or \
                            stat.S_ISBLK(t.st_mode):
                        found.append(e.path)
    return found


# ---- where clang runs --------------------------------------------------------------------

# what clang and its linker need of the system, bound read-only into the sandbox
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/alternatives",
           "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/opt/rocm")
SANDBOX_ENV = "HQVAL_SANDBOX"  # "off": run without bubblewrap even where it is installed


@dataclass(frozen=True)
class Sandbox:
    on: bool
    detail: str


def sandbox() -> Sandbox:
    """Whether clang runs inside bubblewrap here, and why (for ``hqval doctor``)."""
    if os.environ.get(SANDBOX_ENV, "").lower() in ("0", "off", "no", "false"):
        return Sandbox(False, f"{SANDBOX_ENV}=off: clang runs in a private directory only")
    exe = shutil.which("bwrap")
    if exe is None:
        return Sandbox(False, "bubblewrap not installed (apt-get install bubblewrap): clang "
                              "runs in a private directory only")
    return _probe(exe)


_probed: dict[str, Sandbox] = {}


def _probe(exe: str) -> Sandbox:
    if exe in _probed:
        return _probed[exe]
    try:
        proc = subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all",
                               "--die-with-parent", "true"], capture_output=True, text=True,
                              timeout=30, check=False, stdin=subprocess.DEVNULL)
        ok = proc.returncode == 0
        why = (f"{exe}: clang sees the system, the kernel tree and its private directory "
               "only, read-only but for that directory, no network") if ok else (
            f"{exe} cannot start a sandbox here ({' '.join(proc.stderr.split())[:160]}): "
            "clang runs in a private directory only")
    except (OSError, subprocess.SubprocessError) as exc:
        ok, why = False, f"{exe} failed ({exc}): clang runs in a private directory only"
    _probed[exe] = Sandbox(ok, why)
    return _probed[exe]


def _bwrap_argv(exe: str, argv: Sequence[str], private: Path, roots: Sequence[Path]
                ) -> list[str]:
    out = [exe, "--unshare-all", "--die-with-parent", "--new-session",
           "--dev", "/dev", "--proc", "/proc"]
    binds: list[str] = []
    for p in _SYSTEM:
        if os.path.islink(p):
            out += ["--symlink", os.readlink(p), p]
        elif os.path.exists(p):
            binds.append(p)
    compiler_root = Path(os.path.realpath(argv[0])).parent.parent
    binds += [str(compiler_root), *(str(r) for r in roots if os.path.exists(r))]
    for p in sorted(dict.fromkeys(binds), key=len):
        out += ["--ro-bind", p, p]
    out += ["--bind", str(private), str(private), "--chdir", str(private), "--", *argv]
    return out


@contextlib.contextmanager
def private_dir(base: str | Path | None = None) -> Iterator[Path]:
    """A fresh directory (under ``base`` when given: the object is then renamed out of it
    on the same file system) removed with everything in it afterwards."""
    d = Path(tempfile.mkdtemp(prefix=".hqval-cc-", dir=base))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_contained(argv: Sequence[str], *, env: dict[str, str], private: Path,
                  roots: Sequence[Path], timeout: float) -> subprocess.CompletedProcess[str]:
    """``argv`` (a compiler command) with ``private`` as its working and temporary
    directory and stdin closed; inside bubblewrap where ``sandbox()`` is on.  Raises
    ``subprocess.TimeoutExpired`` and ``OSError`` as ``subprocess.run`` does."""
    env = {**env, "TMPDIR": str(private), "TMP": str(private), "TEMP": str(private)}
    box = sandbox()
    full = list(argv)
    if box.on:
        exe = shutil.which("bwrap")
        assert exe is not None
        full = _bwrap_argv(exe, argv, private, roots)
    return subprocess.run(full, cwd=private, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, errors="replace", timeout=timeout,
                          check=False)


# ---- messages ----------------------------------------------------------------------------

DIAGNOSTIC_FLAGS = ("-fno-caret-diagnostics", "-fdiagnostics-format=sarif",
                    "-Wno-sarif-format-unstable", "-fno-color-diagnostics")
WITHHELD = "(message withheld: the file is outside the kernel tree)"
_DRIVER = re.compile(r"(?:\S*clang\S*|\S*lld\S*|hipcc): (?:error|warning|fatal error): .*")
_CXX_KEYWORDS = frozenset({
    "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char",
    "class", "const", "constexpr", "const_cast", "continue", "decltype", "default", "delete",
    "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false",
    "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace",
    "new", "noexcept", "not", "nullptr", "operator", "or", "private", "protected", "public",
    "register", "reinterpret_cast", "return", "short", "signed", "sizeof", "static",
    "static_assert", "static_cast", "struct", "switch", "template", "this", "throw", "true",
    "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void",
    "volatile", "while",
})
# an identifier a kernel uses as a macro: reserved (__x) or in capitals (ALIGN)
_MACRO_LIKE = re.compile(r"__[A-Za-z0-9_]*|[A-Z][A-Z0-9_]*")


@dataclass(frozen=True)
class Diagnostic:
    path: str
    line: int
    column: int
    level: str
    text: str


def _sarif(stderr: str) -> tuple[list[Diagnostic], list[str]] | None:
    """clang's SARIF documents in ``stderr`` and its other (driver, linker) lines; None when
    there is no SARIF (an older compiler, a driver error before compiling)."""
    docs: list[Diagnostic] = []
    rest: list[str] = []
    found = False
    for ln in stderr.splitlines():
        s = ln.strip()
        if s.startswith("{") and '"runs"' in s:
            try:
                doc = json.loads(s)
            except ValueError:
                rest.append(ln)
                continue
            found = True
            for run in doc.get("runs", []) if isinstance(doc, dict) else []:
                for res in run.get("results", []) or []:
                    docs.append(_diagnostic(res))
        elif s:
            rest.append(ln)
    return (docs, rest) if found else None


def _diagnostic(res: dict[str, object]) -> Diagnostic:
    level = str(res.get("level") or "note")
    msg = res.get("message")
    text = str(msg.get("text", "")) if isinstance(msg, dict) else ""
    path, line, col = "", 0, 0
    locs = res.get("locations")
    if isinstance(locs, list) and locs and isinstance(locs[0], dict):
        phys = locs[0].get("physicalLocation")
        if isinstance(phys, dict):
            art = phys.get("artifactLocation")
            if isinstance(art, dict) and isinstance(art.get("uri"), str):
                path = unquote(urlparse(str(art["uri"])).path)
            region = phys.get("region")
            if isinstance(region, dict):
                line = int(region.get("startLine") or 0)
                col = int(region.get("startColumn") or 0)
    return Diagnostic(path, line, col, level, " ".join(text.split()))


def _named_identifier(d: Diagnostic, tree: Sequence[Path]) -> str | None:
    """For a parse error clang reports after an identifier it does not know as a macro
    (``struct __align__(16) v``: "expected unqualified-id"), that identifier, read from the
    source line inside the tree; None when the message names it already or none fits."""
    if d.level not in ("error", "fatal error") or "'" in d.text or not d.path or \
            not d.text.startswith(("expected", "variable has incomplete type")) or \
            not inside(d.path, tree):
        return None
    from hqval.safeio import SafeIOError, read_text

    try:
        lines = read_text(d.path, limit=16 << 20, what="source").splitlines()
    except SafeIOError:
        return None
    if not 0 < d.line <= len(lines):
        return None
    # the identifier before the error, over the "(" a function-like macro would take
    before = lines[d.line - 1][:max(0, d.column - 1)].rstrip(" \t(")
    m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)$", before)
    if not m or m.group(1) in _CXX_KEYWORDS or not _MACRO_LIKE.fullmatch(m.group(1)):
        return None
    return m.group(1)


# clang's warning (-Wpass-failed) when a kernel's amdgpu_waves_per_eu (the second argument
# of HIP's __launch_bounds__) is not met; a request above the arch's wave slots is dropped
# with this warning too.  The code object does not record the request.
_OCCUPANCY_MISS = re.compile(
    r"failed to meet occupancy target given by 'amdgpu-waves-per-eu' in "
    r"'([A-Za-z_][A-Za-z0-9_]*)': desired occupancy was (\d+), final occupancy is (\d+)")


def occupancy_misses(stderr: str) -> dict[str, list[int]]:
    """The kernels of a build whose declared minimum waves per execution unit the compiler
    reports it could not meet, as symbol -> [desired, final]: read from the warnings of
    ``stderr`` (SARIF, or plain text from a compiler without it)."""
    parsed = _sarif(stderr)
    texts = [d.text for d in parsed[0]] if parsed is not None else stderr.splitlines()
    out: dict[str, list[int]] = {}
    for text in texts:
        if m := _OCCUPANCY_MISS.search(text):
            out[m[1]] = [int(m[2]), int(m[3])]
    return out


def diagnostics(stderr: str, trusted: Sequence[Path], tree: Sequence[Path] = (),
                limit: int = 12) -> str:
    """The compiler's first errors as lines ``path:line:col: level: text``.  A diagnostic
    located outside ``trusted`` keeps its location but not its text; driver and linker
    lines are kept (they name files, never quote them).  A parse error after an identifier
    nothing defines (``__align__`` without the headers that define it) is preceded by a
    line naming it: "undeclared identifier '__align__'"."""
    parsed = _sarif(stderr)
    if parsed is None:
        return _plain(stderr, trusted, limit)
    diags, rest = parsed
    out: list[str] = []
    named: list[str] = []
    for d in diags:
        where = f"{printable(d.path)}:{d.line}:{d.column}" if d.path else "clang"
        if d.path and not inside(d.path, trusted):
            out.append(f"{printable(d.path)}:{d.line}: {d.level}: {WITHHELD}")
            continue
        ident = _named_identifier(d, tree or trusted)
        if ident and ident not in named:
            named.append(ident)
            out.append(f"{where}: error: use of undeclared identifier '{ident}' (nothing "
                       "defines it as a macro here: include the header that does, or add a "
                       f"-D{ident}... to the manifest's flags)")
        out.append(f"{where}: {d.level}: {d.text}")
    out += [ln.strip() for ln in rest if _DRIVER.fullmatch(ln.strip())]
    errors = [ln for ln in out if ": error:" in ln or ": fatal error:" in ln]
    return "\n".join((errors or out)[:limit])


_PLAIN = re.compile(r"(?P<path>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)? "
                    r"(?P<sev>fatal error|error|warning|note): (?P<msg>.*)")
_SUMMARY = re.compile(r"\d+ (?:errors?|warnings?)(?: and \d+ (?:errors?|warnings?))? "
                      r"generated.*")


def _plain(stderr: str, trusted: Sequence[Path], limit: int) -> str:
    """Text diagnostics (no SARIF): a located line is kept only when its file is inside
    ``trusted``; no other line (a quoted source line, a caret) is kept but the driver's."""
    out: list[str] = []
    for ln in (x.strip() for x in stderr.splitlines() if x.strip()):
        if m := _PLAIN.match(ln):
            out.append(ln if inside(m["path"], trusted) else
                       f"{printable(m['path'])}:{m['line']}: {m['sev']}: {WITHHELD}")
        elif _DRIVER.fullmatch(ln) or _SUMMARY.fullmatch(ln):
            out.append(ln)
    errors = [ln for ln in out if "error" in ln]
    return "\n".join((errors or out)[:limit])
