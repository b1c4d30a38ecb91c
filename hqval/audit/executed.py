"""The audit decided from executed facts: the emulator runs a v2 kernel and its v1 baseline
on one shared problem (M, K, N) and records, for every executed load, whether it is scalar
or vector, whether its address is lane-uniform and which bytes of which (row, group) of W
it read, and the dynamic instruction counts by class (v_wmma apart from VALU).  From those
facts:

  header_scalar   in a row-per-wave access the header bytes are read by scalar or
                  lane-uniform loads: a vector load whose lanes read one row's header bytes
                  at their own addresses, several lanes the same bytes, fails (a per-lane
                  header read covering several rows -- WMMA tiles -- is allowed, and so is
                  a copy whose lanes each read other bytes -- LDS staging); and the W
                  traffic per (row, group, column tile) is no more than the baseline's;
  payload_offset  every (row, group) has its header and its payload bytes [8, 136) read and
                  nothing else; a shifted payload or another stride leaves bytes unread,
                  and the finding names the bytes read and those left unread;
  v2_valu_delta   (VALU of v2 - VALU of v1) per executed group-row and column tile (of a
                  routed GEMV: per group-row and (token, rank) slot routed to it), WMMA
                  excluded, against the budget: the marginal count, each kernel run again on
                  a K four groups longer (``marginal_problem``) and the difference of its
                  VALU divided by the difference of its group-rows, so what a block spends
                  once whatever K is (its prologue, its epilogue's stores: a batch-tiled
                  GEMM's grow with its tiles) is not charged to the group-rows of a short K.

Code the problem does not execute (a load of W the static flow found that never ran) makes
a rule that would pass ``unsupported``: a rule never passes code it did not see run."""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from hqval.audit.rules import RULE_LETTER, V2_VALU_BUDGET
from hqval.codeobject import Instruction
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec

# A problem every kernel of the ABI accepts: K of 5 groups for a GEMV (an odd count, so a
# group loop unrolled by 2 or 4 runs its main body and its remainder; at 4 groups a fused
# QKV's remainder path never runs) and 2 for a GEMM (its emulation is the costly one),
# rows for two blocks of the widest row-per-block kernels, one 16-row WMMA tile, columns
# for two 16-wide tiles.
GEMV_M, GEMM_M, K_DEFAULT, GEMM_K, N_DEFAULT = 16, 16, 1280, 512, 32
W_PAD = 4096  # bytes after each W matrix: a read past the matrix is recorded, not a fault


@dataclass
class Facts:
    """What one launch executed (see the module doc)."""

    kernel: str
    problem: tuple[int, int, int]
    grid: tuple[int, int, int]
    group_bytes: int
    rows: int
    groups: int
    read: np.ndarray  # bool [rows, groups, group_bytes]: bytes read of each (row, group)
    traffic: np.ndarray  # int [rows, groups]: distinct bytes per load instance, summed
    beyond: int = 0  # bytes read past the last row (inside the pad)
    per_lane_header: list[str] = field(default_factory=list)
    multi_row_header: int = 0  # per-lane header loads whose lanes cover several rows
    staged_header: int = 0  # per-lane copies of header bytes, each lane other bytes
    loads: dict[int, dict[str, Any]] = field(default_factory=dict)  # W loads by address
    executed: Counter[int] = field(default_factory=Counter)  # wave-executions by address
    classes: Counter[str] = field(default_factory=Counter)
    error: str = ""
    # recorded by a counts-only recorder (``_Recorder``): ``read``, ``executed``,
    # ``classes`` and ``error`` hold; the traffic, the loads and the header evidence are
    # not recorded
    counts_only: bool = False
    # per recorded row: how many times the kernel may legitimately read it (column tiles
    # of a dense GEMM, slot tiles of its expert in a grouped GEMM, the (token, rank) slots
    # routed to its expert in a routed GEMV, else 1); grid.y of a routed GEMV is the rank,
    # not a column tile
    row_tiles: np.ndarray = field(default_factory=lambda: np.ones(1, np.int64))

    @property
    def column_tiles(self) -> int:
        return int(self.row_tiles.max()) if self.row_tiles.size else 1

    @property
    def tile_units(self) -> int:
        """(row, group, column tile) units whose payload was read."""
        cells = self.read[:, :, 8:].any(axis=2)
        return int((cells * self.row_tiles[:cells.shape[0], None]).sum())

    def per_tile(self) -> np.ndarray:
        """W traffic per (row, group) and column tile."""
        out: np.ndarray = self.traffic / np.maximum(self.row_tiles[:self.traffic.shape[0], None],
                                                    1)
        return out

    @property
    def group_rows(self) -> int:
        """(row, group) cells whose payload was read (at least one byte at or past +8)."""
        return int(self.read[:, :, 8:].any(axis=2).sum())


@functools.lru_cache(maxsize=1024)
def _nbytes(mnemonic: str) -> int:
    """The bytes one lane of a load reads (the emulator's own table)."""
    from hqval.emu.memory import _SIZES, _norm

    name = _norm(mnemonic)
    if name.startswith("buffer_"):
        name = _norm("global_" + name[len("buffer_"):])
    kind = name.split("_load_", 1)[-1]
    return _SIZES.get(kind, 4)


class _Recorder:
    """The memory recorder of one launch: W matrices as (base, rows, row_bytes).  A
    ``counts_only`` recorder keeps only which bytes were read (``Facts.read``: what the
    marginal VALU count's group-rows need), not the traffic, the loads or the header
    evidence."""

    def __init__(self, facts: Facts, mats: list[tuple[int, int, int]], header_bytes: int,
                 payload_offset: int, waves_per_wg: int, grid_x: int,
                 counts_only: bool = False) -> None:
        self.f = facts
        self.mats = mats
        self.header_bytes = header_bytes
        self.payload_offset = payload_offset
        self.waves_per_wg = waves_per_wg
        self.grid_x = grid_x
        self.counts_only = counts_only
        self.row_base = np.cumsum([0] + [r for _, r, _ in mats])

    def __call__(self, ins: Instruction, w: Any, addr: np.ndarray,
                 em: np.ndarray | None) -> None:
        nb = _nbytes(ins.mnemonic)
        scalar = em is None
        mask = np.ones(addr.shape, bool) if em is None else em
        gb = self.f.group_bytes
        span = np.arange(nb)
        # every lane's address, active or not, bounds the active lanes': a load outside
        # [lo, hi] of every lane misses the matrix
        lo, hi = int(addr.min()), int(addr.max())
        for mi, (base, rows, row_bytes) in enumerate(self.mats):
            size = rows * row_bytes
            if hi < base or lo >= base + size + W_PAD:
                continue
            rel = addr - base
            hit = mask & (rel >= 0) & (rel < size + W_PAD)
            if not hit.any():
                continue
            row0 = int(self.row_base[mi])
            if self.counts_only:
                b = (rel[hit][:, None] + span[None, :]).reshape(-1)
                b = b[b < size]
                col = b % row_bytes
                self.f.read[b // row_bytes + row0, col // gb, col % gb] = True
                continue
            rec = self.f.loads.setdefault(ins.addr, {"text": ins.text, "scalar": scalar,
                                                     "uniform": True, "instances": 0,
                                                     "max_rows": 0})
            # every wave with a lane in this matrix at once: one load instance each
            waves = np.nonzero(hit.any(axis=1))[0]
            h, r = hit[waves], rel[waves]
            rec["instances"] += int(waves.size)
            first = r[np.arange(waves.size), h.argmax(axis=1)]
            uniform = ((r == first[:, None]) | ~h).all(axis=1)
            rec["uniform"] = rec["uniform"] and bool(uniform.all())
            # the distinct bytes each wave's load read, (wave, byte) pairs made unique
            wid, lane = np.nonzero(h)
            lane_bytes = r[wid, lane][:, None] + span[None, :]
            stride = size + W_PAD + nb
            pairs = np.unique((wid[:, None] * stride + lane_bytes).reshape(-1))
            b = pairs % stride
            inside = b[b < size]
            self.f.beyond += int(b.size - inside.size)
            row = inside // row_bytes + row0
            col = inside % row_bytes
            grp, byte = col // gb, col % gb
            self.f.read[row, grp, byte] = True
            np.add.at(self.f.traffic, (row, grp), 1)
            if scalar or uniform.all():
                continue
            # only a wave one of whose lanes read a header byte can read the header
            in_hdr = (lane_bytes < size) & ((lane_bytes % row_bytes) % gb < self.header_bytes)
            with_hdr = np.zeros(waves.size, bool)
            with_hdr[wid[in_hdr.any(axis=1)]] = True
            for k in np.nonzero(with_hdr & ~uniform)[0]:
                self._header(ins, r[k][h[k]], nb, rec, size, row_bytes, row0)

    def _header(self, ins: Instruction, la: np.ndarray, nb: int, rec: dict[str, Any],
                size: int, row_bytes: int, row0: int) -> None:
        """The header evidence of one wave's lane-dependent load (``la``: its lanes'
        addresses in the matrix).  A header dword several lanes read at their own addresses
        is the per-lane read a scalar load makes once; a copy whose lanes each read other
        bytes (LDS staging) reads every byte once.  A lane whose load spans header and
        payload bytes copies the group (a staging vector), it does not decode the header:
        only header-only lanes can be the header read, so a copy's clamped rows (a partial
        tile's lanes all reading the last row) are no per-lane header read."""
        gb = self.f.group_bytes
        per_lane = la[:, None] + np.arange(nb)[None, :]
        inside_lane = per_lane < size
        copies = np.any(((per_lane % row_bytes) % gb >= self.payload_offset) & inside_lane,
                        axis=1)
        lane_bytes = per_lane[inside_lane]
        lrow = lane_bytes // row_bytes + row0
        lbyte = (lane_bytes % row_bytes) % gb
        hdr = lbyte < self.header_bytes
        decode = (~np.broadcast_to(copies[:, None], per_lane.shape))[inside_lane]
        if not hdr.any():
            return
        hrows = np.unique(lrow[hdr])
        rec["max_rows"] = max(rec["max_rows"], int(hrows.size))
        dec = hdr & decode
        shared = np.unique(lane_bytes[dec]).size < int(dec.sum())
        if hrows.size == 1 and shared:
            if len(self.f.per_lane_header) < 8:
                self.f.per_lane_header.append(
                    f"0x{ins.addr:x}: {ins.text} (row {int(hrows[0])}, header "
                    f"bytes {sorted({int(x) for x in lbyte[hdr]})} at "
                    f"{int(np.unique(la).size)} lane addresses)")
        elif hrows.size > 1:
            self.f.multi_row_header += 1
        else:
            self.f.staged_header += 1


def problem_for(spec: KernelSpec, baseline: KernelSpec | None = None) -> tuple[int, int, int]:
    """The shared (M, K, N) of a kernel and its baseline."""
    import math

    specs = [spec] if baseline is None else [spec, baseline]
    # a K-specialised build runs on a K it accepts: the K of the manifest's explicit
    # shapes (the smallest, as the emulator's checks run), else the default rounded up
    # to its k_multiple
    shaped = [min(s.shapes, key=lambda mk: mk[0] * mk[1]) for s in specs
              if getattr(s, "shapes", ())]
    if shaped:
        k = shaped[0][1]
        return ((GEMM_M, k, N_DEFAULT) if spec.signature.is_prefill
                else (max(GEMV_M, 2 * max(s.rows_per_block for s in specs)), k, 1))
    mult = math.lcm(256, *(int(getattr(s, "k_multiple", 0) or 256) for s in specs))
    if spec.signature.is_prefill:
        return GEMM_M, -(-GEMM_K // mult) * mult, N_DEFAULT
    return (max(GEMV_M, 2 * max(s.rows_per_block for s in specs)),
            -(-K_DEFAULT // mult) * mult, 1)


# the second K of the marginal VALU count: four groups more (a group loop unrolled by 1, 2
# or 4 runs whole iterations more), kept a multiple of every kernel's k_multiple
MARGINAL_GROUPS = 4


def marginal_problem(spec: KernelSpec, baseline: KernelSpec | None,
                     problem: tuple[int, int, int]) -> tuple[int, int, int] | None:
    """The problem of ``problem``'s M and N on a longer K that the kernel and its baseline
    both accept, or None where the manifest fixes K (explicit ``shapes`` of one K: a build
    specialised for that K reads other K wrongly)."""
    import math

    specs = [spec] if baseline is None else [spec, baseline]
    ks = sorted({k for s in specs for _m, k in getattr(s, "shapes", ())})
    if ks:
        longer = [k for k in ks if k > problem[1] and all(
            k in {kk for _m, kk in s.shapes} if s.shapes
            else k % int(getattr(s, "k_multiple", 0) or 256) == 0 for s in specs)]
        return (problem[0], longer[0], problem[2]) if longer else None
    step = math.lcm(256 * MARGINAL_GROUPS,
                    *(int(getattr(s, "k_multiple", 0) or 256) for s in specs))
    return problem[0], problem[1] + step, problem[2]


def _keep(store: dict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """``store[key] = value`` as its newest entry, the oldest dropped past ``limit``
    entries (the bounded stores of this module)."""
    store.pop(key, None)
    if len(store) >= limit:
        store.pop(next(iter(store)))
    store[key] = value


# machines by (arch, code object sha256), the most recent few: the launches of one object
# (its problem and the marginal count's longer K) translate its kernels once
_MACHINES: dict[tuple[str, str], Any] = {}
_MACHINES_LIMIT = 32


def _machine(arch: str, code_object: bytes) -> Any:
    """A machine for ``arch`` that has loaded ``code_object``, its memory new: a launch on
    it runs as on a new machine (the memory layout, the allocations and every byte the
    kernel can reach are a new machine's), only the translation is reused."""
    from hqval.emu import Machine
    from hqval.emu.memory import Memory

    key = (arch, hashlib.sha256(code_object).hexdigest())
    machine = _MACHINES.get(key)
    if machine is None:
        machine = Machine(arch)
    _keep(_MACHINES, key, machine, _MACHINES_LIMIT)
    machine.mem = Memory()
    return machine


def run_facts(spec: KernelSpec, arch: str, code_object: bytes,
              problem: tuple[int, int, int], seed: int = 0,
              counts_only: bool = False) -> Facts:
    """Launch ``spec`` on the emulator on ``problem`` with the recorder on.  The launch
    is the one its signature describes (the checks' own fixture and launch plan: every
    weight matrix, pointer table, index, activation and output in ABI order, grid and block
    from the signature's expressions); the recorder watches every weight matrix, of a
    pointer table the experts the routing selects (the others are poisoned).
    ``counts_only``: record only the bytes read and the dynamic counts (``Facts``)."""
    from hqval.checks.cell import Sizes
    from hqval.checks.launch import Output, Table, signature_plan
    from hqval.checks.oracle import NamedFixture, build_case, dims_for
    from hqval.emu.errors import EmuError
    from hqval.emu.runner import _extra_args
    from hqval.formats import by_qt

    M, K, N = problem
    fmt = by_qt(spec.qt)
    gb = fmt.group_bytes
    header = 4 if getattr(fmt, "header", None) == "f16" and getattr(fmt, "halves", 2) == 1 \
        else fmt.payload_offset
    sig = spec.signature
    sizes = Sizes(gemv_m=M, gemv_k=K, gemm_m=M, gemm_k=K, prefill_n=(N,), padded_m=M)
    dims = dims_for(sig, spec, sizes, tokens=N if sig.is_prefill else None)
    # one case per inputs while the caller has the oracle's memo on (audit_arches does):
    # every arch's launch of a kernel on one problem takes the same inputs
    case = build_case(sig, spec, dims, seed, NamedFixture("gaussian"))
    plan = signature_plan(spec, case.dims, case.values(sig))
    machine = _machine(arch, code_object)
    module = machine.load(code_object)
    groups = K // 256
    # how often each expert's rows are legitimately read: once per slot tile of that expert
    # (a grouped GEMM), once per column tile (a dense GEMM), once (a GEMV)
    tiles_of: dict[int, int] = {}
    for out in sig.outputs:
        if out.op is not None and out.op.kind == "grouped_matmul" and out.op.tiles:
            ids = np.asarray(case.host[out.op.tiles]).reshape(-1)
            tiles_of = {int(e): int((ids == e).sum()) for e in np.unique(ids) if e >= 0}
    dense_tiles = plan.grid[1] if sig.is_prefill and not tiles_of else 1
    # a routed GEMV reads each selected expert once per (token, rank) slot routed to it:
    # a batched one (N tokens) as often as its index table names it, a decode one once
    slots_of: dict[str, dict[int, int]] = {}
    for out in sig.outputs:
        op = out.op
        if op is not None and op.kind == "matvec" and op.experts and op.weight not in slots_of:
            ids = np.asarray(case.host[op.experts]).reshape(-1)
            slots_of[op.weight] = {int(e): int((ids == e).sum()) for e in np.unique(ids)
                                   if e >= 0}
    mats: list[tuple[int, int, int]] = []
    row_tiles: list[int] = []

    def put(data: np.ndarray, pad: int = 0) -> int:
        addr = machine.alloc(max(1, data.nbytes) + pad)
        machine.write(addr, np.ascontiguousarray(data))
        return int(addr)

    args: list[int | float] = []
    abi = list(sig.args)
    for i, v in enumerate(plan.args[:len(abi)]):
        arg = abi[i]
        if isinstance(v, Table):
            blobs = case.blobs[arg.name]
            ptrs = []
            for e, entry in enumerate(v.entries):
                addr = put(np.asarray(entry), W_PAD)
                ptrs.append(addr)
                if blobs[e] is not None:
                    rows = int(np.asarray(entry).shape[0])
                    mats.append((addr, rows, groups * gb))
                    reads = tiles_of.get(e, 1) if tiles_of else \
                        slots_of.get(arg.name, {}).get(e, 1)
                    row_tiles += [reads] * rows
            args.append(put(np.array(ptrs, np.uint64)))
        elif isinstance(v, Output):
            args.append(put(np.asarray(v.init)))
        elif isinstance(v, np.ndarray):
            if arg.role == "weight":
                addr = put(v, W_PAD)
                mats.append((addr, int(v.shape[0]), groups * gb))
                row_tiles += [dense_tiles] * int(v.shape[0])
                args.append(addr)
            else:
                args.append(put(v))
        elif v is None:
            args.append(0)
        else:
            assert isinstance(v, (int, float))
            args.append(v)
    kargs = [int(np.array([x], np.float32).view(np.uint32)[0]) if isinstance(x, float)
             else int(x) for x in args]
    rows = sum(r for _, r, _ in mats)
    facts = Facts(spec.name, problem, plan.grid, gb, rows, groups,
                  np.zeros((rows, groups, gb), bool), np.zeros((rows, groups), np.int64),
                  row_tiles=np.array(row_tiles or [1], np.int64), counts_only=counts_only)
    info = module.code_object.kernels.get(spec.symbol)
    nl = info.wavefront_size if info is not None else 32
    machine.mem.recorder = _Recorder(facts, mats, header, fmt.payload_offset,
                                     -(-plan.block[0] // nl), plan.grid[0], counts_only)
    executed = facts.executed

    def trace(addr: int, _text: str, waves: int) -> None:
        executed[addr] += waves

    try:
        machine.launch(module, spec.symbol, plan.grid, plan.block,
                       [*kargs, *_extra_args(spec)], trace=trace)
    except EmuError as exc:
        facts.error = str(exc)
    finally:
        machine.mem.recorder = None
    code = {i.addr: i for i in module.program(spec.symbol).instructions}
    for a, n in executed.items():
        ins = code.get(a)
        if ins is None:
            continue
        facts.classes[ins.klass] += n * (ins.valu_ops if ins.klass == "valu" else 1)
    return facts


_FACTS: dict[tuple[str, ...], Facts] = {}
_FACTS_LIMIT = 2048  # the oldest go first (the matrix makes ~1400 launches)
_OBJECT_IDENTITY: dict[tuple[str, str], str] = {}  # (object sha256, arch) -> digest


def _object_identity(arch: str, code_object: bytes) -> str:
    """The object's part of ``execution_identity``: its code identity and every
    instruction as this arch's disassembler decoded it, once per (content, arch)."""
    from hqval.codeobject import load

    key = (hashlib.sha256(code_object).hexdigest(), arch)
    got = _OBJECT_IDENTITY.get(key)
    if got is None:
        co = load(code_object)
        h = hashlib.sha256(co.code_identity.encode())
        for sym in co.disassembled_symbols(arch):
            h.update(f"\0{sym}\0".encode())
            for ins in co.disassembly(sym, arch):
                h.update(f"{ins.addr}:{ins.text}\n".encode())
        got = h.hexdigest()
        _keep(_OBJECT_IDENTITY, key, got, _FACTS_LIMIT)
    return got


def execution_identity(spec: KernelSpec, arch: str, code_object: bytes) -> str:
    """What a launch's executed facts depend on in the code and the arch: the object's code
    identity (``CodeObject.code_identity``: everything but the target it names), the
    generation whose semantics run it (``hqval.emu.machine.ARCH_GEN``), the kernel, and
    every instruction of the object as this arch's disassembler decoded it.  Two arches
    of one generation whose objects differ only in the target they name share it (the
    emulator's launch replay rests on the same fact: ``Module.execution_key``)."""
    from hqval.emu.machine import ARCH_GEN

    h = hashlib.sha256(_object_identity(arch, code_object).encode())
    h.update(repr((spec.name, spec.symbol, spec.qt, ARCH_GEN.get(arch))).encode())
    return h.hexdigest()


def facts_key(spec: KernelSpec, arch: str, code_object: bytes,
              problem: tuple[int, int, int], counts_only: bool = False) -> tuple[str, ...]:
    """The key of a launch's facts in this process (``facts_for``)."""
    return (execution_identity(spec, arch, code_object), repr(problem),
            "counts" if counts_only else "all")


def facts_for(spec: KernelSpec, arch: str, code_object: bytes,
              problem: tuple[int, int, int], counts_only: bool = False) -> Facts:
    """``run_facts``, once per (execution identity, problem) in this process: the facts
    of a launch are reused for another arch's code object of the same execution identity
    (``execution_identity``), except a launch that raised, whose message names the arch
    it ran on.  A ``counts_only`` request is answered by the launch's whole facts when
    they are known."""
    return _facts(spec, arch, code_object, problem, counts_only)[1]


def _facts(spec: KernelSpec, arch: str, code_object: bytes, problem: tuple[int, int, int],
           counts_only: bool) -> tuple[tuple[str, ...], Facts]:
    """``facts_for`` with the key the facts are kept under."""
    key = facts_key(spec, arch, code_object, problem, counts_only)
    for k in (key, (*key, arch), *(((*key[:2], "all"), (*key[:2], "all", arch))
                                   if counts_only else ())):
        got = _FACTS.get(k)
        if got is not None:
            return k, got
    got = run_facts(spec, arch, code_object, problem, counts_only=counts_only)
    if got.error:
        key = (*key, arch)
    remember_facts(key, got)
    return key, got


def remember_facts(key: tuple[str, ...], facts: Facts) -> None:
    """Keep ``facts`` under ``key`` (``facts_key``, the arch added for a launch that
    raised) for ``facts_for``: a launch another process ran, reused here."""
    _keep(_FACTS, key, facts, _FACTS_LIMIT)


def _ranges(values: list[int]) -> str:
    """[8, 9, 10, 12] -> '[8,11) [12,13)'."""
    out: list[str] = []
    start = prev = None
    for v in sorted(values):
        if start is None:
            start = prev = v
        elif prev is not None and v == prev + 1:
            prev = v
        else:
            out.append(f"[{start},{(prev or 0) + 1})")
            start = prev = v
    if start is not None:
        out.append(f"[{start},{(prev or 0) + 1})")
    return " ".join(out) or "none"


def layout(qt: int) -> tuple[int, frozenset[int], frozenset[int]]:
    """(group bytes, bytes a kernel must read, bytes it may read) of a format's group."""
    from hqval.formats import by_qt

    fmt = by_qt(qt)
    gb, po = fmt.group_bytes, fmt.payload_offset
    header = 4 if getattr(fmt, "header", None) == "f16" and getattr(fmt, "halves", 2) == 1 \
        else po
    must = frozenset(range(header)) | frozenset(range(po, gb))
    return gb, must, must | frozenset(range(header, po))  # qt=45's zero pad may be read


def _unexecuted(static_loads: list[int], facts: Facts) -> list[int]:
    return [a for a in static_loads if facts.executed.get(a, 0) == 0]


@dataclass
class Executed:
    """The executed facts of a v2 kernel and its baseline, and the rows they decide."""

    spec: KernelSpec
    arch: str
    facts: Facts
    base: Facts | None
    static_unexecuted: list[str] = field(default_factory=list)
    budget: float = V2_VALU_BUDGET
    # the same launches on the longer K of ``marginal_problem`` (None: K is fixed)
    wide: Facts | None = None
    base_wide: Facts | None = None
    base_spec: KernelSpec | None = None  # the baseline's entry (its batch tile)

    def _row(self, rule: str, status: Status, message: str, *,
             measured: float | None = None, tolerance: float | None = None,
             details: dict[str, Any] | None = None) -> Row:
        f = self.facts
        ev = {"rule": RULE_LETTER[rule], "decided_by": "executed",
              "problem": {"M": f.problem[0], "K": f.problem[1], "N": f.problem[2]},
              "grid": list(f.grid), **(details or {})}
        return Row(kind="audit", check=f"audit_{rule}", kernel=self.spec.name, arch=self.arch,
                   backend="isa", status=status, measured=measured, tolerance=tolerance,
                   message=f"executed on M={f.problem[0]} K={f.problem[1]} N={f.problem[2]}: "
                           f"{message}", details=ev)

    def _not_run(self, rule: str, details: dict[str, Any]) -> Row | None:
        if not self.static_unexecuted:
            return None
        return self._row(rule, Status.UNSUPPORTED, "loads of W the problem did not execute: "
                         + "; ".join(self.static_unexecuted[:6]) + " -- a rule never passes "
                         "code it did not see run", details=details)

    def payload_offset(self) -> Row:
        f = self.facts
        gb, must, may = layout(self.spec.qt)
        missing = [(r, g) for r in range(f.rows) for g in range(f.groups)
                   if not all(f.read[r, g, b] for b in must)]
        extra = [(r, g) for r in range(f.rows) for g in range(f.groups)
                 if any(f.read[r, g, b] for b in range(gb) if b not in may)]
        ev: dict[str, Any] = {"cells": f.rows * f.groups, "cells_missing": len(missing),
                              "cells_extra": len(extra), "bytes_beyond_matrix": f.beyond}
        if missing or extra or f.beyond:
            r, g = (missing or extra or [(0, 0)])[0]
            got = [b for b in range(gb) if f.read[r, g, b]]
            unread = sorted(must - set(got))
            other = sorted(set(got) - may)
            ev.update({"first_cell": [r, g], "read": _ranges(got), "unread": _ranges(unread),
                       "read_outside_layout": _ranges(other)})
            beyond = f"; {f.beyond} bytes read past the last row" if f.beyond else ""
            return self._row("payload_offset", Status.FAIL,
                             f"the format's bytes are read in another layout: (row {r}, "
                             f"group {g}) has bytes {_ranges(got)} read and "
                             f"{_ranges(unread)} left unread"
                             + (f", {_ranges(other)} read outside header and payload"
                                if other else "")
                             + f"; {len(missing)} of {f.rows * f.groups} (row, group) cells "
                             f"miss bytes, {len(extra)} read others{beyond}", details=ev)
        return self._not_run("payload_offset", ev) or self._row(
            "payload_offset", Status.PASS, f"every one of {f.rows * f.groups} (row, group) "
            f"cells has its header and payload [8,{gb}) read and nothing else", details=ev)

    def header_scalar(self) -> Row:
        f, b = self.facts, self.base
        ev: dict[str, Any] = {
            "loads": {f"0x{a:x}": {k: v for k, v in d.items()} for a, d in f.loads.items()},
            "multi_row_header_instances": f.multi_row_header,
            "staged_header_instances": f.staged_header}
        if f.per_lane_header:
            ev["evidence"] = f.per_lane_header
            return self._row("header_scalar", Status.FAIL, "header bytes read at lane-dependent "
                             "addresses in a row-per-wave access: "
                             + "; ".join(f.per_lane_header[:3]), details=ev)
        if b is None or b.error:
            return self._row("header_scalar", Status.UNSUPPORTED, "no header read per lane "
                             "in a row-per-wave access, but the baseline did not run, so the W "
                             "traffic cannot be compared"
                             + (f" ({b.error})" if b is not None else ""), details=ev)
        mine = f.per_tile()
        theirs = b.per_tile()
        if mine.shape != theirs.shape:
            return self._row("header_scalar", Status.UNSUPPORTED, "the baseline ran on other "
                             "W rows/groups", details=ev)
        worse = mine - theirs
        ev.update({"traffic_per_cell_tile": float(mine.mean()),
                   "baseline_traffic_per_cell_tile": float(theirs.mean())})
        if (worse > 1e-9).any():
            r, g = np.unravel_index(int(np.argmax(worse)), worse.shape)
            return self._row("header_scalar", Status.FAIL, f"W traffic per (row, group, column "
                             f"tile) exceeds the baseline's: (row {r}, group {g}) "
                             f"{mine[r, g]:g} vs {theirs[r, g]:g} bytes; "
                             f"{int((worse > 1e-9).sum())} cells more", details=ev,
                             measured=float(mine.sum()), tolerance=float(theirs.sum()))
        how = ("per-lane header loads cover several rows (row-per-lane)" if f.multi_row_header
               else "header bytes copied by lanes that each read other bytes (staging)"
               if f.staged_header else "header bytes read by scalar or lane-uniform loads")
        return self._not_run("header_scalar", ev) or self._row(
            "header_scalar", Status.PASS, f"{how}; W traffic per (row, group, column tile) "
            f"{float(mine.mean()):g} bytes, the baseline's {float(theirs.mean()):g}", details=ev)

    def v2_valu_delta(self) -> Row:
        f, b = self.facts, self.base
        if b is None or b.error:
            return self._row("v2_valu_delta", Status.UNSUPPORTED, "the baseline did not run"
                             + (f" ({b.error})" if b is not None else ""))
        units, bunits = f.tile_units, b.tile_units
        if units == 0 or bunits == 0:
            return self._row("v2_valu_delta", Status.UNSUPPORTED, "no group-row's payload was "
                             "read: there is no per-group-row VALU count")
        ev: dict[str, Any] = {
            "valu": f.classes["valu"], "baseline_valu": b.classes["valu"],
            "wmma": f.classes["wmma"], "baseline_wmma": b.classes["wmma"],
            "group_rows": f.group_rows, "column_tiles": f.column_tiles,
            "baseline_group_rows": b.group_rows, "baseline_column_tiles": b.column_tiles,
            "classes": dict(f.classes), "baseline_classes": dict(b.classes)}
        w, bw = self.wide, self.base_wide
        if w is not None and bw is not None:
            # the marginal count: the VALU the longer K adds per group-row it adds
            for facts in (w, bw):
                if facts.error:
                    return self._row("v2_valu_delta", Status.UNSUPPORTED, "the launch on K="
                                     f"{facts.problem[1]} did not run ({facts.error}): the "
                                     "marginal VALU per group-row needs two K", details=ev)
            du, dbu = w.tile_units - units, bw.tile_units - bunits
            if du <= 0 or dbu <= 0:
                return self._row("v2_valu_delta", Status.UNSUPPORTED, f"K={w.problem[1]} read "
                                 f"no group-row more than K={f.problem[1]} (a build for one "
                                 "K?): there is no marginal VALU count", details=ev)
            mine = (w.classes["valu"] - f.classes["valu"]) / du
            theirs = (bw.classes["valu"] - b.classes["valu"]) / dbu
            how = f"marginal from K={f.problem[1]} to K={w.problem[1]}"
            ev.update({"marginal_k": [f.problem[1], w.problem[1]],
                       "valu_wide": w.classes["valu"], "baseline_valu_wide": bw.classes["valu"],
                       "valu_per_unit": mine, "baseline_valu_per_unit": theirs,
                       "single_k_delta": f.classes["valu"] / units - b.classes["valu"] / bunits})
        else:
            mine, theirs = f.classes["valu"] / units, b.classes["valu"] / bunits
            how = f"at the one K={f.problem[1]} the manifest allows (per-block costs included)"
        per = mine - theirs
        text = (f"{per:+.3f} VALU per group-row and column tile (or routed slot) over "
                f"{self.spec.baseline}, {how} (budget {self.budget:g}; WMMA excluded)")
        if per > self.budget:
            bs = self.base_spec
            if bs is not None and bs.batch_tile != self.spec.batch_tile:
                # kept a failure, said why: counted per batch tile instead, a kernel that
                # dequantises each group twice would pass
                ev["batch_tiles"] = [self.spec.batch_tile, bs.batch_tile]
                text += (f"; the baseline {bs.name} has batch tile {bs.batch_tile}, "
                         f"{self.spec.name} {self.spec.batch_tile}: the count is per "
                         "group-row and 16-column tile, so it holds what the wider tile "
                         "spends per tile besides the header decode; it is not divided by "
                         "the batch tile, which would let a kernel dequantising each group "
                         "twice pass: a v1 baseline of the same batch tile compares the "
                         "header decode alone")
            return self._row("v2_valu_delta", Status.FAIL, text, measured=per,
                             tolerance=self.budget, details=ev)
        return self._not_run("v2_valu_delta", ev) or self._row(
            "v2_valu_delta", Status.PASS, text, measured=per, tolerance=self.budget, details=ev)

    def rows(self) -> dict[str, Row]:
        if self.facts.error:
            msg = f"the kernel did not run on the emulator: {self.facts.error}"
            return {r: self._row(r, Status.UNSUPPORTED, msg)
                    for r in ("header_scalar", "payload_offset", "v2_valu_delta")}
        return {"header_scalar": self.header_scalar(), "payload_offset": self.payload_offset(),
                "v2_valu_delta": self.v2_valu_delta()}


def applies(spec: KernelSpec, arch: str) -> bool:
    """Whether ``executed_rows`` decides the rules of ``spec`` on ``arch``: the emulator
    runs the arch and the format is a v2 one."""
    from hqval.emu.machine import ARCH_GEN

    return arch in ARCH_GEN and spec.qt in (44, 45)


def _marginal_needed(facts: Facts, base: Facts) -> bool:
    """Whether ``Executed.v2_valu_delta`` reads the launches on the longer K: not when
    either kernel did not run, nor when either read no group-row's payload (the rule is
    unsupported from these facts alone)."""
    return not facts.error and not base.error and facts.tile_units > 0 \
        and base.tile_units > 0


def baseline_launches(bspec: KernelSpec, arch: str, code_object: bytes,
                      problem: tuple[int, int, int],
                      longer: tuple[int, int, int] | None
                      ) -> list[tuple[tuple[str, ...], Facts]]:
    """The launches of a baseline that ``executed_rows`` makes for its v2 kernels on
    ``problem`` (and on the marginal count's ``longer`` K, unless the baseline did not
    run or read no group-row), each with the key ``facts_for`` keeps it under: run once
    for every v2 kernel judged against it, in whichever process judges them
    (``remember_facts``)."""
    key, base = _facts(bspec, arch, code_object, problem, False)
    out = [(key, base)]
    if longer is not None and not base.error and base.tile_units > 0:
        out.append(_facts(bspec, arch, code_object, longer, True))
    return out


def executed_rows(spec: KernelSpec, arch: str, code_object: bytes,
                  baseline: tuple[KernelSpec, bytes] | None,
                  static_w_loads: list[Instruction], budget: float) -> dict[str, Row] | None:
    """The three rules from executed facts, or None where the emulator cannot run the
    arch or the format is not a v2 one."""
    if not applies(spec, arch):
        return None
    problem = problem_for(spec, baseline[0] if baseline else None)
    facts = facts_for(spec, arch, code_object, problem)
    base = wide = base_wide = None
    if baseline is not None:
        bspec, bco = baseline
        base = facts_for(bspec, arch, bco, problem)
        longer = marginal_problem(spec, bspec, problem)
        if longer is not None and _marginal_needed(facts, base):
            # the marginal count needs only the bytes read and the dynamic counts
            wide = facts_for(spec, arch, code_object, longer, counts_only=True)
            base_wide = facts_for(bspec, arch, bco, longer, counts_only=True)
    missed = [f"0x{i.addr:x}: {i.text}" for i in static_w_loads
              if facts.executed.get(i.addr, 0) == 0]
    return Executed(spec, arch, facts, base, missed, budget, wide, base_wide,
                    baseline[0] if baseline is not None else None).rows()
