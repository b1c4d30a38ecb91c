"""hqval.emu: an RDNA wave interpreter that runs compiled code objects on the CPU.

``Machine(arch)``: ``load(code_object) -> Module``, ``alloc``, ``write``, ``read``,
``launch(module, symbol, grid, block, args) -> LaunchStats``."""

from hqval.emu.errors import EmuError, OutOfBounds, UnknownArch, UnsupportedInstruction
from hqval.emu.machine import CLASSES, LaunchStats, Machine, Module

__all__ = ["CLASSES", "EmuError", "LaunchStats", "Machine", "Module", "OutOfBounds", "UnknownArch",
           "UnsupportedInstruction"]
