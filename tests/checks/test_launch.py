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



# ---- several independent launches as one batch (launch_guarded_many) ---------------------

def _tokens(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.standard_normal(K).astype(np.float32) for _ in range(n)]


def test_decode_many_is_one_batch_equal_to_one_launch_per_token(
        backend: EmuBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    from hqval.checks.launch import decode_many

    xs = _tokens(5)
    single: list[object] = []
    for name in ("gemv_hfq4g256_r1", "gemv_mq4g256v2_qkv_r1"):
        spec = MANIFEST.by_name(name)
        program = backend.load(spec)
        blob_s = by_qt(spec.qt).encode(np.random.default_rng(2).standard_normal(
            (M if spec.kind == "gemv" else 9, K)).astype(np.float32))
        seq = [decode(backend, program, spec, blob_s, x, None) for x in xs]
        monkeypatch.setattr(backend, "launch", lambda *a: single.append(a))  # not called
        batch = decode_many(backend, program, spec, blob_s, xs)
        monkeypatch.undo()
        assert not single  # the batch ran as one launch_many
        assert [o.raw.tobytes() for o in batch] == [o.raw.tobytes() for o in seq]
        assert [o.counts for o in batch] == [o.counts for o in seq]


@pytest.mark.parametrize("kernel", ["gemv_writes_x_r1", "gemv_writes_below_y_r1"])
def test_a_failing_batch_reports_exactly_what_sequential_launches_do(
        backend: EmuBackend, kernel: str) -> None:
    """A guard broken in a batch: the plans rerun one at a time, so the message (addresses
    included) is the first token's as a sequential run gives it."""
    from hqval.checks.launch import decode_many

    spec = STRAY.by_name(kernel)
    program = backend.load(spec)
    blob, _ = _inputs()
    xs = _tokens(3)
    with pytest.raises(GuardViolation) as seq:
        for x in xs:
            decode(backend, program, spec, blob, x, None)
    with pytest.raises(GuardViolation) as many:
        decode_many(backend, program, spec, blob, xs)
    assert str(many.value) == str(seq.value)


@pytest.mark.parametrize(("check", "kernel", "arch"), [
    ("prefill_parity", "gemm_mq4g256v2_wmma_gfx11_residual", "gfx1100"),
    ("fallback", "gemm_mq4g256v2_wmma_gfx11", "gfx1030"),
    ("reference_parity", "gemv_mq4g256v2_qkv_r1", "gfx1201"),
])
def test_check_rows_equal_the_sequential_numpy_path(
        check: str, kernel: str, arch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A check cell's row with the fast paths (batched launches, compiled FMA) equals the
    row of the plain path (one launch at a time, the numpy FMA) in everything: status,
    measured value, message and details.  Fresh backends, so no launch is replayed from the
    other path; the fast path is shown to have been taken."""
    import dataclasses

    from hqval.backends.base import Backend
    from hqval.checks.cell import CheckContext, run_cell
    from hqval.emu import fastfma
    from hqval.emu.replay import SHARED_REPLAY
    from hqval.matrix import resolve_arch

    def row(fast: bool) -> dict[str, object]:
        SHARED_REPLAY.clear()  # the backends' shared replay store: nothing from the other path
        fastfma.reset()
        monkeypatch.setenv(fastfma.ENV, "auto" if fast else "numpy")
        be = EmuBackend(arch)
        batches: list[int] = []
        if fast:
            real = be.launch_many
            monkeypatch.setattr(be, "launch_many",
                                lambda p, launches: batches.append(len(launches))
                                or real(p, launches))
        else:
            monkeypatch.setattr(be, "launch_many",
                                lambda p, launches: Backend.launch_many(be, p, launches))
        ctx = CheckContext(backend=be, arch=resolve_arch(arch), manifest=MANIFEST, seed=0)
        r = run_cell(ctx, check, MANIFEST.by_name(kernel))
        assert fastfma.status()[0] == ("compiled" if fast else "numpy")
        if fast and check != "reference_parity":
            assert batches and max(batches) > 1  # the cell really batched
        d = dataclasses.asdict(r)
        return {k: d[k] for k in ("status", "measured", "tolerance", "message", "details")}

    try:
        fast, plain = row(True), row(False)
    finally:
        fastfma.reset()
    assert fast["status"].value == "pass"  # type: ignore[attr-defined]
    assert fast == plain
