"""Machine: launches of the interpreter's own kernels (exec masking, LDS + barrier,
atomics, scalar ALU), the error contract (UnsupportedInstruction, OutOfBounds, bad
arguments) and the instruction counts."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from hqval.emu import EmuError, Machine, Module, OutOfBounds, UnsupportedInstruction
from tests.emu.conftest import ARCHES

Ops = Callable[[str], tuple[Machine, Module]]


def buf(m: Machine, a: np.ndarray) -> int:
    addr = m.alloc(a.nbytes)
    m.write(addr, a)
    return addr


def _loop(v: int) -> int:
    s = 0
    for j in range(v & 15):
        s = (s * 3 + (j ^ v)) & 0xFFFFFFFF
    return int(np.array(s, np.uint32).view(np.int32))


@pytest.mark.parametrize("arch", ARCHES)
def test_divergent_branches_and_loops_respect_exec(ops: Ops, arch: str) -> None:
    m, mod = ops(arch)
    a = np.array([5, -9, 0, -3, 12, -6, 1, 31] * 8, np.int32)  # 64 lanes: 2 waves
    out = m.alloc(8 * a.size)
    stats = m.launch(mod, "diverge", (2, 1, 1), (32, 1, 1), [buf(m, a), out])
    got = m.read(out, 8 * a.size).view(np.int32).reshape(-1, 2)
    want_r = np.where(a > 0, a * 3, np.where(a < -5, -a, 7))
    want_s = np.array([_loop(int(v)) for v in a])
    np.testing.assert_array_equal(got[:, 0], want_r)
    np.testing.assert_array_equal(got[:, 1], want_s)
    assert stats.waves == 2
    assert stats.counts["BRANCH"] > 0 and stats.counts["VALU"] > 0


@pytest.mark.parametrize("arch", ARCHES)
def test_scalar_alu_on_kernel_arguments(ops: Ops, arch: str) -> None:
    m, mod = ops(arch)
    out = m.alloc(32)
    for p, q in ((123457, -77), (-5, 3), (1 << 30, 9)):
        m.launch(mod, "scalar_ops", (1, 1, 1), (32, 1, 1), [out, p, q])
        got = m.read(out, 32).view(np.int32)
        w = p * q
        want = [w, (p & 0xFFFFFFFF) >> (q & 31), min(p, q), (p >> 3) & 0x1F, w >> 32,
                p ^ ((q << 4) & 0xFFFFFFFF), bin(p & 0xFFFFFFFF).count("1"),
                q - p if p > 1000 else q + p]
        want = [int(np.array(v & 0xFFFFFFFF, np.uint32).view(np.int32)) for v in want]
        assert got.tolist() == want, (p, q)


@pytest.mark.parametrize("arch", ARCHES)
def test_lds_reduction_across_four_waves_with_barriers(ops: Ops, arch: str) -> None:
    m, mod = ops(arch)
    rng = np.random.default_rng(3)
    # integers in f32: the tree sum is exact whatever the order
    a = rng.integers(-1000, 1000, 3 * 128).astype(np.float32)
    out = m.alloc(12)
    stats = m.launch(mod, "lds_reduce", (3, 1, 1), (128, 1, 1), [buf(m, a), out])
    got = m.read(out, 12).view(np.float32)
    np.testing.assert_array_equal(got, a.reshape(3, 128).sum(1))
    assert stats.waves == 12 and stats.counts["LDS"] > 0


@pytest.mark.parametrize("arch", ["gfx1010", "gfx1100", "gfx1201"])
def test_atomics_return_distinct_old_values(ops: Ops, arch: str) -> None:
    m, mod = ops(arch)
    ctr = buf(m, np.array([100], np.uint32))
    out = m.alloc(4 * 96)
    m.launch(mod, "atomic_ret", (3, 1, 1), (32, 1, 1), [ctr, out])
    got = m.read(out, 4 * 96).view(np.uint32)
    assert sorted(got.tolist()) == list(range(100, 196))
    assert int(m.read(ctr, 4).view(np.uint32)[0]) == 196


def test_out_of_bounds_read_names_address_instruction_kernel_and_arch(ops: Ops) -> None:
    m, mod = ops("gfx1100")
    a = buf(m, np.zeros(32, np.float32))
    out = m.alloc(128)
    m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a, out, 0])  # in bounds
    with pytest.raises(OutOfBounds) as exc:
        m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a, out, 1])  # lane 31 reads a[32]
    assert exc.value.address == a + 128
    msg = str(exc.value)
    assert "global_load" in msg and "copy_off" in msg and "gfx1100" in msg


def test_freed_buffer_is_out_of_bounds(ops: Ops) -> None:
    m, mod = ops("gfx1100")
    a = buf(m, np.zeros(32, np.float32))
    out = m.alloc(128)
    m.free(a)
    with pytest.raises(OutOfBounds):
        m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a, out, 0])


def test_wrong_argument_count_is_an_error(ops: Ops) -> None:
    m, mod = ops("gfx1100")
    with pytest.raises(EmuError, match="takes 3 arguments"):
        m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [0, 0])


def test_argument_that_does_not_fit_is_an_error(ops: Ops) -> None:
    m, mod = ops("gfx1100")
    a, out = m.alloc(128), m.alloc(128)
    with pytest.raises(EmuError, match="does not fit"):
        m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a, out, a])  # pointer as int off


def test_code_object_for_another_arch_is_refused(build: Callable[[str, str], bytes]) -> None:
    with pytest.raises(EmuError, match="gfx1201"):
        Machine("gfx1100").load(build("ops", "gfx1201"))


def test_unknown_arch_is_refused() -> None:
    with pytest.raises(EmuError, match="gfx9999"):
        Machine("gfx9999")


def test_unsupported_instruction_names_mnemonic_address_kernel_arch(
        build: Callable[[str, str], bytes]) -> None:
    m = Machine("gfx1100")
    mod = m.load(build("unsupported", "gfx1100"))
    out = m.alloc(128)
    with pytest.raises(UnsupportedInstruction) as exc:
        m.launch(mod, "reads_mode_register", (1, 1, 1), (32, 1, 1), [out])
    e = exc.value
    assert e.mnemonic == "s_getreg_b32" and e.kernel == "reads_mode_register"
    assert e.arch == "gfx1100"
    assert e.address > 0 and f"0x{e.address:x}" in str(e)
    # nothing was skipped: the store after the unmodelled read never ran
    assert not m.read(out, 128).any()
    assert mod.unsupported("reads_mode_register")[0][0] == "s_getreg_b32"


def test_real_kernels_have_no_unsupported_instructions(ops: Ops) -> None:
    _, mod = ops("gfx1201")
    assert {s: mod.unsupported(s) for s in mod.symbols() if mod.unsupported(s)} == {}


def test_per_wave_counts_sum_to_launch_counts(ops: Ops) -> None:
    m, mod = ops("gfx1100")
    a = np.arange(-40, 24, dtype=np.int32)
    out = m.alloc(8 * a.size)
    stats = m.launch(mod, "diverge", (2, 1, 1), (32, 1, 1), [buf(m, a), out])
    for cls, total in stats.counts.items():
        assert sum(stats.per_wave_counts[cls]) == total
    assert stats.wave_instructions == sum(stats.counts.values())
    # wave 1 (values -8..23) loops more than wave 0 (-40..-9 & 15 trips too) - both ran
    assert all(n > 10 for n in np.sum([stats.per_wave_counts[c] for c in stats.counts], 0))


# ---- wave64 (-mwavefrontsize64): exec/VCC are SGPR pairs, lanes 32-63 are live

@pytest.mark.parametrize("arch", ["gfx1030", "gfx1100", "gfx1201"])
def test_wave64_exec_masking_lds_and_cross_lane(build: Callable[..., bytes], arch: str) -> None:
    m = Machine(arch)
    mod = m.load(build("ops", arch, "-mwavefrontsize64"))
    a = np.array([5, -9, 0, -3, 12, -6, 1, 31] * 16, np.int32)  # 128 lanes: 2 waves of 64
    out = m.alloc(8 * a.size)
    stats = m.launch(mod, "diverge", (2, 1, 1), (64, 1, 1), [buf(m, a), out])
    got = m.read(out, 8 * a.size).view(np.int32).reshape(-1, 2)
    np.testing.assert_array_equal(got[:, 0], np.where(a > 0, a * 3, np.where(a < -5, -a, 7)))
    np.testing.assert_array_equal(got[:, 1], [_loop(int(v)) for v in a])
    assert stats.waves == 2
    v = (np.arange(64, dtype=np.int32) + 1) * 10
    out2 = m.alloc(4 * 5 * 64)
    m.launch(mod, "cross_lane", (1, 1, 1), (64, 1, 1), [buf(m, v), out2])
    got2 = m.read(out2, 4 * 5 * 64).view(np.int32).reshape(64, 5)
    lane = np.arange(64)
    np.testing.assert_array_equal(got2[:, 0], v[(lane & 32) + ((lane & 31) ^ 5)])
    np.testing.assert_array_equal(got2[:, 4], v[lane ^ 1])  # DPP quad perm, every row
    r = np.random.default_rng(3).integers(-1000, 1000, 2 * 128).astype(np.float32)
    out3 = m.alloc(8)
    stats = m.launch(mod, "lds_reduce", (2, 1, 1), (128, 1, 1), [buf(m, r), out3])
    np.testing.assert_array_equal(m.read(out3, 8).view(np.float32), r.reshape(2, 128).sum(1))
    assert stats.waves == 4


@pytest.mark.parametrize("arch", ["gfx1030", "gfx1100", "gfx1151", "gfx1201"])
def test_wave64_half_split_of_section_9(build: Callable[..., bytes], arch: str) -> None:
    """The offset-derived half select matches the oracle on wave64; the lane-id select
    (lane < 32) applies the wrong scale to half of every group and is caught."""
    from hqval.formats import by_qt

    m = Machine(arch)
    mod = m.load(build("wave64", arch, "-mwavefrontsize64"))
    M, K = 6, 1024
    rng = np.random.default_rng(9)
    fmt = by_qt(44)
    w = (rng.standard_normal((M, K)) * 0.02).astype(np.float32)
    w[:, 128:256] *= 8  # halves with different scales: a wrong select is visible
    blob = fmt.encode(w)
    deq = fmt.decode(blob, K).astype(np.float64)
    x = rng.standard_normal(K).astype(np.float32)
    ref = deq @ x
    scale = np.abs(deq) @ np.abs(x.astype(np.float64))
    pw, px = buf(m, blob), buf(m, x)
    errs = {}
    for sym in ("gemv_w64_offset_select", "gemv_w64_lane_select"):
        py = m.alloc(4 * M)
        m.launch(mod, sym, (M, 1, 1), (64, 1, 1), [pw, px, py, M, K])
        y = m.read(py, 4 * M).view(np.float32)
        errs[sym] = float(np.max(np.abs(y - ref) / scale))
    tol = (K / 64 + 64) * 2.0**-24  # per-lane fma chain, then a 64-term serial sum
    assert errs["gemv_w64_offset_select"] <= tol
    assert errs["gemv_w64_lane_select"] > 100 * tol


def test_trace_reports_executed_instructions_and_wave_counts(ops: Ops) -> None:
    m, mod = ops("gfx1100")
    a = np.array([5, -9] * 32, np.int32)
    out = m.alloc(8 * a.size)
    seen: list[tuple[int, str, int]] = []
    stats = m.launch(mod, "diverge", (2, 1, 1), (32, 1, 1), [buf(m, a), out],
                     trace=lambda addr, text, n: seen.append((addr, text, n)))
    assert sum(n for _, _, n in seen) == stats.wave_instructions
    assert seen[-1][1].startswith("s_endpgm") and seen[0][2] == 2


def test_launches_do_not_leak_memory(ops: Ops) -> None:
    m, mod = ops("gfx1100")
    a = buf(m, np.zeros(32, np.float32))
    out = m.alloc(128)
    m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a, out, 0])
    top = m.mem.top
    for _ in range(5):
        m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a, out, 0])
    assert m.mem.top == top and len(m.mem.starts) == 2


def test_step_budget_stops_runaway_launches(ops: Ops) -> None:
    m, mod = ops("gfx1100")
    a = np.arange(64, dtype=np.int32)
    out = m.alloc(8 * a.size)
    with pytest.raises(EmuError, match="ran 20 steps"):
        m.launch(mod, "diverge", (2, 1, 1), (32, 1, 1), [buf(m, a), out], max_steps=20)


@pytest.mark.parametrize("arch", ["gfx1010", "gfx1030", "gfx1100", "gfx1151", "gfx1201"])
def test_calls_to_device_functions_with_a_scratch_stack(build: Callable[..., bytes],
                                                        arch: str) -> None:
    m = Machine(arch)
    mod = m.load(build("call", arch))
    a = np.arange(32, dtype=np.float32) * 0.5
    out = m.alloc(128)
    stats = m.launch(mod, "caller", (1, 1, 1), (32, 1, 1), [buf(m, a), out])
    t = np.arange(32)
    want = (a * (t & 15) + 1) * 2 + (a * ((t + 3) & 15) + 2) * 2
    np.testing.assert_array_equal(m.read(out, 128).view(np.float32), want)
    assert stats.counts["BRANCH"] >= 4  # two calls, two returns


def test_an_identical_launch_is_replayed_with_the_memory_it_left(ops: Ops) -> None:
    """A launch equal in code object, kernel, grid, block, arguments and every live
    byte to an earlier one is answered from it: the same output bytes (written back into
    memory, so read-back and guards see them) and the same counts."""
    m, mod = ops("gfx1100")
    a = buf(m, np.arange(64, dtype=np.float32))
    out = buf(m, np.full(32, -1, np.float32))
    first = m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a, out, 3])
    assert m.replayed == 0
    np.testing.assert_array_equal(m.read(out, 128).view(np.float32), np.arange(3, 35))
    m.write(out, np.full(32, -1, np.float32))  # the same state as before the first launch
    again = m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a, out, 3])
    assert m.replayed == 1
    np.testing.assert_array_equal(m.read(out, 128).view(np.float32), np.arange(3, 35))
    assert again.counts == first.counts and again.per_wave_counts == first.per_wave_counts


@pytest.mark.parametrize("change", ["input byte", "output byte", "argument", "grid",
                                    "window", "new allocation", "freed allocation"])
def test_a_launch_that_differs_in_anything_runs(ops: Ops, change: str) -> None:
    m, mod = ops("gfx1100")
    a = buf(m, np.arange(128, dtype=np.float32))
    out = buf(m, np.full(64, -1, np.float32))
    spare = m.alloc(16)
    m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a, out, 3])
    m.write(out, np.full(64, -1, np.float32))
    args, grid = [a, out, 3], (1, 1, 1)
    if change == "input byte":
        m.write(a + 4 * 10, np.array([7.5], np.float32))  # out[7] = a[10]
    elif change == "output byte":
        m.write(out + 4 * 50, np.array([2.0], np.float32))  # never written by the kernel
    elif change == "argument":
        args = [a, out, 4]
    elif change == "grid":
        grid = (2, 1, 1)
    elif change == "new allocation":
        m.alloc(8)
    elif change == "freed allocation":
        m.free(spare)
    if change == "window":
        with m.mem.windows([(a, 256)]):
            m.launch(mod, "copy_off", grid, (32, 1, 1), args)
    else:
        m.launch(mod, "copy_off", grid, (32, 1, 1), args)
    assert m.replayed == 0, change
    got = m.read(out, 256).view(np.float32)
    if change == "input byte":
        assert got[7] == 7.5
    if change == "output byte":
        assert got[50] == 2.0


def test_failed_and_traced_launches_are_not_remembered(ops: Ops) -> None:
    m, mod = ops("gfx1100")
    a = buf(m, np.zeros(32, np.float32))
    out = m.alloc(128)
    for _ in range(2):
        with pytest.raises(OutOfBounds):
            m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a, out, 1])
    seen: list[str] = []
    for _ in range(2):
        m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a, out, 0],
                 trace=lambda addr, text, n: seen.append(text))
    assert m.replayed == 0
    assert len(seen) > 0 and len(seen) % 2 == 0


def test_relaxed_gc_restores_the_threshold_and_nests() -> None:
    import gc

    from hqval.emu.machine import _GC_THRESHOLD0, relaxed_gc

    before = gc.get_threshold()
    with relaxed_gc():
        assert gc.get_threshold()[0] == max(before[0], _GC_THRESHOLD0)
        with relaxed_gc():
            assert gc.get_threshold()[0] == max(before[0], _GC_THRESHOLD0)
        assert gc.get_threshold()[0] == max(before[0], _GC_THRESHOLD0)
    assert gc.get_threshold() == before
    with pytest.raises(ValueError), relaxed_gc():
        raise ValueError
    assert gc.get_threshold() == before


def test_translation_freezes_the_heap(ops: Ops) -> None:
    """After a kernel is translated every tracked object is in the permanent generation, so
    later collections (relaxed_gc's exit, gc.collect() from pytest, interpreter exit) do not
    walk the translations."""
    import gc

    gc.unfreeze()
    try:
        _m, mod = ops("gfx1100")
        assert gc.get_freeze_count() == 0
        mod.program(mod.symbols()[0])
        assert gc.get_freeze_count() > 0
        # the program's closures are frozen: no generation the collector walks holds them
        prog = mod.program(mod.symbols()[0])
        young = {id(o) for o in gc.get_objects()}
        assert not any(id(fn) in young for fn in prog.fns)
    finally:
        gc.unfreeze()  # back to the collector (the rest of the session freezes again)


def test_translations_are_shared_per_generation_not_per_arch() -> None:
    from hqval.codeobject import parse_text
    from hqval.emu.machine import _translate
    from hqval.emu.operands import Ctx

    def closure(arch: str, gen: int, text: str) -> object:
        cx = Ctx(arch=arch, kernel="t", gen=gen, index_of={0: 0})
        res = _translate(parse_text(text, 0, [0]), cx, 32)
        assert res is not None
        return res[0]

    text = "v_add_f32_e32 v1, v2, v3"
    assert closure("gfx1100", 11, text) is closure("gfx1151", 11, text)
    assert closure("gfx1010", 10, text) is closure("gfx1030", 10, text)
    assert closure("gfx1100", 11, text) is not closure("gfx1201", 12, text)
    # memory instructions name the kernel in their errors: never shared
    load = "global_load_b32 v1, v[2:3], off"
    assert closure("gfx1100", 11, load) is not closure("gfx1101", 11, load)


GENERATIONS = {10: ("gfx1010", "gfx1030"),
               11: ("gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151"),
               12: ("gfx1200", "gfx1201")}


_RANDOM_S = np.random.default_rng(7).integers(0, 2**32, (256, 1), dtype=np.uint64
                                             ).astype(np.uint32)
_RANDOM_V = np.random.default_rng(8).integers(0, 2**32, (8, 1, 32), dtype=np.uint64
                                             ).astype(np.uint32)


def _run_everywhere(text: str, arches: tuple[str, ...], gen: int) -> list[object]:
    """``text`` translated afresh (no sharing) with each arch's context and run on the
    same random state: what it left in every register, or the error it raised."""
    from hqval.codeobject import parse_text
    from hqval.emu import memory, scalar, vector
    from hqval.emu.errors import EmuError
    from hqval.emu.fparith import launch_fp
    from hqval.emu.operands import EXEC, Ctx, WaveState

    out: list[object] = []
    for arch in arches:
        st = WaveState(1, 8)
        st.S[:] = _RANDOM_S
        st.V[:] = _RANDOM_V
        st.S[EXEC] = 0xFFFFFFFF
        st.set_exec(slice(None))
        cx = Ctx(arch=arch, kernel="t", gen=gen, index_of={0: 0})
        ins = parse_text(text, 0, [0])
        try:
            res = (scalar.translate(ins, cx) or memory.translate(ins, cx)
                   or vector.translate(ins, cx, 32))
            if res is None:
                out.append("no semantics")
                continue
            with launch_fp():
                ret = res[0](st, slice(None))
            out.append((res[1], repr(ret), st.S.tobytes(), st.V.tobytes(), st.em.tobytes()))
        except (EmuError, ValueError, KeyError, IndexError) as exc:
            out.append((type(exc).__name__, str(exc).replace(arch, "ARCH")))
    return out


@pytest.mark.parametrize("gen", sorted(GENERATIONS))
def test_alu_semantics_do_not_depend_on_the_arch_within_a_generation(gen: int) -> None:
    """Every SALU/SOPK/VALU op of the ISA text (RDNA3's for gens 10 and 11, RDNA4's for 12),
    translated with each arch's context of the generation, leaves identical registers (or
    raises the same error): what makes sharing translations per generation sound."""
    import importlib
    import os

    try:
        tp = importlib.import_module("tests.emu.test_pcode_oracle")
    except pytest.skip.Exception:
        if os.environ.get("CI"):
            raise
        pytest.skip("needs the oracle extra (the ISA text lists the ops)")
    mod = tp.rdna4 if gen == 12 else tp.rdna3
    arches = GENERATIONS[gen]
    ran = 0
    for name, (fmt, text) in sorted(tp.table(mod).items()):
        made = tp._instruction(tp.Case(arch=arches[0], name=name, fmt=fmt, text=text))
        if made is None:
            continue
        results = _run_everywhere(made[0], arches, gen)
        assert all(r == results[0] for r in results), f"{made[0]!r} differs between {arches}"
        ran += isinstance(results[0], tuple) and len(results[0]) == 5
    assert ran > 300  # the ops really ran (not all refused)


# ---- launch_many: independent launches as one wave batch ---------------------------------

def _copy_off_setup(m: Machine, n: int) -> list[tuple[int, int]]:
    """n launches' (a, out) buffers of copy_off, a filled with distinct values."""
    out = []
    for k in range(n):
        a = buf(m, (np.arange(64, dtype=np.float32) + 100 * k))
        out.append((a, m.alloc(256)))
    return out


def test_launch_many_equals_launching_one_after_another(ops: Ops) -> None:
    m, mod = ops("gfx1100")
    bufs = _copy_off_setup(m, 4)
    grids = [(1, 1, 1), (2, 1, 1), (1, 1, 1), (2, 1, 1)]
    offs = [0, 0, 32, 0]
    seq = [m.launch(mod, "copy_off", g, (32, 1, 1), [a, o, off])
           for (a, o), g, off in zip(bufs, grids, offs, strict=True)]
    want = [m.read(o, 256).copy() for _, o in bufs]
    for _, o in bufs:
        m.write(o, np.zeros(64, np.float32))
    batch = m.launch_many(mod, "copy_off", [
        (g, (32, 1, 1), [a, o, off], [(a, 256), (o, 256)])
        for (a, o), g, off in zip(bufs, grids, offs, strict=True)])
    assert [m.read(o, 256).tobytes() for _, o in bufs] == [w.tobytes() for w in want]
    assert [s.counts for s in batch] == [s.counts for s in seq]
    assert [s.per_wave_counts for s in batch] == [s.per_wave_counts for s in seq]
    # an identical batch (same memory before it) is replayed, leaving the same memory
    for _, o in bufs:
        m.write(o, np.zeros(64, np.float32))
    before = m.replayed
    again = m.launch_many(mod, "copy_off", [
        (g, (32, 1, 1), [a, o, off], [(a, 256), (o, 256)])
        for (a, o), g, off in zip(bufs, grids, offs, strict=True)])
    assert m.replayed == before + 1 and [s.counts for s in again] == [s.counts for s in seq]
    assert [m.read(o, 256).tobytes() for _, o in bufs] == [w.tobytes() for w in want]


def test_a_stray_access_into_a_sibling_launch_faults(ops: Ops) -> None:
    """Launch 0 reads launch 1's buffer (an allocation that is live, so one launch alone
    would read it): in the batch that is an OutOfBounds naming the address, as it would be
    with the sibling absent; launch 1 reading its own buffer is fine."""
    m, mod = ops("gfx1100")
    (a0, o0), (a1, o1) = _copy_off_setup(m, 2)
    into_sibling = (a1 - a0) // 4
    m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a0, o0, into_sibling])  # alone: reads
    assert np.array_equal(m.read(o0, 128).view(np.float32), np.arange(32) + 100.0)
    with pytest.raises(OutOfBounds) as exc:
        m.launch_many(mod, "copy_off", [
            ((1, 1, 1), (32, 1, 1), [a0, o0, into_sibling], [(a0, 256), (o0, 256)]),
            ((1, 1, 1), (32, 1, 1), [a1, o1, 0], [(a1, 256), (o1, 256)])])
    assert exc.value.address == a1 and "global_load" in str(exc.value)
    # the sibling's kernarg segment is its own too: nothing leaks after the batch
    m.launch(mod, "copy_off", (1, 1, 1), (32, 1, 1), [a0, o0, into_sibling])
    # a buffer given to both launches is shared, not owned
    m.launch_many(mod, "copy_off", [
        ((1, 1, 1), (32, 1, 1), [a0, o0, 0], [(a0, 256), (o0, 256)]),
        ((1, 1, 1), (32, 1, 1), [a0, o1, 1], [(a0, 256), (o1, 256)])])
    assert np.array_equal(m.read(o1, 128).view(np.float32), np.arange(1, 33, dtype=np.float32))


def test_launch_many_needs_one_block_shape(ops: Ops) -> None:
    m, mod = ops("gfx1100")
    (a0, o0), (a1, o1) = _copy_off_setup(m, 2)
    with pytest.raises(EmuError, match="one block shape"):
        m.launch_many(mod, "copy_off", [((1, 1, 1), (32, 1, 1), [a0, o0, 0], []),
                                        ((1, 1, 1), (64, 1, 1), [a1, o1, 0], [])])


def test_identical_code_of_another_arch_is_replayed_through_a_shared_store() -> None:
    """Machines sharing a replay store: gfx1201 replays gfx1200's launch of the same code
    (the suite's GEMV, whose objects differ only in the target) on the same bytes, naming
    gfx1200 as the arch it ran on; with stores of their own, with the executed audit's
    memory recorder on, or with other code (gfx1100's), every launch runs."""
    from hqval.emu.replay import ReplayStore
    from hqval.formats import by_qt
    from hqval.manifest import load_manifest
    from hqval.toolchain import compile_kernel

    spec = load_manifest(None).by_name("gemv_hfq4g256_r1")
    rng = np.random.default_rng(3)
    w = by_qt(6).encode(rng.standard_normal((2, 256)).astype(np.float32))
    x = rng.standard_normal(256).astype(np.float32)

    modules: dict[int, Module] = {}

    def launch(m: Machine) -> tuple[np.ndarray, object]:
        res = compile_kernel(spec, m.arch)
        assert res.ok and res.code_object is not None, res.message
        mod = modules[id(m)] = m.load(res.code_object.read_bytes())
        wa, xa = buf(m, w.reshape(-1)), buf(m, x)
        y = buf(m, np.full(2, -1, np.float32))
        stats = m.launch(mod, spec.symbol, (2, 1, 1), (32, 1, 1), [wa, xa, y, 2, 256])
        got = m.read(y, 8).view(np.float32).copy()
        for a in (y, xa, wa):
            m.free(a)
        return got, stats.counts

    store = ReplayStore()
    first, second = Machine("gfx1200", replay=store), Machine("gfx1201", replay=store)
    ran, counts = launch(first)
    again, again_counts = launch(second)
    assert (first.replayed, second.replayed) == (0, 1)
    assert first.ran_on == ["gfx1200"] and second.ran_on == ["gfx1200"]
    # the replayed launch's key is made from the decoded code: its kernel is never
    # translated (the launch that ran was)
    assert spec.symbol in modules[id(first)]._programs
    assert modules[id(second)]._programs == {}
    np.testing.assert_array_equal(again, ran)
    assert again_counts == counts and not np.array_equal(ran, [-1, -1])
    alone = Machine("gfx1201")
    assert np.array_equal(launch(alone)[0], ran)
    assert alone.replayed == 0 and alone.ran_on == ["gfx1201"]
    recorded = Machine("gfx1201", replay=store)
    seen: list[object] = []
    recorded.mem.recorder = lambda ins, wave, addr, ok: seen.append(ins)
    launch(recorded)
    assert recorded.replayed == 0 and recorded.ran_on == ["gfx1201"] and seen
    other = Machine("gfx1100", replay=store)
    launch(other)
    assert other.replayed == 0 and other.ran_on == ["gfx1100"]
    assert spec.symbol in modules[id(other)]._programs
