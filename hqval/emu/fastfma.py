"""The exact FMA family as compiled numpy ufuncs, bit-identical to ``fparith``'s numpy code.

``fparith.fma_f32``, ``fma_f16`` and ``packed.fma_round`` compute a single-rounding
multiply-add by an f64 sum, TwoSum and round-to-odd: about twenty numpy calls, which at
the emulator's array sizes (a few waves x 32 lanes) cost ~40x the arithmetic.  Here the
same steps, in the same order, are one C loop per element, made a real numpy ufunc
(broadcasting and casting as numpy's own), so one call replaces the twenty.
``fparith.mix_f16`` (v_fma_mix{lo,hi}_f16) is one loop too: the round-to-odd sum, the f32
cast and ``f32_to_f16`` by bits, where the numpy code made five calls after the sum.

How it is built: ``SOURCE`` uses no header at all (no libc, no Python.h, no numpy
headers), so the C compiler the suite already needs (clang-19, linking with lld-19, which
the suite needs too; else ``cc``) is all it takes, on a fresh Debian machine as here.  The
shared object is built at first use into the cache (``hqval.toolchain.cache_base()``, the
command's ``--cache-dir``: ``emu-ext/<key>/``), keyed by the source, the compiler's identity
and the machine, written under a temporary name and renamed (concurrent workers race
harmlessly), tagged under the cache key (``hqval.cacheauth``: a library another job put
there is built again, never loaded), and loaded with
ctypes; the ufuncs are made through numpy's own C API table (``PyUFunc_FromFuncAndData``),
found through the ``_UFUNC_API`` capsule numpy exports for extension modules.

NaN results follow the x86 rules numpy's arithmetic gets from the hardware (a product's
NaN is its first NaN operand quieted; a sum's is the product's, else the addend's quieted;
an invalid operation gives the default NaN), written out with bit operations so that no
compiler's reordering of commutative operands can change a payload.  Before the ufuncs
are used they are compared bit for bit with the numpy code on special values (zeros,
denormals, infinities, NaN payloads, overflow and exact-zero cases); any difference, or
a build or load failure, and ``fparith`` stays on the numpy code, which is the oracle
(``tests/emu/test_fastfma.py`` compares the two on a large randomised set).

``HQVAL_EMU_FMA`` picks: ``auto`` (the default: compiled, else numpy with the reason in
``status()`` and one line on stderr), ``numpy`` (the oracle only), ``compiled`` (the
compiled ufuncs or an ``EmuError`` saying why not: never a silent fallback)."""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from hqval.emu.errors import EmuError

ENV = "HQVAL_EMU_FMA"
CHOICES = ("auto", "numpy", "compiled")

SOURCE = r"""
/* hqval exact FMA loops (hqval/emu/fastfma.py); no headers: fixed-width types by hand */
typedef long npy_intp;
typedef unsigned long long u64;
typedef unsigned int u32;

static u64 dbits(double x) { u64 u; __builtin_memcpy(&u, &x, 8); return u; }
static double dval(u64 u) { double x; __builtin_memcpy(&x, &u, 8); return x; }
#define EXP_MASK 0x7ff0000000000000ULL
static int isnan_d(double x) { return (dbits(x) & 0x7fffffffffffffffULL) > EXP_MASK; }
static int isfinite_d(double x) { return (dbits(x) & EXP_MASK) != EXP_MASK; }
static double quiet_d(double x) { return dval(dbits(x) | 0x0008000000000000ULL); }

/* x86 (SSE) NaN propagation of a*b: the first NaN operand, quieted; else IEEE */
static double mul_d(double a, double b) {
    if (isnan_d(a)) return quiet_d(a);
    if (isnan_d(b)) return quiet_d(b);
    return a * b;
}
static double add_d(double a, double b) {
    if (isnan_d(a)) return quiet_d(a);
    if (isnan_d(b)) return quiet_d(b);
    return a + b;
}

/* a*b + c rounded to odd at 53 bits, for a*b exact in f64 (fparith's numpy steps) */
static double fma_odd(double a, double b, double c) {
    double p = mul_d(a, b);
    double s = add_d(p, c);
    if (!isfinite_d(s)) return s;
    double bp = s - c;
    double e = (p - bp) + (c - (s - bp));
    u64 bits = dbits(s);
    if (e != 0.0 && (bits & 1ULL) == 0) {
        bits = ((e > 0.0) == (s > 0.0)) ? bits + 1 : bits - 1;
        return dval(bits);
    }
    return s;
}

void hq_fma_odd_loop(char **args, const npy_intp *dim, const npy_intp *steps, void *data) {
    npy_intp n = dim[0], s0 = steps[0], s1 = steps[1], s2 = steps[2], s3 = steps[3];
    char *a = args[0], *b = args[1], *c = args[2], *o = args[3];
    (void)data;
    for (npy_intp i = 0; i < n; i++, a += s0, b += s1, c += s2, o += s3)
        *(double *)o = fma_odd(*(double *)a, *(double *)b, *(double *)c);
}

static u32 fbits(float x) { u32 u; __builtin_memcpy(&u, &x, 4); return u; }

/* f32 -> f16 bits, nearest even (fparith.f32_to_f16: numpy's cast, then a NaN's quiet bit
   set): a NaN keeps its sign and its payload's top bits; past the largest f16 is inf */
static unsigned short f16_bits(float f) {
    u32 x = fbits(f);
    u32 sign = (x >> 16) & 0x8000u;
    u32 ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return (unsigned short)(sign | 0x7c00u | 0x0200u | ((ax >> 13) & 0x03ffu));
    if (ax >= 0x477ff000u) /* 65520 and up (a tie at 65520 rounds to even: inf) */
        return (unsigned short)(sign | 0x7c00u);
    if (ax >= 0x38800000u) /* a normal f16: rebias the exponent, round the 13 bits off */
        return (unsigned short)(sign | ((ax - 0x38000000u + 0x0fffu + ((ax >> 13) & 1u)) >> 13));
    if (ax <= 0x33000000u) /* at most 2^-25: zero (2^-25 itself is a tie, to even) */
        return (unsigned short)sign;
    u32 e = ax >> 23, mant = (ax & 0x007fffffu) | 0x00800000u;
    u32 shift = 126u - e; /* 14..24: units of 2^-24, the smallest f16 subnormal */
    u32 h = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u)))
        h++;
    return (unsigned short)(sign | h);
}

/* v_fma_mix{lo,hi}_f16: a*b + c rounded once to f32 (round to odd at 53 bits, then the
   f64 -> f32 cast), then to f16 (the ISA's f32_to_f16), as packed.fma_round then
   fparith.f32_to_f16 do; the operands are f16 or f32 values widened to f64 */
void hq_mix_f16_loop(char **args, const npy_intp *dim, const npy_intp *steps, void *data) {
    npy_intp n = dim[0], s0 = steps[0], s1 = steps[1], s2 = steps[2], s3 = steps[3];
    char *a = args[0], *b = args[1], *c = args[2], *o = args[3];
    (void)data;
    for (npy_intp i = 0; i < n; i++, a += s0, b += s1, c += s2, o += s3)
        *(unsigned short *)o = f16_bits((float)fma_odd(*(double *)a, *(double *)b, *(double *)c));
}

void hq_fma_f32_loop(char **args, const npy_intp *dim, const npy_intp *steps, void *data) {
    npy_intp n = dim[0], s0 = steps[0], s1 = steps[1], s2 = steps[2], s3 = steps[3];
    char *a = args[0], *b = args[1], *c = args[2], *o = args[3];
    (void)data;
    for (npy_intp i = 0; i < n; i++, a += s0, b += s1, c += s2, o += s3) {
        /* f32 -> f64 widening is exact (a NaN quieted, as numpy's astype) */
        double r = fma_odd((double)*(float *)a, (double)*(float *)b, (double)*(float *)c);
        *(float *)o = (float)r;
    }
}
"""

# numpy type numbers (stable C ABI): NPY_USHORT, NPY_FLOAT, NPY_DOUBLE
_NPY_USHORT, _NPY_FLOAT, _NPY_DOUBLE = 4, 11, 12
# index of PyUFunc_FromFuncAndData in numpy's ufunc C API table (stable since numpy 1.0)
_FROM_FUNC_AND_DATA = 1


Oracle = tuple[Callable[..., np.ndarray], Callable[..., np.ndarray], Callable[..., np.ndarray]]
# fparith's numpy (fma_odd_numpy, fma_f32_numpy, mix_f16_numpy), registered by fparith at
# import
_ORACLE: list[Oracle | None] = [None]
# what fparith dispatches to: None = not decided yet, False = the numpy code, else the
# (fma_odd, fma_f32, mix_f16) ufuncs
CURRENT: list[Any] = [None]


class _State:
    """What was chosen, once per process."""

    chosen: str | None = None  # "compiled" | "numpy"
    reason = ""
    path: Path | None = None
    fma_odd: Any = None  # ufunc (ddd->d)
    fma_f32: Any = None  # ufunc (fff->f)
    mix_f16: Any = None  # ufunc (ddd->H): f16 bits
    keep: ClassVar[list[Any]] = []  # ctypes arrays the ufuncs point into, and the library


def _compiler() -> tuple[list[str], str] | None:
    """(command prefix, identity) of the C compiler used for the loops."""
    clang = shutil.which("clang-19") or shutil.which("clang")
    lld = shutil.which("ld.lld-19") or shutil.which("ld.lld")
    if clang and lld:
        cmd = [clang, f"--ld-path={lld}"]
    elif clang:
        cmd = [clang]
    else:
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            return None
        cmd = [cc]
    try:
        ver = subprocess.run([cmd[0], "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return cmd, ver


def _build_dir() -> Path:
    from hqval.toolchain import cache_base

    return cache_base() / "emu-ext"


def build(root: Path | None = None) -> Path:
    """The shared object with the loops, built unless the cache has it.  Raises EmuError
    naming what failed."""
    found = _compiler()
    if found is None:
        raise EmuError("no C compiler (clang-19, clang, cc) on PATH to build the compiled "
                       "FMA; install clang-19 (apt-get install clang-19 lld-19)")
    cmd, ident = found
    key = hashlib.sha256("\0".join([SOURCE, ident, " ".join(cmd[1:]), platform.machine(),
                                    sys.platform]).encode()).hexdigest()[:24]
    root = root if root is not None else _build_dir()
    target = root / key / "hqval_fma.so"
    if _authentic(target, root):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src = Path(tmp) / "hqval_fma.c"
        src.write_text(SOURCE)
        out = Path(tmp) / "hqval_fma.so"
        # -ffp-contract=off: no fused multiply-add may replace the TwoSum steps; the
        # default -fno-fast-math keeps every operation IEEE in the written order
        full = [*cmd, "-O2", "-fPIC", "-shared", "-nostdlib", "-ffp-contract=off",
                "-fno-fast-math", "-fno-builtin", str(src), "-o", str(out)]
        try:
            res = subprocess.run(full, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            raise EmuError(f"building the compiled FMA failed: {exc}") from exc
        if res.returncode != 0:
            tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
            raise EmuError(f"building the compiled FMA with {' '.join(full[:1])} failed: "
                           f"{' / '.join(tail)}")
        from hqval import cacheauth

        try:
            mac = cacheauth.seal(root.parent, "emu-ext", _digest(out.read_bytes()))
        except cacheauth.CacheKeyError as exc:
            raise EmuError(f"the compiled FMA cannot be kept: {exc}") from exc
        tag = Path(tmp) / "hqval_fma.so.mac"
        tag.write_text(mac)
        os.replace(out, target)  # atomic: a concurrent builder's copy is the same bytes
        os.replace(tag, _tag_of(target))
    return target


def _tag_of(target: Path) -> Path:
    return target.with_name(target.name + ".mac")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _authentic(target: Path, root: Path) -> bool:
    """Whether the cached library is one this machine's cache key vouches for: a shared
    object another job put into the cache is never loaded (it would run in this process);
    it is built again."""
    from hqval import cacheauth, safeio

    try:
        data = safeio.read_bytes(target, limit=64 << 20, what="compiled FMA",
                                 follow_symlinks=False)
        tag = safeio.read_text(_tag_of(target), limit=4096, what="compiled FMA tag",
                               follow_symlinks=False).strip()
    except (OSError, safeio.SafeIOError):
        return False
    return cacheauth.usable(tag, root.parent, "emu-ext", _digest(data))


def _ufuncs(path: Path) -> tuple[Any, Any, Any, list[Any]]:
    """(fma_odd, fma_f32, mix_f16) ufuncs over the loops in ``path``."""
    try:  # numpy 2 moved numpy.core to numpy._core
        umath = importlib.import_module("numpy._core._multiarray_umath")
    except ImportError:
        umath = importlib.import_module("numpy.core._multiarray_umath")
    lib = ctypes.CDLL(str(path))
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    table = ctypes.cast(get(umath._UFUNC_API, None), ctypes.POINTER(ctypes.c_void_p))
    make = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                             ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
                             ctypes.c_int)(table[_FROM_FUNC_AND_DATA])
    keep: list[Any] = [lib]
    out = []
    d = _NPY_DOUBLE
    for sym, npy, name in (("hq_fma_odd_loop", [d] * 4, b"hq_fma_odd"),
                           ("hq_fma_f32_loop", [_NPY_FLOAT] * 4, b"hq_fma_f32"),
                           ("hq_mix_f16_loop", [d, d, d, _NPY_USHORT], b"hq_mix_f16")):
        funcs = (ctypes.c_void_p * 1)(ctypes.cast(getattr(lib, sym), ctypes.c_void_p).value)
        data = (ctypes.c_void_p * 1)(None)
        types = ctypes.create_string_buffer(bytes(npy), 4)
        doc = ctypes.c_char_p(b"exact single-rounding multiply-add (hqval.emu.fastfma)")
        keep += [funcs, data, types, name, doc]
        # identity -1 is PyUFunc_None; the last argument is unused
        out.append(make(ctypes.addressof(funcs), ctypes.addressof(data),
                        ctypes.addressof(types), 1, 3, 1, -1, name, doc.value, 0))
    return out[0], out[1], out[2], keep


def special_values_f32() -> np.ndarray:
    """f32 bit patterns that exercise every branch: zeros, denormals, limits, infinities,
    quiet and signalling NaNs with payloads, and ordinary values."""
    bits = [0, 0x80000000, 1, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x80800000,
            0x3F800000, 0xBF800000, 0x3F800001, 0x33800000, 0x33800001, 0x7F7FFFFF,
            0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FC00BAD,
            0x7FA00000, 0xFF800001, 0x7F800123, 0x4B800000, 0x4F000000, 0x1F800000,
            0x0C000000, 0x3EAAAAAB, 0xC0490FDB]
    return np.array(bits, np.uint32).view(np.float32)


def _self_check(fma_odd: Any, fma_f32: Any, mix_f16: Any, oracle: Oracle) -> str | None:
    """The first difference from the numpy code (``oracle``: fparith's fma_odd_numpy,
    fma_f32_numpy and mix_f16_numpy) on every triple of special values, or None.  Run
    before first use."""
    odd_numpy, f32_numpy, mix_numpy = oracle
    v = special_values_f32()
    a, b, c = np.meshgrid(v, v, v, indexing="ij")
    a, b, c = a.reshape(-1), b.reshape(-1), c.reshape(-1)
    with np.errstate(all="ignore"):
        want = f32_numpy(a, b, c).view(np.uint32)
        got = np.asarray(fma_f32(a, b, c)).view(np.uint32)
        a64, b64, c64 = (x.astype(np.float64) for x in (a, b, c))
        want64 = odd_numpy(a64, b64, c64).view(np.uint64)
        got64 = np.asarray(fma_odd(a64, b64, c64)).view(np.uint64)
        # and f16's rounding edges as sums (x*1 + 0): normal and subnormal ties, the
        # overflow tie 65520, 2^-25
        edges = np.array([0x3F801000, 0x3F803000, 0xC7001000, 0x477FF000, 0x477FEFFF,
                          0x33000000, 0x33000001, 0x33C00000, 0x34200000, 0x387FF000,
                          0x387FE000], np.uint32).view(np.float32).astype(np.float64)
        m64, n64, o64 = (np.concatenate([x, y]) for x, y in (
            (a64, edges), (b64, np.ones_like(edges)), (c64, np.zeros_like(edges))))
        want16 = np.asarray(mix_numpy(m64, n64, o64))
        got16 = np.asarray(mix_f16(m64, n64, o64))
    for w, g, what in ((want, got, "f32"), (want64, got64, "f64 round-to-odd"),
                       (want16, got16, "v_fma_mix f16")):
        bad = np.flatnonzero(w != g)
        if bad.size:
            k = int(bad[0])
            x, y, z = (m64[k], n64[k], o64[k]) if w is want16 else (a64[k], b64[k], c64[k])
            return (f"{what} fma of {x!r}, {y!r}, {z!r}: compiled {int(g[k]):#x}, numpy "
                    f"{int(w[k]):#x} ({bad.size} of {w.size} differ)")
    return None


def choice() -> str:
    mode = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if mode not in CHOICES:
        raise EmuError(f"{ENV}={mode!r}: use one of {', '.join(CHOICES)}")
    return mode


def load(oracle: Oracle | None = None) -> tuple[Any, Any, Any] | None:
    """The compiled (fma_odd, fma_f32, mix_f16) ufuncs, or None where the numpy code is to be used
    (``status()`` says why).  Decided once per process, on first use, after comparing them
    with ``oracle`` (fparith's numpy functions, which pass themselves)."""
    if _State.chosen is None:
        oracle = oracle or _ORACLE[0]
        if oracle is None:
            raise EmuError("import hqval.emu.fparith first: its numpy FMA is the oracle "
                           "the compiled one is checked against")
        mode = choice()
        if mode == "numpy":
            _State.chosen, _State.reason = "numpy", f"{ENV}=numpy"
        else:
            try:
                path = build()
                odd, f32, mix, keep = _ufuncs(path)
                bad = _self_check(odd, f32, mix, oracle)
                if bad:
                    raise EmuError(f"the compiled FMA differs from the numpy oracle: {bad}")
            except (EmuError, OSError, AttributeError, ImportError, ValueError) as exc:
                if mode == "compiled":
                    raise EmuError(f"{ENV}=compiled but the compiled FMA is unusable: "
                                   f"{exc}") from exc
                _State.chosen, _State.reason = "numpy", str(exc)
                print(f"hqval.emu: using the numpy FMA (slower, same results): {exc}",
                      file=sys.stderr)
            else:
                _State.chosen, _State.reason, _State.path = "compiled", str(path), path
                _State.fma_odd, _State.fma_f32, _State.mix_f16 = odd, f32, mix
                _State.keep = keep
    CURRENT[0] = ((_State.fma_odd, _State.fma_f32, _State.mix_f16)
                  if _State.chosen == "compiled" else False)
    return CURRENT[0] or None


def status() -> tuple[str, str]:
    """(``compiled`` | ``numpy``, the shared object's path or why not)."""
    load()
    assert _State.chosen is not None
    return _State.chosen, _State.reason


def reset() -> None:
    """Forget the choice (tests: to re-decide under another ``HQVAL_EMU_FMA``)."""
    _State.chosen = None
    _State.reason = ""
    _State.path = None
    _State.fma_odd = _State.fma_f32 = _State.mix_f16 = None
    _State.keep = []
    CURRENT[0] = None

