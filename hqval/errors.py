"""Causes kept apart: an error of hqval's own machinery is never the kernel's.

``InfrastructureError`` is raised for a failure of hqval itself, not of the kernel under
test: the code-object cache (unwritable, damaged), I/O on hqval's own files, a fixture that
cannot be built, an option value that reaches a step.  A row made from one is
``Status.ERROR`` with ``details["infrastructure"] = True`` (``infrastructure_details``);
such a row makes the run exit 2, and ``hqval run --resume`` redoes its cell.  Only the
kernel's own behaviour under test (its compile error, its wrong output, its fault) is a
kernel failure.
"""

from __future__ import annotations

from typing import Any


class InfrastructureError(Exception):
    """hqval's own machinery failed (cache, I/O, fixtures, options); not the kernel."""


def infrastructure_details(exc: BaseException, **extra: Any) -> dict[str, Any]:
    """The ``details`` of an error row made from ``exc``, an infrastructure failure."""
    return {"infrastructure": True, "error_type": type(exc).__name__, **extra}


def is_infrastructure(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) is a failure of hqval's machinery: an
    ``InfrastructureError``, an ``OSError`` (I/O on hqval's own files: the kernel under test
    runs on a device or the emulator and raises none) or a ``SafeIOError`` (a file hqval
    could not read or write safely)."""
    from hqval.safeio import SafeIOError

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, (InfrastructureError, OSError, SafeIOError)):
            return True
        seen.add(id(cur))
        cur = cur.__cause__
    return False


# Python's own errors of a program's logic: raised inside a check they are a bug of hqval's
# code (its oracle, fixtures, emulator or bookkeeping), never the kernel's behaviour, which
# reaches a check as a fault of its own (``hqval.emu.errors.KernelFault``, a broken guard,
# a launch that never ends, a device runtime's error)
PROGRAM_ERRORS: tuple[type[BaseException], ...] = (
    TypeError, AttributeError, NameError, LookupError, ArithmeticError, AssertionError,
    NotImplementedError, RecursionError, ImportError, MemoryError)


def is_program_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one of ``PROGRAM_ERRORS`` (a bug of hqval's own code)."""
    return isinstance(exc, PROGRAM_ERRORS)
