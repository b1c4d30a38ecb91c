"""memory: allocations separated by guards, bounds checks, free."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from hqval.emu.errors import EmuError, OutOfBounds
from hqval.emu.memory import BASE, Memory


def what() -> tuple[str, str, str]:
    return ("global_load_b32 v0, v[0:1], off", "k", "gfx1100")


def test_allocations_do_not_touch_and_gaps_are_out_of_bounds() -> None:
    mem = Memory()
    a, b = mem.alloc(100), mem.alloc(64)
    assert b >= a + 100 + 64  # a guard gap between them
    mem.check(np.array([a - BASE, a - BASE + 96]), 4, what)
    with pytest.raises(OutOfBounds) as exc:
        mem.check(np.array([a - BASE, a - BASE + 97]), 4, what)
    assert exc.value.address == a + 97
    with pytest.raises(OutOfBounds):
        mem.check(np.array([b - BASE - 4]), 4, what)  # in the guard before b


def test_gather_scatter_round_trip_aligned_and_unaligned() -> None:
    mem = Memory()
    a = mem.alloc(64)
    off = np.array([a - BASE, a - BASE + 8])
    mem.scatter(off, 8, np.array([[1, 2], [3, 4]], np.uint32))
    assert mem.gather(off, 8).tolist() == [[1, 2], [3, 4]]
    mem.scatter(np.array([a - BASE + 1]), 2, np.array([[0xBEEF]], np.uint32))
    assert mem.gather(np.array([a - BASE + 1]), 2).tolist() == [[0xBEEF]]
    assert mem.data[a - BASE] == 1  # the byte before the 2-byte store is untouched


def test_growth_keeps_contents_and_free_revokes() -> None:
    mem = Memory()
    a = mem.alloc(16)
    mem.data[mem.region(a, 16)] = 7
    mem.alloc(1 << 20)
    assert (mem.data[mem.region(a, 16)] == 7).all()
    mem.free(a)
    with pytest.raises(EmuError):
        mem.region(a, 16)
    with pytest.raises(OutOfBounds):
        mem.check(np.array([a - BASE]), 4, what)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1151", "gfx1201"])
def test_scratch_private_segment_per_lane(build: Callable[..., bytes], arch: str) -> None:
    from hqval.emu import Machine

    m = Machine(arch)
    mod = m.load(build("private", arch))
    idx = np.arange(32, dtype=np.int32) * 3 + 1
    pi, po = m.alloc(128), m.alloc(128)
    m.write(pi, idx)
    m.launch(mod, "priv", (1, 1, 1), (32, 1, 1), [pi, po])
    got = m.read(po, 128).view(np.float32)
    t = np.arange(32)
    arr = (np.arange(40)[None, :] * t[:, None]).astype(np.float32)
    arr[t, idx % 40] += 1
    np.testing.assert_array_equal(got, arr[t, (idx * 7) % 40])


def test_gfx10_scratch_through_a_buffer_resource_fails_closed(build: Callable[..., bytes]
                                                              ) -> None:
    from hqval.emu import Machine, UnsupportedInstruction

    m = Machine("gfx1010")
    mod = m.load(build("private", "gfx1010"))
    assert any(u[0].startswith("buffer_") for u in mod.unsupported("priv"))
    pi, po = m.alloc(128), m.alloc(128)
    with pytest.raises(UnsupportedInstruction, match="buffer_store"):
        m.launch(mod, "priv", (1, 1, 1), (32, 1, 1), [pi, po])
