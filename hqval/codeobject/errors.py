"""The one error of the code-object reader."""

from __future__ import annotations

from hqval.errors import InfrastructureError


class CodeObjectError(ValueError):
    """A code object could not be read (not an AMDGPU ELF, a damaged table, a missing or
    failing disassembler); the message names what and the fix."""


class ToolFailed(CodeObjectError, InfrastructureError):
    """The disassembler hqval reads code objects with is missing, not executable, crashed
    or failed: hqval's own machinery, not the kernel (an infrastructure error)."""
