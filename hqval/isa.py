"""The ISA audit's old module name: everything lives in ``hqval.audit`` (and code objects
in ``hqval.codeobject``); this module only re-exports it for callers not yet moved."""

from __future__ import annotations

from hqval.audit import *  # noqa: F403
from hqval.audit import __all__ as _audit_all
from hqval.audit.cache import _baseline_spec as _baseline_spec
from hqval.codeobject import Instruction as Instruction
from hqval.codeobject import elf_symbols as elf_symbols
from hqval.codeobject import find_llvm_tool as find_llvm_tool

__all__ = [*_audit_all, "Instruction", "elf_symbols", "find_llvm_tool"]
