"""Launch guards with a real kernel on the emulator: sentinel bytes around every output,
the unwritten-NaN pattern, and NaN/Inf before any metric."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hqval.backends.emu import EmuBackend
from hqval.checks.launch import (
    CANARY,
    GUARD_BYTES,
    UNWRITTEN_F32,
    GuardViolation,
    Output,
    decode,
    launch_guarded,
    non_finite,
    qkv_split,
)
from hqval.formats import by_qt
from hqval.manifest import load_manifest

MANIFEST = load_manifest(None)
M, K = 5, 512


@pytest.fixture(scope="module")
def backend() -> EmuBackend:
    return EmuBackend("gfx1100")


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    blob = by_qt(6).encode(rng.standard_normal((M, K)).astype(np.float32))
    return blob, rng.standard_normal(K).astype(np.float32)


def test_nan_helpers() -> None:
    assert CANARY.size == GUARD_BYTES
    y = Output.unwritten((3,)).init
    assert y.view(np.uint32)[0] == UNWRITTEN_F32
    assert "unwritten (NaN pattern)" in str(non_finite(y))
    assert "inf" in str(non_finite(np.array([0.0, np.inf], np.float32)))
    assert non_finite(np.zeros(2, np.float32)) is None
    assert qkv_split(7) == (3, 2, 2)
    with pytest.raises(ValueError, match="at least 3 rows"):
        qkv_split(2)


def test_good_launch_passes_guards(backend: EmuBackend) -> None:
    spec = MANIFEST.by_name("gemv_hfq4g256_r1")
    blob, x = _inputs()
    out = decode(backend, backend.load(spec), spec, blob, x, None)
    ref = by_qt(6).decode(blob, K).astype(np.float64) @ x
    assert np.max(np.abs(out.values - ref)) < 1e-5 * np.max(np.abs(ref))
    assert out.counts


def test_write_past_the_output_hits_the_sentinel(backend: EmuBackend) -> None:
    # The kernel is told M rows but the output holds M-1: its last store lands in the
    # sentinel after the output, which must fail the launch.
    spec = MANIFEST.by_name("gemv_hfq4g256_r1")
    blob, x = _inputs()
    program = backend.load(spec)
    # the emulator faults on the store into the canary and names the argument
    with pytest.raises(GuardViolation, match=r"memory fault at 0x[0-9a-f]+, 0 B past the end of y"):
        launch_guarded(backend, program, (M, 1, 1), (32, 1, 1),
                       [blob, x, Output.unwritten((M - 1,)), M, K], ["W", "x", "y", "M", "K"])
    assert GUARD_BYTES >= 16 * 32


def test_output_never_written_is_caught_before_any_metric(backend: EmuBackend) -> None:
    spec = MANIFEST.by_name("gemv_hfq4g256_r1")
    blob, x = _inputs()
    program = backend.load(spec)
    # grid covers M-1 rows: row M-1 is never stored and keeps the NaN pattern.
    with pytest.raises(GuardViolation, match=r"first at \[4\]: unwritten"):
        launch_guarded(backend, program, (M - 1, 1, 1), (32, 1, 1),
                       [blob, x, Output.unwritten((M,)), M, K])


def test_a_launch_needs_an_output(backend: EmuBackend) -> None:
    spec = MANIFEST.by_name("gemv_hfq4g256_r1")
    with pytest.raises(ValueError, match="at least one Output"):
        launch_guarded(backend, backend.load(spec), (1, 1, 1), (32, 1, 1), [1, 2])


# ---- stray writes the old 256 B output sentinels missed ----------------------------------

STRAY = load_manifest(Path(__file__).parent / "stray_writes" / "kernels.yaml")


@pytest.mark.parametrize(("kernel", "message"), [
    ("gemv_writes_x_r1",
     r"write into const input x \(byte 2044 of 2048 at 0x[0-9a-f]+\): \d byte\(s\) changed"),
    ("gemv_writes_below_y_r1", r"memory fault at 0x[0-9a-f]+, 1024 B below y: .*global_store"),
])
def test_stray_writes_fail_with_the_address_named(backend: EmuBackend, kernel: str,
                                                  message: str) -> None:
    """Real HIP kernels whose outputs are exactly right: one writes its const input x after
    using it, one writes 1 KiB below y.  Both used to pass (the writes landed in another
    live allocation beyond the 256 B sentinel)."""
    spec = STRAY.by_name(kernel)
    blob, x = _inputs()
    with pytest.raises(GuardViolation, match=message) as info:
        decode(backend, backend.load(spec), spec, blob, x, None)
    # the named address is the byte the kernel wrote: inside the allocation's canary or data
    addr = int(re.search(r"at 0x([0-9a-f]+)", str(info.value)).group(1), 16)  # type: ignore[union-attr]
    assert addr % 4 == 0


def test_stray_writes_fail_their_check_cells(backend: EmuBackend) -> None:
    from hqval.checks.cell import CheckContext, run_cell
    from hqval.matrix import resolve_arch
    from hqval.result import Status

    ctx = CheckContext(backend=backend, arch=resolve_arch("gfx1100"), manifest=STRAY, seed=0)
    for kernel in ("gemv_writes_x_r1", "gemv_writes_below_y_r1"):
        row = run_cell(ctx, "reference_parity", STRAY.by_name(kernel))
        assert row.status is Status.FAIL, row
        assert row.message.startswith("guard: ") and " at 0x" in row.message


def test_canaries_and_input_checksums_after_the_launch() -> None:
    """What HIP and CUDA rely on (their stores do not fault): the read-back of every
    allocation names a changed canary or input byte, its offset and its address."""
    from hqval.backends.base import Buffer
    from hqval.checks.launch import _damage, _Guarded

    data = np.arange(64, dtype=np.uint8)
    whole = Buffer(nbytes=64 + 2 * GUARD_BYTES, handle=0x1000_0000)
    clean = np.concatenate([CANARY, data, CANARY])
    x = _Guarded("x", whole, data, None)
    y = _Guarded("y", whole, data, Output(np.zeros(16, np.float32)))
    assert _damage(x, clean) == [] and _damage(y, clean) == []
    below = clean.copy()
    below[GUARD_BYTES - 1024] ^= 0xFF
    assert _damage(y, below) == [
        f"write outside y (1024 B below it at 0x{0x1000_0000 + GUARD_BYTES - 1024:x}): "
        "1 canary byte(s) changed"]
    past = clean.copy()
    past[GUARD_BYTES + 64 + 8] ^= 0xFF
    assert "write outside y (8 B past its end" in _damage(y, past)[0]
    wrote_x = clean.copy()
    wrote_x[GUARD_BYTES + 5] ^= 0xFF
    assert _damage(x, wrote_x) == [
        f"write into const input x (byte 5 of 64 at 0x{0x1000_0000 + GUARD_BYTES + 5:x}): "
        "1 byte(s) changed"]
    assert _damage(y, wrote_x) == []  # an output may change

