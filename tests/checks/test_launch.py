"""Launch guards with a real kernel on the emulator: sentinel bytes around every output,
the unwritten-NaN pattern, and NaN/Inf before any metric."""

from __future__ import annotations

import numpy as np
import pytest

from hqval.backends.emu import EmuBackend
from hqval.checks.launch import (
    SENTINEL,
    SENTINEL_BYTES,
    UNWRITTEN_F32,
    GuardViolation,
    Output,
    decode,
    launch_guarded,
    non_finite,
    qkv_split,
    sentinel_damage,
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


def test_sentinel_and_nan_helpers() -> None:
    assert sentinel_damage(SENTINEL, SENTINEL.copy()) is None
    hit = SENTINEL.copy()
    hit[7] ^= 1
    assert sentinel_damage(SENTINEL, hit) == "1 sentinel byte(s) changed, first at byte 7"
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
    with pytest.raises(GuardViolation, match=r"write outside output 0 \(after it\)"):
        launch_guarded(backend, program, (M, 1, 1), (32, 1, 1),
                       [blob, x, Output.unwritten((M - 1,)), M, K])
    assert SENTINEL_BYTES >= 4 * 32


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
