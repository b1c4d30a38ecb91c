"""The one error of the code-object reader."""

from __future__ import annotations


class CodeObjectError(ValueError):
    """A code object could not be read (not an AMDGPU ELF, a damaged table, a missing or
    failing disassembler); the message names what and the fix."""
