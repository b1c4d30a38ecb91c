"""The protocol every execution backend implements: load, allocate, copy, launch, time.

One backend per module (``emu``, ``hip``, ``cuda``), each small.  A capability a backend
lacks raises ``NotImplementedError("need ...")``; a backend that cannot start raises
``BackendUnavailable`` naming what is missing (the CLI turns it into exit 2: a requested
backend that cannot run is an error, never a silent skip or switch).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from hqval.deadline import Deadline
    from hqval.manifest import KernelSpec


class BackendUnavailable(RuntimeError):
    """The backend cannot run here; the message names what is missing and how to get it."""


@dataclass
class Buffer:
    """A device allocation.  ``handle`` is backend-specific (an address, a pointer object)."""

    nbytes: int
    handle: Any


@dataclass
class Program:
    """A loaded kernel, ready to launch."""

    spec: KernelSpec
    symbol: str
    handle: Any
    # Where the code came from: code object path and hash, or the NVRTC source hash.
    provenance: dict[str, Any] = field(default_factory=dict)


@dataclass
class LaunchInfo:
    """What a launch reports back. The emulator fills ``counts`` (dynamic instruction
    counts by class); hardware backends leave it empty."""

    counts: dict[str, int] = field(default_factory=dict)


# One kernel argument: a device buffer, an i32, an f32, or a null pointer.
Arg = Buffer | int | float | None


def f32_bits(value: float) -> int:
    """The 32 bits of ``value`` as an f32 (how a float argument sits in the kernarg)."""
    return int(np.array([value], np.float32).view(np.uint32)[0])


class Backend(abc.ABC):
    name: str = ""
    # How this instance was chosen ("hip: requested by name", "auto: emu (no ROCm ...)"),
    # set by ``hqval.backends.get``; recorded in result rows.
    selection: str = ""
    # The code object cache ``load`` compiles into (``hqval.toolchain.cache_base``: None is
    # $HQVAL_CACHE or ~/.cache/hqval), set by ``hqval.backends.get`` from --cache-dir so
    # the checks run the very objects the compile and audit steps built.
    cache_dir: str | None = None
    # The deadline of the cell now running (``hqval.deadline.bounded``): a hardware
    # backend's waits poll against it and its launches are refused once it has passed;
    # None: each wait gets ``hqval.deadline.DEFAULT_WAIT_S``.
    deadline: Deadline | None = None

    def __init__(self, arch: str) -> None:
        self.arch = arch

    @abc.abstractmethod
    def device_name(self) -> str: ...

    def runtime_info(self) -> dict[str, str]:
        """Driver/runtime versions and clocks for the results envelope."""
        return {}

    @abc.abstractmethod
    def load(self, spec: KernelSpec) -> Program:
        """Compile (if needed) and load ``spec`` for this backend's arch."""

    @abc.abstractmethod
    def alloc(self, nbytes: int) -> Buffer: ...

    @abc.abstractmethod
    def free(self, buf: Buffer) -> None: ...

    def view(self, buf: Buffer, offset: int, nbytes: int) -> Buffer:
        """A sub-range of ``buf`` usable as a kernel argument (sentinel-guarded outputs).
        Backends whose handles are not integer addresses override this."""
        if offset < 0 or offset + nbytes > buf.nbytes:
            raise ValueError(f"view [{offset}, {offset + nbytes}) outside a {buf.nbytes} B buffer")
        return Buffer(nbytes=nbytes, handle=int(buf.handle) + offset)

    @abc.abstractmethod
    def copy_in(self, buf: Buffer, host: np.ndarray, offset: int = 0) -> None: ...

    @abc.abstractmethod
    def copy_out(self, buf: Buffer, nbytes: int | None = None, offset: int = 0) -> np.ndarray:
        """Return the bytes as a uint8 array."""

    @abc.abstractmethod
    def launch(
        self,
        program: Program,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: Sequence[Arg],
    ) -> LaunchInfo:
        """Launch and return; ``synchronize`` waits.  ``int`` args are i32 scalars,
        ``float`` args f32 scalars and ``None`` a null pointer (a manifest's
        ``extra_args``, e.g. the unused bias pointers of a fused kernel)."""

    def launch_many(
        self,
        program: Program,
        launches: Sequence[tuple[tuple[int, int, int], tuple[int, int, int], Sequence[Arg]]],
    ) -> list[LaunchInfo]:
        """Independent launches of one program, none reading what another writes: by
        default one after another; the emulator runs them as one wave batch, each launch
        kept to its own buffers."""
        return [self.launch(program, grid, block, args) for grid, block, args in launches]

    def ran_on(self) -> list[str]:
        """The arch whose device ran each launch so far, in order.  Empty here: a hardware
        backend runs every launch itself; the emulator names the arch whose identical code
        a replayed launch ran on (``hqval.checks.cell.run_cell`` says so in the row)."""
        return []

    def synchronize(self) -> None:
        return None

    # Device events, one pair per timing sample.
    def record_event(self) -> Any:
        raise NotImplementedError(f"need device events: backend {self.name!r} has no clock")

    def elapsed_ms(self, start: Any, end: Any) -> float:
        raise NotImplementedError(f"need device events: backend {self.name!r} has no clock")

    def copy_device(self, dst: Buffer, src: Buffer, nbytes: int) -> None:
        """Device-to-device copy (the timing issue's bandwidth ceiling)."""
        raise NotImplementedError(f"need device copies: backend {self.name!r}")


def unwrap_status(fn: str, result: Any, describe: Callable[[Any], str]) -> Any:
    """A binding call's ``(status, *values)`` as cuda-bindings and hip-python return it:
    RuntimeError("FN failed: ...") when the status is not 0, else None, the value, or the
    values.  ``describe`` turns a failing status into the runtime's own words."""
    if not isinstance(result, tuple):
        result = (result,)
    err, rest = result[0], result[1:]
    if int(err) != 0:
        raise RuntimeError(f"{fn} failed: {describe(err)}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def format_uuid(raw: Any) -> str | None:
    """A device UUID struct as cuda-bindings (``CUuuid``) and hip-python (``hipUUID``)
    return it, its 16 bytes in ``.bytes`` (bytes, or a sequence of possibly signed
    chars), as ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` (nvidia-smi's spelling);
    None when it is not 16 bytes or all zero (no UUID to tell devices apart by)."""
    data = getattr(raw, "bytes", raw)
    try:
        b = bytes(data) if isinstance(data, (bytes, bytearray)) else bytes(
            (int(x) if not isinstance(x, (bytes, str)) else ord(x)) & 0xFF for x in data)
    except (TypeError, ValueError):
        return None
    if len(b) != 16 or not any(b):
        return None
    h = b.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
