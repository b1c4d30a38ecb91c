"""Operand syntax (as llvm-objdump prints it) and the wave-batch register state.

Registers are uint32 numpy arrays with the waves of a launch as a batch dimension:
``S[reg, wave]`` for scalar registers (indexed by their hardware encoding: 106 vcc_lo,
124 m0, 125 null, 126 exec_lo, 253 scc), ``V[reg, wave, lane]`` for vector registers.
An instruction runs on a wave selection ``w``: a slice (every wave, a view) or an index
array (the waves at one PC when control flow diverged)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from hqval.emu.errors import EmuError

VCC, M0, NULL, EXEC, SCC = 106, 124, 125, 126, 253
TTMP0 = 108

_NAMED = {"vcc_lo": (VCC, 1), "vcc_hi": (VCC + 1, 1), "vcc": (VCC, 2), "m0": (M0, 1),
          "null": (NULL, 1), "exec_lo": (EXEC, 1), "exec_hi": (EXEC + 1, 1),
          "exec": (EXEC, 2), "scc": (SCC, 1), "src_scc": (SCC, 1)}
_REG = re.compile(r"^(v|s|ttmp)(\d+)(\.[lh])?$")
_RANGE = re.compile(r"^(v|s|ttmp)\[(\d+):(\d+)\]$")
_INV_2PI = {16: 0x3118, 32: 0x3E22F983, 64: 0x3FC45F306DC9C882}

# Where a wave selection is a slice, numpy indexing returns views (no copies).
Sel = Any


@dataclass(frozen=True)
class Operand:
    kind: str  # "v" | "s" | "int" (inline integer) | "float" (inline float) | "lit" | "off"
    reg: int = 0
    count: int = 1
    value: float = 0
    neg: bool = False
    abs: bool = False
    high: bool = False  # true16 ``.h``
    low: bool = False  # true16 ``.l``: the low half named as such (a 16-bit register)
    sext: bool = False  # SDWA ``sext(v1)``: the selected field is sign-extended

    def bits(self, width: int, is_float: bool = False) -> int:
        """The bit pattern of a constant operand as a source of ``width`` bits.  A 32-bit
        literal feeding a 64-bit float source is its high half (ISA: "literal constants")."""
        mask = (1 << width) - 1
        if self.kind == "int":
            return int(self.value) & mask
        if self.kind == "lit":
            v = int(self.value)
            return (v << 32) & mask if width == 64 and is_float and v <= 0xFFFFFFFF else v & mask
        if self.kind == "float":
            if abs(self.value - 0.15915494) < 1e-7:
                return _INV_2PI[width]
            dt = {16: np.float16, 32: np.float32, 64: np.float64}[width]
            ut = {16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
            return int(np.array(self.value, dt).view(ut))
        raise EmuError(f"operand {self} is not a constant")


def parse_operand(tok: str) -> Operand:
    t = tok.strip()
    if t.startswith("sext(") and t.endswith(")"):
        return replace(parse_operand(t[5:-1]), sext=True)
    neg = absf = False
    if t.startswith("-") and not re.match(r"^-[\d.]", t):
        neg, t = True, t[1:]
    if t.startswith("neg(") and t.endswith(")"):
        neg, t = True, t[4:-1]
    if t.startswith("|") and t.endswith("|"):
        absf, t = True, t[1:-1]
    elif t.startswith("abs(") and t.endswith(")"):
        absf, t = True, t[4:-1]
    if t in _NAMED:
        r, c = _NAMED[t]
        return Operand("s", r, c, neg=neg, abs=absf)
    m = _REG.match(t)
    if m:
        base = TTMP0 if m.group(1) == "ttmp" else 0
        kind = "v" if m.group(1) == "v" else "s"
        return Operand(kind, base + int(m.group(2)), 1, neg=neg, abs=absf,
                       high=m.group(3) == ".h", low=m.group(3) == ".l")
    m = _RANGE.match(t)
    if m:
        base = TTMP0 if m.group(1) == "ttmp" else 0
        kind = "v" if m.group(1) == "v" else "s"
        lo, hi = int(m.group(2)), int(m.group(3))
        return Operand(kind, base + lo, hi - lo + 1, neg=neg, abs=absf)
    if t == "off":
        return Operand("off")
    if t == "src_shared_base":  # the shared aperture's 64-bit base (hqval.emu.memory)
        return Operand("lit", value=1 << 48, neg=neg, abs=absf)
    if re.match(r"^-?0x[0-9a-fA-F]+$", t):
        return Operand("lit", value=int(t, 16), neg=neg, abs=absf)
    if re.match(r"^-?\d+$", t):
        return Operand("int", value=int(t), neg=neg, abs=absf)
    try:
        return Operand("float", value=float(t), neg=neg, abs=absf)
    except ValueError:
        raise EmuError(f"cannot parse operand {tok!r}") from None


class WaveState:
    """Registers and memory views of the waves of one launch."""

    def __init__(self, nwaves: int, nvgpr: int, nlanes: int = 32) -> None:
        self.n = nwaves
        self.lanes = nlanes
        self.S = np.zeros((256, nwaves), np.uint32)
        self.V = np.zeros((max(nvgpr, 1), nwaves, nlanes), np.uint32)
        self.em = np.zeros((nwaves, nlanes), bool)  # exec as a lane mask
        # every lane of every wave active (kept by set_exec): a VGPR write to a slice of
        # all waves then needs no lane mask
        self.full = False
        # bit of each lane in its 32-bit mask word (wave64 masks are SGPR pairs)
        self.lane_bits = (np.uint32(1) << (np.arange(nlanes, dtype=np.uint32) & np.uint32(31))
                          ).astype(np.uint32)
        self.lane_id = np.arange(nlanes, dtype=np.uint32)
        # set by the machine for a launch
        self.mem: Any = None  # hqval.emu.memory.Memory
        self.lds = np.zeros(4, np.uint8)  # every workgroup's LDS, back to back
        self.lds_size = 0
        self.lds_base = np.zeros(nwaves, np.int64)  # per wave: its workgroup's LDS offset
        self.denorm32 = True  # f32 denormals kept (FLOAT_DENORM_MODE_32 != 0)
        self.denorm16_64 = True  # f16/f64 denormals kept (FLOAT_DENORM_MODE_16_64 != 0)
        self.private = np.zeros(4, np.uint8)  # scratch: every lane's private segment
        self.private_size = 0  # bytes per lane
        # launch number of each wave in a batch of launches (Machine.launch_many): memory
        # checks keep each launch to its own allocations; None for a single launch
        self.launch: np.ndarray | None = None

    def set_exec(self, w: Sel) -> None:
        self.em[w] = self.read_mask(w, EXEC)
        self.full = bool(self.em.all())

    def read_mask(self, w: Sel, reg: int) -> np.ndarray:
        """A lane mask held in SGPR ``reg`` (wave64: the pair reg, reg+1): bool[n, lanes]."""
        if self.lanes == 32:
            return np.asarray((self.S[reg][w][:, None] & self.lane_bits) != 0)
        words = np.stack([self.S[reg][w], self.S[reg + 1][w]], axis=1)  # [n, 2]
        return np.asarray((np.repeat(words, 32, axis=1) & self.lane_bits) != 0)

    def mask_nonzero(self, w: Sel, reg: int) -> np.ndarray:
        """Per wave: is any lane bit of the mask in ``reg`` (and reg+1 in wave64) set."""
        nz = self.S[reg][w] != 0
        if self.lanes == 64:
            nz = nz | (self.S[reg + 1][w] != 0)
        return np.asarray(nz)

    def write_mask(self, w: Sel, reg: int, lanes: np.ndarray) -> None:
        words = self.pack(lanes)
        swrite(self, w, reg, words[:, 0])
        if self.lanes == 64 and reg != NULL:
            swrite(self, w, reg + 1, words[:, 1])

    def pack(self, lanes: np.ndarray) -> np.ndarray:
        """bool[n, lanes] -> uint32[n, lanes // 32] mask words."""
        return np.asarray(np.packbits(lanes, axis=1, bitorder="little").view("<u4"), np.uint32)


def vwrite(st: WaveState, w: Sel, reg: int, val: Any, lanes: np.ndarray | None = None) -> None:
    """Write a VGPR on the active lanes (exec, or an explicit lane mask)."""
    if isinstance(w, slice):
        if lanes is None and st.full:
            # exec is all ones: the masked copy would write every lane.  An assignment,
            # not np.copyto (half the cost, ~1 us less a write): it casts as
            # casting="unsafe" does, with the same warnings and errors for every value an
            # instruction writes (tests/emu/test_operands.py)
            st.V[reg, w] = val
            return
        np.copyto(st.V[reg][w], val, where=st.em[w] if lanes is None else lanes,
                  casting="unsafe")
    else:
        cur = st.V[reg][w]
        np.copyto(cur, val, where=st.em[w] if lanes is None else lanes, casting="unsafe")
        st.V[reg][w] = cur


def vread_regs(st: WaveState, w: Sel, reg: int, count: int) -> np.ndarray:
    """VGPRs ``reg .. reg + count - 1`` as uint32 [n, lanes, count] (a view for a slice)."""
    if reg + count > st.V.shape[0]:
        return np.stack([st.V[reg + i][w] for i in range(count)], axis=-1)
    return st.V[reg:reg + count][:, w].transpose(1, 2, 0)


def vwrite_regs(st: WaveState, w: Sel, reg: int, vals: np.ndarray) -> None:
    """``vwrite`` of VGPRs ``reg .. reg + count - 1`` from ``vals`` [n, lanes, count] on the
    active lanes, in one copy."""
    count = vals.shape[-1]
    if count == 1 or reg + count > st.V.shape[0]:  # past the last VGPR: vwrite raises
        for i in range(count):
            vwrite(st, w, reg + i, vals[..., i])
        return
    src = vals.transpose(2, 0, 1)
    if isinstance(w, slice):
        if st.full:
            st.V[reg:reg + count, w] = src  # as vwrite's: an assignment casts as copyto
        else:
            np.copyto(st.V[reg:reg + count, w], src, where=st.em[w][None], casting="unsafe")
        return
    cur = st.V[reg:reg + count][:, w]
    np.copyto(cur, src, where=st.em[w][None], casting="unsafe")
    st.V[reg:reg + count, w] = cur


def swrite(st: WaveState, w: Sel, reg: int, val: Any) -> None:
    if reg == NULL:
        return
    st.S[reg][w] = val
    if reg == EXEC or (reg == EXEC + 1 and st.lanes == 64):
        st.set_exec(w)


@dataclass
class Ctx:
    """What translating one kernel's instructions needs to know."""

    arch: str
    kernel: str
    gen: int  # 10, 11 or 12 (RDNA1/2, RDNA3/3.5, RDNA4)
    index_of: dict[int, int]  # instruction address -> index
    lanes: int = 32  # wavefront size


def sreader(op: Operand, width: int = 32, is_float: bool = False) -> Any:
    """A getter ``(st, w) -> uint32[n] | uint64[n] | constant`` for a scalar-side source."""
    if op.kind == "s":
        r = op.reg
        if r == NULL:
            zero = np.uint64(0) if width == 64 else np.uint32(0)
            return lambda st, w: zero
        if width == 64:
            return lambda st, w: (st.S[r][w].astype(np.uint64)
                                  | (st.S[r + 1][w].astype(np.uint64) << np.uint64(32)))
        return lambda st, w: st.S[r][w]
    if op.kind in ("int", "float", "lit"):
        c = op.bits(width, is_float)
        cv = np.uint64(c) if width == 64 else np.uint32(c)
        return lambda st, w: cv
    raise EmuError(f"operand kind {op.kind} is not a scalar source")


def swriter(op: Operand, width: int = 32) -> Any:
    if op.kind != "s":
        raise EmuError(f"scalar destination expected, got {op}")
    r = op.reg
    if width == 64:
        def write64(st: WaveState, w: Sel, val: Any) -> None:
            v = np.asarray(val, np.uint64)
            swrite(st, w, r, (v & np.uint64(0xFFFFFFFF)).astype(np.uint32))
            swrite(st, w, r + 1, (v >> np.uint64(32)).astype(np.uint32))
        return write64
    return lambda st, w, val: swrite(st, w, r, val)
