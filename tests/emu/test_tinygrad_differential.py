"""Opt-in differential test: the suite's GEMV-family kernels (plain, residual, fused QKV)
on hqval's interpreter and on tinygrad's independently written RDNA emulator must give
bit-identical outputs, on gfx1100 and gfx1201.

Set HQVAL_TINYGRAD_CHECKOUT to a tinygrad source checkout (its test/mockgpu/amd/emu.py is
not in the wheel); the other emulator runs in its own process (tests/emu/tinygrad_driver.py)
with that checkout's tinygrad.  Nothing of it is copied into this project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hqval.emu import Machine

CHECKOUT = os.environ.get("HQVAL_TINYGRAD_CHECKOUT", "")
pytestmark = pytest.mark.skipif(
    not CHECKOUT or not (Path(CHECKOUT) / "test" / "mockgpu" / "amd" / "emu.py").is_file(),
    reason="opt-in: set HQVAL_TINYGRAD_CHECKOUT to a tinygrad checkout "
           "(with test/mockgpu/amd/emu.py)")

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ["gemv_hfq4g256_r1", "gemv_mq4g256v2_r1", "gemv_mq4c_r1", "gemv_mq4g256v2_r8",
           "gemv_hfq4g256_residual_r1", "gemv_mq4g256v2_residual_r2", "gemv_mq4c_residual_r1",
           "gemv_hfq4g256_qkv_r1", "gemv_mq4g256v2_qkv_r2", "gemv_mq4c_qkv_r1"]


def _tinygrad(tmp: Path, co: bytes, kernel: str, arch: str, grid: tuple[int, ...],
              block: tuple[int, ...], buffers: list[np.ndarray], args: list[dict[str, int]]
              ) -> list[np.ndarray]:
    (tmp / "k.co").write_bytes(co)
    paths = []
    for i, b in enumerate(buffers):
        np.save(tmp / f"b{i}.npy", b)
        paths.append(str(tmp / f"b{i}.npy"))
    spec = {"checkout": CHECKOUT, "code_object": str(tmp / "k.co"), "kernel": kernel,
            "arch": arch, "grid": list(grid), "block": list(block), "buffers": paths,
            "args": args, "out": str(tmp / "out.npz")}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([CHECKOUT, str(ROOT)]))
    if shutil.which("clang") is None and shutil.which("clang-19"):
        # tinygrad's CPU backend (which runs its emulator's kernels) calls plain `clang`
        bindir = tmp / "bin"
        bindir.mkdir(exist_ok=True)
        (bindir / "clang").symlink_to(str(shutil.which("clang-19")))
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("tinygrad_driver.py"))],
                          input=json.dumps(spec), capture_output=True, text=True, env=env,
                          timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = np.load(tmp / "out.npz")
    return [out[f"arr_{i}"] for i in range(len(buffers))]


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
@pytest.mark.parametrize("name", KERNELS)
def test_gemv_family_is_bit_identical_to_tinygrads_emulator(tmp_path: Path, arch: str,
                                                            name: str) -> None:
    from hqval.formats import by_qt
    from hqval.manifest import load_manifest
    from hqval.matrix import resolve_arch
    from hqval.toolchain import compile_kernel

    manifest = load_manifest(None)
    names = {s.name for s in manifest.kernels}
    if name not in names:
        pytest.skip(f"{name} is not in this manifest")
    spec = manifest.by_name(name)
    if not spec.applies_to(resolve_arch(arch)):
        pytest.skip(f"{name} does not apply to {arch}")
    res = compile_kernel(spec, arch)
    assert res.ok and res.code_object is not None, res.message
    co = res.code_object.read_bytes()
    fmt = by_qt(spec.qt)
    rng = np.random.default_rng(14)
    K = 512
    ms = (24,) if spec.kind == "gemv" else (24, 15, 11)
    bufs: list[np.ndarray] = []
    for m in ms:
        bufs.append(np.frombuffer(fmt.encode((rng.standard_normal((m, K)) * 0.02)
                                             .astype(np.float32)), np.uint8).copy())
    x = rng.standard_normal(K).astype(np.float32)
    bufs.append(x.view(np.uint8).copy())
    for m in ms:
        bufs.append(rng.standard_normal(m).astype(np.float32).view(np.uint8).copy())
    nw = len(ms)
    args = [{"buf": i} for i in range(nw)] + [{"buf": nw}] + \
        [{"buf": nw + 1 + i} for i in range(nw)] + [{"int": m} for m in ms] + [{"int": K}]
    r = spec.rows_per_block
    grid = (sum(-(-m // r) for m in ms), 1, 1)
    block = (32, 1, 1)
    # hqval
    machine = Machine(arch)
    module = machine.load(co)
    addrs = []
    for b in bufs:
        a = machine.alloc(b.nbytes)
        machine.write(a, b)
        addrs.append(a)
    machine.launch(module, spec.symbol, grid, block,
                   [addrs[a["buf"]] if "buf" in a else a["int"] for a in args])
    ours = [machine.read(a, b.nbytes) for a, b in zip(addrs, bufs, strict=True)]
    theirs = _tinygrad(tmp_path, co, spec.symbol, arch, grid, block, bufs, args)
    for i in range(nw + 1, 2 * nw + 1):  # the outputs
        assert np.array_equal(ours[i], theirs[i]), (
            f"{name} on {arch}: output {i - nw - 1} differs in "
            f"{np.count_nonzero(ours[i].view(np.uint32) != theirs[i].view(np.uint32))} values")
    assert not np.array_equal(ours[nw + 1], bufs[nw + 1])  # the kernel did write
