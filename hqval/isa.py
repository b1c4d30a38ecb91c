"""Code object notes, disassembly and the ISA audit rules (issue 3, item 5).

Per kernel: VGPR/SGPR/spill/scratch/LDS counts and wave size from the AMDGPU metadata note,
occupancy from the arch's VGPR file, and an instruction histogram from ``llvm-objdump``.
The rules, each one ``Row(kind="audit", check=f"audit_{rule}")`` with its evidence:

  header_scalar   (a) qt=44/45 headers are read by scalar loads, never vector loads
  no_spill        (b) no VGPR/SGPR spills, no scratch
  vgpr_budget     (c) VGPRs within the arch's budget for the kernel's launch bounds
  v2_valu_delta   (d) VALU cost per group-row of a v2 kernel over its v1 baseline <= 3
  wmma            (e) prefill kernels contain v_wmma of the arch's generation
  payload_offset  (f) the payload is read at offset 8 of the group

Rules (a) and (d) compare a kernel with its qt=6 baseline: the two share every instruction
except the header decode (one template, two instantiations), so a difference in vector
loads or VALU count is the header's doing.
"""

from __future__ import annotations

import functools
import hashlib
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hqval.elf import elf_symbols as elf_symbols  # re-exported: the audit reads symbols
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec

RULES = ("header_scalar", "no_spill", "vgpr_budget", "v2_valu_delta", "wmma", "payload_offset")
RULE_LETTER = dict(zip(RULES, "abcdef", strict=True))
# Section 4: one v_cndmask plus two v_cvt_f32_f16 per group per row.
V2_VALU_BUDGET = 3.0
MAX_VGPRS_WAVE32 = 256  # architectural limit of one wave32 on gfx10+


class IsaError(RuntimeError):
    """A code object could not be read (missing tool, not an AMDGPU ELF)."""


# ---- ELF -------------------------------------------------------------------------------


# ---- tools -----------------------------------------------------------------------------

@functools.lru_cache(maxsize=4)
def find_llvm_tool(name: str) -> str:
    """``llvm-objdump`` / ``llvm-readelf`` matching the compiler: next to it first, then
    versioned names on PATH."""
    from hqval.toolchain import ToolchainError, find_compiler

    candidates: list[str] = []
    try:
        comp = Path(find_compiler().path)
        m = re.search(r"-(\d+)$", comp.name)
        if m:
            candidates.append(str(comp.parent / f"{name}-{m.group(1)}"))
        candidates.append(str(comp.parent / name))
    except ToolchainError:
        pass
    candidates += [f"{name}-20", f"{name}-19", name]
    for c in candidates:
        exe = shutil.which(c)
        if exe:
            return exe
    raise IsaError(f"{name} not found (tried {', '.join(candidates)}); fix: apt-get install "
                   "llvm-19, or put ROCm's llvm/bin on PATH")


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise IsaError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[:500]}")
    return proc.stdout


# ---- instructions ----------------------------------------------------------------------

_LINE = re.compile(r"^\s+([a-z_0-9]+)\s*(.*?)\s*//\s*([0-9A-Fa-f]+):[^<]*(?:<([^>]+)>)?")
_LABEL = re.compile(r"^[0-9A-Fa-f]+ <([^>]+)>:")
_REG = re.compile(r"\b([vs])(?:\[(\d+):(\d+)\]|(\d+)(?!\w))")
_CONTROL = ("s_waitcnt", "s_delay_alu", "s_clause", "s_nop", "s_endpgm", "s_sendmsg",
            "s_branch", "s_cbranch", "s_barrier", "s_setprio", "s_code_end", "s_inst_prefetch",
            "s_wait_", "s_set_inst_prefetch", "s_dcache", "s_icache", "s_trap")


@dataclass(frozen=True)
class Instruction:
    addr: int
    mnemonic: str
    operands: str
    target: int | None = None  # branch destination, absolute address

    @functools.cached_property
    def klass(self) -> str:
        m = self.mnemonic
        if m.startswith(("s_load", "s_buffer_load")):
            return "smem"
        if m.startswith(("global_", "buffer_", "flat_", "scratch_")):
            return "vmem"
        if m.startswith("ds_"):
            return "lds"
        if m.startswith("v_"):
            return "valu"
        if m.startswith(_CONTROL):
            return "control"
        return "salu"

    @property
    def valu_ops(self) -> int:
        """VALU operations (a dual-issue pair counts as two)."""
        if self.klass != "valu":
            return 0
        return 2 if self.mnemonic.startswith("v_dual_") else 1

    @property
    def is_load(self) -> bool:
        return "_load" in self.mnemonic and not self.mnemonic.startswith("ds_")

    @property
    def is_branch(self) -> bool:
        return self.mnemonic.startswith(("s_branch", "s_cbranch"))

    @property
    def imm_offset(self) -> int:
        m = re.search(r"offset:(-?(?:0x)?[0-9a-fA-F]+)", self.operands)
        if m:
            return int(m.group(1), 0)
        if self.klass == "smem":
            last = self.operands.split(",")[-1].strip()
            if last == "null":
                return 0
            try:
                return int(last, 0)
            except ValueError:
                return 0
        return 0

    @functools.cached_property
    def dst_src(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Registers written and read (heuristic: the first operand, or two for the
        carry-out forms, is the destination; stores, compares and branches write none)."""
        dst, src = _dst_src(self)
        return tuple(dst), tuple(src)

    @property
    def wmma_a_regs(self) -> int:
        """Registers of the A operand of a v_wmma (8: gfx11 16-half form, 4: gfx12)."""
        regs = [_reg_count(p) for p in self.operands.split(",")]
        return regs[1] if len(regs) > 1 else 0


def _reg_count(operand: str) -> int:
    m = _REG.search(operand)
    if not m:
        return 0
    return int(m.group(3)) - int(m.group(2)) + 1 if m.group(2) else 1


def _regs(operand: str) -> list[str]:
    out = []
    for m in _REG.finditer(operand):
        kind = m.group(1)
        if m.group(2) is not None:
            out += [f"{kind}{i}" for i in range(int(m.group(2)), int(m.group(3)) + 1)]
        else:
            out.append(f"{kind}{m.group(4)}")
    return out


def parse_disassembly(text: str) -> dict[str, list[Instruction]]:
    kernels: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    for line in text.splitlines():
        lab = _LABEL.match(line)
        if lab:
            current = kernels.setdefault(lab.group(1), [])
            continue
        m = _LINE.match(line)
        if m and current is not None:
            target = None
            if m.group(4) and m.group(1).startswith(("s_branch", "s_cbranch")):
                _, _, off = m.group(4).partition("+")
                base = current[0].addr if current else int(m.group(3), 16)
                target = base + (int(off, 16) if off else 0)
            current.append(Instruction(int(m.group(3), 16), m.group(1), m.group(2), target))
    for ins in kernels.values():  # drop the alignment padding after the last s_endpgm
        while ins and ins[-1].mnemonic in ("s_nop", "s_code_end"):
            ins.pop()
    return kernels


# ---- code objects ------------------------------------------------------------------------

@dataclass
class KernelCode:
    name: str
    arch: str
    instructions: list[Instruction]
    notes: dict[str, Any]
    target_arch: str = ""
    _loops: list[tuple[int, int]] | None = field(default=None, repr=False, compare=False)

    def loops(self) -> list[tuple[int, int]]:
        """(first, last) instruction indexes of each loop, from backward branches."""
        if self._loops is None:
            self._loops = self._find_loops()
        return self._loops

    def main_loop_span(self) -> tuple[int, int] | None:
        loops = self.loops()
        return max(loops, key=lambda fl: fl[1] - fl[0]) if loops else None

    def _find_loops(self) -> list[tuple[int, int]]:
        index = {ins.addr: i for i, ins in enumerate(self.instructions)}
        out = []
        for i, ins in enumerate(self.instructions):
            if ins.is_branch and ins.target is not None and ins.target <= ins.addr:
                j = index.get(ins.target)
                if j is not None:
                    out.append((j, i))
        return out

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


@functools.lru_cache(maxsize=256)
def _analyze_cached(digest: str, path: str, arch: str) -> dict[str, KernelCode]:
    readelf = find_llvm_tool("llvm-readelf")
    objdump = find_llvm_tool("llvm-objdump")
    notes = parse_notes(_run([readelf, "--notes", path]))
    code = parse_disassembly(_run([objdump, "-d", f"--mcpu={arch}", path]))
    out = {}
    for name, meta in notes["kernels"].items():
        out[name] = KernelCode(name, arch, code.get(name, []), meta, notes.get("target", ""))
    return out


def analyze(code_object: Path, arch: str) -> dict[str, KernelCode]:
    """Kernels of a code object by name: notes and instructions (cached by content)."""
    data = Path(code_object).read_bytes()
    return _analyze_cached(hashlib.sha256(data).hexdigest(), str(code_object), arch)


def parse_notes(text: str) -> dict[str, Any]:
    """The AMDGPU metadata note of ``llvm-readelf --notes`` as {"target", "kernels"}."""
    start = text.find("amdhsa.kernels:")
    if start < 0:
        raise IsaError("no AMDGPU metadata note (amdhsa.kernels) in the code object")
    block = text[start:]
    end = block.find("\n...")
    if end >= 0:
        block = block[:end]
    data = yaml.load(block, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    kernels = {k[".name"]: k for k in data.get("amdhsa.kernels", [])}
    return {"target": str(data.get("amdhsa.target", "")), "kernels": kernels}


# ---- occupancy -------------------------------------------------------------------------

def vgpr_file(arch: Any) -> int:
    """VGPRs per SIMD lane: 1536 on the full-VGPR RDNA3/4 parts, else 1024."""
    value = getattr(arch, "vgprs_per_simd", None) or getattr(arch, "vgpr_file", None)
    if value:
        return int(value)
    name = getattr(arch, "name", str(arch))
    return 1536 if name in ("gfx1100", "gfx1101", "gfx1151", "gfx1200", "gfx1201") else 1024


def vgpr_granule(arch: Any) -> int:
    name = getattr(arch, "name", str(arch))
    if vgpr_file(arch) == 1536:
        return 24
    return 8 if name.startswith("gfx101") else 16


def max_waves_per_simd(arch: Any) -> int:
    name = getattr(arch, "name", str(arch))
    return 20 if name.startswith("gfx10") else 16


def occupancy(arch: Any, vgprs: int) -> int:
    """Waves per SIMD that the VGPR file admits for a wave32 kernel using ``vgprs``."""
    g = vgpr_granule(arch)
    alloc = max(g, -(-vgprs // g) * g)
    return min(max_waves_per_simd(arch), vgpr_file(arch) // alloc)


# ---- data flow: which loads read W -----------------------------------------------------

_TWO_DST = ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32", "v_add_co_ci_u32",
            "v_sub_co_ci_u32", "v_subrev_co_ci_u32", "v_mad_u64_u32", "v_mad_i64_i32",
            "v_div_scale")
_NO_DST = ("s_cmp", "s_bitcmp", "global_store", "buffer_store", "flat_store", "scratch_store",
           "ds_write", "ds_store", "s_store", "s_cbranch", "s_branch", "s_waitcnt", "s_endpgm",
           "s_delay_alu", "s_clause", "s_nop", "s_sendmsg", "s_barrier", "v_cmpx", "s_wait")


def _dst_src(ins: Instruction) -> tuple[list[str], list[str]]:
    if ins.mnemonic.startswith(_NO_DST):
        return [], _regs(ins.operands)
    parts = [p.strip() for p in ins.operands.split(",")]
    n = 2 if ins.mnemonic.startswith(_TWO_DST) else 1
    dst: list[str] = []
    for p in parts[:n]:
        dst += _regs(p)
    src: list[str] = []
    for p in parts[n:]:
        src += _regs(p)
    return dst, src


def pointer_origins(kc: KernelCode) -> dict[int, frozenset[str]]:
    """For every memory load up to the end of the group loop (by address): the kernel
    arguments its address derives from, as ``arg@OFFSET`` tags.  The kernarg pointer is the
    base of the first scalar load; origins flow from every instruction's sources to its
    destinations."""
    ins_list = kc.instructions
    first_smem = next((i for i in ins_list if i.klass == "smem"), None)
    if first_smem is None:
        return {}
    base_regs = _regs(first_smem.operands.split(",")[1])
    state: dict[str, frozenset[str]] = {r: frozenset({"kernarg"}) for r in base_regs}
    origins: dict[int, set[str]] = {}
    # Straight through up to the end of the group loop (what the rules read), then the loop
    # body once more from its back-edge state, so loop-carried pointers are seen.
    span = kc.main_loop_span()
    end = span[1] + 1 if span is not None else len(ins_list)
    for ins in ins_list[:end]:
        _flow(ins, state, origins)
    if span is not None:
        for ins in ins_list[span[0]:span[1] + 1]:
            _flow(ins, state, origins)
    return {addr: frozenset(tags) for addr, tags in origins.items()}


def _flow(ins: Instruction, state: dict[str, frozenset[str]],
          origins: dict[int, set[str]]) -> None:
    if ins.mnemonic.startswith("v_dual_"):
        for half in ins.operands.split("::"):
            words = half.strip().split(None, 1)
            regs = _regs(words[1] if len(words) > 1 and words[0].startswith("v_dual")
                         else half)
            if regs:
                state[regs[0]] = frozenset().union(*(state.get(r, frozenset())
                                                     for r in regs[1:]))
        return
    dst, src = ins.dst_src
    src_tags: frozenset[str] = frozenset().union(*(state.get(r, frozenset()) for r in src))
    if ins.is_load:
        origins.setdefault(ins.addr, set()).update(src_tags)
        if ins.klass == "smem" and "kernarg" in src_tags:
            off = ins.imm_offset
            for i, r in enumerate(dst):
                state[r] = frozenset({f"arg@{(off + 4 * i) // 8 * 8}"})
            return
        for r in dst:
            state[r] = frozenset({"data"})
        return
    for r in dst:
        state[r] = src_tags


# ---- the rules ---------------------------------------------------------------------------

def weight_args(spec: KernelSpec) -> frozenset[str]:
    return frozenset({"arg@0", "arg@8", "arg@16"} if spec.kind == "gemv_qkv" else {"arg@0"})


@dataclass
class Audit:
    spec: KernelSpec
    arch: Any
    code: KernelCode
    baseline: KernelCode | None = None
    rows: list[Row] = field(default_factory=list)

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


def rule_header_scalar(a: Audit) -> Row:
    if a.spec.qt not in (44, 45):
        return a.row("header_scalar", Status.UNSUPPORTED, f"rule (a) is for qt=44/45, not "
                     f"qt={a.spec.qt}")
    loop = a.code.main_loop()
    if not loop:
        return a.row("header_scalar", Status.ERROR, "no loop found in the kernel")
    smem = _loads(loop, "smem")
    vmem_all = _loads(a.code.instructions, "vmem")
    details: dict[str, Any] = {"loop_scalar_loads": dict(smem),
                               "vector_loads": dict(vmem_all)}
    problems = []
    if not smem:
        problems.append("the group loop has no scalar loads: the header is read by vector loads")
    if a.baseline is not None:
        base = _loads(a.baseline.instructions, "vmem")
        details["baseline_vector_loads"] = dict(base)
        extra = vmem_all - base
        if extra:
            problems.append(f"{sum(extra.values())} vector loads more than the v1 baseline "
                            f"({dict(extra)}): the header is read per lane")
    if problems:
        return a.row("header_scalar", Status.FAIL, "; ".join(problems), details=details)
    compared = ("vector loads identical to the v1 baseline" if a.baseline is not None
                else "no v1 baseline to compare vector loads with")
    return a.row("header_scalar", Status.PASS, f"{sum(smem.values())} scalar loads in the group "
                 f"loop; {compared}", details=details)


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
    waves_per_wg = -(-flat // wave)
    # A workgroup's waves share the 2 SIMDs of a WGP (CU mode: 2 SIMDs per CU on RDNA).
    per_simd = -(-waves_per_wg // 2)
    budget = min(MAX_VGPRS_WAVE32, vgpr_file(a.arch) // per_simd // vgpr_granule(a.arch)
                 * vgpr_granule(a.arch))
    ev = {"vgpr_count": vgprs, "sgpr_count": int(n.get(".sgpr_count", 0)),
          "lds_bytes": int(n.get(".group_segment_fixed_size", 0)), "wavefront_size": wave,
          "max_flat_workgroup_size": flat, "vgpr_file": vgpr_file(a.arch),
          "occupancy_waves_per_simd": occupancy(a.arch, vgprs),
          "sgpr_spill_count": int(n.get(".sgpr_spill_count", 0)),
          "vgpr_spill_count": int(n.get(".vgpr_spill_count", 0)),
          "scratch_bytes": int(n.get(".private_segment_fixed_size", 0)),
          "classes": dict(a.code.classes()),
          "loop_classes": dict(a.code.classes(a.code.main_loop())),
          "histogram": dict(a.code.histogram().most_common())}
    deriv = (f"min(256, {vgpr_file(a.arch)} VGPRs / {per_simd} waves per SIMD for launch "
             f"bounds {flat})")
    problems = []
    if wave != 32:
        problems.append(f"wave{wave} (the ABI is wave32)")
    if flat != a.spec.block:
        problems.append(f"launch bounds {flat} != block {a.spec.block}")
    if vgprs > budget:
        problems.append(f"{vgprs} VGPRs > budget {budget}")
    status = Status.FAIL if problems else Status.PASS
    msg = "; ".join(problems) or f"{vgprs} VGPRs <= {budget}, occupancy " \
        f"{ev['occupancy_waves_per_simd']} waves/SIMD"
    return a.row("vgpr_budget", status, msg, measured=float(vgprs), tolerance=float(budget),
                 derivation=deriv, details=ev)


def rule_v2_valu_delta(a: Audit) -> Row:
    if a.spec.qt not in (44, 45) or a.baseline is None:
        why = "no v1 baseline" if a.spec.qt in (44, 45) else f"qt={a.spec.qt} is not a v2 format"
        return a.row("v2_valu_delta", Status.UNSUPPORTED, f"rule (d) needs a qt=44/45 kernel "
                     f"and its v1 baseline ({why})")
    loop, base_loop = a.code.main_loop(), a.baseline.main_loop()
    if not loop or not base_loop:
        return a.row("v2_valu_delta", Status.ERROR, "no group loop found")
    # Group-rows per loop iteration: v1 reads two header dwords per group-row by scalar load.
    base_hdr_dwords = sum(_dwords(i.mnemonic) for i in base_loop if i.klass == "smem")
    group_rows = base_hdr_dwords // 2
    if group_rows < 1:
        return a.row("v2_valu_delta", Status.ERROR, "the v1 baseline's loop has no scalar "
                     "header loads to count group-rows by")
    v2 = a.code.classes(loop)["valu"]
    v1 = a.baseline.classes(base_loop)["valu"]
    per = (v2 - v1) / group_rows
    ev = {"valu_loop_v2": v2, "valu_loop_v1": v1, "group_rows_per_iteration": group_rows,
          "delta_histogram": {k: v for k, v in (
              a.code.histogram(loop) - a.baseline.histogram(base_loop)).items()
              if k.startswith("v_")}}
    status = Status.PASS if per <= V2_VALU_BUDGET else Status.FAIL
    return a.row("v2_valu_delta", status, f"{per:+.3f} VALU per group-row over "
                 f"{a.spec.baseline} ({v2} vs {v1} per iteration of {group_rows} group-rows)",
                 measured=per, tolerance=V2_VALU_BUDGET,
                 derivation="section 4: one v_cndmask + two v_cvt_f32_f16 per group per row",
                 details=ev)


def rule_wmma(a: Audit) -> Row:
    if a.spec.kind != "gemm":
        return a.row("wmma", Status.UNSUPPORTED, "rule (e) is for prefill (gemm) kernels")
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


def rule_payload_offset(a: Audit, group_bytes: int = 136, payload_offset: int = 8) -> Row:
    """Loads of W in the group loop (found by pointer origin) must use immediate offsets
    that land in [8, 136) of a group, one of them at +8.  A static reading: it relies on
    the compiler keeping the group base in the register and the +8 in the immediate, as
    clang 19 does for every kernel here; a compiler that folds +8 into the base would fail
    it falsely (the padded_offset and parity checks are the dynamic authority)."""
    loop = a.code.main_loop()
    origins = pointer_origins(a.code)
    wargs = weight_args(a.spec)
    loads = [i for i in loop if i.klass == "vmem" and i.is_load
             and origins.get(i.addr, frozenset()) & wargs]
    offsets = sorted({i.imm_offset for i in loads})
    in_group = sorted({o % group_bytes for o in offsets})
    ev = {"weight_vector_loads": len(loads), "imm_offsets": offsets,
          "offsets_mod_group": in_group, "group_bytes": group_bytes,
          "payload_offset": payload_offset}
    if not origins:
        return a.row("payload_offset", Status.ERROR, "could not find the kernarg pointer",
                     details=ev)
    if not loads:
        return a.row("payload_offset", Status.FAIL, "no vector load of W in the group loop",
                     details=ev)
    header = [o for o in in_group if o < payload_offset]
    if header or payload_offset not in in_group:
        return a.row("payload_offset", Status.FAIL, f"W vector loads at group offsets "
                     f"{in_group}: expected the payload to start at +{payload_offset} and "
                     f"nothing below it", details=ev)
    return a.row("payload_offset", Status.PASS, f"{len(loads)} payload loads at group offsets "
                 f"{in_group} (first +{payload_offset})", details=ev)


def audit_kernel(spec: KernelSpec, arch: Any, code: KernelCode,
                 baseline: KernelCode | None = None) -> list[Row]:
    a = Audit(spec, arch, code, baseline)
    for rule in (rule_header_scalar, rule_no_spill, rule_vgpr_budget, rule_v2_valu_delta,
                 rule_wmma, rule_payload_offset):
        rule(a)
    return a.rows


def summary(code: KernelCode, arch: Any) -> dict[str, Any]:
    """The per-kernel facts of item 5 (counts, occupancy, histogram by class)."""
    n = code.notes
    vgprs = int(n.get(".vgpr_count", 0))
    return {
        "vgpr": vgprs, "sgpr": int(n.get(".sgpr_count", 0)),
        "vgpr_spill": int(n.get(".vgpr_spill_count", 0)),
        "sgpr_spill": int(n.get(".sgpr_spill_count", 0)),
        "scratch": int(n.get(".private_segment_fixed_size", 0)),
        "lds": int(n.get(".group_segment_fixed_size", 0)),
        "wave": int(n.get(".wavefront_size", 0)),
        "occupancy": occupancy(arch, vgprs),
        "instructions": len(code.instructions),
        "classes": dict(code.classes()),
        "loop_classes": dict(code.classes(code.main_loop())),
    }


def audit_matrix(cells: Iterable[tuple[KernelSpec, Any]], arch: Any,
                 cache_dir: str | Path | None = None) -> list[Row]:
    """Audit rows for compiled ``(spec, CompileResult)`` cells of one arch.  A kernel's v1
    baseline is taken from the cells, or compiled from the suite's manifest when absent."""
    from hqval.toolchain import compile_kernel

    arch_name = str(getattr(arch, "name", arch))
    cells = list(cells)
    by_name = {spec.name: (spec, res) for spec, res in cells}
    rows: list[Row] = []
    for spec, res in cells:
        if res is None or not res.ok or res.code_object is None:
            continue
        try:
            code = analyze(res.code_object, arch_name)[spec.symbol]
            baseline = None
            if spec.baseline:
                pair = by_name.get(spec.baseline)
                if pair is None:
                    bspec = _baseline_spec(spec)
                    pair = (bspec, compile_kernel(bspec, arch_name, cache_dir))
                bspec, bres = pair
                if bres is not None and bres.ok and bres.code_object is not None:
                    baseline = analyze(bres.code_object, arch_name)[bspec.symbol]
            rows += audit_kernel(spec, arch, code, baseline)
        except (IsaError, KeyError, ValueError) as exc:
            rows.append(Row(kind="audit", check="audit", kernel=spec.name, arch=arch_name,
                            backend="isa", status=Status.ERROR, message=str(exc)))
    return rows


def _baseline_spec(spec: KernelSpec) -> KernelSpec:
    from hqval.manifest import load_manifest

    assert spec.baseline is not None
    if spec.manifest is not None and not spec.is_mutant:
        return load_manifest(spec.manifest).by_name(spec.baseline)
    return load_manifest().by_name(spec.baseline)
