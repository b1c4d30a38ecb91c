"""The suite's own kernels, compiled for real and run on the RDNA emulator: results against
a float64 oracle of the decoded weights, bit identity across formats on equal halves, tail
rows and tiles, the remainder group loop, residual accumulation and the fused QKV ABI."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from hqval.emu import Machine
from hqval.formats import by_qt
from hqval.manifest import KernelSpec, load_manifest
from hqval.toolchain import compile_kernel

pytestmark = pytest.mark.skipif(
    not (shutil.which("clang-19") and shutil.which("llvm-objdump-19")),
    reason="needs clang-19 and llvm-objdump-19 (apt-get install clang-19 llvm-19)")

REAL = load_manifest()
PREFIX = {6: "gemv_hfq4g256", 44: "gemv_mq4g256v2", 45: "gemv_mq4c"}
# f32 accumulation of K <= 1536 products in a different order than the f64 oracle: the
# error is a few ulp of sum|w x|; 1e-5 of that bound leaves a 10x margin.
GEMV_TOL = 1e-5
SENTINEL = np.float32(-7.25e30)
MACHINES: dict[str, Machine] = {}


@pytest.fixture(scope="module")
def cache(code_cache: Path) -> Path:
    """The test run's shared code-object cache (tests/conftest.py)."""
    return code_cache


def launch(spec: KernelSpec, arch: str, cache: Path, grid: tuple[int, int, int],
           buffers: Sequence[np.ndarray], scalars: Sequence[int],
           outputs: Sequence[int]) -> list[np.ndarray]:
    """Run ``spec`` with its buffers (copied in, each followed by 64 sentinel bytes) and
    scalar args; return the output buffers and assert the sentinels survived."""
    res = compile_kernel(spec, arch, cache)
    assert res.ok and res.code_object is not None, res.message
    m = MACHINES.setdefault(arch, Machine(arch))  # keeps translated modules across tests
    mod = m.load(res.code_object.read_bytes())
    guard = np.full(16, SENTINEL, np.float32)
    addrs = []
    for buf in buffers:
        raw = np.ascontiguousarray(buf).view(np.uint8).reshape(-1)
        addr = m.alloc(raw.size + guard.nbytes)
        m.write(addr, raw)
        m.write(addr + raw.size, guard)
        addrs.append(addr)
    m.launch(mod, spec.symbol, grid, (32, 1, 1), [*addrs, *scalars])
    out = []
    for i in outputs:
        nbytes = buffers[i].nbytes
        raw = m.read(addrs[i], nbytes + guard.nbytes)
        assert (raw[nbytes:].view(np.float32) == SENTINEL).all(), "write past the output"
        out.append(raw[:nbytes].view(buffers[i].dtype).reshape(buffers[i].shape))
    for addr in addrs:
        m.free(addr)
    return out


def weights(rng: np.random.Generator, M: int, K: int) -> np.ndarray:
    # Distinct scales per row and per half, so a wrong row or half is visible.
    w = rng.standard_normal((M, K)).astype(np.float32)
    w[:, :128] *= 3.0
    return w * (1.0 + np.arange(M, dtype=np.float32)[:, None] / 4)


def rel_err(got: np.ndarray, ref: np.ndarray, scale: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - ref) / scale))


@pytest.mark.parametrize("qt", [6, 44, 45])
@pytest.mark.parametrize(("variant", "arch"), [
    ("r1", "gfx1100"), ("r2", "gfx1100"), ("r4", "gfx1030"), ("r8", "gfx1100"),
    ("residual_r2", "gfx1201")])
def test_gemv_matches_the_decoded_oracle(arch: str, qt: int, variant: str,
                                         cache: Path) -> None:
    spec = REAL.by_name(f"{PREFIX[qt]}_{variant}")
    rng = np.random.default_rng(qt * 100 + spec.rows_per_block)
    M, K = 13, 256 * 6  # 13 rows: a tail block for every R; 6 groups: main loop + remainder
    fmt = by_qt(qt)
    blob = fmt.encode(weights(rng, M, K))
    x = rng.standard_normal(K).astype(np.float32)
    y0 = rng.standard_normal(M).astype(np.float32) if spec.residual else \
        np.zeros(M, np.float32)
    R = spec.rows_per_block
    (y,) = launch(spec, arch, cache, (-(-M // R), 1, 1), [blob, x, y0.copy()], [M, K], [2])
    deq = fmt.decode(blob, K).astype(np.float64)
    ref = deq @ x.astype(np.float64) + (y0 if spec.residual else 0.0)
    scale = np.abs(deq) @ np.abs(x.astype(np.float64)) + np.abs(y0)
    assert rel_err(y, ref, scale) <= GEMV_TOL


def equal_half_blobs(rng: np.random.Generator, M: int, K: int) -> dict[int, np.ndarray]:
    """The same nibbles with one fp16-exact (scale, zero) per group, written in each
    format's header: v1 as two f32, v2 in both halves, qt=45 once plus the zero pad."""
    G = K // 256
    nib = rng.integers(0, 256, size=(M, G, 128), dtype=np.uint8)
    sc = (rng.random((M, G)) * 0.1 + 0.01).astype(np.float16)
    zp = (rng.standard_normal((M, G)) * 0.5).astype(np.float16)
    pair = (sc.view(np.uint16).astype(np.uint32) | (zp.view(np.uint16).astype(np.uint32) << 16))
    out = {}
    for qt in (6, 44, 45):
        g = np.zeros((M, G, 136), np.uint8)
        g[:, :, 8:] = nib
        if qt == 6:
            g[:, :, 0:4] = sc.astype(np.float32)[..., None].view(np.uint8)
            g[:, :, 4:8] = zp.astype(np.float32)[..., None].view(np.uint8)
        else:
            g[:, :, 0:4] = pair[..., None].view(np.uint8)
            if qt == 44:
                g[:, :, 4:8] = pair[..., None].view(np.uint8)
        out[qt] = g.reshape(M, G * 136)
    return out


@pytest.mark.parametrize("arch", ["gfx1010", "gfx1151", "gfx1201"])
@pytest.mark.parametrize("variant", ["r1", "r4", "qkv_r2"])
def test_v2_and_mq4c_are_bit_identical_to_v1_on_equal_halves(
        arch: str, variant: str, cache: Path) -> None:
    rng = np.random.default_rng(7)
    M, K = 11, 256 * 5
    blobs = equal_half_blobs(rng, M, K)
    x = rng.standard_normal(K).astype(np.float32)
    outs = {}
    for qt in (6, 44, 45):
        spec = REAL.by_name(f"{PREFIX[qt]}_{variant}")
        R = spec.rows_per_block
        if spec.kind == "gemv_qkv":
            grid = (3 * -(-M // R), 1, 1)
            ys = [np.zeros(M, np.float32) for _ in range(3)]
            got = launch(spec, arch, cache, grid, [blobs[qt]] * 3 + [x, *ys], [M, M, M, K],
                         [4, 5, 6])
            outs[qt] = np.concatenate(got)
        else:
            (outs[qt],) = launch(spec, arch, cache, (-(-M // R), 1, 1),
                                 [blobs[qt], x, np.zeros(M, np.float32)], [M, K], [2])
    assert np.array_equal(outs[44].view(np.uint32), outs[6].view(np.uint32))
    assert np.array_equal(outs[45].view(np.uint32), outs[6].view(np.uint32))
    assert np.isfinite(outs[6]).all() and np.abs(outs[6]).max() > 0


def test_fused_qkv_writes_three_projections_of_different_heights(cache: Path) -> None:
    spec = REAL.by_name("gemv_mq4g256v2_qkv_r2")
    rng = np.random.default_rng(3)
    K, heights = 512, (9, 4, 7)
    fmt = by_qt(44)
    blobs = [fmt.encode(weights(rng, m, K)) for m in heights]
    x = rng.standard_normal(K).astype(np.float32)
    ys = [np.zeros(m, np.float32) for m in heights]
    grid = (sum(-(-m // 2) for m in heights), 1, 1)
    got = launch(spec, "gfx1100", cache, grid, [*blobs, x, *ys], [*heights, K], [4, 5, 6])
    for blob, y, m in zip(blobs, got, heights, strict=True):
        deq = fmt.decode(blob, K).astype(np.float64)
        scale = np.abs(deq) @ np.abs(x.astype(np.float64))
        assert y.shape == (m,)
        assert rel_err(y, deq @ x.astype(np.float64), scale) <= GEMV_TOL


GEMMS = [("gemm_mq4g256v2_wmma_gfx11", "gfx1100"), ("gemm_hfq4g256_wmma_gfx11_bt4", "gfx1151"),
         ("gemm_mq4g256v2_wmma_gfx11_residual", "gfx1100"),
         ("gemm_mq4g256v2_wmma_gfx12", "gfx1201"), ("gemm_mq4c_wmma_gfx12_residual", "gfx1200")]


@pytest.mark.parametrize(("name", "arch"), GEMMS)
def test_gemm_matches_the_f16_weight_oracle(name: str, arch: str, cache: Path) -> None:
    spec = REAL.by_name(name)
    rng = np.random.default_rng(11)
    M, K, N = 20, 512, 21  # a ragged row tile and a ragged token tile
    fmt = by_qt(spec.qt)
    blob = fmt.encode(weights(rng, M, K))
    X = rng.standard_normal((N, K)).astype(np.float16)
    Y0 = rng.standard_normal((N, M)).astype(np.float32) if spec.residual else \
        np.zeros((N, M), np.float32)
    BT = spec.batch_tile
    grid = (-(-M // 16), -(-N // (16 * BT)), 1)
    (Y,) = launch(spec, arch, cache, grid, [blob, X, Y0.copy()], [M, K, N], [2])
    # The WMMA takes f16 weights: the oracle rounds the decoded weights to f16 too.
    deq16 = fmt.decode(blob, K).astype(np.float16).astype(np.float64)
    Xd = X.astype(np.float64)
    ref = Xd @ deq16.T + Y0
    scale = np.abs(Xd) @ np.abs(deq16.T) + np.abs(Y0)
    # f32 accumulation over K=512 plus a rare double-rounding ulp of one f16 weight.
    assert rel_err(Y, ref, scale) <= 1e-4
