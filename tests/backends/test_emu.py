"""The emu backend: real code objects from the toolchain on the RDNA wave interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import hqval.backends as registry
from hqval.backends.base import BackendUnavailable
from hqval.backends.emu import EmuBackend
from hqval.formats import by_qt
from hqval.manifest import load_manifest

MANIFEST = load_manifest(None)


def test_copy_round_trip_and_views() -> None:
    b = EmuBackend("gfx1100")
    buf = b.alloc(64)
    data = np.arange(16, dtype=np.uint32)
    b.copy_in(buf, data)
    assert np.array_equal(b.copy_out(buf).view(np.uint32), data)
    v = b.view(buf, 16, 16)
    assert np.array_equal(b.copy_out(buf, 16, 16).view(np.uint32), data[4:8])
    assert v.nbytes == 16 and int(v.handle) == int(buf.handle) + 16
    with pytest.raises(ValueError, match="overruns"):
        b.copy_in(buf, np.zeros(17, np.uint32))
    with pytest.raises(NotImplementedError, match="need device events"):
        b.record_event()
    b.free(buf)


@pytest.mark.parametrize("arch", ["gfx1010", "gfx1030", "gfx1100", "gfx1151", "gfx1201"])
def test_gemv_runs_and_reports_counts(arch: str) -> None:
    spec = MANIFEST.by_name("gemv_mq4g256v2_r1")
    b = EmuBackend(arch)
    program = b.load(spec)
    M, K = 3, 512
    rng = np.random.default_rng(0)
    w = rng.standard_normal((M, K)).astype(np.float32)
    fmt = by_qt(44)
    blob = fmt.encode(w)
    x = rng.standard_normal(K).astype(np.float32)
    bw, bx, by = b.alloc(blob.nbytes), b.alloc(x.nbytes), b.alloc(4 * M)
    b.copy_in(bw, blob)
    b.copy_in(bx, x)
    info = b.launch(program, (M, 1, 1), (32, 1, 1), [bw, bx, by, M, K])
    y = b.copy_out(by).view(np.float32)
    ref = fmt.decode(blob, K).astype(np.float64) @ x.astype(np.float64)
    assert np.max(np.abs(y - ref)) <= 1e-5 * np.max(np.abs(ref))
    assert sum(info.counts.values()) > 0


def test_unknown_or_foreign_arch_is_unavailable() -> None:
    with pytest.raises(BackendUnavailable, match="not an RDNA target"):
        EmuBackend("sm_90")
    with pytest.raises(BackendUnavailable, match="cannot emulate gfx9999"):
        EmuBackend("gfx9999")


def test_auto_without_rdna_hardware_picks_emu_and_says_why() -> None:
    backend = registry.get("auto", "gfx1201")
    if backend.name == "hip":
        pytest.skip("a gfx1201 HIP device is present: auto correctly picked hardware")
    assert backend.name == "emu"
    assert backend.selection.startswith("auto: emu (") and "hip" in backend.selection


def test_by_name_records_the_request() -> None:
    assert registry.get("emu", "gfx1030").selection == "emu: requested by name"
