"""Memory: the flat global address space of separate allocations, SMEM, global/flat
loads, stores and atomics, and LDS (ds_*) including the cross-lane ds_bpermute/swizzle.

Every access is checked against the allocations (global) or the workgroup's LDS size;
an access outside raises OutOfBounds naming address, instruction, kernel and arch."""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from hqval.codeobject import Instruction
from hqval.emu.errors import EmuError, OutOfBounds, UnsupportedInstruction
from hqval.emu.operands import (
    NULL,
    Ctx,
    Operand,
    Sel,
    WaveState,
    parse_operand,
    swrite,
    vwrite,
    vwrite_regs,
)

Fn = Callable[[WaveState, Sel], Any]

BASE = 1 << 32  # heap addresses start above 4 GiB so 64-bit address math is exercised
# The shared (LDS) aperture of the flat address space: ``src_shared_base`` reads it, a
# local pointer cast to a generic one is (aperture | LDS offset), and a flat access whose
# address falls inside it reaches the wave's workgroup LDS (ISA "flat scratch / aperture").
SHARED_APERTURE = 1 << 48


def _in_shared(addr: np.ndarray, em: np.ndarray) -> np.ndarray:
    """Active lanes of a flat access whose address is in the shared aperture."""
    return np.asarray(em & ((addr >> 32) == (SHARED_APERTURE >> 32)), bool)
GUARD = 256


class Memory:
    """One host byte array holding every allocation, separated by unallocated guards."""

    def __init__(self) -> None:
        self.data = np.zeros(1 << 16, np.uint8)
        self.top = 0
        self.starts: list[int] = []
        self.ends: list[int] = []
        # The per-allocation bounds check's index (each allocation's accessible [lo, hi)
        # and owning launch, as lists for the one-allocation fast path and as arrays for
        # the per-lane path), rebuilt from starts/ends/windows/owners on first use after
        # a change (``_rebuild``): a launch allocates and frees many buffers between
        # accesses, and rebuilding on each change was quadratic in the allocations.
        # start offset -> (lo, hi): while a launch runs, the kernel may touch only [lo, hi)
        # of that allocation (a guarded argument's data, not its canaries); see ``windows``
        self._windows: dict[int, tuple[int, int]] = {}
        # start offset -> launch number: while a batch of launches runs (launch_many), an
        # allocation given to one launch may be touched only by that launch's waves, so a
        # stray access into a sibling's buffer faults as it would with the sibling absent
        self._owners: dict[int, int] = {}
        self._stale = True
        self._starts = np.zeros(0, np.int64)
        self._lo = self._starts
        self._hi = self._starts
        self._own = self._starts
        self._lo_list: list[int] = []
        self._hi_list: list[int] = []
        self._own_list: list[int] = []
        # Called for every executed global/flat/buffer/scalar load when set (the executed
        # audit's access recorder): (instruction, wave selection, int64 byte addresses
        # [waves, lanes] -- [waves, 1] for a scalar load --, active-lane mask or None).
        self.recorder: Callable[[Instruction, Any, np.ndarray, np.ndarray | None],
                                None] | None = None

    def _index(self) -> None:
        """The allocations, windows or owners changed: the index is rebuilt when next
        needed."""
        self._stale = True

    def _rebuild(self) -> None:
        spans = [self._windows.get(s, (s, e)) for s, e in zip(self.starts, self.ends,
                                                             strict=True)]
        self._lo_list = [a for a, _ in spans]
        self._hi_list = [b for _, b in spans]
        self._own_list = [self._owners.get(s, -1) for s in self.starts]
        self._starts = np.array(self.starts, np.int64)
        self._lo = np.array(self._lo_list, np.int64)
        self._hi = np.array(self._hi_list, np.int64)
        self._own = np.array(self._own_list, np.int64)
        self._stale = False

    def _holder(self, off: int, nbytes: int) -> int:
        """The index of the allocation holding heap bytes [off, off + nbytes), or -1."""
        k = bisect.bisect_right(self.starts, off) - 1
        return k if k >= 0 and off + nbytes <= self.ends[k] else -1

    @contextlib.contextmanager
    def windows(self, ranges: Iterable[tuple[int, int]],
                owners: Iterable[int] | None = None) -> Iterator[None]:
        """Within the block, the allocation holding each ``(addr, nbytes)`` range may be
        accessed by kernels only inside that range (host copies are not limited): a
        guarded launch passes the data between two canaries, and an access to a canary is
        then an ``OutOfBounds`` naming the instruction, like one outside every allocation.
        ``owners`` (one launch number per range, for ``Machine.launch_many``): the
        allocation is also reachable only by that launch's waves; one given to two
        launches is left to both."""
        added = []
        owned = []
        own = list(owners) if owners is not None else None
        ranges = list(ranges)
        claims: dict[int, set[int]] = {}
        for i, (addr, nbytes) in enumerate(ranges):
            off = addr - BASE
            k = self._holder(off, nbytes)
            if k < 0:
                continue
            if own is not None:
                claims.setdefault(self.starts[k], set()).add(own[i])
            if self.starts[k] in self._windows:
                continue  # two ranges in one allocation: leave it whole
            self._windows[self.starts[k]] = (off, off + nbytes)
            added.append(self.starts[k])
        for start, who in claims.items():
            if len(who) == 1 and start not in self._owners:
                self._owners[start] = next(iter(who))
                owned.append(start)
        self._index()
        try:
            yield
        finally:
            for s in added:
                self._windows.pop(s, None)
            for s in owned:
                self._owners.pop(s, None)
            self._index()

    def set_owner(self, addr: int, launch: int) -> None:
        """Allocation ``addr`` (a launch's kernarg segment) belongs to one launch of a
        batch (freeing it ends that)."""
        self._owners[addr - BASE] = launch
        self._index()

    def alloc(self, nbytes: int, align: int = 256) -> int:
        if nbytes < 0:
            raise EmuError(f"cannot allocate {nbytes} bytes")
        start = -(-(self.top + GUARD) // align) * align
        end = start + max(nbytes, 0)
        if end > len(self.data):
            cap = len(self.data)
            while cap < end + GUARD:
                cap *= 2
            grown = np.zeros(cap, np.uint8)
            grown[: len(self.data)] = self.data
            self.data = grown
        self.top = end
        self.starts.append(start)
        self.ends.append(end)
        self._index()
        return BASE + start

    def free(self, addr: int) -> None:
        off = addr - BASE
        if off not in self.starts:
            raise EmuError(f"0x{addr:x} is not the start of an allocation")
        k = self.starts.index(off)
        del self.starts[k]
        del self.ends[k]
        self._windows.pop(off, None)
        self._owners.pop(off, None)
        if k == len(self.starts):  # the most recent allocation: its space is reused
            self.top = self.ends[-1] if self.ends else 0
        self._index()

    def region(self, addr: int, nbytes: int) -> slice:
        off = addr - BASE
        if self._holder(off, nbytes) < 0:
            raise EmuError(f"0x{addr:x}+{nbytes} is not inside one allocation "
                           f"(allocate it with Machine.alloc first)")
        return slice(off, off + nbytes)

    def check(self, off: np.ndarray, nbytes: int, what: Callable[[], tuple[str, str, str]],
              launch: np.ndarray | None = None) -> None:
        """``off``: int64 heap offsets (addr - BASE) of the active lanes; ``launch``: the
        launch number of each (a batch of launches), or None (one launch)."""
        if off.size == 0:
            return
        if self._stale:
            self._rebuild()
        lo, hi = int(off.min()), int(off.max()) + nbytes
        k = bisect.bisect_right(self.starts, lo) - 1
        if k >= 0 and self._lo_list[k] <= lo and hi <= self._hi_list[k] and (
                launch is None or not self._owners or self._own_list[k] < 0
                or bool((launch == self._own_list[k]).all())):
            return
        ks = np.searchsorted(self._starts, off, "right") - 1
        kk = np.maximum(ks, 0)
        bad = (ks < 0) | (off < self._lo[kk]) | (off + nbytes > self._hi[kk])
        if launch is not None and self._owners:
            own = self._own[kk]
            bad |= (own >= 0) & (own != launch)
        if bad.any():
            first = int(off[np.argmax(bad)])
            ins, kern, arch = what()
            raise OutOfBounds(first + BASE, nbytes, ins, kern, arch, "global")

    def gather(self, off: np.ndarray, nbytes: int) -> np.ndarray:
        """uint32 words [len(off), ceil(nbytes/4)] (sub-dword: zero-extended)."""
        if nbytes % 4 == 0 and not (off & 3).any():
            words = self.data.view(np.uint32)
            return np.asarray(words[(off >> 2)[:, None] + np.arange(nbytes // 4)], np.uint32)
        b = self.data[off[:, None] + np.arange(nbytes)]
        if nbytes % 4:
            b = np.concatenate([b, np.zeros((len(off), 4 - nbytes % 4), np.uint8)], axis=1)
        return np.asarray(np.ascontiguousarray(b).view("<u4"), np.uint32)

    def scatter(self, off: np.ndarray, nbytes: int, words: np.ndarray) -> None:
        if nbytes % 4 == 0 and not (off & 3).any():
            self.data.view(np.uint32)[(off >> 2)[:, None] + np.arange(nbytes // 4)] = words
            return
        b = np.ascontiguousarray(words.astype("<u4")).view(np.uint8)[:, :nbytes]
        self.data[off[:, None] + np.arange(nbytes)] = b


ALIASES = {
    "dword": "b32", "dwordx2": "b64", "dwordx3": "b96", "dwordx4": "b128", "dwordx8": "b256",
    "dwordx16": "b512", "ubyte": "u8", "sbyte": "i8", "ushort": "u16", "sshort": "i16",
    "byte": "b8", "short": "b16", "ubyte_d16": "d16_u8", "sbyte_d16": "d16_i8",
    "short_d16": "d16_b16", "short_d16_hi": "d16_hi_b16", "byte_d16_hi": "d16_hi_b8",
    "ubyte_d16_hi": "d16_hi_u8", "sbyte_d16_hi": "d16_hi_i8",
}
_SIZES = {"b32": 4, "b64": 8, "b96": 12, "b128": 16, "b256": 32, "b512": 64, "u8": 1,
          "i8": 1, "u16": 2, "i16": 2, "b8": 1, "b16": 2, "d16_b16": 2, "d16_hi_b16": 2,
          "d16_u8": 1, "d16_i8": 1, "d16_hi_u8": 1, "d16_hi_i8": 1, "d16_hi_b8": 1}
DS_ALIASES = {"ds_read_": "ds_load_", "ds_write_": "ds_store_",
              "ds_read2st64_": "ds_load_2addr_stride64_",
              "ds_write2st64_": "ds_store_2addr_stride64_", "ds_read2_": "ds_load_2addr_",
              "ds_write2_": "ds_store_2addr_"}


def _norm(name: str) -> str:
    for prefix in ("global_", "flat_", "s_", "scratch_"):
        if name.startswith(prefix):
            for suffix, repl in ALIASES.items():
                if name.endswith("_" + suffix):
                    return name[: -len(suffix)] + repl
            return name
    return name


def _sext(words: np.ndarray, nbytes: int) -> np.ndarray:
    bits = 8 * nbytes
    v = words.astype(np.int64) & ((1 << bits) - 1)
    return np.asarray((((v ^ (1 << (bits - 1))) - (1 << (bits - 1))) & 0xFFFFFFFF), np.uint32)


_SIGNED_KINDS = ("i8", "i16", "d16_i8", "d16_hi_i8")


def _write_loaded(st: WaveState, w: Sel, mask: np.ndarray, dst_reg: int, kind: str,
                  words: np.ndarray, nbytes: int) -> None:
    """Put the words loaded for the lanes in ``mask`` into VGPRs ``dst_reg``...: signed
    kinds sign-extend, lanes outside ``mask`` read 0, and the d16 forms replace only the
    low (or, for ``*_hi_*``, the high) 16 bits of ``dst_reg``."""
    if kind in _SIGNED_KINDS:
        words = _sext(words, nbytes)
    nwords = max(1, nbytes // 4)
    if words.shape[0] == mask.size:  # every lane of the selection loaded
        full = words.reshape(*mask.shape, nwords)
    else:
        full = np.zeros((*mask.shape, nwords), np.uint32)
        full[mask] = words
    if kind.startswith("d16"):
        old = st.V[dst_reg][w]
        val = full[..., 0] & np.uint32(0xFFFF)
        new = ((old & np.uint32(0xFFFF)) | (val << np.uint32(16)) if "hi" in kind
               else (old & np.uint32(0xFFFF0000)) | val)
        vwrite(st, w, dst_reg, new)
        return
    vwrite_regs(st, w, dst_reg, full)


def _launch_of(st: WaveState, w: Sel, mask: np.ndarray) -> np.ndarray | None:
    """The launch number of each lane in ``mask`` (in ``addr[mask]``'s order) while a
    batch of launches runs (``Machine.launch_many``); None for one launch."""
    if st.launch is None:
        return None
    return np.asarray(np.broadcast_to(st.launch[w][:, None], mask.shape)[mask])


def _n(st: WaveState, w: Sel) -> int:
    return st.n if isinstance(w, slice) else len(w)


def translate(ins: Instruction, cx: Ctx) -> tuple[Fn, str] | None:
    name = _norm(ins.mnemonic)
    for old, new in DS_ALIASES.items():
        if name.startswith(old):
            name = new + name[len(old):]
    what = lambda: (ins.text, cx.kernel, cx.arch)  # noqa: E731
    if name.startswith("s_load_") or name.startswith("s_buffer_load"):
        if name.startswith("s_buffer"):
            return None
        return _smem(name, ins, what), "SMEM"
    if name.startswith(("global_", "flat_")):
        fn = _global(name, ins, cx, what)
        return (fn, "VMEM") if fn is not None else None
    if name.startswith("ds_"):
        fn = _ds(name, ins, cx, what)
        return (fn, "LDS") if fn is not None else None
    if name.startswith("scratch_"):
        fn = _scratch(name, ins, cx, what)
        return (fn, "VMEM") if fn is not None else None
    if name.startswith("buffer_"):
        fn = _buffer(name, ins, cx, what)
        return (fn, "VMEM") if fn is not None else None
    return None


def _buffer(name: str, ins: Instruction, cx: Ctx, what: Any) -> Fn | None:
    """MUBUF loads/stores through a buffer resource (V#) in four SGPRs: base address
    (48 bits), stride, num_records.  Lanes outside num_records are the hardware's defined
    bounds check (loads read 0, stores are dropped); inside it, every byte must lie in an
    allocation (OutOfBounds otherwise).  Swizzled resources (private segment on gfx10)
    are not modelled."""
    name = _norm("global_" + name[len("buffer_"):])[len("global_"):]
    ops = [parse_operand(o) for o in ins.operands]
    load = name.startswith("load_")
    if not (load or name.startswith("store_")):
        return None
    kind = name.split("_", 1)[1]
    size = _SIZES.get(kind)
    if size is None or len(ops) < 4:
        return None
    nbytes = size
    nwords = max(1, nbytes // 4)
    data, vaddr, rsrc, soff = ops[0], ops[1], ops[2], ops[3]
    offen, idxen = "offen" in ins.modifiers, "idxen" in ins.modifiers
    imm = int(ins.modifiers.get("offset", "0"), 0)
    signed = kind in ("i8", "i16")

    def addresses(st: WaveState, w: Sel) -> tuple[np.ndarray, np.ndarray, bool]:
        em = st.em[w]
        r = rsrc.reg
        d0, d1, d2 = (st.S[r + k][w].astype(np.int64) for k in range(3))
        swizzled = ((d1 >> 30) & 1) != 0
        if swizzled.any():
            if not swizzled.all() or st.private_size == 0:
                i, k, ar = what()
                raise UnsupportedInstruction(i.split()[0], ins.addr, k, ar,
                                             "swizzled buffer resource that is not the "
                                             "private segment")
            # the private segment buffer (gfx10 scratch): a lane-private address space;
            # the hardware's per-lane swizzle is an addressing detail with no observable
            # effect when only this resource reaches private memory
            lane_off = np.full(em.shape, imm, np.int64)
            if offen:
                lane_off = lane_off + st.V[vaddr.reg][w].astype(np.int64)
            if soff.kind == "s" and soff.reg != NULL:
                lane_off = lane_off + st.S[soff.reg][w].astype(np.int64)[:, None]
            elif soff.kind in ("int", "lit"):
                lane_off = lane_off + int(soff.value)
            return lane_off, em, True
        base = d0 | ((d1 & 0xFFFF) << 32)
        stride = (d1 >> 16) & 0x3FFF
        nrec = d2
        va = 0
        idx = np.zeros(em.shape, np.int64)
        off = np.full(em.shape, imm, np.int64)
        if idxen:
            idx = st.V[vaddr.reg][w].astype(np.int64)
            va = 1
        if offen:
            off = off + st.V[vaddr.reg + va][w].astype(np.int64)
        so = np.zeros(em.shape[0], np.int64)
        if soff.kind == "s" and soff.reg != NULL:
            so = st.S[soff.reg][w].astype(np.int64)
        elif soff.kind in ("int", "lit"):
            so = np.full(em.shape[0], int(soff.value), np.int64)
        structured = stride[:, None] != 0
        in_range = np.where(structured, (idx < nrec[:, None]) & (off + nbytes <= stride[:, None]),
                            off + nbytes <= nrec[:, None])
        addr = (base + so)[:, None] + idx * stride[:, None] + off
        return addr, em & in_range, False

    if load:
        def bload(st: WaveState, w: Sel) -> None:
            addr, ok, private = addresses(st, w)
            if private:
                words = _private_load(st, _private_flat(st, w, addr, nbytes, what), nbytes)
            else:
                if st.mem.recorder is not None:
                    st.mem.recorder(ins, w, addr, ok)
                off = addr[ok] - BASE
                st.mem.check(off, nbytes, what, _launch_of(st, w, ok))
                words = st.mem.gather(off, nbytes)
            if signed:
                words = _sext(words, nbytes)
            full = np.zeros((*ok.shape, nwords), np.uint32)  # out of range: reads 0
            full[ok] = words
            for k in range(nwords):
                vwrite(st, w, data.reg + k, full[..., k])
        return bload

    def bstore(st: WaveState, w: Sel) -> None:
        addr, ok, private = addresses(st, w)
        words = np.stack([st.V[data.reg + k][w][ok] for k in range(nwords)], axis=1)
        if private:
            _private_store(st, _private_flat(st, w, addr, nbytes, what), nbytes, words)
            return
        off = addr[ok] - BASE
        st.mem.check(off, nbytes, what, _launch_of(st, w, ok))
        st.mem.scatter(off, nbytes, words)
    return bstore


def _private_flat(st: WaveState, w: Sel, lane_off: np.ndarray, nbytes: int,
                  what: Any) -> np.ndarray:
    """Flat indices into ``st.private`` of the active lanes' private-segment offsets
    (``lane_off``: int64 [n, lanes]); OutOfBounds past the per-lane segment."""
    em = st.em[w]
    act = lane_off[em]
    bad = (act < 0) | (act + nbytes > st.private_size)
    if act.size and bad.any():
        i, k, ar = what()
        raise OutOfBounds(int(act[np.argmax(bad)]), nbytes, i, k, ar,
                          f"private (scratch: {st.private_size} bytes per lane)")
    waves = np.arange(st.n)[w]
    lane_base = (waves[:, None] * st.lanes + np.arange(st.lanes)[None, :]) * st.private_size
    return np.asarray(act + lane_base[em], np.int64)


def _private_load(st: WaveState, flat: np.ndarray, nbytes: int) -> np.ndarray:
    b = st.private[flat[:, None] + np.arange(nbytes)]
    if nbytes % 4:
        b = np.concatenate([b, np.zeros((len(flat), 4 - nbytes % 4), np.uint8)], 1)
    return np.asarray(np.ascontiguousarray(b).view("<u4"), np.uint32)


def _private_store(st: WaveState, flat: np.ndarray, nbytes: int, words: np.ndarray) -> None:
    b = np.ascontiguousarray(words.astype("<u4")).view(np.uint8)[:, :nbytes]
    st.private[flat[:, None] + np.arange(nbytes)] = b


def _scratch(name: str, ins: Instruction, cx: Ctx, what: Any) -> Fn | None:
    """gfx11+ architected flat scratch: each lane's private segment, addressed from 0 by
    vaddr + saddr + offset.  (gfx10 reaches the same segment through the private segment
    buffer resource: see _buffer.)"""
    if cx.gen < 11:
        return None
    ops = [parse_operand(o) for o in ins.operands]
    imm = int(ins.modifiers.get("offset", "0"), 0)
    op = name[len("scratch_"):]
    load = op.startswith("load_")
    kind = op.split("_", 1)[1]
    size = _SIZES.get(kind)
    if size is None or not (load or op.startswith("store_")):
        return None
    nbytes = size
    nwords = max(1, nbytes // 4)
    if load:
        dst, vaddr, saddr = ops[0], ops[1], ops[2]
    else:
        vaddr, data, saddr = ops[0], ops[1], ops[2]

    def lane_flat(st: WaveState, w: Sel) -> np.ndarray:
        a = np.full(st.em[w].shape, imm, np.int64)
        if vaddr.kind == "v":
            a = a + st.V[vaddr.reg][w].astype(np.int64)
        if saddr.kind == "s" and saddr.reg != NULL:
            a = a + st.S[saddr.reg][w].astype(np.int64)[:, None]
        return _private_flat(st, w, a, nbytes, what)

    if load:
        def sload(st: WaveState, w: Sel) -> None:
            em = st.em[w]
            words = _private_load(st, lane_flat(st, w), nbytes)
            if kind in ("i8", "i16"):
                words = _sext(words, nbytes)
            full = np.zeros((*em.shape, nwords), np.uint32)
            full[em] = words
            for k in range(nwords):
                vwrite(st, w, dst.reg + k, full[..., k])
        return sload

    def sstore(st: WaveState, w: Sel) -> None:
        em = st.em[w]
        words = np.stack([st.V[data.reg + k][w][em] for k in range(nwords)], axis=1)
        _private_store(st, lane_flat(st, w), nbytes, words)
    return sstore


def _smem(name: str, ins: Instruction, what: Any) -> Fn:
    ops = [parse_operand(o) for o in ins.operands]
    dst, base = ops[0], ops[1]
    kind = name[len("s_load_"):]
    size = _SIZES.get(kind)
    if size is None:
        raise UnsupportedInstruction(ins.mnemonic, ins.addr, what()[1], what()[2])
    nbytes = size
    imm = 0
    soff: int | None = None
    for extra in ops[2:]:
        if extra.kind == "s" and extra.reg != NULL:
            soff = extra.reg
        elif extra.kind in ("int", "lit"):
            imm += int(extra.value)
    if "offset" in ins.modifiers:
        imm += int(ins.modifiers["offset"], 0)
    nwords = max(1, nbytes // 4)
    signed = kind in ("i8", "i16")

    def sload(st: WaveState, w: Sel) -> None:
        b = base.reg
        addr = st.S[b][w].astype(np.int64) | (st.S[b + 1][w].astype(np.int64) << 32)
        addr = addr + imm
        if soff is not None:
            addr = addr + st.S[soff][w].astype(np.int64)
        if st.mem.recorder is not None:
            st.mem.recorder(ins, w, addr[:, None], None)
        off = addr - BASE
        st.mem.check(off, nbytes, what, None if st.launch is None else st.launch[w])
        words = st.mem.gather(off, nbytes)
        if signed:
            words = _sext(words, nbytes)
        for k in range(nwords):
            swrite(st, w, dst.reg + k, words[:, k])
    return sload


def _lane_addresses(st: WaveState, w: Sel, vaddr: Operand, saddr: Operand | None,
                    imm: int) -> np.ndarray:
    """int64 [n, lanes] byte addresses of a global/flat access."""
    if saddr is not None and saddr.kind == "s" and saddr.reg != NULL:
        s = saddr.reg
        base = st.S[s][w].astype(np.int64) | (st.S[s + 1][w].astype(np.int64) << 32)
        return np.asarray(base[:, None] + st.V[vaddr.reg][w].astype(np.int64) + imm, np.int64)
    if vaddr.kind != "v":
        raise EmuError(f"global address operand {vaddr} is not a VGPR")
    r = vaddr.reg
    return np.asarray((st.V[r][w].astype(np.int64)
                       | (st.V[r + 1][w].astype(np.int64) << 32)) + imm, np.int64)


def _global(name: str, ins: Instruction, cx: Ctx, what: Any) -> Fn | None:
    ops = [parse_operand(o) for o in ins.operands]
    imm = int(ins.modifiers.get("offset", "0"), 0)
    is_flat = name.startswith("flat_")
    op = name.split("_", 1)[1]  # load_b32, store_b32, atomic_add_u32
    if op.startswith("load_"):
        kind = op[len("load_"):]
        size = _SIZES.get(kind)
        if size is None:
            return None
        nbytes = size
        dst, vaddr = ops[0], ops[1]
        saddr = None if is_flat else ops[2] if len(ops) > 2 else None

        def gload(st: WaveState, w: Sel) -> None:
            addr = _lane_addresses(st, w, vaddr, saddr, imm)
            em = st.em[w]
            if is_flat and (sh := _in_shared(addr, em)).any():
                _flat_shared_load(st, w, addr, em, sh, dst.reg, kind, nbytes, what)
                return
            if st.mem.recorder is not None:
                st.mem.recorder(ins, w, addr, em)
            # every lane active: the masked selection is all of them, in order
            off = (addr.reshape(-1) if st.full and isinstance(w, slice) else addr[em]) - BASE
            st.mem.check(off, nbytes, what, _launch_of(st, w, em))
            _write_loaded(st, w, em, dst.reg, kind, st.mem.gather(off, nbytes), nbytes)
        return gload
    if op.startswith("store_"):
        kind = op[len("store_"):]
        size = _SIZES.get(kind)
        if size is None:
            return None
        nbytes = size
        vaddr, data = ops[0], ops[1]
        saddr = None if is_flat else ops[2] if len(ops) > 2 else None
        nwords = max(1, nbytes // 4)
        hi = "hi" in kind

        def gstore(st: WaveState, w: Sel) -> None:
            addr = _lane_addresses(st, w, vaddr, saddr, imm)
            em = st.em[w]
            if is_flat and (sh := _in_shared(addr, em)).any():
                words = np.stack([st.V[data.reg + k][w][em] for k in range(nwords)], axis=1)
                if hi:
                    words = words >> np.uint32(16)
                to_lds = sh[em]
                if (~to_lds).any():
                    goff = addr[em & ~sh] - BASE
                    st.mem.check(goff, nbytes, what, _launch_of(st, w, em & ~sh))
                    st.mem.scatter(goff, nbytes, words[~to_lds])
                _lds_scatter(st, _shared_offsets(st, w, addr, sh, nbytes, what), nbytes,
                             words[to_lds])
                return
            off = addr[em] - BASE
            st.mem.check(off, nbytes, what, _launch_of(st, w, em))
            words = np.stack([st.V[data.reg + k][w][em] for k in range(nwords)], axis=1)
            if hi:
                words = words >> np.uint32(16)
            st.mem.scatter(off, nbytes, words)
        return gstore
    if op.startswith("atomic_"):
        return _global_atomic(op[len("atomic_"):], ops, ins, imm, is_flat, what)
    return None


_ATOMIC: dict[str, Callable[[Any, Any], Any]] = {
    "add_u32": lambda old, d: old + d, "sub_u32": lambda old, d: old - d,
    "and_b32": lambda old, d: old & d, "or_b32": lambda old, d: old | d,
    "xor_b32": lambda old, d: old ^ d, "swap_b32": lambda old, d: d,
    "max_u32": np.maximum, "min_u32": np.minimum,
    "max_i32": lambda old, d: np.maximum(old.view(np.int32), d.view(np.int32)).view(np.uint32),
    "min_i32": lambda old, d: np.minimum(old.view(np.int32), d.view(np.int32)).view(np.uint32),
    "inc_u32": lambda old, d: np.where(old >= d, 0, old + 1),
    "dec_u32": lambda old, d: np.where((old == 0) | (old > d), d, old - 1),
    "add_f32": lambda old, d: (old.view(np.float32) + d.view(np.float32)).view(np.uint32),
}
_ATOMIC_ALIASES = {"add": "add_u32", "sub": "sub_u32", "and": "and_b32", "or": "or_b32",
                   "xor": "xor_b32", "swap": "swap_b32", "umax": "max_u32", "umin": "min_u32",
                   "smax": "max_i32", "smin": "min_i32", "inc": "inc_u32", "dec": "dec_u32",
                   "cmpswap": "cmpswap_b32", "fadd": "add_f32"}


def _global_atomic(kind: str, ops: list[Operand], ins: Instruction, imm: int, is_flat: bool,
                   what: Any) -> Fn | None:
    kind = _ATOMIC_ALIASES.get(kind, kind)
    cmpswap = kind == "cmpswap_b32"
    if kind not in _ATOMIC and not cmpswap:
        return None
    returns = "glc" in ins.modifiers or "TH_ATOMIC_RETURN" in ins.modifiers.get("th", "") \
        or "sc0" in ins.modifiers
    if returns:
        dst: Operand | None = ops[0]
        ops = ops[1:]
    else:
        dst = None
    vaddr, data = ops[0], ops[1]
    saddr = None if is_flat else ops[2] if len(ops) > 2 else None
    fn = _ATOMIC.get(kind)

    def atomic(st: WaveState, w: Sel) -> None:
        addr = _lane_addresses(st, w, vaddr, saddr, imm)
        em = st.em[w]
        off = addr[em] - BASE
        st.mem.check(off, 4, what, _launch_of(st, w, em))
        d = st.V[data.reg][w][em]
        c = st.V[data.reg + 1][w][em] if cmpswap else None
        words = st.mem.data.view(np.uint32)
        if off.size and (off & 3).any():
            raise EmuError(f"misaligned atomic in {what()[0]!r}")
        idx = off >> 2
        old = np.empty(len(idx), np.uint32)
        # lanes in order, waves in order: one at a time where addresses collide
        for k in range(len(idx)):
            o = words[idx[k]]
            old[k] = o
            if cmpswap:
                assert c is not None
                if o == c[k]:
                    words[idx[k]] = d[k]
            else:
                assert fn is not None
                words[idx[k]] = np.uint32(fn(np.array([o], np.uint32),
                                             np.array([d[k]], np.uint32))[0])
        if dst is not None:
            full = np.zeros(em.shape, np.uint32)
            full[em] = old
            vwrite(st, w, dst.reg, full)
    return atomic


# ----------------------------------------------------------------------------- LDS

def _lds_check(st: WaveState, addr: np.ndarray, nbytes: int, what: Any) -> None:
    if addr.size == 0:
        return
    bad = (addr < 0) | (addr + nbytes > st.lds_size)
    if bad.any():
        ins, kern, arch = what()
        raise OutOfBounds(int(addr[np.argmax(bad)]), nbytes, ins, kern, arch,
                          f"LDS (workgroup has {st.lds_size} bytes)")


def _lds_gather(st: WaveState, flat: np.ndarray, nbytes: int) -> np.ndarray:
    if nbytes % 4 == 0 and not (flat & 3).any():
        return np.asarray(st.lds.view(np.uint32)[(flat >> 2)[:, None] + np.arange(nbytes // 4)],
                          np.uint32)
    b = st.lds[flat[:, None] + np.arange(nbytes)]
    if nbytes % 4:
        b = np.concatenate([b, np.zeros((len(flat), 4 - nbytes % 4), np.uint8)], axis=1)
    return np.asarray(np.ascontiguousarray(b).view("<u4"), np.uint32)


def _shared_offsets(st: WaveState, w: Sel, addr: np.ndarray, sh: np.ndarray, nbytes: int,
                    what: Any) -> np.ndarray:
    """Offsets into ``st.lds`` of the lanes ``sh`` of a flat access to the shared aperture
    (each wave's own workgroup LDS), bounds-checked like a ds access."""
    local = addr[sh] - SHARED_APERTURE
    _lds_check(st, local, nbytes, what)
    return np.asarray(local + np.broadcast_to(st.lds_base[w][:, None], sh.shape)[sh], np.int64)


def _flat_shared_load(st: WaveState, w: Sel, addr: np.ndarray, em: np.ndarray,
                      sh: np.ndarray, dst_reg: int, kind: str, nbytes: int,
                      what: Any) -> None:
    """A flat load some of whose lanes address LDS (a generic pointer to ``__shared__``)."""
    words = np.zeros((int(em.sum()), max(1, -(-nbytes // 4))), np.uint32)
    from_lds = sh[em]
    if (~from_lds).any():
        goff = addr[em & ~sh] - BASE
        st.mem.check(goff, nbytes, what, _launch_of(st, w, em & ~sh))
        words[~from_lds] = st.mem.gather(goff, nbytes)
    words[from_lds] = _lds_gather(st, _shared_offsets(st, w, addr, sh, nbytes, what), nbytes)
    _write_loaded(st, w, em, dst_reg, kind, words, nbytes)


def _lds_scatter(st: WaveState, flat: np.ndarray, nbytes: int, words: np.ndarray) -> None:
    if nbytes % 4 == 0 and not (flat & 3).any():
        st.lds.view(np.uint32)[(flat >> 2)[:, None] + np.arange(nbytes // 4)] = words
        return
    b = np.ascontiguousarray(words.astype("<u4")).view(np.uint8)[:, :nbytes]
    st.lds[flat[:, None] + np.arange(nbytes)] = b


_DS_RTN: dict[str, Callable[[Any, Any], Any]] = {
    "add": _ATOMIC["add_u32"], "sub": _ATOMIC["sub_u32"], "and": _ATOMIC["and_b32"],
    "or": _ATOMIC["or_b32"], "xor": _ATOMIC["xor_b32"], "max_u32": np.maximum,
    "min_u32": np.minimum, "max_i32": _ATOMIC["max_i32"], "min_i32": _ATOMIC["min_i32"],
    "add_f32": _ATOMIC["add_f32"], "inc": _ATOMIC["inc_u32"], "dec": _ATOMIC["dec_u32"],
    "swap": _ATOMIC["swap_b32"], "rsub": lambda old, d: d - old,
    "max_f32": lambda old, d: np.fmax(old.view(np.float32), d.view(np.float32)).view(np.uint32),
    "min_f32": lambda old, d: np.fmin(old.view(np.float32), d.view(np.float32)).view(np.uint32),
}


def _ds(name: str, ins: Instruction, cx: Ctx, what: Any) -> Fn | None:
    ops = [parse_operand(o) for o in ins.operands]
    word0 = ins.words[0] if ins.words else 0
    off16 = word0 & 0xFFFF
    off0, off1 = word0 & 0xFF, (word0 >> 8) & 0xFF
    if name in ("ds_bpermute_b32", "ds_permute_b32"):
        dst, addr_op, data = ops
        forward = name == "ds_permute_b32"

        def permute(st: WaveState, w: Sel) -> None:
            # the lane index is taken mod 32: in wave64 each 32-lane half permutes within
            # itself (ISA pseudocode: "destination lane is MOD 32 regardless of wave size")
            half = np.arange(st.lanes) & 32
            idx = half + ((st.V[addr_op.reg][w].astype(np.int64) + off16) >> 2) % 32
            em = st.em[w]
            src = st.V[data.reg][w]
            rows = np.arange(em.shape[0])[:, None]
            if forward:
                out = np.zeros_like(src)
                r2, l2 = np.nonzero(em)
                out[r2, idx[r2, l2]] = src[r2, l2]
            else:
                # an inactive source lane reads as zero
                out = np.where(em[rows, idx], src[rows, idx], 0).astype(np.uint32)
            vwrite(st, w, dst.reg, out)
        return permute
    if name == "ds_swizzle_b32":
        dst, data = ops[0], ops[1]
        lane = np.arange(32)
        if off16 & 0x8000:  # quad permute: 2 bits per lane of a quad
            sel = np.array([(off16 >> (2 * k)) & 3 for k in range(4)])
            src_lane = (lane & ~3) + sel[lane & 3]
        else:
            and_m, or_m, xor_m = off16 & 0x1F, (off16 >> 5) & 0x1F, (off16 >> 10) & 0x1F
            src_lane = (((lane & and_m) | or_m) ^ xor_m) & 31

        def swizzle(st: WaveState, w: Sel) -> None:
            nl = st.lanes
            sl = np.concatenate([src_lane + 32 * k for k in range(nl // 32)])
            src = st.V[data.reg][w]
            em = st.em[w]
            out = np.where(em[:, sl], src[:, sl], 0).astype(np.uint32)
            vwrite(st, w, dst.reg, out)
        return swizzle

    def lds_flat(st: WaveState, w: Sel, addr_reg: int, extra: int, nbytes: int) -> np.ndarray:
        a = st.V[addr_reg][w].astype(np.int64) + extra
        em = st.em[w]
        act = a[em]
        _lds_check(st, act, nbytes, what)
        return np.asarray(act + np.broadcast_to(st.lds_base[w][:, None], em.shape)[em],
                          np.int64)

    if name.startswith("ds_load_2addr") or name.startswith("ds_store_2addr"):
        kind = name.rsplit("_", 1)[1]
        size = 4 if kind == "b32" else 8
        stride = size * (64 if "stride64" in name else 1)
        load = name.startswith("ds_load")

        if load:
            dst, addr_op = ops[0], ops[1]

            def load2(st: WaveState, w: Sel) -> None:
                em = st.em[w]
                nw = size // 4
                for half, o in enumerate((off0, off1)):
                    flat = lds_flat(st, w, addr_op.reg, o * stride, size)
                    words = _lds_gather(st, flat, size)
                    full = np.zeros((*em.shape, nw), np.uint32)
                    full[em] = words
                    for k in range(nw):
                        vwrite(st, w, dst.reg + half * nw + k, full[..., k])
            return load2
        addr_op, d0, d1 = ops[0], ops[1], ops[2]

        def store2(st: WaveState, w: Sel) -> None:
            em = st.em[w]
            nw = size // 4
            for o, d in ((off0, d0), (off1, d1)):
                flat = lds_flat(st, w, addr_op.reg, o * stride, size)
                words = np.stack([st.V[d.reg + k][w][em] for k in range(nw)], axis=1)
                _lds_scatter(st, flat, size, words)
        return store2
    if name.startswith("ds_load_"):
        kind = name[len("ds_load_"):]
        ds_size = _SIZES.get(kind)
        if ds_size is None:
            return None
        nbytes = ds_size
        dst, addr_op = ops[0], ops[1]

        def dload(st: WaveState, w: Sel) -> None:
            em = st.em[w]
            flat = lds_flat(st, w, addr_op.reg, off16, nbytes)
            _write_loaded(st, w, em, dst.reg, kind, _lds_gather(st, flat, nbytes), nbytes)
        return dload
    if name.startswith("ds_store_"):
        kind = name[len("ds_store_"):]
        ds_size = _SIZES.get(kind)
        if ds_size is None:
            return None
        nbytes = ds_size
        addr_op, data = ops[0], ops[1]
        nwords = max(1, nbytes // 4)
        hi = "hi" in kind

        def dstore(st: WaveState, w: Sel) -> None:
            em = st.em[w]
            flat = lds_flat(st, w, addr_op.reg, off16, nbytes)
            words = np.stack([st.V[data.reg + k][w][em] for k in range(nwords)], axis=1)
            if hi:
                words = words >> np.uint32(16)
            _lds_scatter(st, flat, nbytes, words)
        return dstore
    # LDS atomics: ds_add_u32 addr, data / ds_add_rtn_u32 dst, addr, data
    base = name[3:]
    rtn = "_rtn_" in base
    base = base.replace("_rtn", "")
    key = base.rsplit("_", 1)[0] if base.rsplit("_", 1)[0] in _DS_RTN else base
    if base.endswith(("_u32", "_b32")) and key not in _DS_RTN:
        key = base.rsplit("_", 1)[0]
    fn = _DS_RTN.get(key)
    if fn is None:
        return None
    if rtn:
        dst_op: Operand | None = ops[0]
        addr_op, data = ops[1], ops[2]
    else:
        dst_op = None
        addr_op, data = ops[0], ops[1]

    def ds_atomic(st: WaveState, w: Sel) -> None:
        em = st.em[w]
        flat = lds_flat(st, w, addr_op.reg, off16, 4)
        d = st.V[data.reg][w][em]
        words = st.lds.view(np.uint32)
        old = np.empty(len(flat), np.uint32)
        for k in range(len(flat)):
            i = flat[k] >> 2
            old[k] = words[i]
            words[i] = fn(np.array([words[i]], np.uint32), np.array([d[k]], np.uint32))[0]
        if dst_op is not None:
            full = np.zeros(em.shape, np.uint32)
            full[em] = old
            vwrite(st, w, dst_op.reg, full)
    return ds_atomic
