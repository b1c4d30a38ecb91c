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


@pytest.mark.parametrize("arch", ["gfx1010", "gfx1030"])
def test_gfx10_scratch_through_the_private_segment_buffer(build: Callable[..., bytes],
                                                          arch: str) -> None:
    from hqval.emu import Machine

    m = Machine(arch)
    mod = m.load(build("private", arch))
    idx = np.arange(32, dtype=np.int32) * 3 + 1
    pi, po = m.alloc(128), m.alloc(128)
    m.write(pi, idx)
    m.launch(mod, "priv", (1, 1, 1), (32, 1, 1), [pi, po])
    t = np.arange(32)
    arr = (np.arange(40)[None, :] * t[:, None]).astype(np.float32)
    arr[t, idx % 40] += 1
    np.testing.assert_array_equal(m.read(po, 128).view(np.float32), arr[t, (idx * 7) % 40])


def test_lds_two_address_forms_and_returning_atomics() -> None:
    from tests.emu.instr import execute, state

    st = state(nwaves=2)
    st.lds_size = 1024
    st.lds = np.zeros(2 * 1024, np.uint8)
    st.lds_base = np.array([0, 1024], np.int64)  # two workgroups, one wave each
    lane = np.arange(32, dtype=np.uint32)
    st.V[0] = lane * 4  # byte address
    st.V[1] = lane + 100
    st.V[2] = lane + 200
    # offset0:0, offset1:32 in dwords: stores to a[lane] and a[lane + 32]
    execute("ds_store_2addr_b32 v0, v1, v2 offset1:32", st, words=[0x2000])
    execute("ds_load_2addr_b32 v[4:5], v0 offset1:32", st, words=[0x2000])
    assert st.V[4, 0].tolist() == (lane + 100).tolist()
    assert st.V[5, 1].tolist() == (lane + 200).tolist()
    words = st.lds.view(np.uint32)
    assert words[32] == 200 and words[256 + 31] == 131  # each workgroup its own LDS
    st.V[6] = 0  # every lane adds 1 to the same dword: returns 0..31 in lane order
    st.V[7] = 1
    execute("ds_add_rtn_u32 v8, v6, v7", st, words=[0])
    assert st.V[8, 0].tolist() == list(range(100, 132))  # old value a[0] = 100 first
    assert words[0] == 132 and words[256] == 132


def test_lds_access_past_the_workgroup_allocation_is_out_of_bounds() -> None:
    from tests.emu.instr import execute, state

    st = state()
    st.lds_size = 64
    st.lds = np.zeros(64, np.uint8)
    st.V[0] = np.arange(32, dtype=np.uint32) * 4  # lanes 16+ are past 64 bytes
    with pytest.raises(OutOfBounds, match="LDS"):
        execute("ds_load_b32 v1, v0", st, words=[0])


@pytest.mark.parametrize("arch", ["gfx1030", "gfx1100", "gfx1201"])
def test_buffer_resource_bounds_check_reads_zero_and_drops_stores(
        build: Callable[..., bytes], arch: str) -> None:
    from hqval.emu import Machine

    m = Machine(arch)
    mod = m.load(build("buffer", arch))
    a = np.arange(1, 33, dtype=np.float32)
    pa, po, ps = m.alloc(128), m.alloc(128), m.alloc(128)
    m.write(pa, a)
    m.write(po, np.full(32, -1, np.float32))
    m.launch(mod, "bufk", (1, 1, 1), (32, 1, 1), [pa, po, ps, 20])  # num_records = 80 B
    got = m.read(po, 128).view(np.float32)
    np.testing.assert_array_equal(got[:20], a[:20] * 2)
    np.testing.assert_array_equal(got[20:], -1)  # stores past num_records dropped
    seen = m.read(ps, 128).view(np.float32)
    np.testing.assert_array_equal(seen, np.where(np.arange(32) < 20, a, 0))  # loads read 0


def test_a_window_limits_kernel_accesses_to_a_guarded_argument() -> None:
    """During a guarded launch only the data between an argument's canaries is reachable;
    host copies (the canaries themselves) are not limited, and the window ends with the
    launch."""
    mem = Memory()
    whole = mem.alloc(4096 + 64 + 4096)
    data = whole + 4096
    with mem.windows([(data, 64)]):
        mem.check(np.array([data - BASE, data - BASE + 60]), 4, what)
        with pytest.raises(OutOfBounds) as exc:
            mem.check(np.array([data - BASE - 1024]), 4, what)  # 1 KiB below: a canary
        assert exc.value.address == data - 1024
        with pytest.raises(OutOfBounds):
            mem.check(np.array([data - BASE + 64]), 4, what)  # just past the end
        mem.data[mem.region(whole, 16)] = 7  # a host copy into the canary is fine
        scratch = mem.alloc(32)  # an allocation made during the launch is whole
        mem.check(np.array([scratch - BASE]), 32, what)
    mem.check(np.array([whole - BASE]), 4, what)  # after the launch: whole again


def test_the_bounds_index_follows_every_change_between_accesses() -> None:
    """The index the accesses are checked against is rebuilt after each change (alloc,
    free, owner, window), never left as the last access saw it: each change is followed
    by an access whose verdict it decides."""
    mem = Memory()
    a = mem.alloc(64)
    mem.check(np.array([a - BASE]), 4, what)  # the index now holds a
    b = mem.alloc(64)
    mem.check(np.array([b - BASE + 60]), 4, what)  # a new allocation is reachable
    mem.free(b)
    with pytest.raises(OutOfBounds) as exc:
        mem.check(np.array([b - BASE + 60]), 4, what)  # a freed one is not
    assert exc.value.address == b + 60
    c = mem.alloc(32)  # the freed space is reused, to a shorter end
    assert c == b
    with pytest.raises(OutOfBounds):
        mem.check(np.array([c - BASE + 32]), 4, what)
    mem.set_owner(a, 1)
    mem.check(np.array([a - BASE]), 4, what, np.array([1]))
    with pytest.raises(OutOfBounds):
        mem.check(np.array([a - BASE]), 4, what, np.array([0]))  # another launch's
    with mem.windows([(c + 8, 8)]):
        with pytest.raises(OutOfBounds):
            mem.check(np.array([c - BASE]), 4, what)  # outside the window
        mem.check(np.array([c - BASE + 8]), 8, what)
    mem.check(np.array([c - BASE]), 4, what)  # the window ended with the block
    with pytest.raises(EmuError):
        mem.region(c + 16, 32)  # past c's end, in the guard
