"""What the interpreter can run, found before anything runs.

``scan_object(raw)``: every kernel of a code object with the instructions (mnemonic,
address, why) the interpreter has no semantics for: the same translation a launch does,
so an instruction listed here is exactly one that would raise UnsupportedInstruction.

``isa_opcodes(arch)``: LLVM's instruction table for ``arch``, derived by decoding: every
value of the top 16 bits of a first instruction word (with fixed low bits and trailing
words), plus every value of the SOP1 and VOP1 opcode fields (which lie below bit 16), is
disassembled by llvm-mc-19 for the arch; each mnemonic it decodes is one of the arch's
opcodes.  Encoding suffixes (_e32, _e64, _dpp, _sdwa) name one opcode; VOPD halves count as
their ``v_dual_*`` names.  ``isa_coverage(arch)`` translates the first decoded instance of
each opcode: implemented means it translates without raising."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field

from hqval.codeobject import CodeObject, CodeObjectError, Instruction, parse_text
from hqval.codeobject import load as load_code_object
from hqval.emu.errors import EmuError, UnknownArch, UnsupportedInstruction
from hqval.emu.machine import ARCH_GEN, Machine
from hqval.emu.operands import Ctx


@dataclass(frozen=True)
class KernelScan:
    kernel: str
    # (mnemonic, address, why), one per instruction without semantics
    unsupported: tuple[tuple[str, int, str], ...]

    @property
    def mnemonics(self) -> list[str]:
        return sorted({m for m, _, _ in self.unsupported})


@dataclass(frozen=True)
class ObjectScan:
    arch: str
    kernels: tuple[KernelScan, ...]

    @property
    def mnemonics(self) -> list[str]:
        return sorted({m for k in self.kernels for m in k.mnemonics})


def object_arch(co: CodeObject) -> str:
    """The gfx target of a code object (``amdgcn-amd-amdhsa--gfx1100:xnack-`` -> gfx1100)."""
    target = co.target.split("--")[-1].split(":")[0]
    if not target:
        raise EmuError("code object names no target (amdhsa.target missing from its metadata)")
    if target not in ARCH_GEN:
        raise UnknownArch(f"code object is for {target}: the emulator models "
                          f"{', '.join(sorted(ARCH_GEN))}")
    return target


def scan_object(raw: bytes) -> ObjectScan:
    """Translate every kernel of ``raw`` (and the device functions it may call)."""
    try:
        co = load_code_object(raw)
    except CodeObjectError as exc:
        raise EmuError(str(exc)) from exc
    arch = object_arch(co)
    module = Machine(arch).load(raw)
    kernels = tuple(KernelScan(k, tuple(module.unsupported(k))) for k in module.symbols())
    return ObjectScan(arch=arch, kernels=kernels)


# ---------------------------------------------------------------------------- ISA table

def find_llvm_mc() -> str:
    env = os.environ.get("HQVAL_LLVM_MC")
    for cand in ([env] if env else []) + ["llvm-mc-19", "llvm-mc"]:
        path = shutil.which(cand)
        if path:
            return path
    raise EmuError("llvm-mc not found: install llvm-19 (apt-get install llvm-19) or point "
                   "HQVAL_LLVM_MC at an llvm-mc that knows AMDGPU")


_PAD = (0xBF800000).to_bytes(4, "little")  # s_nop 0: trailing words for 64/96-bit forms
_V123 = 0x101 | 0x102 << 9 | 0x103 << 18  # VOP3 second word: sources v1, v2, v3
# VOP3 (first word 0b110101...) also with SGPR sources (v_s_*, permlane selects); VOP3P
# (0xCC...) also with WMMA-shaped operands (op_sel_hi set, v[0:3], v[8:11], v[16:23])
_VOP3_SECOND = (_V123, 0x101 | 0x002 << 9 | 0x003 << 18, 0x002 | 0x003 << 9 | 0x004 << 18,
                0x002)
_VOP3P_FORMS = ((0x0002, _V123), (0x4010, 0x1C421100))


def _candidate_words() -> Iterator[bytes]:
    def word(first: int, *rest: int) -> bytes:
        return b"".join(w.to_bytes(4, "little") for w in (first, *rest))
    for top in range(1 << 16):
        if top >> 10 == 0b110101:
            for second in _VOP3_SECOND:
                yield word(top << 16 | 0x0002, second) + _PAD + _PAD
        elif top >> 8 == 0xCC:
            for low, second in _VOP3P_FORMS:
                yield word(top << 16 | low, second) + _PAD + _PAD
        else:
            yield word(top << 16 | 0x0002, _V123) + _PAD + _PAD
    for op in range(256):
        yield word(0xBE800000 | op << 8 | 0x02) + _PAD  # SOP1: opcode in bits 15:8
        yield word(0x7E000000 | op << 9 | 0x102) + _PAD  # VOP1: opcode in bits 16:9


def opcode_name(mnemonic: str) -> str:
    for suf in ("_e64_dpp", "_e32", "_e64", "_dpp", "_sdwa"):
        if mnemonic.endswith(suf):
            return mnemonic[: -len(suf)]
    return mnemonic


@dataclass
class IsaTable:
    arch: str
    # opcode name -> the first instruction text llvm-mc decoded for it
    samples: dict[str, str] = field(default_factory=dict)


def isa_opcodes(arch: str) -> IsaTable:
    if arch not in ARCH_GEN:
        raise UnknownArch(f"unknown arch {arch!r}")
    mc = find_llvm_mc()
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        for raw in _candidate_words():
            f.write(",".join(f"0x{b:02x}" for b in raw) + "\n")
        f.flush()
        proc = subprocess.run([mc, "--disassemble", "-triple=amdgcn-amd-amdhsa",
                               f"-mcpu={arch}", f.name], capture_output=True, text=True,
                              timeout=600, check=False)
    table = IsaTable(arch)
    for line in proc.stdout.splitlines():
        text = line.strip()
        if not text or text.startswith("."):
            continue
        text = text.split("//")[0].strip()
        for half in text.split(" :: "):
            name = opcode_name(half.split()[0])
            sample = text if " :: " not in text else half
            # llvm-mc flags operands of the wrong register class in a comment: keep a
            # clean instance when one decodes
            if name not in table.samples or ("/*" in table.samples[name] and "/*" not in sample):
                table.samples[name] = sample
    if not table.samples:
        raise EmuError(f"llvm-mc decoded nothing for {arch}: {proc.stderr.strip()[:300]}")
    return table


class _AnyAddress(dict[int, int]):
    """Branch targets of sample instructions: every address maps to instruction 0."""

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: int) -> int:
        return 0


@dataclass(frozen=True)
class IsaCoverage:
    arch: str
    implemented: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def total(self) -> int:
        return len(self.implemented) + len(self.missing)


def translates(ins: Instruction, cx: Ctx) -> bool:
    from hqval.emu import memory, scalar, vector

    try:
        res = (scalar.translate(ins, cx) or memory.translate(ins, cx)
               or vector.translate(ins, cx, cx.lanes))
    except (UnsupportedInstruction, EmuError, ValueError, KeyError, IndexError):
        return False
    return res is not None


def isa_coverage(arch: str, table: IsaTable | None = None) -> IsaCoverage:
    table = table or isa_opcodes(arch)
    cx = Ctx(arch=arch, kernel="isa-table", gen=ARCH_GEN[arch], index_of=_AnyAddress())
    done: list[str] = []
    missing: list[str] = []
    for name, text in sorted(table.samples.items()):
        ins = parse_text(text, 0, [0xBF800000, 0, 0])
        (done if "/*" not in text and translates(ins, cx) else missing).append(name)
    return IsaCoverage(arch=arch, implemented=tuple(done), missing=tuple(missing))
