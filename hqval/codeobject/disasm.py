"""Disassembly: ONE llvm-objdump (the toolchain's, ``find_objdump``) and ONE parser of its
output into ``Instruction`` (mnemonic, operands, modifiers, encoding words, branch target,
and the classes the audit and cost model count by).  The emulator translates these same
instructions."""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hqval.codeobject.errors import ToolFailed

_LINE = re.compile(
    r"^\s+(?P<text>.*?)\s*//\s*(?P<addr>[0-9A-Fa-f]+):\s*(?P<words>(?:[0-9A-Fa-f]{8}\s?)+)"
    r"\s*(?:<[^>]*>)?\s*$")
_SYMBOL = re.compile(r"^([0-9a-fA-F]+) <([^>]+)>:\s*$")
_REG = re.compile(r"\b([vs])(?:\[(\d+):(\d+)\]|(\d+)(?!\w))")
_CONTROL = ("s_waitcnt", "s_delay_alu", "s_clause", "s_nop", "s_endpgm", "s_sendmsg",
            "s_branch", "s_cbranch", "s_barrier", "s_setprio", "s_code_end", "s_inst_prefetch",
            "s_wait_", "s_set_inst_prefetch", "s_dcache", "s_icache", "s_trap")
_TWO_DST = ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32", "v_add_co_ci_u32",
            "v_sub_co_ci_u32", "v_subrev_co_ci_u32", "v_mad_u64_u32", "v_mad_i64_i32",
            "v_mad_co_u64_u32", "v_mad_co_i64_i32", "v_div_scale")
_NO_DST = ("s_cmp", "s_bitcmp", "global_store", "buffer_store", "flat_store", "scratch_store",
           "ds_write", "ds_store", "s_store", "s_cbranch", "s_branch", "s_waitcnt", "s_endpgm",
           "s_delay_alu", "s_clause", "s_nop", "s_sendmsg", "s_barrier", "v_cmpx", "s_wait")

#: instruction classes (``Instruction.klass``): v_wmma is its own class, never VALU
CLASSES = ("salu", "valu", "wmma", "smem", "vmem", "lds", "control")


@dataclass
class Instruction:
    """One decoded instruction.  ``operands`` are the comma-separated operands (modifiers
    after the last one are in ``modifiers``); ``operand_text`` is everything after the
    mnemonic as the disassembler wrote it; ``target`` is a branch's destination."""

    addr: int
    words: list[int]
    text: str
    mnemonic: str
    operands: list[str] = field(default_factory=list)
    modifiers: dict[str, str] = field(default_factory=dict)
    # VOPD: the second half (``v_dual_x ... :: v_dual_y ...``) as its own Instruction
    second: Instruction | None = None
    target: int | None = None

    def __hash__(self) -> int:
        return hash((self.addr, self.text))

    @classmethod
    def of(cls, addr: int, mnemonic: str, operand_text: str = "",
           target: int | None = None) -> Instruction:
        """An instruction from its text alone (no encoding words)."""
        ins = parse_text(f"{mnemonic} {operand_text}".strip(), addr)
        ins.target = target
        return ins

    @property
    def size(self) -> int:
        return 4 * len(self.words)

    @functools.cached_property
    def operand_text(self) -> str:
        parts = self.text.split(None, 1)
        return parts[1] if len(parts) > 1 else ""

    @functools.cached_property
    def klass(self) -> str:
        m = self.mnemonic
        if m.startswith(("s_load", "s_buffer_load")):
            return "smem"
        if m.startswith(("global_", "buffer_", "flat_", "scratch_")):
            return "vmem"
        if m.startswith("ds_"):
            return "lds"
        if m.startswith(("v_wmma", "v_swmmac")):
            return "wmma"
        if m.startswith("v_"):
            return "valu"
        if m.startswith(_CONTROL):
            return "control"
        return "salu"

    @property
    def valu_ops(self) -> int:
        """VALU operations (a dual-issue pair counts as two; WMMA counts none)."""
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
        m = re.search(r"offset:(-?(?:0x)?[0-9a-fA-F]+)", self.operand_text)
        if m:
            return int(m.group(1), 0)
        if self.klass == "smem":
            last = self.operand_text.split(",")[-1].strip()
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
        text = self.operand_text
        if self.mnemonic.startswith(_NO_DST):
            return (), regs(text)
        parts = [p.strip() for p in text.split(",")]
        n = 2 if self.mnemonic.startswith(_TWO_DST) else 1
        dst: list[str] = []
        for p in parts[:n]:
            dst += regs(p)
        src: list[str] = []
        for p in parts[n:]:
            src += regs(p)
        return tuple(dst), tuple(src)

    @property
    def wmma_a_regs(self) -> int:
        """Registers of the A operand of a v_wmma (8: gfx11 16-half form, 4: gfx12)."""
        counts = [reg_count(p) for p in self.operand_text.split(",")]
        return counts[1] if len(counts) > 1 else 0


def reg_count(operand: str) -> int:
    m = _REG.search(operand)
    if not m:
        return 0
    return int(m.group(3)) - int(m.group(2)) + 1 if m.group(2) else 1


@functools.lru_cache(maxsize=65536)
def regs(operand: str) -> tuple[str, ...]:
    """The 32-bit registers an operand names (``v[4:5]`` is v4, v5), memoised."""
    out: list[str] = []
    for m in _REG.finditer(operand):
        kind = m.group(1)
        if m.group(2) is not None:
            out += [f"{kind}{i}" for i in range(int(m.group(2)), int(m.group(3)) + 1)]
        else:
            out.append(f"{kind}{m.group(4)}")
    return tuple(out)


_NESTING = frozenset("[]()")


def split_top(s: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and parentheses."""
    if _NESTING.isdisjoint(s):
        # nothing nests: str.split, with the same pieces (each stripped; an empty last
        # piece dropped) as the scan below
        parts = s.split(sep)
        out = [p.strip() for p in parts[:-1]]
        last = parts[-1].strip()
        return [*out, last] if last else out
    return _split_nested(s, sep)


def _split_nested(s: str, sep: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in s:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    tail = "".join(cur).strip()
    if tail:
        out.append(tail)
    return out


def parse_text(text: str, addr: int = 0, words: list[int] | None = None) -> Instruction:
    """Parse one disassembled instruction (``mnemonic op, op, op mod:val flag``)."""
    if " :: " in text:
        a, b = text.split(" :: ", 1)
        first = parse_text(a, addr, words)
        first.second = parse_text(b, addr, words)
        first.text = text
        return first
    mnemonic, ops, mods = _fields(text)
    target = None
    if words and mnemonic.startswith(("s_branch", "s_cbranch")):
        simm = words[0] & 0xFFFF  # SOPP: the word offset after this instruction
        target = addr + 4 + 4 * (simm - 0x10000 if simm >> 15 else simm)
    return Instruction(addr=addr, words=list(words or []), text=text, mnemonic=mnemonic,
                       operands=list(ops), modifiers=dict(mods), target=target)


# An instruction's mnemonic, operands and modifiers are a function of its text alone (the
# address and encoding words give only a branch's target), and a kernel's few thousand
# lines repeat a few hundred texts: each text is split once per process.  Every
# Instruction still gets its own operand list and modifier dict.
@functools.lru_cache(maxsize=1 << 16)
def _fields(text: str) -> tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]:
    parts = text.split(None, 1)
    mnemonic = parts[0]
    rest = parts[1] if len(parts) > 1 else ""
    operands: list[str] = []
    modifiers: dict[str, str] = {}
    tokens = split_top(rest, ",") if rest else []
    if tokens:
        # modifiers follow the last operand, separated by spaces
        last = split_top(tokens[-1], " ")
        tokens[-1] = last[0]
        for mod in last[1:]:
            key, _, val = mod.partition(":")
            modifiers[key] = val
        # an instruction with only modifiers (``s_waitcnt vmcnt(0) lgkmcnt(0)``)
        operands = [t for t in tokens if t]
        if ":" in operands[-1] and not operands[-1].startswith(("s[", "v[", "ttmp[")):
            key, _, val = operands.pop().partition(":")
            modifiers[key] = val
    return mnemonic, tuple(operands), tuple(modifiers.items())


def symbol_lines(text: str) -> dict[str, list[str]]:
    """The disassembly's lines under each symbol header, unparsed."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = _SYMBOL.match(line)
        if m:
            current = out.setdefault(m.group(2), [])
            continue
        if current is not None:
            current.append(line)
    return out


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off within the block (on again after, if it was on).
    Parsing makes only acyclic objects (Instructions, their lists and dicts; a VOPD's
    second half has no reference back), which reference counting frees, and a kernel
    makes thousands of them: with the collector on, its generation-0 and -2 passes over
    the growing heap took ~60% of the parse (11.2 vs 4.7 us an instruction over 40
    objects of the matrix)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def parse_lines(lines: list[str]) -> list[Instruction]:
    """One symbol's disassembly lines as instructions (padding and non-code lines
    dropped: ``s_code_end`` and the ``s_nop`` alignment after the last ``s_endpgm``)."""
    with _collector_paused():
        return _parse_lines(lines)


def _parse_lines(lines: list[str]) -> list[Instruction]:
    out: list[Instruction] = []
    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        words = [int(x, 16) for x in m.group("words").split()]
        text = m.group("text").strip()
        if text.startswith("s_code_end") or not text:
            continue
        out.append(parse_text(text, int(m.group("addr"), 16), words))
    last_end = max((i for i, ins in enumerate(out) if ins.mnemonic == "s_endpgm"), default=-1)
    if last_end >= 0 and all(ins.mnemonic == "s_nop" for ins in out[last_end + 1:]):
        del out[last_end + 1:]
    return out


# ---- the tool ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=8)
def find_llvm_tool(name: str) -> str:
    """An LLVM tool (``llvm-objdump``, ``llvm-readelf``) matching the compiler: next to it
    first, then versioned names on PATH."""
    from hqval.toolchain import ToolchainError, find_compiler

    candidates: list[str] = []
    try:
        comp = Path(find_compiler().path)
        m = re.search(r"-(\d+)$", comp.name)
        if m:
            candidates.append(str(comp.parent / f"{name}-{m.group(1)}"))
        # the compiler's own installation (/usr/lib/llvm-22/bin for /usr/bin/clang-22)
        candidates.append(str(Path(os.path.realpath(comp)).parent / name))
        if not m:
            # an unversioned tool beside a versioned compiler is the distribution's default
            # LLVM (Debian 12's /usr/bin/llvm-objdump is LLVM 14, which has no gfx11/12:
            # clang-22's objects failed 'can't find target'), not the compiler's
            candidates.append(str(comp.parent / name))
    except ToolchainError:
        pass
    candidates += [f"{name}-20", f"{name}-19", name]
    for c in candidates:
        exe = shutil.which(c)
        if exe:
            return exe
    raise ToolFailed(f"{name} not found (tried {', '.join(candidates)}); fix: apt-get "
                          "install llvm-19, or put ROCm's llvm/bin on PATH")


def find_objdump() -> str:
    """THE disassembler: ``HQVAL_OBJDUMP`` when set, else the toolchain's llvm-objdump."""
    env = os.environ.get("HQVAL_OBJDUMP")
    if env:
        path = shutil.which(env)
        if path is None:
            raise ToolFailed(f"HQVAL_OBJDUMP={env} is not an executable; fix: point it "
                                  "at an llvm-objdump that knows AMDGPU, or unset it")
        return path
    return find_llvm_tool("llvm-objdump")


@functools.lru_cache(maxsize=8)
def _identity(path: str, mtime_ns: int, size: int) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60,
                         check=False)
    return hashlib.sha256(f"{path}\0{size}\0{mtime_ns}\0{out.returncode}\0"
                          f"{out.stdout}".encode()).hexdigest()


def tool_identity(path: str) -> str:
    """A tool as it runs: resolved path, size, mtime and --version text (a replaced or
    rebuilt tool is another tool)."""
    real = os.path.realpath(path)
    st = os.stat(real)
    return _identity(real, st.st_mtime_ns, st.st_size)


def objdump_text(raw: bytes, mcpu: str, objdump: str | None = None) -> str:
    """llvm-objdump's disassembly of every function symbol of the code object."""
    tool = objdump or find_objdump()
    with tempfile.NamedTemporaryFile(suffix=".co") as f:
        f.write(raw)
        f.flush()
        try:
            proc = subprocess.run([tool, "-d", f"--mcpu={mcpu}", f.name],
                                  capture_output=True, text=True, timeout=300, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ToolFailed(f"{tool} could not run on the code object for {mcpu} (hqval's "
                             f"disassembler, not the kernel): {exc}; fix: install a working "
                             "llvm-objdump (llvm-19) or set HQVAL_OBJDUMP") from exc
    if proc.returncode != 0:
        how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
               else f"exited {proc.returncode}")
        raise ToolFailed(f"{tool} {how} on the code object for {mcpu} (hqval's "
                         f"disassembler, not the kernel): {proc.stderr.strip()[:400]}; fix: "
                         "install a working llvm-objdump (llvm-19) or set HQVAL_OBJDUMP")
    return proc.stdout
