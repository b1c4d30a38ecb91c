"""Errors the interpreter raises.  Every one names what went wrong and where."""

from __future__ import annotations


class EmuError(RuntimeError):
    """Base class: the emulator cannot run this launch (bad code object, bad arguments)."""


class UnknownArch(EmuError, ValueError):
    """The emulator has no model of this gfx target."""


class UnsupportedInstruction(EmuError):
    """An instruction the interpreter does not implement.  Never skipped silently."""

    def __init__(self, mnemonic: str, address: int, kernel: str, arch: str, why: str = "") -> None:
        self.mnemonic = mnemonic
        self.address = address
        self.kernel = kernel
        self.arch = arch
        self.why = why
        detail = f" ({why})" if why else ""
        super().__init__(
            f"unsupported instruction {mnemonic!r} at 0x{address:x} in kernel {kernel!r} "
            f"on {arch}{detail}: the emulator has no semantics for it; run this kernel on a "
            f"hardware backend or add the instruction to hqval.emu"
        )


class KernelFault(EmuError):
    """The kernel's own behaviour ended the launch: as deterministic as its outputs, and on
    hardware the launch aborts or never finishes, so the kernel fails (never an emulator
    gap, never hqval's machinery).  Every subclass names the instruction and its address
    (``instruction``, ``address``); ``label`` is what a row calls the fault."""

    label = "fault"
    instruction = ""
    address = 0


class KernelTrap(KernelFault):
    """The kernel executed ``s_trap`` (``__builtin_trap()``, a failed device assert) or
    halted its wave (``s_sethalt``): on hardware the launch aborts, so the kernel fails."""

    label = "trap"

    def __init__(self, instruction: str, address: int, kernel: str, arch: str) -> None:
        self.instruction = instruction
        self.address = address
        self.kernel = kernel
        self.arch = arch
        super().__init__(
            f"kernel {kernel!r} executed {instruction!r} at 0x{address:x} on {arch}: a trap "
            "or halt aborts the launch on hardware (a __builtin_trap(), a failed device "
            "assert, or a fault path the kernel reached)")


class IllegalInstruction(KernelFault):
    """The kernel executed a word the arch's disassembler decodes as no instruction
    (``.long``): on hardware an illegal-instruction exception aborts the launch."""

    label = "illegal instruction"

    def __init__(self, text: str, address: int, kernel: str, arch: str) -> None:
        self.instruction = text
        self.address = address
        self.kernel = kernel
        self.arch = arch
        super().__init__(
            f"kernel {kernel!r} executed {text!r} at 0x{address:x} on {arch}, which is no "
            f"instruction of {arch} (its disassembler decodes none there): an illegal "
            "instruction aborts the launch on hardware")


class LaunchNeverEnds(EmuError):
    """The launch did not finish: the step bound reached, or waves waiting at a barrier
    others never reach.  Not a ``KernelFault``: the interpreter runs a launch's waves by
    lowest program counter, never concurrently, so a kernel waiting on another workgroup
    (a flag it sets, a barrier it reaches later) that hardware runs to the end stops here
    too.  The cell reaches no verdict (an error naming the instruction and address: the
    run is incomplete, exit 2), never a failure of a kernel that may be correct."""

    label = "never finished"

    def __init__(self, message: str, instruction: str, address: int) -> None:
        self.instruction = instruction
        self.address = address
        super().__init__(message)


class BadJump(KernelFault):
    """The kernel jumped to an address holding no instruction of its code object, or ran
    past its last instruction: on hardware, a fault or garbage executed."""

    label = "bad jump"

    def __init__(self, message: str, instruction: str, address: int) -> None:
        self.instruction = instruction
        self.address = address
        super().__init__(message)


class OutOfBounds(KernelFault):
    """A memory access outside every allocation (or outside the workgroup's LDS)."""

    label = "memory fault"

    def __init__(
        self, address: int, nbytes: int, instruction: str, kernel: str, arch: str, space: str
    ) -> None:
        self.address = address
        self.nbytes = nbytes
        self.instruction = instruction
        self.kernel = kernel
        self.arch = arch
        self.space = space
        super().__init__(
            f"out-of-bounds {space} access of {nbytes} bytes at 0x{address:x} by "
            f"{instruction!r} in kernel {kernel!r} on {arch}: no allocation covers it "
            f"(check the grid, the buffer sizes and the kernel's bounds guards)"
        )
