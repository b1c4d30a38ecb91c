"""The compiled exact FMA (hqval.emu.fastfma) against the numpy code it replaces (the
oracle, kept in fparith): bit for bit on a large randomised set with denormals,
infinities, NaN payloads, cancellations and rounding ties; the build, the cache, the
choice and what happens when the compiled code is missing or wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from hqval.emu import fastfma, fparith
from hqval.emu.errors import EmuError

needs_cc = pytest.mark.skipif(shutil.which("clang-19") is None and shutil.which("cc") is None,
                              reason="needs a C compiler (clang-19, as the suite does)")


@pytest.fixture()
def fresh(monkeypatch: pytest.MonkeyPatch) -> object:
    """Forget the process's choice before and after the test."""
    fastfma.reset()
    yield None
    monkeypatch.undo()
    fastfma.reset()


def _triples(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """f32 operands: uniformly random bit patterns (NaN payloads, infinities, denormals
    included), special values, denormal-only, near-cancellation (c ~ -a*b, so the sum
    is mostly rounding error) and exact-product ties."""
    rng = np.random.default_rng(seed)
    bits = lambda k: rng.integers(0, 2**32, k, dtype=np.uint64).astype(np.uint32)  # noqa: E731
    parts = []
    a, b, c = (bits(n).view(np.float32) for _ in range(3))
    parts.append((a, b, c))
    special = fastfma.special_values_f32()
    pick = lambda k: special[rng.integers(0, special.size, k)]  # noqa: E731
    parts.append((pick(n // 4), bits(n // 4).view(np.float32), pick(n // 4)))
    den = lambda k: (rng.integers(0, 0x007FFFFF, k, dtype=np.uint32)  # noqa: E731
                     | (rng.integers(0, 2, k, dtype=np.uint32) << np.uint32(31))).view(np.float32)
    parts.append((den(n // 4), rng.standard_normal(n // 4).astype(np.float32), den(n // 4)))
    with np.errstate(all="ignore"):
        x = rng.standard_normal(n // 2).astype(np.float32)
        y = (rng.standard_normal(n // 2) * 2.0 ** rng.integers(-30, 30, n // 2)).astype(
            np.float32)
        near = -(x.astype(np.float64) * y).astype(np.float32)
        wiggle = rng.integers(-2, 3, n // 2).astype(np.int32)
        near = (near.view(np.int32) + wiggle).view(np.float32)
        parts.append((x, y, near))
        # products at the bottom of the f32 range: subnormal results and double rounding
        tiny = (rng.standard_normal(n // 4) * 2.0**-70).astype(np.float32)
        parts.append((tiny, (rng.standard_normal(n // 4) * 2.0**-70).astype(np.float32),
                      den(n // 4)))
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(3))  # type: ignore[return-value]


@needs_cc
def test_the_compiled_fma_is_used_where_a_compiler_is(fresh: object) -> None:
    mode, where = fastfma.status()
    assert mode == "compiled", where
    assert Path(where).is_file()


@needs_cc
def test_fma_f32_is_bit_identical_to_the_numpy_oracle(fresh: object) -> None:
    assert fastfma.load() is not None
    a, b, c = _triples(400_000, 1)
    with np.errstate(all="ignore"):
        want = fparith.fma_f32_numpy(a, b, c).view(np.uint32)
        got = fparith.fma_f32(a, b, c).view(np.uint32)
    assert a.size >= 900_000
    assert np.isnan(a).sum() > 1000 and np.isinf(c).sum() > 100  # the set has them
    bad = np.flatnonzero(want != got)
    assert bad.size == 0, (f"{bad.size} differ; first {a[bad[0]].view(np.uint32):#x} "
                           f"{b[bad[0]].view(np.uint32):#x} {c[bad[0]].view(np.uint32):#x}: "
                           f"{got[bad[0]]:#x} vs {want[bad[0]]:#x}")
    # NaN results keep their payloads (they are compared as bits above); some are not the
    # default NaN, so payload propagation was really exercised
    nan_bits = got[np.isnan(got.view(np.float32))]
    assert np.unique(nan_bits).size > 100


@needs_cc
def test_round_to_odd_f64_and_f16_and_mix_are_bit_identical(fresh: object) -> None:
    from hqval.emu.packed import fma_round

    assert fastfma.load() is not None
    a, b, c = _triples(200_000, 2)
    with np.errstate(all="ignore"):
        a64, b64, c64 = (x.astype(np.float64) for x in (a, b, c))
        assert np.array_equal(fparith.fma_odd(a64, b64, c64).view(np.uint64),
                              fparith.fma_odd_numpy(a64, b64, c64).view(np.uint64))
        for out in (np.float32, np.float16, np.float64):
            want = fparith.fma_odd_numpy(a64, b64, c64).astype(out)
            assert np.array_equal(fma_round(a, b, c, out).view(want.dtype.str.replace(
                "f", "u")), want.view(want.dtype.str.replace("f", "u"))), out
        h = [(x.view(np.uint32) & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16)
             for x in (a, b, c)]
        assert np.array_equal(fparith.fma_f16(*h).view(np.uint16),
                              fparith.fma_f16_numpy(*h).view(np.uint16))


def _mix_operands(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """v_fma_mix operands as the emulator widens them (f16 or f32 values, as f64): every
    f32 triple of ``_triples``, random f16 bit patterns (NaN payloads, infinities,
    subnormals), products whose sums fall in f16's subnormal range and past its largest
    value, and exact f16 rounding ties (normal and subnormal) and the overflow tie."""
    rng = np.random.default_rng(seed)
    a, b, c = _triples(n, seed)
    parts = [(a, b, c)]
    h = lambda k: rng.integers(0, 2**16, k, dtype=np.uint32).astype(np.uint16).view(  # noqa: E731
        np.float16).astype(np.float32)
    parts.append((h(n), h(n), h(n)))
    with np.errstate(all="ignore"):
        small = (rng.standard_normal(n) * 2.0 ** rng.integers(-14, 1, n)).astype(np.float32)
        wide = (rng.standard_normal(n) * 2.0 ** rng.integers(-27, 18, n)).astype(np.float32)
        parts.append((h(n), small, wide))
    one, zero = np.ones(n, np.float32), np.zeros(n, np.float32)
    # halfway between two normal f16s: 13 dropped bits of 0x1000, exponents of f16's range
    mant = rng.integers(0, 1 << 10, n, dtype=np.uint32) << np.uint32(13) | np.uint32(0x1000)
    exp = rng.integers(113, 143, n, dtype=np.uint32) << np.uint32(23)
    sign = rng.integers(0, 2, n, dtype=np.uint32) << np.uint32(31)
    ties = (sign | exp | mant).view(np.float32)
    # halfway between two f16 subnormals (k + 1/2) * 2^-24, and 65520 (rounds to inf)
    sub = ((rng.integers(0, 1024, n) + 0.5) * 2.0**-24).astype(np.float32)
    edge = np.float32([65504, 65519.996, 65520, 65536, 2.0**-25, 2.0**-25 * 1.0000001,
                       2.0**-24, 6.1035156e-05, 6.097555e-05])
    parts += [(ties, one, zero), (sub, one, -zero), (edge, np.ones_like(edge), zero[:9])]
    with np.errstate(invalid="ignore"):  # widening a signalling NaN quiets it
        return tuple(np.concatenate([p[k] for p in parts]).astype(np.float64)  # type: ignore[return-value]
                     for k in range(3))


@needs_cc
def test_mix_f16_is_bit_identical_to_the_numpy_oracle(fresh: object) -> None:
    """v_fma_mix{lo,hi}_f16's two roundings in one compiled loop against the numpy steps
    (fma_odd, the f32 cast, f32_to_f16), on the values the emulator passes it."""
    assert fastfma.load() is not None
    a, b, c = _mix_operands(200_000, 5)
    with np.errstate(all="ignore"):
        want = fparith.mix_f16_numpy(a, b, c)
        got = fparith.mix_f16(a, b, c)
        ref = fparith.f32_to_f16(fparith.fma_odd_numpy(a, b, c).astype(np.float32))
    assert got.dtype == want.dtype == np.uint16 and type(got) is np.ndarray
    assert np.array_equal(want, ref.view(np.uint16))  # the oracle is the old steps
    bad = np.flatnonzero(want != got)
    assert bad.size == 0, (f"{bad.size} of {want.size} differ; first {a[bad[0]]!r} "
                           f"{b[bad[0]]!r} {c[bad[0]]!r}: {got[bad[0]]:#x} vs {want[bad[0]]:#x}")
    # the set reaches every branch: NaNs with payloads, infinities, overflow, subnormal
    # and zero results, both signs
    h = got.view(np.float16)
    assert np.unique(got[np.isnan(h)]).size > 100
    assert (got == 0x7C00).sum() > 100 and (got == 0xFC00).sum() > 100
    sub = (got & 0x7C00 == 0) & (got & 0x03FF != 0)
    assert sub.sum() > 10_000 and ((got & 0x7FFF) == 0).sum() > 1000
    # broadcasting as the emulator's operands do: a wave's scalar against its lanes
    x = np.arange(64, dtype=np.float64).reshape(2, 32) / 7.0
    s = np.array([[0.5], [-3.0]])
    assert np.array_equal(fparith.mix_f16(x, s, 1.0), fparith.mix_f16_numpy(x, s, 1.0))


@needs_cc
def test_broadcasting_scalars_and_dtypes_match(fresh: object) -> None:
    assert fastfma.load() is not None
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    cases = [(x, np.float32(3), x[:, :1]), (1.5, x, 2.0), (x.astype(np.float64), x, 0.1),
             (np.float32(2), np.float32(3), np.float32(4)), (x[::-1, ::2], x[:, 1:], 1)]
    for a, b, c in cases:
        want, got = fparith.fma_f32_numpy(a, b, c), fparith.fma_f32(a, b, c)
        assert type(got) is np.ndarray and got.dtype == np.float32
        assert got.shape == want.shape and np.array_equal(got.view(np.uint32),
                                                           want.view(np.uint32))


def test_numpy_only_when_asked(fresh: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fastfma.ENV, "numpy")
    assert fastfma.load() is None
    assert fastfma.status() == ("numpy", "HQVAL_EMU_FMA=numpy")
    a = np.float32([1, 2])
    assert np.array_equal(fparith.fma_f32(a, a, a), fparith.fma_f32_numpy(a, a, a))


def test_no_compiler_falls_back_in_auto_and_fails_loudly_when_required(
        fresh: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HQVAL_CACHE", str(tmp_path))
    monkeypatch.setattr(fastfma.shutil, "which", lambda name: None)
    monkeypatch.setenv(fastfma.ENV, "compiled")
    with pytest.raises(EmuError, match="no C compiler"):
        fastfma.load()
    fastfma.reset()
    monkeypatch.setenv(fastfma.ENV, "auto")
    assert fastfma.load() is None
    mode, why = fastfma.status()
    assert mode == "numpy" and "no C compiler" in why
    assert "using the numpy FMA" in capsys.readouterr().err
    monkeypatch.setenv(fastfma.ENV, "fast")
    fastfma.reset()
    with pytest.raises(EmuError, match="use one of auto, numpy, compiled"):
        fastfma.load()


@needs_cc
def test_a_compiled_fma_that_differs_is_never_used(fresh: object,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The self-check before first use: a loop with a wrong NaN rule (the addend's NaN
    preferred over the product's) is refused."""
    real = fastfma._ufuncs

    def wrong(path: Path) -> tuple[object, object, object, list[object]]:
        odd, f32, mix, keep = real(path)

        def bad_f32(a: object, b: object, c: object, **kw: object) -> np.ndarray:
            r = np.asarray(f32(a, b, c, **kw))
            cc = np.broadcast_to(np.asarray(c, np.float32), r.shape)
            return np.where(np.isnan(cc), cc, r)
        return odd, bad_f32, mix, keep

    monkeypatch.setattr(fastfma, "_ufuncs", wrong)
    monkeypatch.setenv(fastfma.ENV, "compiled")
    with pytest.raises(EmuError, match="differs from the numpy oracle"):
        fastfma.load()
    fastfma.reset()
    monkeypatch.setenv(fastfma.ENV, "auto")
    assert fastfma.load() is None
    assert "differs from the numpy oracle" in fastfma.status()[1]


@needs_cc
def test_the_build_is_cached_by_content(fresh: object, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    first = fastfma.build(tmp_path)
    assert first.is_file() and first.parent.parent == tmp_path

    def no_compile(*a: object, **k: object) -> object:
        cmd = a[0] if a else k.get("args")
        if isinstance(cmd, list) and "-shared" in cmd:
            raise AssertionError("rebuilt although cached")
        return real_run(*a, **k)

    real_run = fastfma.subprocess.run
    monkeypatch.setattr(fastfma.subprocess, "run", no_compile)
    assert fastfma.build(tmp_path) == first
    # nothing left but the library and its cache-key tag
    assert sorted(p.name for p in first.parent.iterdir()) == ["hqval_fma.so",
                                                                "hqval_fma.so.mac"]


@needs_cc
def test_a_mix_loop_rounding_ties_up_is_never_used(fresh: object,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The check before first use holds f16's rounding edges: a mix loop that rounds a
    normal f16 tie up instead of to even is refused."""
    real = fastfma._ufuncs

    def ties_up(path: Path) -> tuple[object, object, object, list[object]]:
        odd, f32, mix, keep = real(path)

        def bad_mix(a: object, b: object, c: object, **kw: object) -> np.ndarray:
            r = np.asarray(mix(a, b, c, **kw))
            with np.errstate(all="ignore"):
                f = fparith.fma_odd_numpy(a, b, c).astype(np.float32).view(np.uint32)
            mag = f & np.uint32(0x7FFFFFFF)
            tie = ((f & np.uint32(0x1FFF)) == 0x1000) & (mag >= 0x38800000) & (mag < 0x477FF000)
            return np.where(tie & ((r & 1) == 0), r + 1, r).astype(np.uint16)
        return odd, f32, bad_mix, keep

    monkeypatch.setattr(fastfma, "_ufuncs", ties_up)
    monkeypatch.setenv(fastfma.ENV, "compiled")
    with pytest.raises(EmuError, match="v_fma_mix f16 fma of"):
        fastfma.load()
