"""The static ISA audit: per kernel, the metadata note's counts, the instructions'
classes, the loops of the control-flow graph and an abstract interpretation of the
address arithmetic (``AddressFlow``), and the six rules decided from them.

  header_scalar   (a) qt=44/45 headers are read by scalar loads, never vector loads
  no_spill        (b) no VGPR/SGPR spills, no scratch
  vgpr_budget     (c) VGPRs within the arch's budget for the kernel's launch bounds,
                      and the declared minimum waves per EU met
  v2_valu_delta   (d) VALU cost per group-row of a v2 kernel over its v1 baseline <= 3
  wmma            (e) prefill kernels contain v_wmma of the arch's generation
  payload_offset  (f) the payload is read at offset 8 of the group

Rules (a), (d) and (f) are decided from executed facts where the emulator ran the kernel
(``hqval.audit.executed``); the static findings here stay beside them as evidence.

Every rule passes, fails on a proven violation (the instructions are the evidence) or says
unsupported with the reason it could not decide.  The loads of W and their offsets come
from the address flow: a constant the compiler folded into a base register counts like
one in the immediate, spill reloads are never W loads, and a kernel is row-per-lane (each
lane reads its own row, as WMMA GEMMs do) or row-per-wave (GEMV) by how its W addresses
depend on the lane.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hqval.audit.occupancy import (
    max_waves_per_simd,
    occupancy,
    vgpr_budget,
    vgpr_budget_derivation,
    vgpr_file,
)
from hqval.audit.rules import RULE_LETTER, V2_VALU_BUDGET
from hqval.codeobject import Instruction
from hqval.codeobject.disasm import _NO_DST, _TWO_DST
from hqval.codeobject.disasm import regs as _regs
from hqval.formats import HFQ4G256_QT
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec


def find_loops(instrs: list[Instruction]) -> list[tuple[int, int]]:
    """Natural loops of a function's control-flow graph as (first, last) instruction
    index spans: a back edge is an edge whose target block dominates its source block
    (``s_cbranch_*`` or ``s_branch``: a loop may close with an unconditional branch), and
    the loop is every block that reaches the source without passing the header."""
    n = len(instrs)
    if n == 0:
        return []
    index = {ins.addr: i for i, ins in enumerate(instrs)}
    leaders = {0}
    for i, ins in enumerate(instrs):
        if ins.is_branch and ins.target in index:
            leaders.add(index[ins.target])
        if (ins.is_branch or ins.mnemonic in ("s_endpgm", "s_setpc_b64")) and i + 1 < n:
            leaders.add(i + 1)
    starts = sorted(leaders)
    block_of = {}
    bounds = []
    for k, st in enumerate(starts):
        end = (starts[k + 1] if k + 1 < len(starts) else n) - 1
        bounds.append((st, end))
        block_of[st] = k
    succ: list[list[int]] = []
    for k, (_st, end) in enumerate(bounds):
        last = instrs[end]
        nxt = [k + 1] if k + 1 < len(bounds) else []
        if last.mnemonic in ("s_endpgm", "s_setpc_b64"):
            succ.append([])
        elif last.is_branch:
            tgt = [block_of[index[last.target]]] if last.target in index else []
            succ.append(tgt if last.mnemonic.startswith("s_branch") else tgt + nxt)
        else:
            succ.append(nxt)
    nb = len(bounds)
    pred: list[list[int]] = [[] for _ in range(nb)]
    for k, ss in enumerate(succ):
        for t in ss:
            pred[t].append(k)
    full = (1 << nb) - 1
    dom = [full] * nb
    dom[0] = 1
    changed = True
    while changed:
        changed = False
        for k in range(1, nb):
            meet = full
            for p in pred[k]:
                meet &= dom[p]
            new = (meet if pred[k] else 0) | (1 << k)
            if new != dom[k]:
                dom[k], changed = new, True
    bodies: dict[int, set[int]] = {}
    for u in range(nb):
        for h in succ[u]:
            if dom[u] >> h & 1:  # h dominates u: u -> h is a back edge
                body = bodies.setdefault(h, {h})
                stack = [u]
                while stack:
                    x = stack.pop()
                    if x not in body:
                        body.add(x)
                        stack.extend(pred[x])
    spans = [(min(bounds[b][0] for b in body), max(bounds[b][1] for b in body))
             for body in bodies.values()]
    return sorted(spans, key=lambda sp: (sp[0], -sp[1]))


_SREG = re.compile(r"^s(\d+)$")
_SRANGE = re.compile(r"^s\[(\d+):(\d+)\]$")
_SCMP = re.compile(r"^s_cmpk?_(eq|lg|lt|le|gt|ge)_(i32|u32)$")
_NOT_A_WRITE = ("s_cmp", "s_cbranch", "s_branch", "s_waitcnt", "s_clause", "s_nop",
                "s_barrier", "s_store", "s_buffer_store", "s_sendmsg", "s_delay_alu",
                "s_inst_prefetch", "s_endpgm", "s_setprio", "s_sleep", "s_dcache", "s_icache")


def _sregs(op: str) -> range:
    """The SGPR numbers an operand names (``s7``, ``s[2:3]``), else none."""
    if m := _SREG.match(op):
        return range(int(m.group(1)), int(m.group(1)) + 1)
    if m := _SRANGE.match(op):
        return range(int(m.group(1)), int(m.group(2)) + 1)
    return range(0)


def _writes_sgpr(ins: Instruction, reg: int) -> bool:
    """Whether ``ins`` may write SGPR ``reg``: a scalar instruction's first operand, a
    vector one's SGPR destination (VOPC/VOP3 compares, readlane, carry-out)."""
    ops = ins.operands
    if not ops or ins.mnemonic.startswith(_NOT_A_WRITE):
        return False
    if ins.mnemonic.startswith("s_"):
        return reg in _sregs(ops[0])
    if reg in _sregs(ops[0]):
        return True
    carry = "_co_" in ins.mnemonic or "div_scale" in ins.mnemonic
    return carry and len(ops) > 1 and reg in _sregs(ops[1])


def _int_operand(op: str) -> int | None:
    try:
        return int(op, 0)
    except ValueError:
        return None


def constant_trip_count(instrs: Sequence[Instruction], span: tuple[int, int]) -> int | None:
    """The iterations of loop ``span`` when its control flow fixes them, else None.  The
    loop is one block closing with ``s_cbranch_scc0/1`` back to its first instruction,
    after an ``s_cmp``/``s_cmpk`` of an SGPR against a constant (the last SCC write of the
    block); that SGPR is stepped once in the block by a constant ``s_add``/``s_sub``/
    ``s_addk`` and set by an ``s_mov`` of a constant in the straight-line code just
    before the loop, which is entered only there.  Anything else (a run-time bound, a
    second exit, a second write of the induction register) is None: the static rules say
    ``unsupported`` rather than guess."""
    a, b = span
    br = instrs[b]
    if br.mnemonic not in ("s_cbranch_scc0", "s_cbranch_scc1") or br.target != instrs[a].addr:
        return None
    body = instrs[a:b]
    if any(i.is_branch for i in body):
        return None
    cmp_k = max((k for k, i in enumerate(body) if _SCMP.match(i.mnemonic)), default=None)
    if cmp_k is None:
        return None
    # nothing after the compare may write SCC (a scalar ALU op other than a move)
    if any(i.mnemonic.startswith("s_") and not i.mnemonic.startswith(("s_mov", "s_cmov"))
           and not i.mnemonic.startswith(_NOT_A_WRITE) and not i.mnemonic.startswith(
               ("s_load", "s_buffer_load")) for i in body[cmp_k + 1:]):
        return None
    cmp = body[cmp_k]
    m = _SCMP.match(cmp.mnemonic)
    assert m is not None
    rel, ty = m.group(1), m.group(2)
    if len(cmp.operands) != 2:
        return None
    lhs, rhs = cmp.operands
    regs = [_sregs(o) for o in (lhs, rhs)]
    consts = [_int_operand(o) for o in (lhs, rhs)]
    if len(regs[0]) == 1 and consts[1] is not None:
        reg, bound, reg_left = regs[0][0], consts[1], True
    elif len(regs[1]) == 1 and consts[0] is not None:
        reg, bound, reg_left = regs[1][0], consts[0], False
    else:
        return None
    if cmp.mnemonic.startswith("s_cmpk") and ty == "i32" and bound & 0x8000:
        bound -= 0x10000  # the k form's 16-bit immediate, sign-extended for i32
    writes = [k for k, i in enumerate(body) if _writes_sgpr(i, reg)]
    if len(writes) != 1:
        return None
    step_ins = body[writes[0]]
    sops = step_ins.operands
    step: int | None = None
    if step_ins.mnemonic in ("s_add_i32", "s_add_u32", "s_sub_i32", "s_sub_u32") \
            and len(sops) == 3 and reg in _sregs(sops[0]):
        others = [o for o in sops[1:] if reg not in _sregs(o)]
        if len(others) == 1 and len([o for o in sops[1:] if reg in _sregs(o)]) == 1:
            c = _int_operand(others[0])
            if c is not None and not (step_ins.mnemonic.startswith("s_sub")
                                      and reg not in _sregs(sops[1])):
                step = -c if step_ins.mnemonic.startswith("s_sub") else c
    elif step_ins.mnemonic == "s_addk_i32" and len(sops) == 2:
        c = _int_operand(sops[1])
        if c is not None:
            step = c - 0x10000 if c & 0x8000 else c
    if step is None:
        return None
    # the initial value: the last write of the register before the loop, in straight-line
    # code that only falls through into it (no branch between, none into the header but
    # the back edge)
    into = [i for i in instrs if i.is_branch and i.target == instrs[a].addr]
    if into != [br]:
        return None
    init: int | None = None
    for k in range(a - 1, -1, -1):
        ins = instrs[k]
        sets = _writes_sgpr(ins, reg)
        if not sets and (ins.is_branch
                         or any(j.is_branch and j.target == ins.addr for j in instrs)):
            return None
        if not sets:
            continue
        ops = ins.operands
        if ins.mnemonic in ("s_mov_b32", "s_movk_i32") and len(ops) == 2:
            init = _int_operand(ops[1])
            if init is not None and ins.mnemonic == "s_movk_i32" and init & 0x8000:
                init -= 0x10000
        elif (ins.mnemonic == "s_mov_b64" and len(ops) == 2
              and (c := _int_operand(ops[1])) is not None):
            lo = _sregs(ops[0])
            init = c & 0xFFFFFFFF if reg == lo.start else (c >> 32) & 0xFFFFFFFF
        break
    if init is None:
        return None
    mask = 0xFFFFFFFF

    def value(v: int) -> int:
        v &= mask
        return v - (1 << 32) if ty == "i32" and v & 0x80000000 else v

    def holds(v: int) -> bool:
        x, y = (value(v), value(bound)) if reg_left else (value(bound), value(v))
        return {"eq": x == y, "lg": x != y, "lt": x < y, "le": x <= y, "gt": x > y,
                "ge": x >= y}[rel]

    v = init
    for trips in range(1, 1 << 16):
        if writes[0] < cmp_k:
            v += step
            scc = holds(v)
        else:
            scc = holds(v)
            v += step
        if scc != (br.mnemonic == "s_cbranch_scc1"):
            return trips
    return None


@dataclass
class KernelCode:
    name: str
    arch: str
    instructions: list[Instruction]
    notes: dict[str, Any]
    target_arch: str = ""
    _loops: list[tuple[int, int]] | None = field(default=None, repr=False, compare=False)
    _flow: Any = field(default=None, repr=False, compare=False)

    def address_flow(self) -> AddressFlow:
        """The kernel's AddressFlow, computed once (several rules read it) per instruction
        stream in this process: the flow is a function of the instructions alone (their
        addresses, encodings and text; not the arch, name or metadata), so another arch's
        object decoding to the same instructions shares it."""
        if self._flow is None:
            key = tuple((i.addr, i.text, tuple(i.words)) for i in self.instructions)
            flow = _FLOWS.get(key)
            if flow is None:
                flow = AddressFlow(self)
                if len(_FLOWS) >= _ANALYZED_LIMIT:
                    _FLOWS.pop(next(iter(_FLOWS)))
                _FLOWS[key] = flow
            self._flow = flow
        return self._flow  # type: ignore[no-any-return]

    def loops(self) -> list[tuple[int, int]]:
        """(first, last) instruction indexes of each natural loop of the control-flow
        graph (a back edge's target dominates its source: conditional and unconditional
        back edges alike), one per loop header, outermost first."""
        if self._loops is None:
            self._loops = find_loops(self.instructions)
        return self._loops

    def main_loop_span(self) -> tuple[int, int] | None:
        loops = self.loops()
        return max(loops, key=lambda fl: fl[1] - fl[0]) if loops else None

    def weight_loop_span(self, wargs: frozenset[str]) -> tuple[int, int] | None:
        """The largest loop holding a load of W (by data flow); None when no loop does."""
        flow = self.address_flow()
        w = {f.instruction.addr for f in flow.facts.values()
             if f.tags & wargs and not f.is_scratch}
        spans = [sp for sp in self.loops()
                 if any(self.instructions[i].addr in w for i in range(sp[0], sp[1] + 1))]
        return max(spans, key=lambda fl: fl[1] - fl[0]) if spans else None

    def nest(self, span: tuple[int, int]) -> tuple[int, ...]:
        """The loop nest inside ``span``: the depth of each loop it contains (itself 0)."""
        inner = [sp for sp in self.loops() if span[0] <= sp[0] and sp[1] <= span[1]]
        return tuple(sorted(sum(1 for o in inner if o != sp and o[0] <= sp[0] and
                                sp[1] <= o[1]) for sp in inner))

    def main_loop(self) -> list[Instruction]:
        """The loop with the most instructions (the unrolled group loop); [] if none."""
        span = self.main_loop_span()
        if span is None:
            return []
        return self.instructions[span[0]:span[1] + 1]

    def histogram(self, body: list[Instruction] | None = None) -> Counter[str]:
        return Counter(ins.mnemonic for ins in (self.instructions if body is None else body))

    def classes(self, body: list[Instruction] | None = None) -> Counter[str]:
        c: Counter[str] = Counter()
        for ins in self.instructions if body is None else body:
            c[ins.klass] += ins.valu_ops if ins.klass == "valu" else 1
        return c


_ANALYZED: dict[tuple[str, str], dict[str, KernelCode]] = {}
_ANALYZED_LIMIT = 256
# AddressFlow by instruction stream ((address, text, encoding words) of every instruction)
_FLOWS: dict[tuple[tuple[int, str, tuple[int, ...]], ...], AddressFlow] = {}


def analyze(code_object: Path | bytes, arch: str) -> dict[str, KernelCode]:
    """Kernels of a code object by name: metadata and instructions, read by
    ``hqval.codeobject`` (decoded once per content and disassembler).  One analysis per
    (object content, arch) per process: a v1 baseline that several v2 kernels are judged
    against has its loops and address flow computed once, not once per sibling (the
    ``KernelCode`` is shared: do not change it)."""
    from hqval.codeobject import load

    co = load(code_object)
    key = (co.sha256, arch)
    kernels = _ANALYZED.get(key)
    if kernels is None:
        kernels = {name: KernelCode(name, arch, co.disassembly(name, arch),
                                    dict(info.metadata), co.target)
                   for name, info in co.kernels.items()}
        if len(_ANALYZED) >= _ANALYZED_LIMIT:
            _ANALYZED.pop(next(iter(_ANALYZED)))
        _ANALYZED[key] = kernels
    return dict(kernels)


# ---- data flow: which loads read W, and at what offset ---------------------------------
#
# Each 32-bit register holds an abstract value: the kernel arguments it derives from
# (``arg@OFFSET`` tags), its constant part (``off``, None once an operation makes it
# unknown), whether it is exactly that constant (``pure``) and how it depends on the lane
# (0: uniform, 1: lane-dependent by constants only, e.g. 4*lane, 2: the lane scaled by a
# run-time value, e.g. (lane % 16) * row_bytes -- a row-per-lane access).  Terms other than
# the constant (pointers, row * row_bytes, group * 136, a loaded index) are opaque and
# taken as whole groups; an address whose constant part is known therefore has its group
# offset in ``off % group_bytes``, wherever the compiler folded the constant (an immediate,
# a base register, a lane offset).  Operations not modelled make the constant unknown:
# the rules then say unsupported, never fail.

@dataclass(frozen=True)
class Val:
    tags: frozenset[str] = frozenset()
    off: int | None = 0
    pure: bool = False
    lane: int = 0


_UNIFORM = Val()
_LANE0 = Val(lane=1)  # work-item ids arrive in v0 (x; y and z packed above bit 10 on gfx11+)
_U32 = 0xFFFFFFFF


def _const(v: int) -> Val:
    v &= _U32
    return Val(off=v - (1 << 32) if v >> 31 else v, pure=True)  # a 32-bit literal, signed


def _join(*vals: Val, off: int | None = None, pure: bool = False, lane: int | None = None) -> Val:
    return Val(frozenset().union(*(v.tags for v in vals)), off, pure,
               max((v.lane for v in vals), default=0) if lane is None else lane)


def _sum(*vals: Val) -> Val:
    offs = [v.off for v in vals]
    off = None if any(o is None for o in offs) else sum(o for o in offs if o is not None)
    return _join(*vals, off=off, pure=all(v.pure for v in vals))


def _scale(v: Val, k: int) -> Val:
    return _join(v, off=None if v.off is None else v.off * k, pure=v.pure)


def _product(a: Val, b: Val) -> Val:
    if a.pure and a.off is not None:
        return _scale(b, a.off)
    if b.pure and b.off is not None:
        return _scale(a, b.off)
    lane = 2 if (a.lane or b.lane) else 0
    # An opaque term is whole groups, so its product with anything is too: constant 0.
    aligned = (not a.pure and a.off == 0) or (not b.pure and b.off == 0)
    return _join(a, b, off=0 if aligned else None, lane=lane)


def _opaque(*vals: Val) -> Val:
    """A bit operation of its inputs: opaque with constant 0 when they have no constant
    part (a mask or shift of a whole-group term), else unknown."""
    consts = [v for v in vals if v.pure]
    if consts and len(consts) == len(vals) and all(v.off is not None for v in consts):
        return _join(*vals, off=None, lane=0)
    rest = [v for v in vals if not v.pure]
    off = 0 if all(v.off == 0 for v in rest) else None
    return _join(*vals, off=off)


_LIT = re.compile(r"^-?(?:0x[0-9a-fA-F]+|\d+)$")


def _operand(text: str, state: dict[str, Val]) -> Val | None:
    reg, val = _operand_form(text)
    return val if reg is None else state.get(reg, val)


@functools.lru_cache(maxsize=65536)
def _operand_form(text: str) -> tuple[str | None, Val | None]:
    """What ``_operand`` makes of ``text``, whatever the state: (the register whose value
    it is, that register's value before any write) or (None, the value itself)."""
    t = text.strip()
    if _LIT.match(t):
        return None, _const(int(t, 0))
    t = _SOURCE_MODS.sub("", t).rstrip(")|")  # source modifiers of a register
    regs = _regs(t)
    if regs:
        return regs[0], _LANE0 if regs[0].startswith("v") else _UNIFORM
    if t in ("null", "off", "vcc_lo", "vcc", "exec_lo", "exec", "m0", "scc") or not t:
        return None, None
    if t.startswith(("ttmp", "s[", "v[")):
        return None, _UNIFORM
    return None, None  # float literals and modifiers: not an address part


@functools.lru_cache(maxsize=65536)
def _split_operands(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in _OPERAND_COMMA.split(text) if p.strip())


@dataclass(frozen=True)
class LoadFacts:
    """What the flow knows about one load: the arguments its address derives from, its
    constant byte offset (None: unknown) and how the address depends on the lane."""

    instruction: Instruction
    tags: frozenset[str]
    offsets: tuple[int | None, ...]  # one per pass over the instruction (loops: two)
    lane: int

    @property
    def is_scratch(self) -> bool:
        return self.instruction.mnemonic.startswith("scratch_")

    def group_offset(self, group_bytes: int) -> int | None:
        """Offset inside the group, when every pass agrees on it modulo the stride."""
        offs = {None if o is None else o % group_bytes for o in self.offsets}
        return next(iter(offs)) if len(offs) == 1 else None

    def first_offset(self, group_bytes: int) -> int | None:
        """Offset inside the group on the loop's first iteration (the first pass), which
        the kernel really reads whenever the loop runs."""
        o = self.offsets[0]
        return None if o is None else o % group_bytes


# the mnemonic patterns AddressFlow._value dispatches on, compiled once (it runs per
# instruction of every audited kernel)
_ADD_OPS = re.compile(r"(v_add_(co_)?u32|v_add_nc_u32|v_add_u32|v_add_i32|v_add_nc_i32|"
    r"s_add_(co_)?[iu]32|s_add_u32|s_add_i32|s_add_nc_u64|v_add_nc_u64|"
    r"v_lshl_add_u64|v_add_co_u32)")
_SUB_OPS = re.compile(r"(v_sub_(co_)?u32|v_sub_nc_u32|s_sub_(co_)?[iu]32|s_sub_u32|s_sub_i32)")
_SUBREV_OPS = re.compile(r"(v_subrev_(co_)?u32|v_subrev_nc_u32)")
_MUL_OPS = re.compile(r"(v_mul_lo_u32|v_mul_u32_u24|v_mul_i32_i24|s_mul_i32|s_mul_u64|"
    r"v_mul_lo_i32)")
_MAD_OPS = re.compile(r"(v_mad_u64_u32|v_mad_i64_i32|v_mad_co_u64_u32|v_mad_co_i64_i32|"
    r"v_mad_u32_u24|v_mad_i32_i24|v_mad_u32_u16)")
_LSHLREV_OPS = re.compile(r"(v_lshlrev_b(32|64)|v_lshlrev_b16)")
_S_LSHL_OPS = re.compile(r"s_lshl_b(32|64)")
_S_LSHL_ADD_OPS = re.compile(r"s_lshl([1-4])_add_u32")
_BITWISE_OPS = re.compile(r"(v_and_|s_and_|v_lshr|s_lshr|v_ashr|s_ashr|v_bfe|s_bfe|"
    r"v_or_|s_or_|v_xor|s_xor)")
_SOURCE_MODS = re.compile(r"^(?:-|\||abs\()")
_OPERAND_COMMA = re.compile(r",(?![^\[]*\])")


class AddressFlow:
    """The abstract interpretation of a kernel's address arithmetic (see ``Val``)."""

    def __init__(self, kc: KernelCode) -> None:
        self.code = kc
        self.facts: dict[int, LoadFacts] = {}
        ins_list = kc.instructions
        first_smem = next((i for i in ins_list if i.klass == "smem"), None)
        self.found_kernarg = first_smem is not None
        if first_smem is None:
            return
        parts = _split_operands(first_smem.operand_text)
        base_regs = _regs(parts[1]) if len(parts) > 1 else []
        state: dict[str, Val] = {r: Val(frozenset({"kernarg"})) for r in base_regs}
        self._spills: dict[str, Val] = {}
        # Straight through up to the end of the group loop (what the rules read), then the
        # loop body once more from its back-edge state, so loop-carried pointers are seen.
        span = kc.main_loop_span()
        end = span[1] + 1 if span is not None else len(ins_list)
        for ins in ins_list[:end]:
            self._step(ins, state)
        if span is not None:
            for ins in ins_list[span[0]:span[1] + 1]:
                self._step(ins, state)

    # -- recording
    def _record(self, ins: Instruction, addr: Val | None) -> None:
        prev = self.facts.get(ins.addr)
        tags: frozenset[str]
        off: int | None
        if addr is None:
            tags, off, lane = frozenset(), None, 0
        else:
            tags, lane = addr.tags, addr.lane
            off = None if addr.off is None else addr.off + ins.imm_offset
        if prev is None:
            self.facts[ins.addr] = LoadFacts(ins, tags, (off,), lane)
        else:
            self.facts[ins.addr] = LoadFacts(ins, prev.tags | tags, (*prev.offsets, off),
                                             max(prev.lane, lane))

    def _address(self, ins: Instruction, ops: Sequence[str], state: dict[str, Val]
                 ) -> Val | None:
        m = ins.mnemonic
        if ins.klass == "smem":
            base = _operand(ops[1], state) if len(ops) > 1 else None
            soff = _operand(ops[2], state) if len(ops) > 2 and _regs(ops[2]) else None
            if base is None:
                return None
            return _sum(base, soff) if soff is not None and not soff.pure else base
        if m.startswith(("global_", "flat_")):
            vaddr = _operand(ops[1], state) if len(ops) > 1 else None
            saddr = _operand(ops[2], state) if len(ops) > 2 and ops[2] != "off" else None
            if vaddr is None:
                return None
            return _sum(vaddr, saddr) if saddr is not None else vaddr
        if m.startswith("buffer_"):
            # buffer_load vdst, vaddr, srsrc, soffset [offen]: base of the resource + offsets
            if len(ops) < 4:
                return None
            rsrc = _operand(ops[2], state)
            soff = _operand(ops[3], state)
            parts = [v for v in (rsrc, soff) if v is not None]
            if "offen" in ins.operand_text:
                vaddr = _operand(ops[1], state)
                if vaddr is not None:
                    parts.append(vaddr)
            return _sum(*parts) if parts else None
        return None

    # -- one instruction
    def _step(self, ins: Instruction, state: dict[str, Val]) -> None:
        m = ins.mnemonic
        if m.startswith("v_dual_"):
            for half in ins.operand_text.split("::"):
                words = half.strip().split(None, 1)
                if len(words) == 2 and words[0].startswith("v_dual_"):
                    self._alu(words[0].replace("v_dual_", "v_"), words[1], state)
                else:
                    self._alu(m.replace("v_dual_", "v_"), half, state)
            return
        ops = _split_operands(ins.operand_text)
        if ins.is_load:
            addr = self._address(ins, ops, state)
            self._record(ins, addr)
            dst = _regs(ops[0]) if ops else []
            if m.startswith("scratch_"):
                key = ins.operand_text.split(",", 1)[-1].strip()
                for i, r in enumerate(dst):
                    state[r] = self._spills.get(f"{key}#{i}", Val(off=None))
                return
            if ins.klass == "smem" and addr is not None and "kernarg" in addr.tags:
                off = ins.imm_offset
                for i, r in enumerate(dst):
                    state[r] = Val(frozenset({f"arg@{(off + 4 * i) // 8 * 8}"}))
                return
            for r in dst:
                state[r] = Val(frozenset({"data"}), lane=0 if ins.klass == "smem" else 1)
            return
        if m.startswith("scratch_store"):
            key_ops = ins.operand_text.split(",")
            data = _regs(key_ops[1]) if len(key_ops) > 1 else []
            key = ",".join([key_ops[0], *key_ops[2:]]).strip()
            for i, r in enumerate(data):
                self._spills[f"{key}#{i}"] = state.get(r, Val(off=None))
            return
        self._alu(m, ins.operand_text, state)

    def _alu(self, m: str, operands: str, state: dict[str, Val]) -> None:
        if m.startswith(_NO_DST) or m.startswith(("s_cbranch", "s_branch")):
            return
        ops = _split_operands(operands)
        if not ops:
            return
        two = m.startswith(_TWO_DST)
        dst = _regs(ops[0])
        srcs_txt = ops[2:] if two else ops[1:]
        if m.startswith("v_writelane"):
            if len(ops) >= 3:
                v = _operand(ops[1], state) or Val(off=None)
                self._spills[f"{ops[0]}@{ops[2]}"] = v
            return
        if m.startswith("v_readlane"):
            if len(ops) >= 3 and dst:
                state[dst[0]] = self._spills.get(f"{ops[1]}@{ops[2]}", Val(off=None))
            return
        if m.startswith(("s_addk_", "s_mulk_")):
            srcs_txt = (ops[0], *ops[1:])  # SOPK: dst = dst op imm16
        srcs = [_operand(s, state) for s in srcs_txt]
        if m.startswith(("s_addk_", "s_mulk_", "s_movk_")) and srcs and srcs[-1] is not None \
                and srcs[-1].pure and srcs[-1].off is not None:
            imm = srcs[-1].off & 0xFFFF  # SOPK immediates are 16-bit, sign-extended
            srcs[-1] = Val(off=imm - 0x10000 if imm >> 15 else imm, pure=True)
        vals = [s for s in srcs if s is not None]
        wide = bool(dst) and len(dst) == 2 and m.endswith(("_b64", "_u64", "_i64"))
        out = self._value(m, srcs, vals, srcs_txt, state)
        if not dst:
            return
        if wide or m.startswith(("v_mad_u64", "v_mad_i64", "v_mad_co_")):
            # 64-bit results: the constant lives in the low dword; the high dword keeps tags
            hi_regs = _regs(ops[0])
            state[hi_regs[0]] = out
            for r in hi_regs[1:]:
                state[r] = _join(out, off=None)
            return
        for r in dst:
            state[r] = out
        if two and len(_regs(ops[1])) and not m.startswith(("v_mad", "v_div")):
            for r in _regs(ops[1]):  # the carry-out
                state[r] = _join(*vals, off=None)

    def _value(self, m: str, srcs: list[Val | None], vals: list[Val], txt: Sequence[str],
               state: dict[str, Val]) -> Val:
        def src(i: int) -> Val:
            s = srcs[i] if i < len(srcs) else None
            return s if s is not None else Val(off=None)

        if m.startswith("v_readfirstlane"):
            return _join(src(0), off=src(0).off, pure=src(0).pure, lane=0)
        if m.startswith(("v_mov_b", "s_mov_b", "s_movk_i32", "v_mov_b64")):
            return src(0)
        if m.startswith(("s_addk_", "s_mulk_")):
            return _sum(src(0), src(1)) if m.startswith("s_addk") else _product(src(0), src(1))
        if _ADD_OPS.match(m):
            if m.startswith("v_lshl_add_u64"):
                return _sum(_scale(src(0), 1 << (src(1).off or 0)) if src(1).pure else
                            _join(src(0), src(1), off=None), src(2))
            return _sum(src(0), src(1))
        if m.startswith("v_add3_u32"):
            return _sum(src(0), src(1), src(2))
        if _SUB_OPS.match(m):
            return _sum(src(0), _scale(src(1), -1))
        if _SUBREV_OPS.match(m):
            return _sum(src(1), _scale(src(0), -1))
        if _MUL_OPS.match(m):
            return _product(src(0), src(1))
        if _MAD_OPS.match(m):
            return _sum(_product(src(0), src(1)), src(2))
        if _LSHLREV_OPS.match(m):
            k = src(0)
            return _scale(src(1), 1 << k.off) if k.pure and k.off is not None and k.off < 32 \
                else _opaque(src(1), k)
        if _S_LSHL_OPS.match(m):
            k = src(1)
            return _scale(src(0), 1 << k.off) if k.pure and k.off is not None and k.off < 64 \
                else _opaque(src(0), k)
        mm = _S_LSHL_ADD_OPS.match(m)
        if mm:
            return _sum(_scale(src(0), 1 << int(mm.group(1))), src(1))
        if m.startswith("v_lshl_add_u32"):
            k = src(1)
            if k.pure and k.off is not None:
                return _sum(_scale(src(0), 1 << k.off), src(2))
            return _join(*vals, off=None)
        if m.startswith("v_add_lshl_u32"):
            k = src(2)
            if k.pure and k.off is not None:
                return _scale(_sum(src(0), src(1)), 1 << k.off)
            return _join(*vals, off=None)
        if m.startswith("v_lshl_or_b32"):
            # (a << k) | c is an add when c is a constant below 1 << k
            k, c = src(1), src(2)
            if k.pure and k.off is not None and c.pure and c.off is not None \
                    and 0 <= c.off < (1 << k.off):
                return _sum(_scale(src(0), 1 << k.off), c)
            return _opaque(src(0), k, c)
        if m.startswith(("v_cndmask", "s_cselect", "s_cmov")):
            pair = [v for v in vals[:2]]
            if len(pair) == 2 and pair[0].off == pair[1].off and pair[0].off is not None:
                return _join(*pair, off=pair[0].off, pure=pair[0].pure and pair[1].pure,
                             lane=max(1 if m.startswith("v_") else 0, *(v.lane for v in pair)))
            return _join(*vals, off=None, lane=max([1 if m.startswith("v_") else 0,
                                                     *(v.lane for v in vals)]))
        if m.startswith(("v_and_or", "v_bfi", "v_alignbit", "v_alignbyte", "v_perm")):
            return _join(*vals, off=None)  # byte and bit mixes: nothing known of the result
        if _BITWISE_OPS.match(m):
            if m.startswith(("v_or_", "s_or_", "v_xor", "s_xor")):
                # x | 0 and x ^ 0 keep x.  A uniform x of whole groups (8-byte aligned) with
                # an 8-aligned constant part ORed with c < 8 is x + c (the compiler's way of
                # writing +4 when it knows the low bits are clear).
                consts = [v for v in vals if v.pure]
                other = [v for v in vals if not v.pure]
                if (m.startswith(("v_or_", "s_or_")) and len(consts) == 1 and len(other) == 1
                        and consts[0].off is not None and 0 <= consts[0].off < 8
                        and other[0].lane == 0 and other[0].off is not None
                        and other[0].off % 8 == 0):
                    return _sum(other[0], consts[0])
                if consts and all(c.off == 0 for c in consts) and len(vals) == 2:
                    return next(v for v in vals if not v.pure) if any(
                        not v.pure for v in vals) else _const(0)
                return _join(*vals, off=None)
            return _opaque(*vals)
        if m.startswith("v_cmp") or m.startswith("s_cmp"):
            return _join(*vals, off=None)
        return _join(*vals, off=None)

    # -- queries
    def origins(self) -> dict[int, frozenset[str]]:
        return {a: f.tags for a, f in self.facts.items()}


def pointer_origins(kc: KernelCode) -> dict[int, frozenset[str]]:
    """For every memory load up to the end of the group loop (by address): the kernel
    arguments its address derives from, as ``arg@OFFSET`` tags."""
    return kc.address_flow().origins()


# ---- the rules ---------------------------------------------------------------------------



@dataclass
class Audit:
    spec: KernelSpec
    arch: Any
    code: KernelCode
    baseline: KernelCode | None = None
    rows: list[Row] = field(default_factory=list)
    # (desired, final): the compiler could not meet the kernel's declared minimum waves per
    # EU (__launch_bounds__'s second argument), as its build reported
    occupancy_miss: tuple[int, int] | None = None

    @property
    def arch_name(self) -> str:
        return str(getattr(self.arch, "name", self.arch))

    def row(self, rule: str, status: Status, message: str, *, measured: float | None = None,
            tolerance: float | None = None, derivation: str = "",
            details: dict[str, Any] | None = None) -> Row:
        r = Row(kind="audit", check=f"audit_{rule}", kernel=self.spec.name, arch=self.arch_name,
                backend="isa", status=status, measured=measured, tolerance=tolerance,
                derivation=derivation, message=message,
                details={"rule": RULE_LETTER[rule], **(details or {})})
        self.rows.append(r)
        return r


def _loads(body: list[Instruction], klass: str) -> Counter[str]:
    return Counter(i.mnemonic for i in body if i.klass == klass and i.is_load)


def _dwords(mnemonic: str) -> int:
    m = re.search(r"(?:_b|dwordx?)(\d+)$", mnemonic)
    if not m:
        return 1
    n = int(m.group(1))
    return n // 32 if "_b" in mnemonic else n


def weight_args(spec: KernelSpec) -> frozenset[str]:
    """The kernarg slots of the kernel's weight matrices (its signature's ``weight``
    arguments; a pointer table's matrices are reached through the table, not named here)."""
    offsets = spec.signature.kernarg_offsets()
    return frozenset(f"arg@{offsets[a.name]}" for a in spec.signature.by_role("weight"))


def _evidence(loads: Iterable[LoadFacts], limit: int = 8) -> list[str]:
    return [f"0x{f.instruction.addr:x}: {f.instruction.mnemonic} {f.instruction.operand_text}"
            for f in list(loads)[:limit]]


def _format_layout(qt: int) -> tuple[int, int, frozenset[int]]:
    """(group bytes, payload offset, header dword offsets a kernel may read) of ``qt``.
    qt=45's [4..8) is a zero pad: a read of it is not a header read."""
    from hqval.formats import by_qt

    try:
        fmt = by_qt(qt)
    except KeyError:
        return 136, 8, frozenset({0, 4})
    header_bytes = fmt.payload_offset
    if getattr(fmt, "header", None) == "f16" and getattr(fmt, "halves", 2) == 1:
        header_bytes = 4
    return fmt.group_bytes, fmt.payload_offset, frozenset(range(0, header_bytes, 4))


@dataclass
class WeightLoads:
    """The loads of W in a kernel's group loop (the whole kernel when it has no loop),
    found by data flow; spill reloads (scratch) are never among them."""

    body: list[Instruction]
    loads: list[LoadFacts]
    in_loop: bool
    found_kernarg: bool
    span: tuple[int, int] | None = None
    nest: tuple[int, ...] = ()
    # the kernel has loops but none of them holds a load of W (the group loop was not
    # found): a rule comparing loop bodies cannot decide
    loop_without_w: bool = False

    @classmethod
    def of(cls, code: KernelCode, wargs: frozenset[str]) -> WeightLoads:
        flow = code.address_flow()
        span = code.weight_loop_span(wargs)
        body = code.instructions if span is None else code.instructions[span[0]:span[1] + 1]
        addrs = {i.addr for i in body}
        loads = [f for a, f in sorted(flow.facts.items())
                 if a in addrs and f.tags & wargs and not f.is_scratch]
        return cls(body, loads, span is not None, flow.found_kernarg, span,
                   code.nest(span) if span is not None else (),
                   span is None and bool(code.loops()))

    @property
    def vector(self) -> list[LoadFacts]:
        return [f for f in self.loads if f.instruction.klass == "vmem"]

    @property
    def scalar(self) -> list[LoadFacts]:
        return [f for f in self.loads if f.instruction.klass == "smem"]

    @property
    def row_per_lane(self) -> bool:
        """Some lane reads a row of its own: the W address scales the lane by a run-time
        value (the row stride), as GEMMs whose lanes each own a row do."""
        return any(f.lane >= 2 for f in self.vector)

    def dwords(self, loads: Iterable[LoadFacts] | None = None) -> int:
        return sum(_dwords(f.instruction.mnemonic) for f in (self.loads if loads is None
                                                              else loads))

    def header_dwords(self, group_bytes: int, header: frozenset[int],
                      runs: dict[int, int] | None = None) -> int | None:
        """Dwords of header read per pass, or None when some load's offset is unknown
        (``runs``: how often each load, by address, runs a pass; once by default)."""
        n = 0
        for f in self.loads:
            off = f.group_offset(group_bytes)
            if off is None:
                return None
            n += sum(1 for d in range(_dwords(f.instruction.mnemonic))
                     if (off + 4 * d) % group_bytes in header) * (
                         (runs or {}).get(f.instruction.addr, 1))
        return n


def loop_runs(code: KernelCode, span: tuple[int, int]) -> dict[int, int] | None:
    """How many times each instruction of loop ``span`` (by address) runs per iteration
    of it: the product of the constant trip counts of the loops inside it that hold the
    instruction (``constant_trip_count``); None when an inner loop's count is not a
    constant."""
    runs = {i: 1 for i in range(span[0], span[1] + 1)}
    for sp in code.loops():
        if sp == span or not (span[0] <= sp[0] and sp[1] <= span[1]):
            continue
        trips = constant_trip_count(code.instructions, sp)
        if trips is None:
            return None
        for i in range(sp[0], sp[1] + 1):
            runs[i] *= trips
    return {code.instructions[i].addr: n for i, n in runs.items()}


def rule_header_scalar(a: Audit) -> Row:
    if a.spec.qt not in (44, 45):
        return a.row("header_scalar", Status.UNSUPPORTED, f"rule (a) is for qt=44/45, not "
                     f"qt={a.spec.qt}")
    w = WeightLoads.of(a.code, weight_args(a.spec))
    details: dict[str, Any] = {
        "loop_scalar_loads": dict(Counter(f.instruction.mnemonic for f in w.scalar)),
        "vector_loads": dict(Counter(f.instruction.mnemonic for f in w.vector)),
        "weight_load_dwords": w.dwords(), "in_loop": w.in_loop,
        "layout": "row-per-lane" if w.row_per_lane else "row-per-wave"}
    if not w.found_kernarg:
        return a.row("header_scalar", Status.UNSUPPORTED, "could not find the kernarg pointer "
                     "(no scalar load): the loads of W cannot be told apart", details=details)
    if w.loop_without_w:
        return a.row("header_scalar", Status.UNSUPPORTED, "the kernel's loops hold no load "
                     "of W found by data flow: there is no group loop to read", details=details)
    if not w.loads:
        return a.row("header_scalar", Status.UNSUPPORTED, "no load of W found by data flow "
                     "(its address leaves the modelled arithmetic)", details=details)
    base = WeightLoads.of(a.baseline, weight_args(a.spec)) if a.baseline is not None else None
    if base is not None and (base.nest != w.nest or base.in_loop != w.in_loop
                             or base.loop_without_w):
        details["nest"], details["baseline_nest"] = list(w.nest), list(base.nest)
        if w.row_per_lane:
            return a.row("header_scalar", Status.UNSUPPORTED, "the kernel's group loop nest "
                         f"{list(w.nest) or 'none'} is not its v1 baseline's "
                         f"{list(base.nest) or 'none'}: W loads per pass of different loop "
                         "nests are not comparable", details=details)
        base = None  # row-per-wave: the lane-dependent header loads alone are evidence
    if base is not None:
        details["baseline_vector_loads"] = dict(Counter(f.instruction.mnemonic
                                                         for f in base.vector))
        details["baseline_weight_load_dwords"] = base.dwords()
    if w.row_per_lane:
        # Each lane owns a row: its header words are per-lane loads by design.  What the
        # format promises is no more W traffic than v1 (v2 re-spends v1's 8 header bytes).
        if base is None:
            return a.row("header_scalar", Status.UNSUPPORTED, "row-per-lane kernel: its "
                         "per-lane header loads are compared with the v1 baseline's, and it "
                         "has none", details=details)
        if w.dwords() > base.dwords():
            extra = w.dwords() - base.dwords()
            return a.row("header_scalar", Status.FAIL, f"row-per-lane kernel reads {extra} W "
                         f"dwords more per pass than its v1 baseline ({w.dwords()} vs "
                         f"{base.dwords()}): " + "; ".join(_evidence(w.loads)),
                         details={**details, "evidence": _evidence(w.loads, 32)})
        return a.row("header_scalar", Status.PASS, f"row-per-lane kernel (lanes own rows): "
                     f"{w.dwords()} W dwords per pass, the v1 baseline reads {base.dwords()}",
                     details=details)
    # Row-per-wave: every lane reads its wave's row, so the header words come from
    # lane-invariant addresses -- scalar loads, or (an engine's cache policy) uniform
    # buffer loads.  Proven violations: a header word read at a lane-dependent address, or
    # more vector W traffic than the v1 baseline (whose payload loads are the same).
    group_bytes, _, header = _format_layout(a.spec.qt)
    per_lane_hdr = [f for f in w.vector if f.lane >= 1 and (o := f.first_offset(group_bytes))
                    is not None and any((o + 4 * d) % group_bytes in header
                                        for d in range(_dwords(f.instruction.mnemonic)))]
    problems = []
    if per_lane_hdr:
        problems.append("header words read at lane-dependent addresses: "
                        + "; ".join(_evidence(per_lane_hdr)))
    if base is not None:
        # per-lane (lane-dependent address) W traffic beyond v1's: a uniform vector load
        # (an engine's buffer-load policy) reads one address for the wave and is not it.
        # Compared per group-row: a pass of a kernel owning R rows reads R rows' payload
        # (a dual-row v2 GEMV against a one-row v1), the group-rows of a pass counted by
        # the header dwords it reads, as rule (d) counts them
        mine = [f for f in w.vector if f.lane >= 1]
        theirs = [f for f in base.vector if f.lane >= 1]
        v1_gb, _, v1_header = _format_layout(HFQ4G256_QT)
        hdr1 = base.header_dwords(v1_gb, v1_header)
        hdr2 = w.header_dwords(group_bytes, header)
        rows1 = hdr1 // 2 if hdr1 else 0
        rows2 = hdr2 // len(header) if hdr2 else 0
        if rows1 >= 1 and rows2 >= 1 and rows1 != rows2:
            details.update({"group_rows_per_pass": rows2,
                            "baseline_group_rows_per_pass": rows1})
            extra_dw = w.dwords(mine) * rows1 - base.dwords(theirs) * rows2
            extra_dw = -(-extra_dw // rows1) if extra_dw > 0 else 0  # per v2 pass
        else:
            extra_dw = w.dwords(mine) - base.dwords(theirs)
        if extra_dw > 0:
            more = Counter(f.instruction.mnemonic for f in mine) - Counter(
                f.instruction.mnemonic for f in theirs)
            problems.append(f"{extra_dw} lane-dependent vector W dwords more than the v1 "
                            f"baseline ({dict(more)}): the header is read per lane"
                            + ("" if w.scalar else "; the group loop has no scalar load of "
                               "W: the header is read by vector loads"))
    if problems:
        return a.row("header_scalar", Status.FAIL, "; ".join(problems),
                     details={**details, "evidence": _evidence(w.vector, 32)})
    if not w.scalar and base is None:
        return a.row("header_scalar", Status.UNSUPPORTED, "row-per-wave kernel with no scalar "
                     "load of W and no v1 baseline: whether its vector loads read the header "
                     "per lane cannot be told (name a baseline)", details=details)
    how = (f"{len(w.scalar)} scalar W loads in the group loop" if w.scalar else
           "the header by lane-invariant vector loads, as its v1 baseline")
    compared = ("vector W loads no more than the v1 baseline's" if base is not None
                else "no v1 baseline to compare vector loads with")
    return a.row("header_scalar", Status.PASS, f"row-per-wave kernel: {how}; {compared}",
                 details=details)


def rule_no_spill(a: Audit) -> Row:
    n = a.code.notes
    ev = {k: int(n.get(k, 0)) for k in (".vgpr_spill_count", ".sgpr_spill_count",
                                          ".private_segment_fixed_size")}
    scratch = sum(1 for i in a.code.instructions if i.mnemonic.startswith("scratch_"))
    ev["scratch_instructions"] = scratch
    bad = {k: v for k, v in ev.items() if v}
    if bad:
        return a.row("no_spill", Status.FAIL, f"spills/scratch: {bad}", measured=float(
            sum(bad.values())), tolerance=0.0, details=ev)
    return a.row("no_spill", Status.PASS, "no spills, no scratch", measured=0.0, tolerance=0.0,
                 details=ev)


def rule_vgpr_budget(a: Audit) -> Row:
    n = a.code.notes
    vgprs = int(n.get(".vgpr_count", 0))
    flat = int(n.get(".max_flat_workgroup_size", 1024))
    wave = int(n.get(".wavefront_size", 32))
    budget = vgpr_budget(a.arch, flat, wave)
    ev = {"vgpr_count": vgprs, "sgpr_count": int(n.get(".sgpr_count", 0)),
          "lds_bytes": int(n.get(".group_segment_fixed_size", 0)), "wavefront_size": wave,
          "max_flat_workgroup_size": flat, "vgpr_file": vgpr_file(a.arch),
          "occupancy_waves_per_simd": occupancy(
              a.arch, vgprs, int(n.get(".group_segment_fixed_size", 0)), a.spec.block),
          "sgpr_spill_count": int(n.get(".sgpr_spill_count", 0)),
          "vgpr_spill_count": int(n.get(".vgpr_spill_count", 0)),
          "scratch_bytes": int(n.get(".private_segment_fixed_size", 0)),
          "classes": dict(a.code.classes()),
          "loop_classes": dict(a.code.classes(a.code.main_loop())),
          "histogram": dict(a.code.histogram().most_common())}
    deriv = vgpr_budget_derivation(a.arch, flat, wave)
    problems = []
    if wave != 32:
        problems.append(f"wave{wave} (the ABI is wave32)")
    if flat != a.spec.block:
        problems.append(f"launch bounds {flat} != block {a.spec.block}")
    if vgprs > budget:
        problems.append(f"{vgprs} VGPRs > budget {budget}")
    note = ""
    if a.occupancy_miss is not None:
        # The launch bounds' minimum waves per EU is part of the kernel's declared budget;
        # clang warns when it does not meet it (its own occupancy, LDS included), and drops
        # a request above the arch's wave slots.  What the request can get is at most the
        # slots: a kernel below that is short of its declaration.
        desired, final = a.occupancy_miss
        slots = max_waves_per_simd(a.arch)
        ev.update(declared_min_waves_per_eu=desired, compiler_final_occupancy=final)
        dropped = (f"; {a.arch_name} has {slots} wave slots per SIMD, so clang drops the "
                   "request and allocates as if there were none" if desired > slots else "")
        if final < min(desired, slots):
            problems.append(f"launch bounds ask for at least {desired} waves per SIMD and "
                            f"the compiler could not meet it: final occupancy {final} "
                            f"(clang's warning){dropped}")
        else:
            note = f"; launch bounds ask for {desired} waves per SIMD{dropped}"
    status = Status.FAIL if problems else Status.PASS
    msg = "; ".join(problems) or f"{vgprs} VGPRs <= {budget}, occupancy " \
        f"{ev['occupancy_waves_per_simd']} waves/SIMD{note}"
    return a.row("vgpr_budget", status, msg, measured=float(vgprs), tolerance=float(budget),
                 derivation=deriv, details=ev)


def rule_v2_valu_delta(a: Audit) -> Row:
    if a.spec.qt not in (44, 45) or a.baseline is None:
        why = "no v1 baseline" if a.spec.qt in (44, 45) else f"qt={a.spec.qt} is not a v2 format"
        return a.row("v2_valu_delta", Status.UNSUPPORTED, f"rule (d) needs a qt=44/45 kernel "
                     f"and its v1 baseline ({why})")
    wargs = weight_args(a.spec)
    mine = WeightLoads.of(a.code, wargs)
    base = WeightLoads.of(a.baseline, wargs)
    if mine.loop_without_w or base.loop_without_w:
        return a.row("v2_valu_delta", Status.UNSUPPORTED, "a loop of the kernel or its "
                     "baseline holds no load of W and no other loop does: the group loop "
                     "was not found")
    if not mine.in_loop or not base.in_loop:
        return a.row("v2_valu_delta", Status.UNSUPPORTED, "no group loop in the kernel or its "
                     "baseline: there is no per-iteration VALU count to compare")
    runs = base_runs = None
    if mine.nest != base.nest:
        # different loop nests compare only as whole group-loop iterations: every inner
        # loop's body multiplied by its constant trip count, read from the CFG
        assert mine.span is not None and base.span is not None
        runs, base_runs = loop_runs(a.code, mine.span), loop_runs(a.baseline, base.span)
        if runs is None or base_runs is None:
            return a.row("v2_valu_delta", Status.UNSUPPORTED, f"the group loop nests differ "
                         f"(depths {list(mine.nest)} vs the baseline's {list(base.nest)}): "
                         "loop bodies of different nests are never compared, and the trip "
                         "counts are not constants the rule could multiply by",
                         details={"nest": list(mine.nest), "baseline_nest": list(base.nest)})
    loop, base_loop = mine.body, base.body
    # Group-rows per loop iteration: v1 reads two header dwords per group-row (by scalar
    # load in a row-per-wave kernel, per lane in a row-per-lane one).
    group_bytes, _, header = _format_layout(HFQ4G256_QT)  # the baseline is a v1 kernel
    hdr = base.header_dwords(group_bytes, header, base_runs) if base.loads else None
    if hdr is None:
        return a.row("v2_valu_delta", Status.UNSUPPORTED, "the v1 baseline's header loads "
                     "could not be counted (a W address the data flow cannot follow), so the "
                     "group-rows per iteration are unknown")
    group_rows = hdr // 2
    if group_rows < 1:
        return a.row("v2_valu_delta", Status.UNSUPPORTED, "the v1 baseline's group loop reads "
                     "no header dwords: the group-rows per iteration are unknown")
    # the v2 loop's own group-rows per iteration (it may unroll differently): its header
    # dwords over the dwords one group-row's header has in its format
    gb2, _, header2 = _format_layout(a.spec.qt)
    hdr2 = mine.header_dwords(gb2, header2, runs) if mine.loads else None
    if hdr2 is None or hdr2 < len(header2):
        return a.row("v2_valu_delta", Status.UNSUPPORTED, "the kernel's header loads in its "
                     "group loop could not be counted, so its group-rows per iteration are "
                     "unknown")
    group_rows2 = hdr2 // len(header2)
    v2 = _valu(loop, runs)
    v1 = _valu(base_loop, base_runs)
    per = v2 / group_rows2 - v1 / group_rows
    # WMMA per group-row tells the column tiles one dequantised fragment feeds: a kernel
    # batch-tiling N (BT tiles a fragment) against a BT=1 baseline spends BT-1 tiles'
    # operand addressing per iteration that is no header work; a per-iteration count of
    # unlike tilings is never compared (the executed facts count the marginal group-row)
    tiles2 = _wmma(loop, runs) / group_rows2
    tiles1 = _wmma(base_loop, base_runs) / group_rows
    if tiles2 != tiles1:
        return a.row("v2_valu_delta", Status.UNSUPPORTED, f"the kernel issues {tiles2:g} "
                     f"v_wmma per group-row of its group loop, its baseline {tiles1:g}: "
                     "their iterations feed unlike column tilings, and a per-iteration VALU "
                     "count would charge the extra tiles' operand work to the header "
                     f"({per:+.3f} per group-row counted so)",
                     details={"wmma_per_group_row": tiles2,
                              "baseline_wmma_per_group_row": tiles1,
                              "valu_loop_v2": v2, "valu_loop_v1": v1,
                              "group_rows_per_iteration": group_rows,
                              "group_rows_per_iteration_v2": group_rows2,
                              "unlike_tilings_delta": per})
    ev = {"valu_loop_v2": v2, "valu_loop_v1": v1, "group_rows_per_iteration": group_rows,
          "group_rows_per_iteration_v2": group_rows2, "wmma_excluded": True,
          "layout": "row-per-lane" if base.row_per_lane else "row-per-wave",
          "inner_trip_counts": runs is not None,
          "delta_histogram": {k: v for k, v in (
              a.code.histogram(loop) - a.baseline.histogram(base_loop)).items()
              if k.startswith("v_")}}
    status = Status.PASS if per <= V2_VALU_BUDGET else Status.FAIL
    return a.row("v2_valu_delta", status, f"{per:+.3f} VALU per group-row over "
                 f"{a.spec.baseline} ({v2} per iteration of {group_rows2} group-rows vs "
                 f"{v1} per iteration of {group_rows}"
                 + ("; inner loops counted times their constant trip counts" if runs
                    is not None else "") + ")",
                 measured=per, tolerance=V2_VALU_BUDGET,
                 derivation="section 4: one v_cndmask + two v_cvt_f32_f16 per group per row",
                 details=ev)


def _valu(body: list[Instruction], runs: dict[int, int] | None) -> int:
    """VALU ops of ``body``, each instruction counted ``runs[addr]`` times (once)."""
    return sum(i.valu_ops * (runs or {}).get(i.addr, 1) for i in body if i.klass == "valu")


def _wmma(body: list[Instruction], runs: dict[int, int] | None) -> int:
    """v_wmma instructions of ``body``, each counted ``runs[addr]`` times (once)."""
    return sum((runs or {}).get(i.addr, 1) for i in body if i.mnemonic.startswith("v_wmma"))


def rule_wmma(a: Audit) -> Row:
    if a.spec.requires not in ("wmma_gfx11", "wmma_gfx12"):
        return a.row("wmma", Status.UNSUPPORTED,
                     "rule (e) is for WMMA prefill kernels (requires wmma_gfx11/12)")
    wmma = [i for i in a.code.instructions if i.mnemonic.startswith("v_wmma")]
    want = {"wmma_gfx11": "gfx11", "wmma_gfx12": "gfx12"}.get(a.spec.requires, "")
    arch_gen = str(getattr(a.arch, "wmma", ""))
    forms = Counter(f"{i.mnemonic} A={i.wmma_a_regs}v" for i in wmma)
    gen_of = {8: "gfx11", 4: "gfx12"}
    gens = {gen_of.get(i.wmma_a_regs, "?") for i in wmma}
    ev = {"wmma_instructions": len(wmma), "forms": dict(forms), "arch_wmma": arch_gen,
          "required": want}
    if not wmma:
        return a.row("wmma", Status.FAIL, "no v_wmma instruction", measured=0.0, details=ev)
    if gens != {want} or (arch_gen and arch_gen != want):
        return a.row("wmma", Status.FAIL, f"v_wmma forms {sorted(gens)} do not match "
                     f"{want} on {a.arch_name} ({arch_gen})", measured=float(len(wmma)), details=ev)
    in_loop = sum(1 for i in a.code.main_loop() if i.mnemonic.startswith("v_wmma"))
    ev["wmma_in_group_loop"] = in_loop
    return a.row("wmma", Status.PASS, f"{len(wmma)} {want} v_wmma ({in_loop} in the group loop)",
                 measured=float(len(wmma)), details=ev)


def rule_payload_offset(a: Audit) -> Row:
    """Loads of W (found by data flow) must land, inside a group, on the payload from +8 on
    or on the format's header words; the payload must be read at +8.  Offsets follow the
    address arithmetic, so +8 folded into a base register counts like +8 in the
    immediate.  In a row-per-wave kernel the header is read by scalar loads, so a vector
    load below +8 is a misplaced payload or a per-lane header; in a row-per-lane kernel
    (each lane reads its own row) vector header loads are expected.  A load whose offset
    the flow cannot follow makes the rule unsupported, never failed (the padded_offset
    and parity checks are the dynamic authority)."""
    group_bytes, payload_offset, header = _format_layout(a.spec.qt)
    w = WeightLoads.of(a.code, weight_args(a.spec))
    loads = w.vector
    known = [(f, f.group_offset(group_bytes)) for f in loads]
    offsets = sorted({o for _, o in known if o is not None})
    unknown = [f for f, o in known if o is None]
    ev: dict[str, Any] = {
        "weight_vector_loads": len(loads), "imm_offsets": sorted({f.instruction.imm_offset
                                                                   for f in loads}),
        "offsets_mod_group": offsets, "unknown_offsets": len(unknown),
        "group_bytes": group_bytes, "payload_offset": payload_offset,
        "layout": "row-per-lane" if w.row_per_lane else "row-per-wave"}
    if not w.found_kernarg:
        return a.row("payload_offset", Status.UNSUPPORTED, "could not find the kernarg pointer "
                     "(no scalar load): the loads of W cannot be told apart", details=ev)
    if w.loop_without_w:
        return a.row("payload_offset", Status.UNSUPPORTED, "the kernel's loops hold no load "
                     "of W found by data flow: there is no group loop to read", details=ev)
    if not loads:
        return a.row("payload_offset", Status.UNSUPPORTED, "no vector load of W found by data "
                     "flow in the group loop", details=ev)
    # header words may be read by a vector load when each lane reads its own row, or when
    # the address is lane-invariant (an engine's uniform buffer load of the header)

    def words(f: LoadFacts, o: int) -> list[int]:
        return [(o + 4 * d) % group_bytes for d in range(_dwords(f.instruction.mnemonic))]

    # A load may span header and payload (a merged 16-byte load from +0): its dwords below
    # the payload must be header words the kernel may read by vector load.
    # Evidence may come from the first iteration alone (a later pass that disagrees, as a
    # wrong stride does, does not make the first iteration's read any less real).
    first = [(f, f.first_offset(group_bytes)) for f in loads]
    def allowed(f: LoadFacts, d: int) -> bool:
        return d in header and (w.row_per_lane or f.lane == 0)

    bad = [(f, o) for f, o in first if o is not None
           and any(d < payload_offset and not allowed(f, d) for d in words(f, o))]
    covered = sorted({d for f, o in known if o is not None for d in words(f, o)})
    ev["dwords_covered"] = covered
    if bad:
        what = ("header words" if w.row_per_lane else
                "only header words at a lane-invariant address in a row-per-wave kernel")
        return a.row("payload_offset", Status.FAIL, f"W vector loads at group offsets "
                     f"{sorted({o for _, o in bad})}: the payload starts at +{payload_offset} "
                     f"and below it a vector load may read {what}: "
                     + "; ".join(_evidence(f for f, _ in bad)),
                     details={**ev, "evidence": _evidence((f for f, _ in bad), 32)})
    if payload_offset not in covered:
        if unknown:
            return a.row("payload_offset", Status.UNSUPPORTED, f"no W load is known to read "
                         f"+{payload_offset} and {len(unknown)} W loads have offsets the data "
                         "flow cannot follow: " + "; ".join(_evidence(unknown)), details=ev)
        return a.row("payload_offset", Status.FAIL, f"no W load reads the payload's first "
                     f"dword at +{payload_offset} (group offsets {offsets}): the payload is "
                     "read elsewhere: " + "; ".join(_evidence(loads)),
                     details={**ev, "evidence": _evidence(loads, 32)})
    note = f"; {len(unknown)} loads not followed" if unknown else ""
    return a.row("payload_offset", Status.PASS, f"{len(loads) - len(unknown)} W vector loads at "
                 f"group offsets {offsets} (payload from +{payload_offset}){note}", details=ev)


def audit_kernel(spec: KernelSpec, arch: Any, code: KernelCode,
                 baseline: KernelCode | None = None, *,
                 occupancy_miss: tuple[int, int] | None = None) -> list[Row]:
    a = Audit(spec, arch, code, baseline, occupancy_miss=occupancy_miss)
    for rule in (rule_header_scalar, rule_no_spill, rule_vgpr_budget, rule_v2_valu_delta,
                 rule_wmma, rule_payload_offset):
        rule(a)
    return a.rows


def summary(code: KernelCode, arch: Any) -> dict[str, Any]:
    """The per-kernel facts the audit table prints (counts, occupancy, histogram by class)."""
    n = code.notes
    vgprs = int(n.get(".vgpr_count", 0))
    return {
        "vgpr": vgprs, "sgpr": int(n.get(".sgpr_count", 0)),
        "vgpr_spill": int(n.get(".vgpr_spill_count", 0)),
        "sgpr_spill": int(n.get(".sgpr_spill_count", 0)),
        "scratch": int(n.get(".private_segment_fixed_size", 0)),
        "lds": int(n.get(".group_segment_fixed_size", 0)),
        "wave": int(n.get(".wavefront_size", 0)),
        "occupancy": occupancy(arch, vgprs, int(n.get(".group_segment_fixed_size", 0)),
                               int(n.get(".max_flat_workgroup_size", 1024))),
        "instructions": len(code.instructions),
        "classes": dict(code.classes()),
        "loop_classes": dict(code.classes(code.main_loop())),
    }


