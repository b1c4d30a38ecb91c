"""Emulator backend: the RDNA wave interpreter (``hqval.emu.Machine``) as a device.

The arch is chosen by name, so every architecture path runs in CI with no GPU.  Code
objects come from ``hqval.toolchain.compile_kernel`` for that arch, exactly the bytes a
hardware backend would load.  Launches report dynamic instruction counts; there is no
clock (device events raise ``NotImplementedError("need device events ...")``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hqval.backends.base import (
    Arg,
    Backend,
    BackendUnavailable,
    Buffer,
    LaunchInfo,
    Program,
    f32_bits,
)

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec


class EmuBackend(Backend):
    name = "emu"

    def __init__(self, arch: str) -> None:
        super().__init__(arch)
        try:
            from hqval.emu import EmuError, Machine
        except ImportError as exc:
            raise BackendUnavailable(
                f"backend 'emu': the RDNA interpreter (hqval.emu.Machine) is not importable: {exc}"
            ) from exc
        if not arch.startswith("gfx"):
            raise BackendUnavailable(
                f"backend 'emu': {arch} is not an RDNA target; the interpreter runs gfx10-12 only"
            )
        try:
            from hqval.emu.replay import SHARED_REPLAY

            # one replay store for every arch's machine in this process: a launch of code
            # identical to another arch's (its object apart from the target name, decoded
            # alike, one generation) on the same bytes is run once (``Machine.launch``)
            self.machine: Any = Machine(arch, replay=SHARED_REPLAY)
        except (EmuError, ValueError, KeyError, NotImplementedError) as exc:
            raise BackendUnavailable(f"backend 'emu': cannot emulate {arch}: {exc}") from exc
        self._cache_dir: str | None = None
        self.cache_dir = None
        self._modules: dict[str, Any] = {}
        self._digests: dict[str, str] = {}

    @property
    def cache_dir(self) -> str | None:
        return self._cache_dir

    @cache_dir.setter
    def cache_dir(self, value: str | None) -> None:
        """Where the backend compiles; its machine also remembers launches there
        (``hqval.emu.replay.DiskReplay``), unless ``$HQVAL_EMU_REPLAY`` is ``off``."""
        from hqval.emu import EmuError
        from hqval.emu.replay import DiskReplay, choice
        from hqval.toolchain import cache_base

        try:
            on = choice() == "cache"
        except EmuError as exc:
            raise BackendUnavailable(f"backend 'emu': {exc}") from exc
        self._cache_dir = value
        self.machine.disk = DiskReplay(cache_base(value)) if on else None

    def ran_on(self) -> list[str]:
        """The arch whose machine ran each launch so far, in order: this arch, or the one
        a replayed launch of identical code ran on (the machine's own list: read it)."""
        ran: list[str] = self.machine.ran_on
        return ran

    def device_name(self) -> str:
        return f"hqval RDNA wave interpreter ({self.arch})"

    def runtime_info(self) -> dict[str, str]:
        from hqval import __version__

        return {"emulator": f"hqval.emu {__version__}", "arch": self.arch}

    def load(self, spec: KernelSpec) -> Program:
        from hqval.toolchain import compile_kernel

        result = compile_kernel(spec, self.arch, self.cache_dir)
        if not result.ok or result.code_object is None:
            if result.details.get("infrastructure"):
                from hqval.errors import InfrastructureError

                # the cache or a refused input, not the kernel: the cell is not its failure
                raise InfrastructureError(f"{spec.name} for {self.arch}: {result.message}")
            from hqval.toolchain import ToolchainGap, missing_builtin

            if gap := missing_builtin(result.message):
                raise ToolchainGap(f"{spec.name} for {self.arch}: {result.message}", gap)
            raise RuntimeError(f"{spec.name} does not compile for {self.arch}: {result.message}")
        key = str(result.code_object)
        if key not in self._modules:
            data = result.code_object.read_bytes()
            self._modules[key] = self.machine.load(data)
            self._digests[key] = hashlib.sha256(data).hexdigest()
        # the sha256 of the bytes loaded: the check rows name the object they judged
        return Program(spec=spec, symbol=spec.symbol, handle=self._modules[key],
                       provenance={"code_object": key, "sha256": self._digests[key]})

    def alloc(self, nbytes: int) -> Buffer:
        return Buffer(nbytes=nbytes, handle=int(self.machine.alloc(max(nbytes, 1))))

    def free(self, buf: Buffer) -> None:
        free = getattr(self.machine, "free", None)
        if free is not None:
            free(buf.handle)

    def copy_in(self, buf: Buffer, host: np.ndarray, offset: int = 0) -> None:
        data = np.ascontiguousarray(host).view(np.uint8).reshape(-1)
        if offset + data.nbytes > buf.nbytes:
            raise ValueError(f"copy_in of {data.nbytes} B at +{offset} overruns {buf.nbytes} B")
        self.machine.write(int(buf.handle) + offset, data)

    def copy_out(self, buf: Buffer, nbytes: int | None = None, offset: int = 0) -> np.ndarray:
        n = buf.nbytes - offset if nbytes is None else nbytes
        out: np.ndarray = np.asarray(self.machine.read(int(buf.handle) + offset, n), np.uint8)
        return out.copy()

    def launch(
        self,
        program: Program,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: Sequence[Arg],
    ) -> LaunchInfo:
        raw = [int(a.handle) if isinstance(a, Buffer) else 0 if a is None
               else f32_bits(a) if isinstance(a, float) else int(a) for a in args]
        # a buffer argument that is a view (the data between a guarded argument's canaries)
        # is all the kernel may touch of its allocation: a canary access faults at once
        spans = [(int(a.handle), a.nbytes) for a in args if isinstance(a, Buffer)]
        with self.machine.mem.windows(spans):
            stats = self.machine.launch(program.handle, program.symbol, grid, block, raw)
        counts = getattr(stats, "counts", None) or {}
        return LaunchInfo(counts={str(k): int(v) for k, v in dict(counts).items()})

    def launch_many(
        self,
        program: Program,
        launches: Sequence[tuple[tuple[int, int, int], tuple[int, int, int], Sequence[Arg]]],
    ) -> list[LaunchInfo]:
        """One wave batch (``Machine.launch_many``): each launch may touch only the data of
        its own buffer arguments (between their canaries), so a stray access into a
        sibling launch's buffer faults as an access outside every allocation does."""
        batch = []
        for grid, block, args in launches:
            raw = [int(a.handle) if isinstance(a, Buffer) else 0 if a is None
                   else f32_bits(a) if isinstance(a, float) else int(a) for a in args]
            spans = [(int(a.handle), a.nbytes) for a in args if isinstance(a, Buffer)]
            batch.append((grid, block, raw, spans))
        stats = self.machine.launch_many(program.handle, program.symbol, batch)
        return [LaunchInfo(counts={str(k): int(v) for k, v in dict(s.counts).items()})
                for s in stats]

    def copy_device(self, dst: Buffer, src: Buffer, nbytes: int) -> None:
        self.machine.write(int(dst.handle), self.machine.read(int(src.handle), nbytes))
