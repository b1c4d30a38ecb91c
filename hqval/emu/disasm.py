"""Instruction decoding from a real decoder: llvm-objdump's disassembly of the same code
object, parsed into mnemonic, operands, modifiers and encoding words."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from hqval.emu.errors import EmuError

_LINE = re.compile(
    r"^\s+(?P<text>.*?)\s*//\s*(?P<addr>[0-9A-Fa-f]+):\s*(?P<words>(?:[0-9A-Fa-f]{8}\s?)+)"
    r"\s*(?:<[^>]*>)?\s*$")
_SYMBOL = re.compile(r"^([0-9a-fA-F]+) <([^>]+)>:\s*$")


@dataclass
class Instruction:
    addr: int
    words: list[int]
    text: str
    mnemonic: str
    operands: list[str] = field(default_factory=list)
    modifiers: dict[str, str] = field(default_factory=dict)
    # VOPD: the second half (``v_dual_x ... :: v_dual_y ...``) as its own Instruction
    second: Instruction | None = None

    @property
    def size(self) -> int:
        return 4 * len(self.words)


def find_objdump() -> str:
    env = os.environ.get("HQVAL_OBJDUMP")
    for cand in ([env] if env else []) + ["llvm-objdump-19", "llvm-objdump"]:
        path = shutil.which(cand)
        if path:
            return path
    raise EmuError("llvm-objdump not found: install llvm-19 (apt-get install llvm-19) "
                   "or point HQVAL_OBJDUMP at an llvm-objdump that knows AMDGPU")


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
    return Instruction(addr=addr, words=list(words or []), text=text, mnemonic=mnemonic,
                       operands=operands, modifiers=modifiers)


def objdump_text(raw: bytes, arch: str, symbols: list[str] | None = None) -> str:
    """llvm-objdump's disassembly of the function symbols (all, or ``symbols``)."""
    objdump = find_objdump()
    only = [f"--disassemble-symbols={','.join(symbols)}"] if symbols else []
    with tempfile.NamedTemporaryFile(suffix=".co") as f:
        f.write(raw)
        f.flush()
        proc = subprocess.run([objdump, "-d", *only, f"--mcpu={arch}", f.name],
                              capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise EmuError(f"llvm-objdump failed on the code object for {arch}: "
                       f"{proc.stderr.strip()[:400]}")
    return proc.stdout


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


def parse_lines(lines: list[str]) -> list[Instruction]:
    """One symbol's disassembly lines as instructions (padding and non-code lines
    dropped)."""
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
    return out


def disassemble(raw: bytes, arch: str, symbols: list[str] | None = None
                ) -> dict[str, list[Instruction]]:
    """Disassemble the function symbols (all, or ``symbols``): ``{symbol: [Instruction]}``."""
    return {sym: parse_lines(lines)
            for sym, lines in symbol_lines(objdump_text(raw, arch, symbols)).items()}
