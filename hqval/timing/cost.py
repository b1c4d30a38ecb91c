"""Cost model: predict the v2/v1 GEMV time ratio per arch, shape and cache state.

Inputs, none fitted to any measurement:

- instruction counts per (256-weight group x row), by class, measured on the RDNA
  emulator as the slope between two K values on the kernel's unrolled main loop (so
  per-row overhead, reduction and store drop out; the intercept is kept per row);
- the arch's rates from ``matrices/arches.yaml``: VRAM bandwidth, last-level cache size,
  CU count and clock.  Issue rules: on RDNA each SIMD32 (two per CU) can issue, per clock
  and from different waves, one VALU, one SALU, one vector-memory and one scalar-memory
  instruction, so the issue time is that of the busiest pipe (``max`` over VALU, SALU,
  VMEM, SMEM), not their sum; RDNA3's dual issue (VOPD) needs no rule of its own, since
  the emulator counts a ``v_dual_*`` pair as the one instruction it issues as.  On NVIDIA
  each of the SM's four warp schedulers issues one instruction of any kind per clock
  (the classes share the slot: their sum).

Time of one kernel = max(memory, issue, latency):

- memory = bytes moved / VRAM bandwidth, unless the weights are cache-resident (hot mode
  and weights <= LLC), where the LLC bandwidth is unknown to the matrix and memory is
  taken as not binding: the kernel is then predicted compute-bound, section 6's gfx1030
  mechanism;
- issue = (group-rows x the binding pipe's instructions per group-row + blocks x the same
  per block) / issue rate, where on a family with ``vgpr_banks`` (arches.yaml, GFX10:
  4 banks, one dword read from each per cycle) the VALU pipe's count per group-row also
  holds the main loop's bank-conflict cycles (``bank_stall``: a VALU op reading n VGPRs
  from one bank takes n - 1 more cycles), found in the code object's own register
  numbers;
- latency (RDNA only), Little's law over one SIMD: a wave runs its main loop in order, so
  one iteration takes at least ``chain`` cycles, found by walking the code object's own
  loop body (a few iterations back to back, steady state): each instruction issues one
  cycle after the one before, or when its source registers are ready, or, at an
  ``s_waitcnt``, when enough of the wave's loads have returned; a result is ready its
  class's latency after issue (``latencies`` of arches.yaml, per family: dependent VALU,
  transcendental, SALU, scalar-cache hit, LDS, vector memory).  Loads of the weights
  (vector, and scalar: a header is read once, so it misses the scalar cache) take the
  latency of where the weights are read from, the family's ``llc_ns`` when resident,
  ``vram_ns`` otherwise, at the arch's clock; a family without that figure, and every
  other load (x, re-read from L0/L1), takes ``vmem``.  Waves that a SIMD holds at once
  overlap their chains: ``concurrent = min(occupancy, waves the launch gives a SIMD)``,
  occupancy from the code object's VGPR count, the arch's VGPR file and wave slots
  (``hqval.audit.occupancy``) and its LDS use; the launch gives ``ceil(M/R) x block/32``
  waves to ``CUs x 2`` SIMDs.
  latency = iterations per wave x chain x max(1, waves per SIMD / concurrent) / clock.
  The loop's prologue and epilogue (setup, reduction, store) are left to the issue term.

v2/v1 = time(v2) / time(v1).  A cell is flagged ``exposed`` when the prediction is
issue- or latency-bound, i.e. v2's extra header VALU work shows in the time.  For NVIDIA
devices the counts are the RDNA ones (a proxy: the same source compiled for gfx1100), which the
prediction records; the H200 checkpoint shows how far that proxy is off.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hqval.timing.gemv import Shape, gemv_bytes

# Instruction classes that occupy an issue slot (LDS and branches are negligible here).
ISSUE_CLASSES = ("VALU", "SALU", "SMEM", "VMEM")
# Issue rules: "pipes" -- each class has its own issue port (RDNA: one VALU, SALU, VMEM and
# SMEM per SIMD per clock, from different waves): the busiest class binds; "shared" -- one
# instruction of any class per scheduler per clock (NVIDIA): the classes add up.
PIPES, SHARED = "pipes", "shared"
# K values of the slope measurement: 8 and 16 groups, both whole multiples of the
# kernels' unroll (4 or 8), so both run only the main loop.
SLOPE_K = (2048, 4096)


@dataclass(frozen=True)
class KernelCost:
    """Wave instructions per group-row (slope) and per block of R rows (intercept: setup,
    wave reduction, stores), by class."""

    kernel: str
    arch: str
    per_group_row: dict[str, float]
    per_block: dict[str, float]
    # What the latency term needs, from the code object (None/empty: not known, e.g. a
    # costs file written before the term existed; the term is then reported missing).
    loop: LoopBody | None = None
    vgprs: int = 0
    lds_bytes: int = 0
    block: int = 32

    def issue_per_group_row(self, rule: str = SHARED) -> float:
        return issue_slots(self.per_group_row, rule)

    def binding_class(self, rule: str = PIPES) -> str:
        if rule == SHARED:
            return "all"
        return max(ISSUE_CLASSES, key=lambda c: self.per_group_row.get(c, 0.0))


def issue_slots(counts: dict[str, float], rule: str) -> float:
    """Issue slots per SIMD (RDNA) or scheduler (NVIDIA) that ``counts`` occupy."""
    if rule == PIPES:
        return max(counts.get(c, 0.0) for c in ISSUE_CLASSES)
    if rule == SHARED:
        return sum(counts.get(c, 0.0) for c in ISSUE_CLASSES)
    raise ValueError(f"issue rule {rule!r}: {PIPES} or {SHARED}")


# ---- the latency term: the kernel's own main loop, walked in order --------------------

# Latency kinds of a loop instruction (keys of arches.yaml ``latencies``, plus "wait" for
# an s_waitcnt and "store" for a store, which writes no register).
_TRANS = re.compile(r"^v_(exp|log|rcp|rsq|sqrt|sin|cos)_")
# Instructions that also read the register they write (accumulating forms).
_READS_DST = re.compile(r"^v_(dual_)?(fmac_|mac_|dot\d+c_)")
_WAIT = re.compile(r"(vmcnt|lgkmcnt)\((\d+)\)")
# gfx12's split counters, and gfx10's one-counter forms, to the two counters walked here
# (vector loads: "vm"; scalar loads and LDS: "lgkm").
_WAIT_OPS = {"s_wait_loadcnt": "vm", "s_waitcnt_vmcnt": "vm", "s_wait_kmcnt": "lgkm",
             "s_wait_dscnt": "lgkm", "s_waitcnt_lgkmcnt": "lgkm"}


@dataclass(frozen=True)
class LoopOp:
    """One instruction of a main loop as the latency walk sees it."""

    kind: str  # valu trans salu lds store wait; vmem/smem: a vector/scalar load, _w: of W
    dst: tuple[str, ...] = ()
    src: tuple[str, ...] = ()
    waits: tuple[tuple[str, int], ...] = ()  # for kind "wait": (counter, count) pairs
    text: str = ""                  # the disassembly line, for reports

    def to_list(self) -> list[Any]:
        return [self.kind, list(self.dst), list(self.src), [list(w) for w in self.waits],
                self.text]

    @classmethod
    def from_list(cls, v: list[Any]) -> LoopOp:
        return cls(str(v[0]), tuple(v[1]), tuple(v[2]), tuple((str(c), int(n)) for c, n in v[3]),
                   str(v[4]))


@dataclass(frozen=True)
class LoopBody:
    """A kernel's main loop and the group-rows one iteration covers."""

    ops: tuple[LoopOp, ...]
    group_rows_per_iter: float

    def to_dict(self) -> dict[str, Any]:
        return {"group_rows_per_iter": self.group_rows_per_iter,
                "ops": [o.to_list() for o in self.ops]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoopBody:
        return cls(tuple(LoopOp.from_list(v) for v in d["ops"]), float(d["group_rows_per_iter"]))


def loop_op(ins: Any, weight_loads: frozenset[int]) -> LoopOp | None:
    """The walk's view of one ``hqval.codeobject.Instruction`` (None: not issued to a pipe --
    s_clause, s_delay_alu, s_nop, branches and the other control instructions)."""
    m, text = ins.mnemonic, f"{ins.mnemonic} {ins.operand_text}".strip()
    if ins.klass == "control":
        if m == "s_waitcnt":
            waits = tuple(("vm" if c == "vmcnt" else "lgkm", int(n))
                          for c, n in _WAIT.findall(ins.operand_text))
            return LoopOp("wait", waits=waits, text=text) if waits else None
        for prefix, counter in _WAIT_OPS.items():
            if m == prefix or m.startswith(prefix + "_"):
                last = ins.operand_text.split(",")[-1].strip()
                try:
                    return LoopOp("wait", waits=((counter, int(last, 0)),), text=text)
                except ValueError:
                    return None
        return None
    halves = [ins.operand_text]
    if m.startswith("v_dual_") and "::" in ins.operand_text:
        first, second = ins.operand_text.split("::", 1)
        halves = [first, second.strip().split(None, 1)[1] if " " in second.strip() else ""]
        mnems = [m, second.strip().split(None, 1)[0]]
    else:
        mnems = [m]
    dst: list[str] = []
    src: list[str] = []
    from hqval.codeobject import Instruction
    from hqval.codeobject.disasm import _NO_DST, _TWO_DST

    for mn, ops in zip(mnems, halves, strict=True):
        d, s_ = Instruction.of(ins.addr, mn, ops.strip()).dst_src
        dst += d
        src += s_ + (d if _READS_DST.match(mn) else ())
        # vcc, which the register parser does not name: written as a compare's or a
        # carry's destination operand, read where it is a source (cndmask, add_co_ci).
        n_dst = 0 if mn.startswith(_NO_DST) else 2 if mn.startswith(_TWO_DST) else 1
        for i, part in enumerate(p.strip() for p in ops.split(",")):
            if part in ("vcc", "vcc_lo", "vcc_hi"):
                (dst if i < n_dst else src).append("vcc")
    klass = ins.klass
    if klass in ("valu", "wmma"):  # v_wmma issues to the VALU (matrix) pipe
        kind = "trans" if _TRANS.match(m) else "valu"
    elif klass == "vmem":
        kind = ("vmem_w" if ins.addr in weight_loads else "vmem") if ins.is_load else "store"
    elif klass == "smem":
        # a scalar load of the weights (a group header, read once) misses the scalar cache
        kind = "smem_w" if ins.addr in weight_loads else "smem"
    elif klass == "lds":
        kind = "lds"
    else:
        kind = "salu"
    if kind == "store":
        src, dst = src + dst, []
    return LoopOp(kind, tuple(dst), tuple(src), text=text)


def loop_body(code: Any, spec: Any, per_group_row: dict[str, float]) -> tuple[LoopBody | None,
                                                                                str]:
    """The main loop of ``code`` (an ``hqval.audit.KernelCode``) as LoopOps, and the group-rows
    one iteration covers: its VALU instructions over the emulator's VALU per group-row
    (``(None, why)`` when the loop is not a whole number of group-rows)."""
    from hqval.audit.static import pointer_origins, weight_args

    body = code.main_loop()
    if not body:
        return None, f"{spec.name}: no loop in the code object"
    wargs = weight_args(spec)
    origins = pointer_origins(code)
    weight_loads = frozenset(a for a, tags in origins.items() if tags & wargs)
    if not origins:  # no flow: a scalar load inside the group loop reads a header
        weight_loads = frozenset(i.addr for i in body if i.klass == "smem")
    ops = tuple(op for op in (loop_op(i, weight_loads) for i in body) if op is not None)
    valu = sum(1 for i in body if i.klass == "valu")
    per = per_group_row.get("VALU", 0.0)
    if per <= 0 or valu == 0:
        return None, f"{spec.name}: no VALU in the main loop or per group-row"
    n = valu / per
    if abs(n - round(n)) > 0.05 * n or round(n) < 1:
        return None, (f"{spec.name}: the main loop's {valu} VALU are {n:.2f} group-rows of "
                      f"{per:g} each: not the group loop")
    return LoopBody(ops, float(round(n))), ""


def bank_stall(op: LoopOp, banks: int | None) -> int:
    """Extra cycles ``op`` takes to read its VGPR operands from a register file of ``banks``
    banks, each giving one dword a cycle (arches.yaml ``vgpr_banks``, [regbank]): n distinct
    VGPR dwords in one bank take n - 1 more cycles.  0 for a non-VALU op, or when the
    family's bank count is unknown (``None``)."""
    if not banks or op.kind not in ("valu", "trans"):
        return 0
    per: dict[int, int] = {}
    for r in set(op.src):
        if r[:1] == "v" and r[1:].isdigit():
            b = int(r[1:]) % banks
            per[b] = per.get(b, 0) + 1
    return max(per.values(), default=1) - 1


def bank_stalls_per_group_row(cost: KernelCost, lat: Any) -> float:
    """VGPR bank-conflict cycles of the main loop per group-row (0 where the family has no
    ``vgpr_banks`` or the loop is unknown): extra cycles of the VALU pipe."""
    banks = getattr(lat, "vgpr_banks", None)
    if not banks or cost.loop is None:
        return 0.0
    return sum(bank_stall(op, banks) for op in cost.loop.ops) / cost.loop.group_rows_per_iter


def chain_cycles(ops: tuple[LoopOp, ...], lat: Any, w_cycles: float | None = None,
                 iterations: int = 6) -> float:
    """Cycles one wave takes per iteration of ``ops`` run back to back, alone on its SIMD:
    in-order issue, one instruction a cycle at most (a VALU op 1 + its VGPR bank stall,
    ``bank_stall``, where the family has ``vgpr_banks``), each waiting for its sources and, at
    an s_waitcnt, for all but N of the counter's loads (vector loads return in order; the
    lgkm counter's may not, so it waits for the earliest ones).  Loads of the weights take
    ``w_cycles`` (default: the family's ``vmem``), other vector loads ``vmem``, other scalar
    loads ``smem``.  Steady state: the mean of the last ``iterations - 2`` iterations."""
    w = lat.vmem if w_cycles is None else w_cycles
    stall = [bank_stall(op, getattr(lat, "vgpr_banks", None)) for op in ops]
    latency = {"valu": lat.valu, "trans": lat.trans, "salu": lat.salu, "smem": lat.smem,
               "lds": lat.lds, "vmem": lat.vmem, "vmem_w": w, "smem_w": w, "store": 1.0}
    counter = {"vmem": "vm", "vmem_w": "vm", "smem": "lgkm", "smem_w": "lgkm", "lds": "lgkm"}
    ready: dict[str, float] = {}
    pending: dict[str, list[float]] = {"vm": [], "lgkm": []}
    t = 0.0
    ends = []
    for _ in range(iterations):
        for op, extra in zip(ops, stall, strict=True):
            if op.kind == "wait":
                for c, n in op.waits:
                    q = sorted(pending[c])
                    if len(q) > n:
                        t = max(t, q[len(q) - n - 1])
                        pending[c] = q[len(q) - n:]
                continue
            t0 = max([t, *(ready.get(r, 0.0) for r in op.src)])
            done = t0 + latency[op.kind]
            for r in op.dst:
                ready[r] = done
            ctr = counter.get(op.kind)
            if ctr == "vm":  # in-order return: a later load completes no earlier
                done = max([done, *pending["vm"]])
                pending["vm"].append(done)
            elif ctr is not None:
                pending[ctr].append(done)
            t = t0 + 1.0 + extra
        ends.append(t)
    keep = max(1, iterations - 2)
    return (ends[-1] - ends[-1 - keep]) / keep


def occupancy(cost: KernelCost, rates: ArchRates) -> int:
    """Waves a SIMD can hold for ``cost``'s code object (``hqval.audit.occupancy``: the
    VGPR file, the wave slots and LDS)."""
    from hqval.audit.occupancy import occupancy as resident_waves

    return resident_waves(rates.arch, cost.vgprs, cost.lds_bytes, cost.block)


def weights_latency(rates: ArchRates, is_resident: bool) -> tuple[float, str]:
    """Cycles a load of the weights takes: the family's Infinity Cache (resident) or VRAM
    latency in ns at the arch's clock where arches.yaml has it, else its ``vmem``."""
    lat = rates.latencies
    level, ns = ("llc_ns", lat.llc_ns) if is_resident else ("vram_ns", lat.vram_ns)
    if ns is None:
        return float(lat.vmem), f"vmem (no {level} for {lat.family})"
    return ns * rates.clock_hz / 1e9, f"{level} {ns:g} ns"


def latency_term(cost: KernelCost, shape: Shape, rates: ArchRates, rows_per_block: int,
                 is_resident: bool = False) -> tuple[LatencyTerm | None, str]:
    """The latency bound (Little's law over one SIMD), or (None, why it is missing)."""
    if rates.latencies is None:
        return None, f"latency not modelled for {rates.name} (NVIDIA)"
    if cost.loop is None or cost.vgprs <= 0:
        return None, f"{cost.kernel}: no main loop or VGPR count in the costs"
    w_cycles, w_source = weights_latency(rates, is_resident)
    chain = chain_cycles(cost.loop.ops, rates.latencies, w_cycles)
    blocks = -(-shape.M // rows_per_block)
    waves = blocks * -(-cost.block // 32)
    group_rows_per_wave = shape.M * (shape.K // 256) / waves
    iters = group_rows_per_wave / cost.loop.group_rows_per_iter
    per_simd = waves / rates.simds
    occ = occupancy(cost, rates)
    concurrent = min(float(occ), per_simd)
    cycles = iters * chain * max(1.0, per_simd / occ)
    return LatencyTerm(cycles / rates.clock_hz * 1e6, chain, cost.loop.group_rows_per_iter,
                       iters, per_simd, occ, concurrent, w_cycles, w_source), ""


@dataclass(frozen=True)
class ArchRates:
    name: str
    vram_gbps: float
    llc_bytes: int
    issue_per_s: float  # wave instructions per second, whole device
    source: str
    rule: str = SHARED  # issue rule (PIPES on RDNA, SHARED on NVIDIA)
    # The latency term (RDNA): the arch (for hqval.audit.occupancy), SIMDs, clock and the
    # family's latencies; None on NVIDIA, where the term is not modelled.
    arch: Any = field(default=None, compare=False)
    simds: int = 0
    clock_hz: float = 0.0
    latencies: Any = None

    @classmethod
    def from_arch(cls, arch: Any, latencies: dict[str, Any] | None = None) -> ArchRates:
        """RDNA arch from arches.yaml: 2 SIMD32 per CU, one wave instruction per clock each;
        ``latencies`` by family (default: arches.yaml's); the arch's family must be there."""
        if latencies is None:
            from hqval.matrix import load_latencies

            latencies = load_latencies()
        lat = latencies.get(arch.family)
        if lat is None:
            raise ValueError(f"matrices/arches.yaml has no latencies for family {arch.family} "
                             f"({arch.name}): add latencies.{arch.family} with valu, trans, "
                             "salu, smem, lds and vmem cycles, each with its source")
        return cls(arch.name, float(arch.vram_gbps), int(arch.last_level_cache_bytes),
                   arch.cu_count * 2 * arch.boost_mhz * 1e6,
                   f"arches.yaml {arch.name}: {arch.cu_count} CU x 2 SIMD x {arch.boost_mhz} "
                   f"MHz; per-pipe issue; latencies.{arch.family}", PIPES,
                   arch=arch, simds=arch.cu_count * 2, clock_hz=arch.boost_mhz * 1e6,
                   latencies=lat)

    @classmethod
    def from_device(cls, device: Any, sm_clock_mhz: float) -> ArchRates:
        """NVIDIA device from arches.yaml's devices: 4 warp schedulers per SM."""
        return cls(device.arch, float(device.hbm_gbps), int(device.l2_bytes),
                   device.sm_count * 4 * sm_clock_mhz * 1e6,
                   f"arches.yaml devices.{device.name}: {device.sm_count} SM x 4 x "
                   f"{sm_clock_mhz:g} MHz")


@dataclass(frozen=True)
class LatencyTerm:
    """The latency bound of one kernel at one shape, and what it was made of."""

    t_us: float
    chain_cycles: float      # one main-loop iteration of one wave, steady state
    group_rows_per_iter: float
    iterations_per_wave: float
    waves_per_simd: float    # what the launch gives each SIMD
    occupancy: int           # waves a SIMD can hold (VGPRs, wave slots, LDS)
    concurrent: float        # min of the two
    weights_cycles: float = 0.0  # latency of a load of W
    weights_source: str = ""     # where that figure came from

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Prediction:
    t_mem_us: float
    t_issue_us: float
    resident: bool
    latency: LatencyTerm | None = None
    latency_missing: str = ""  # why there is no latency term ("" when there is one)
    bank_stalls: float = 0.0   # VGPR bank-conflict cycles per group-row in the issue term

    @property
    def t_latency_us(self) -> float:
        return self.latency.t_us if self.latency is not None else 0.0

    @property
    def t_us(self) -> float:
        return max(self.t_mem_us, self.t_issue_us, self.t_latency_us)

    @property
    def bound(self) -> str:
        """The binding term; a tie goes to the earlier of latency, issue, memory."""
        terms = (("latency", self.t_latency_us), ("issue", self.t_issue_us),
                 ("memory", self.t_mem_us))
        return max(terms, key=lambda t: t[1])[0]


@dataclass(frozen=True)
class RatioPrediction:
    v1: Prediction
    v2: Prediction
    counts_source: str

    @property
    def ratio(self) -> float:
        return self.v2.t_us / self.v1.t_us

    @property
    def exposed(self) -> bool:
        """v2's extra VALU work shows: the candidate is predicted issue- or latency-bound."""
        return self.v2.bound in ("issue", "latency")

    def to_dict(self) -> dict[str, Any]:
        def term(p: Prediction) -> dict[str, Any] | str:
            return p.latency.to_dict() if p.latency is not None else p.latency_missing

        return {"predicted_ratio": self.ratio, "predicted_us_a": self.v1.t_us,
                "predicted_us_b": self.v2.t_us, "predicted_bound_a": self.v1.bound,
                "predicted_bound_b": self.v2.bound,
                "predicted_us_terms_a": {"memory": self.v1.t_mem_us, "issue": self.v1.t_issue_us,
                                         "latency": self.v1.t_latency_us},
                "predicted_us_terms_b": {"memory": self.v2.t_mem_us, "issue": self.v2.t_issue_us,
                                         "latency": self.v2.t_latency_us},
                "predicted_latency_a": term(self.v1), "predicted_latency_b": term(self.v2),
                "predicted_bank_stalls_a": self.v1.bank_stalls,
                "predicted_bank_stalls_b": self.v2.bank_stalls,
                "predicted_resident": self.v2.resident, "predicted_exposed": self.exposed,
                "counts_source": self.counts_source}


def resident(shape: Shape, rates: ArchRates, mode: str) -> bool:
    """Weights stay in the LLC between launches: hot mode and they fit."""
    return mode == "hot" and rates.llc_bytes >= shape.M * (shape.K // 256) * 136


def predict(cost: KernelCost, shape: Shape, rates: ArchRates, mode: str,
            rows_per_block: int = 1) -> Prediction:
    group_rows = shape.M * (shape.K // 256)
    is_resident = resident(shape, rates, mode)
    t_mem = 0.0 if is_resident else gemv_bytes(shape) / (rates.vram_gbps * 1e9)
    blocks = -(-shape.M // rows_per_block)
    per_block = issue_slots(cost.per_block, rates.rule)
    # a VGPR bank conflict holds the VALU pipe for its extra read cycles
    stalls = bank_stalls_per_group_row(cost, rates.latencies)
    per_group_row = dict(cost.per_group_row)
    per_group_row["VALU"] = per_group_row.get("VALU", 0.0) + stalls
    instructions = group_rows * issue_slots(per_group_row, rates.rule) + blocks * per_block
    t_issue = instructions / rates.issue_per_s
    term, missing = latency_term(cost, shape, rates, rows_per_block, is_resident)
    return Prediction(t_mem * 1e6, t_issue * 1e6, is_resident, term, missing, stalls)


def predict_ratio(v1: KernelCost, v2: KernelCost, shape: Shape, rates: ArchRates, mode: str,
                  rows_per_block: int = 1) -> RatioPrediction:
    src = f"emulator counts on {v2.arch}" + (
        "" if v2.arch == rates.name else f" (proxy for {rates.name})")
    return RatioPrediction(predict(v1, shape, rates, mode, rows_per_block),
                           predict(v2, shape, rates, mode, rows_per_block), src)


def slope(counts_lo: dict[str, int], counts_hi: dict[str, int], groups_lo: int,
          groups_hi: int, rows: int, waves: int) -> tuple[dict[str, float], dict[str, float]]:
    """(per group-row, per wave) counts from two launches that differ only in K, each of
    ``waves`` waves covering ``rows`` rows in all."""
    if groups_hi <= groups_lo or rows <= 0:
        raise ValueError("slope needs two K values with more groups in the second launch")
    keys = set(counts_lo) | set(counts_hi)
    per_gr = {k: (counts_hi.get(k, 0) - counts_lo.get(k, 0)) / ((groups_hi - groups_lo) * rows)
              for k in keys}
    per_wave = {k: (counts_lo.get(k, 0) - per_gr[k] * groups_lo * rows) / waves for k in keys}
    return per_gr, per_wave


_CACHE: dict[tuple[str, str], KernelCost] = {}


def measure_cost(spec: Any, arch: str = "gfx1100", seed: int = 0) -> KernelCost:
    """Run ``spec`` on the emulator at two K values (one block of R rows) and take the slope."""
    key = (spec.name, arch)
    if key in _CACHE:
        return _CACHE[key]
    from hqval.backends import get
    from hqval.formats import by_qt

    be = get("emu", arch)
    program = be.load(spec)
    R = spec.rows_per_block
    counts = []
    for K in SLOPE_K:
        w = np.random.default_rng(seed).standard_normal((R, K)).astype(np.float32)
        blob = by_qt(spec.qt).encode(w)
        x = np.random.default_rng(seed + 1).standard_normal(K).astype(np.float32)
        bw, bx, by = be.alloc(blob.nbytes), be.alloc(x.nbytes), be.alloc(4 * R)
        be.copy_in(bw, blob)
        be.copy_in(bx, x)
        info = be.launch(program, (1, 1, 1), (spec.block, 1, 1), [bw, bx, by, R, K])
        if not info.counts:
            raise RuntimeError(f"{spec.name}: the emulator reported no instruction counts")
        counts.append(info.counts)
        for b in (bw, bx, by):
            be.free(b)
    per_gr, per_block = slope(counts[0], counts[1], SLOPE_K[0] // 256, SLOPE_K[1] // 256, R, 1)
    from hqval.audit.static import analyze

    code = analyze(Path(program.provenance["code_object"]), arch)[spec.symbol]
    body, why = loop_body(code, spec, per_gr)
    if body is None:
        raise RuntimeError(f"latency term: {why}")
    cost = KernelCost(spec.name, arch, per_gr, per_block, body,
                      int(code.notes.get(".vgpr_count", 0)),
                      int(code.notes.get(".group_segment_fixed_size", 0)), spec.block)
    _CACHE[key] = cost
    return cost


def save_costs(costs: list[KernelCost], path: str) -> None:
    """Write measured costs as JSON (the device run reads them: no emulator there)."""
    import json

    def one(c: KernelCost) -> dict[str, Any]:
        d = {k: v for k, v in asdict(c).items() if k != "loop"}
        d["loop"] = c.loop.to_dict() if c.loop is not None else None
        return d

    from hqval.safeio import write_atomic

    write_atomic(Path(path), json.dumps([one(c) for c in costs], indent=1, sort_keys=True)
                 + "\n", what="--costs-out")


def load_costs(path: str) -> dict[str, KernelCost]:

    try:
        from hqval.safeio import load_json

        data = load_json(path, what="--costs")
        costs = [KernelCost(d["kernel"], d["arch"], dict(d["per_group_row"]),
                            dict(d["per_block"]),
                            LoopBody.from_dict(d["loop"]) if d.get("loop") else None,
                            int(d.get("vgprs", 0)), int(d.get("lds_bytes", 0)),
                            int(d.get("block", 32))) for d in data]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a costs file written by `hqval bench --predict "
                         f"--costs-out` ({exc})") from None
    return {c.kernel: c for c in costs}
