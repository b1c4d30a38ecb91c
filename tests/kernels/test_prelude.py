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


@pytest.mark.slow
@pytest.mark.skipif(CLANG is None or OBJDUMP is None, reason="needs clang-19 and llvm-objdump-19")
@pytest.mark.skipif(rocm_root() is None,
                    reason="needs ROCm's HIP headers "
                           "(apt-get install libamdhip64-dev, or set HQVAL_ROCM_PATH)")
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
# one case per source: the builds of a source spread over the xdist workers
@pytest.mark.parametrize("src", sources(), ids=lambda src: src.name)
def test_hip_headers_build_the_same_machine_code(arch: str, src: Path, tmp_path: Path) -> None:
    rocm = rocm_root()
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


# ---- the HIP compatibility headers (kernels/include/hipcompat) --------------------------

HIPCOMPAT = ROOT / "kernels" / "include" / "hipcompat"
COMMON_SUBSET = ROOT / "tests" / "data" / "hipcompat" / "common_subset.hip"
ENGINE_TREE = ROOT / "tests" / "data" / "engine_tree" / "kernels.yaml"
ALL_ARCHES = ["gfx1010", "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151",
              "gfx1200", "gfx1201"]


@pytest.mark.skipif(CLANG is None or OBJDUMP is None, reason="needs clang-19 and llvm-objdump-19")
@pytest.mark.skipif(rocm_root() is None,
                    reason="needs ROCm's HIP headers "
                           "(apt-get install libamdhip64-dev, or set HQVAL_ROCM_PATH)")
@pytest.mark.parametrize("arch", ALL_ARCHES)
def test_compat_headers_build_the_same_machine_code_as_rocms(arch: str, tmp_path: Path) -> None:
    """Kernels both can build without device libraries (ROCm 5.2's threadIdx, blockIdx and
    __syncthreads call into them): HIP API, ROCm's headers vs hqval's, same code."""
    rocm = rocm_root()
    hip = build(COMMON_SUBSET, arch, tmp_path / "hip.co", f"--rocm-path={rocm}")
    assert hip.returncode == 0, hip.stderr
    compat = build(COMMON_SUBSET, arch, tmp_path / "compat.co", "-nogpuinc",
                   "-isystem", str(HIPCOMPAT))
    assert compat.returncode == 0, compat.stderr
    text = code(tmp_path / "compat.co", arch)
    assert "v_wmma" not in text and "ds_bpermute" in text  # the shuffles are really there
    assert text == code(tmp_path / "hip.co", arch)


@pytest.mark.skipif(CLANG is None, reason="needs clang-19")
@pytest.mark.parametrize("arch", ALL_ARCHES)
def test_engine_style_sources_build_unmodified_for_every_target(arch: str,
                                                                code_cache: Path) -> None:
    """The engine-style tree (HIP headers, __launch_bounds__(32, 16), a pre-included .inc)
    builds through the suite's toolchain with no adapter; the launch bounds keep ROCm's
    meaning (the most threads a block is launched with)."""
    from hqval.audit import analyze
    from hqval.toolchain import compile_kernel, find_compiler

    if find_compiler().hip_headers:
        pytest.skip("ROCm's headers are in use; the compatibility headers are not")
    m = load_manifest(ENGINE_TREE)
    built = 0
    for spec in m.kernels:
        if spec.requires == "wmma_gfx11" and not arch.startswith("gfx11"):
            continue
        if spec.requires == "wmma_gfx12" and not arch.startswith("gfx12"):
            continue
        res = compile_kernel(spec, arch, code_cache)  # the run's shared cache
        assert res.ok and res.code_object is not None, f"{spec.name}: {res.message}"
        notes = analyze(res.code_object, arch)[spec.symbol].notes
        assert notes[".max_flat_workgroup_size"] == spec.block, spec.name
        built += 1
    assert built >= 10


@pytest.mark.skipif(CLANG is None, reason="needs clang-19")
def test_compat_headers_refuse_what_they_do_not_cover(tmp_path: Path) -> None:
    """A function the headers do not provide is a compile error naming it (no silent
    substitute), and a kernel needing the pre-included .inc fails without it."""
    src = tmp_path / "k.hip"
    src.write_text("#include <hip/hip_runtime.h>\n"
                   "extern \"C\" __global__ void k(float* y) { y[threadIdx.x] = sinf(y[0]); }\n")
    r = build(src, "gfx1100", tmp_path / "k.co", "-nogpuinc", "-isystem", str(HIPCOMPAT))
    assert r.returncode != 0 and "sinf" in r.stderr
    gemv = ENGINE_TREE.parent / "src" / "ew_gemv_mq4g256v2.hip"
    r = build(gemv, "gfx1100", tmp_path / "g.co", "-nogpuinc", "-isystem", str(HIPCOMPAT))
    assert r.returncode != 0 and "EW_ROW_BYTES" in r.stderr


SEMANTICS = ROOT / "tests" / "data" / "hipcompat" / "semantics.hip"


@pytest.mark.skipif(CLANG is None, reason="needs clang-19")
@pytest.mark.parametrize("arch", ["gfx1010", "gfx1100", "gfx1201"])
def test_compat_headers_compute_what_hip_defines(arch: str, tmp_path: Path) -> None:
    """Built with the compatibility headers and run on the emulator: launch coordinates,
    the wave operations, a barrier, half2 arithmetic, math and an atomic give the values
    HIP defines (computed here independently)."""
    import numpy as np

    from hqval.backends.emu import EmuBackend
    from hqval.manifest import KernelSpec
    from hqval.toolchain import find_compiler

    if find_compiler().hip_headers:
        pytest.skip("ROCm's headers are in use; the compatibility headers are not")
    spec = KernelSpec(name="hipcompat_semantics", source=SEMANTICS, symbol="hipcompat_semantics",
                      qt=6, kind="gemv", block=64)
    be = EmuBackend(arch)
    program = be.load(spec)
    gx, gy, bd, slots = 3, 2, 64, 16
    n = gx * gy * bd
    x = np.random.default_rng(5).uniform(-3, 3, n).astype(np.float32)
    bx, bo, bc = be.alloc(4 * n), be.alloc(4 * n * slots), be.alloc(4)
    be.copy_in(bx, x)
    be.copy_in(bc, np.zeros(1, np.uint32))
    be.launch(program, (gx, gy, 1), (bd, 1, 1), [bx, bo, bc])
    out = be.copy_out(bo).view(np.float32).reshape(gx * gy, bd, slots)
    assert int(be.copy_out(bc).view(np.uint32)[0]) == n
    xs = x.reshape(gx * gy, bd)
    lane = np.arange(bd) % 32
    wave0 = np.arange(bd) - lane
    for blk in range(gx * gy):
        o, v = out[blk], xs[blk]
        bxid, byid = blk % gx, blk // gx
        assert np.array_equal(o[:, 0], np.arange(bd))
        assert np.all(o[:, 1] == bxid + 100 * byid)
        assert np.all(o[:, 2] == bd + 1000 * gx + 100000 * gy)
        down = np.where(lane + 3 < 32, np.arange(bd) + 3, np.arange(bd))
        up = np.where(lane >= 5, np.arange(bd) - 5, np.arange(bd))
        assert np.array_equal(o[:, 3], v[down]) and np.array_equal(o[:, 4], v[up])
        assert np.array_equal(o[:, 5], v[wave0 + (lane ^ 9)])
        assert np.array_equal(o[:, 6], v[wave0 + 7])
        assert np.array_equal(o[:, 7], v[np.arange(bd) - lane % 8 + 2])
        for w in (0, 32):
            bits = sum(1 << i for i in range(32) if v[w + i] > 0)
            assert np.all(o[w:w + 32, 8] == np.float32(bits))
            want = (np.any(v[w:w + 32] > 2.5) + 2 * np.all(v[w:w + 32] > -100)
                    + 4 * np.all(v[w:w + 32] > 0))
            assert np.all(o[w:w + 32, 9] == want)
        assert np.array_equal(o[:, 10], v[(np.arange(bd) + 37) % 64])
        # __hfma2(h, h, 1): one f16 rounding of the exact h*h + 1 (exact in f64)
        h = v.astype(np.float16).astype(np.float64)
        lo = (h * h + 1.0).astype(np.float16).astype(np.float32)
        assert np.array_equal(o[:, 11], lo + np.float32(10.0) * np.float32(1.25))
        assert np.allclose(o[:, 12], np.tanh(v.astype(np.float64)), rtol=4e-7, atol=2e-7)
        assert np.allclose(o[:, 13], np.exp(v.astype(np.float64) * 0.25), rtol=2e-7)
        assert np.allclose(o[:, 14], 1 / np.sqrt(np.abs(v.astype(np.float64)) + 1), rtol=3e-7)
        assert np.all(o[:, 15] == 32)


DOTS = ROOT / "tests" / "data" / "hipcompat" / "dots.hip"


@pytest.mark.skipif(CLANG is None, reason="needs clang-19")
@pytest.mark.parametrize("arch", ALL_ARCHES)
def test_compat_mixed_dots_and_lrint_compute_what_rocm_defines(arch: str) -> None:
    """amd_mixed_dot (ROCm: __ockl_[su]dot{2,4,8}, __ockl_fdot2) and lrintf/lroundf, built
    with the compatibility headers and run on the emulator: the integer sums exactly, with
    saturation where asked; the half2 dot on values whose sum is exact in f32."""
    import numpy as np

    from hqval.backends.emu import EmuBackend
    from hqval.manifest import KernelSpec
    from hqval.toolchain import find_compiler

    if find_compiler().hip_headers:
        pytest.skip("ROCm's headers are in use; the compatibility headers are not")
    be = EmuBackend(arch)
    program = be.load(KernelSpec(name="hipcompat_dots", source=DOTS, symbol="hipcompat_dots",
                                 qt=6, kind="gemv", block=32))
    rng = np.random.default_rng(7)
    # extremes first (saturation), then random words
    a = np.concatenate([np.array([0x7FFF7FFF, -0x7FFF8000, 0x7F7F7F7F, -1], np.int64),
                        rng.integers(-2**31, 2**31, 28)]).astype(np.int32)
    b = np.concatenate([np.array([0x7FFF7FFF, -0x7FFF8000, 0x7F7F7F7F, -1], np.int64),
                        rng.integers(-2**31, 2**31, 28)]).astype(np.int32)
    c = np.concatenate([np.array([2**31 - 1, -2**31, 2**31 - 100, 5], np.int64),
                        rng.integers(-2**20, 2**20, 28)]).astype(np.int32)
    h = (rng.integers(-64, 64, 128) / 8).astype(np.float16)  # products and sums exact in f32
    f = np.concatenate([rng.integers(-1000, 1000, 32) / 4,
                        np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, -3.51]),
                        rng.uniform(-1e5, 1e5, 24)]).astype(np.float32)
    bufs = [be.alloc(v.nbytes) for v in (a, b, c, h, f)]
    for buf, v in zip(bufs, (a, b, c, h, f), strict=True):
        be.copy_in(buf, v)
    out = be.alloc(4 * 12 * 32)
    be.copy_in(out, np.zeros(12 * 32, np.int32))
    be.launch(program, (1, 1, 1), (32, 1, 1), [*bufs, out])
    got = be.copy_out(out).view(np.int32).reshape(32, 12).astype(np.int64)

    def lanes(v: np.ndarray, bits: int, signed: bool) -> list[np.ndarray]:
        u = v.astype(np.int64) & 0xFFFFFFFF
        out, m = [], (1 << bits) - 1
        for k in range(32 // bits):
            e = (u >> (bits * k)) & m
            out.append(np.where(e >= 1 << (bits - 1), e - (1 << bits), e) if signed else e)
        return out

    def dot(bits: int, signed: bool) -> np.ndarray:
        cc = c.astype(np.int64) if signed else c.astype(np.int64) & 0xFFFFFFFF
        return cc + sum(p * q for p, q in zip(lanes(a, bits, signed), lanes(b, bits, signed),
                                               strict=True))

    def wrap(v: np.ndarray) -> np.ndarray:
        return ((v + 2**31) % 2**32) - 2**31

    def sat_i(v: np.ndarray) -> np.ndarray:
        return np.clip(v, -2**31, 2**31 - 1)

    def sat_u(v: np.ndarray) -> np.ndarray:
        return wrap(np.minimum(v, 2**32 - 1))

    np.testing.assert_array_equal(got[:, 0], wrap(dot(16, True)))
    np.testing.assert_array_equal(got[:, 1], sat_i(dot(16, True)))
    np.testing.assert_array_equal(got[:, 2], sat_u(dot(16, False)))
    np.testing.assert_array_equal(got[:, 3], wrap(dot(8, True)))
    np.testing.assert_array_equal(got[:, 4], sat_i(dot(8, True)))
    np.testing.assert_array_equal(got[:, 5], wrap(dot(8, False)))
    np.testing.assert_array_equal(got[:, 6], sat_i(dot(4, True)))
    np.testing.assert_array_equal(got[:, 7], wrap(dot(4, False)))
    hh = h.astype(np.float64).reshape(2, 32, 2)  # h[i] and h[i + 32] as half2 pairs
    want = f[:32].astype(np.float64) + hh[0, :, 0] * hh[1, :, 0] + hh[0, :, 1] * hh[1, :, 1]
    np.testing.assert_array_equal(got[:, 8], want.astype(np.float32).view(np.int32))
    g = f[32:].astype(np.float64)
    np.testing.assert_array_equal(got[:, 9], np.rint(g))
    np.testing.assert_array_equal(got[:, 10], np.sign(g) * np.floor(np.abs(g) + 0.5))
    np.testing.assert_array_equal(got[:, 11], np.rint((f[32:] * np.float32(3)).astype(np.float64)))


DEVICE_MACROS = ROOT / "tests" / "data" / "hipcompat" / "device_macros.hip"


@pytest.mark.skipif(CLANG is None, reason="needs clang-19")
def test_compat_headers_provide_rocms_device_macros(tmp_path: Path) -> None:
    """__align__, __host__ __device__ in either order, __forceinline__, __noinline__, both
    __launch_bounds__ forms, HIP_DYNAMIC_SHARED and the platform and feature words build as
    ROCm's headers define them; the source checks each with static_assert or #error."""
    r = build(DEVICE_MACROS, "gfx1100", tmp_path / "m.co", "-nogpuinc", "-isystem",
              str(HIPCOMPAT))
    assert r.returncode == 0, r.stderr
    rocm = rocm_root()
    if rocm is not None:
        # ROCm 5.2's threadIdx needs its device libraries to link: check the meaning only
        hip = build(DEVICE_MACROS, "gfx1100", tmp_path / "hip.co", f"--rocm-path={rocm}",
                    "-fsyntax-only")
        assert hip.returncode == 0, hip.stderr


@pytest.mark.skipif(CLANG is None, reason="needs clang-19")
def test_a_missing_macro_is_named_in_the_first_line_of_the_compile_row(tmp_path: Path) -> None:
    """A source using a macro nothing defines (here without the headers that define
    __align__) fails to compile, and the row's first line names the identifier."""
    from hqval.manifest import KernelSpec
    from hqval.toolchain import CompileCell, compile_kernel

    src = tmp_path / "k.hip"
    src.write_text("struct __align__(16) quad { float x, y, z, w; };\n"
                   "extern \"C\" __attribute__((global)) void k(quad* q) { q[0].x = 1.0f; }\n")
    spec = KernelSpec(name="k", source=src, symbol="k", qt=6, kind="gemv", requires="any")
    res = compile_kernel(spec, "gfx1100", tmp_path / "cache")
    assert not res.ok
    row = CompileCell(spec, "gfx1100", res).row()
    first = row.message.splitlines()[0]
    assert "undeclared identifier '__align__'" in first, row.message
