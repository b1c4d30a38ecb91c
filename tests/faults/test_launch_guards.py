"""Fault class: a kernel whose outputs are right but which writes where it must not.  The
check cells fail (exit 1) and the rows name the buffer, the offset and the address: on the
emulator, and on an NVIDIA GPU through the CUDA backend (the ``gpu`` cases)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hqval.backends.base import Buffer
from hqval.checks.launch import GUARD_BYTES, GuardViolation, Output, decode, launch_guarded
from hqval.cli import main
from hqval.formats import by_qt
from hqval.manifest import load_manifest

STRAY = Path(__file__).resolve().parents[1] / "checks" / "stray_writes" / "kernels.yaml"
STRAY_MANIFEST = load_manifest(STRAY)


def test_stray_write_kernels_fail_hqval_check(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    code = main(["check", "--arch", "gfx1100", "--backend", "emu", "--workers", "0",
                 "--manifest", str(STRAY), "--check", "reference_parity",
                 "--json", str(out), "--cache-dir", str(tmp_path / "cache")])
    capsys.readouterr()
    assert code == 1
    rows = {r["kernel"]: r for r in json.loads(out.read_text())}
    assert set(rows) == {"gemv_writes_x_r1", "gemv_writes_below_y_r1"}
    assert all(r["status"] == "fail" for r in rows.values())
    assert "write into const input x" in rows["gemv_writes_x_r1"]["message"]
    assert "1024 B below y" in rows["gemv_writes_below_y_r1"]["message"]
    assert " at 0x" in rows["gemv_writes_below_y_r1"]["message"]


# ---- the same faults on real hardware: the CUDA backend's read-back --------------------
# A GPU's stores do not fault within an allocation, so these are caught only by reading
# every allocation back after the launch: the canaries, and the const inputs byte for byte.
# Skipped with the reason where no NVIDIA GPU runs; an error where HQVAL_BACKEND=cuda.

M, K = 5, 512


def _gemv_inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    blob = by_qt(6).encode(rng.standard_normal((M, K)).astype(np.float32))
    return blob, rng.standard_normal(K).astype(np.float32)


def _recording(backend: Any, monkeypatch: pytest.MonkeyPatch) -> list[Buffer]:
    """The allocations ``launch_guarded`` makes, in argument order (W, x, y)."""
    made: list[Buffer] = []
    alloc = backend.alloc

    def recorded(nbytes: int) -> Buffer:
        buf: Buffer = alloc(nbytes)
        made.append(buf)
        return buf

    monkeypatch.setattr(backend, "alloc", recorded)
    return made


@pytest.mark.gpu
def test_a_clean_kernel_passes_the_guards_on_the_gpu(cuda_backend: Any) -> None:
    spec = load_manifest(None).by_name("gemv_hfq4g256_r1")
    blob, x = _gemv_inputs()
    out = decode(cuda_backend, cuda_backend.load(spec), spec, blob, x, None)
    ref = by_qt(6).decode(blob, K).astype(np.float64) @ x
    assert np.max(np.abs(out.values - ref)) < 1e-5 * np.max(np.abs(ref))


@pytest.mark.gpu
@pytest.mark.parametrize(("kernel", "arg", "offset", "message"), [
    # x[K-1] = 0.5 after the last block used x: byte 4 (K-1) of x's data
    ("gemv_writes_x_r1", 1, GUARD_BYTES + 4 * (K - 1),
     rf"^write into const input x \(byte {4 * (K - 1)} of {4 * K} at 0x(?P<a>[0-9a-f]+)\): "
     r"[1-4] byte\(s\) changed$"),
    # y[-256] = 0.5: the 4 bytes 1024 below y, inside y's front canary
    ("gemv_writes_below_y_r1", 2, GUARD_BYTES - 1024,
     r"^write outside y \(1024 B below it at 0x(?P<a>[0-9a-f]+)\): 4 canary byte\(s\) "
     r"changed$"),
])
def test_stray_writes_fail_on_the_gpu_with_the_address_named(
        cuda_backend: Any, monkeypatch: pytest.MonkeyPatch, kernel: str, arg: int,
        offset: int, message: str) -> None:
    spec = STRAY_MANIFEST.by_name(kernel)
    blob, x = _gemv_inputs()
    program = cuda_backend.load(spec)
    made = _recording(cuda_backend, monkeypatch)
    with pytest.raises(GuardViolation) as info:
        decode(cuda_backend, program, spec, blob, x, None)
    found = re.match(message, str(info.value))
    assert found, str(info.value)
    # the address named is the very byte the kernel wrote, on the device
    assert int(found["a"], 16) == int(made[arg].handle) + offset


@pytest.mark.gpu
def test_a_write_past_the_output_fails_on_the_gpu(cuda_backend: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_manifest(None).by_name("gemv_hfq4g256_r1")
    blob, x = _gemv_inputs()
    program = cuda_backend.load(spec)
    made = _recording(cuda_backend, monkeypatch)
    # told M rows, given M-1: the last row's store lands just past y's end
    with pytest.raises(GuardViolation, match=r"^write outside y \(0 B past its end at 0x"
                                             r"(?P<a>[0-9a-f]+)\): 4 canary") as info:
        launch_guarded(cuda_backend, program, (M, 1, 1), (32, 1, 1),
                       [blob, x, Output.unwritten((M - 1,)), M, K], ["W", "x", "y", "M", "K"])
    addr = int(re.search(r"at 0x([0-9a-f]+)", str(info.value))[1], 16)  # type: ignore[index]
    assert addr == int(made[2].handle) + GUARD_BYTES + 4 * (M - 1)


@pytest.mark.gpu
def test_an_unwritten_output_fails_on_the_gpu(cuda_backend: Any) -> None:
    spec = load_manifest(None).by_name("gemv_hfq4g256_r1")
    blob, x = _gemv_inputs()
    with pytest.raises(GuardViolation, match=r"first at \[4\]: unwritten \(NaN pattern\)"):
        launch_guarded(cuda_backend, cuda_backend.load(spec), (M - 1, 1, 1), (32, 1, 1),
                       [blob, x, Output.unwritten((M,)), M, K], ["W", "x", "y", "M", "K"])


@pytest.mark.gpu
def test_stray_write_kernels_fail_hqval_check_on_the_gpu(
        cuda_backend: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The user's path: ``hqval check --backend cuda``; the stray kernels' cells fail (exit 1)
    naming the address, and a clean kernel's cell passes (exit 0) in the same backend."""
    common = ["check", "--arch", cuda_backend.arch, "--backend", "cuda", "--workers", "0",
              "--check", "reference_parity", "--cache-dir", str(tmp_path / "cache")]
    out = tmp_path / "stray.json"
    code = main([*common, "--manifest", str(STRAY), "--json", str(out)])
    capsys.readouterr()
    assert code == 1
    rows = {r["kernel"]: r for r in json.loads(out.read_text())}
    assert {k: r["status"] for k, r in rows.items()} == {
        "gemv_writes_x_r1": "fail", "gemv_writes_below_y_r1": "fail"}
    assert all(r["backend"] == "cuda" for r in rows.values())
    assert re.search(r"write into const input x \(byte \d+ of \d+ at 0x[0-9a-f]+\)",
                     rows["gemv_writes_x_r1"]["message"])
    assert re.search(r"write outside y \(1024 B below it at 0x[0-9a-f]+\)",
                     rows["gemv_writes_below_y_r1"]["message"])
    clean = tmp_path / "clean.json"
    code = main([*common, "-k", "gemv_hfq4g256_r1", "--json", str(clean)])
    capsys.readouterr()
    assert code == 0
    assert [(r["kernel"], r["status"]) for r in json.loads(clean.read_text())] == [
        ("gemv_hfq4g256_r1", "pass")]
