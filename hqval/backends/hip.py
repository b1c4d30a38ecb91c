"""HIP backend through hip-python: device, program (hipModule*), allocator (hipMalloc).

hip-python imports without ROCm; its first call then raises "failed to dlopen
libamdhip64.so".  That, no device, or a device of another arch than the one asked for is a
``BackendUnavailable`` naming what is missing.  Code objects come from
``hqval.toolchain.compile_kernel`` for this backend's arch.
"""

from __future__ import annotations

import ctypes
import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hqval import deadline
from hqval.backends.base import (
    Arg,
    Backend,
    BackendUnavailable,
    Buffer,
    LaunchInfo,
    Program,
    format_uuid,
    unwrap_status,
)

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec

# Every hip-python name this module calls; tests/backends/test_hip.py checks each exists
# in the installed hip-python with the parameters used here.
HIP_CALLS: dict[str, tuple[str, ...]] = {
    "hipGetDeviceCount": (),
    "hipSetDevice": ("deviceId",),
    "hipGetDeviceProperties": ("prop", "deviceId"),
    "hipDriverGetVersion": (),
    "hipRuntimeGetVersion": (),
    "hipGetErrorString": ("hipError",),
    "hipDeviceGetUuid": ("device",),
    "hipModuleLoadData": ("image",),
    "hipModuleGetFunction": ("module", "kname"),
    "hipModuleLaunchKernel": (
        "f", "gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ",
        "sharedMemBytes", "stream", "kernelParams", "extra",
    ),
    "hipMalloc": ("size",),
    "hipFree": ("ptr",),
    "hipMemcpyHtoD": ("dst", "src", "sizeBytes"),
    "hipMemcpyDtoH": ("dst", "src", "sizeBytes"),
    "hipMemcpyDtoD": ("dst", "src", "sizeBytes"),
    "hipDeviceSynchronize": (),
    "hipEventCreate": (),
    "hipEventRecord": ("event", "stream"),
    "hipEventQuery": ("event",),
    "hipEventElapsedTime": ("start", "stop"),
    "hipEventDestroy": ("event",),
}


def _hip() -> Any:
    try:
        from hip import hip
    except ImportError as exc:
        raise BackendUnavailable(
            "backend 'hip': needs hip-python (pip install hqval[hip]) and ROCm"
        ) from exc
    return hip


def visible_devices() -> int:
    """How many AMD GPUs hip-python can use here: 0 without hip-python, without ROCm,
    or with a runtime that reports an error (no device)."""
    try:
        hip = _hip()
        result = hip.hipGetDeviceCount()
    except (BackendUnavailable, RuntimeError):
        return 0
    err, count = result if isinstance(result, tuple) else (result, 0)
    return int(count) if int(err) == 0 else 0


def base_arch(gcn_arch_name: str) -> str:
    """``gfx1100:sramecc-:xnack-`` -> ``gfx1100``."""
    return gcn_arch_name.split(":", 1)[0].strip()


class HipBackend(Backend):
    name = "hip"

    def __init__(self, arch: str, device: int = 0) -> None:
        super().__init__(arch)
        self.hip = _hip()
        self.device = device
        try:
            count = self._call("hipGetDeviceCount")
        except RuntimeError as exc:
            # hip-python's "failed to dlopen libamdhip64.so" (no ROCm), or a runtime that
            # loads and reports an error (no AMD GPU: hipErrorNoDevice)
            raise BackendUnavailable(
                f"backend 'hip': no usable HIP runtime or device ({exc}); install ROCm "
                "(libamdhip64.so) on a machine with an AMD GPU, or choose --backend emu"
            ) from exc
        if count <= device:
            raise BackendUnavailable(
                f"backend 'hip': no HIP device {device} ({count} present); choose --backend emu"
            )
        try:
            self._call("hipSetDevice", device)
            props = self.hip.hipDeviceProp_t()
            self._call("hipGetDeviceProperties", props, device)
        except RuntimeError as exc:
            # e.g. "failed to dlsym hipGetDevicePropertiesR0600": hip-python was built for a
            # newer ROCm than the runtime installed
            raise BackendUnavailable(
                f"backend 'hip': the ROCm runtime and hip-python do not match ({exc}); "
                "install the hip-python release of your ROCm version "
                "(pip install 'hip-python==<ROCm major.minor>.*')"
            ) from exc
        raw = props.gcnArchName
        self.gcn_arch_name = raw.decode() if isinstance(raw, bytes) else str(raw)
        raw_name = props.name
        self._device_name = raw_name.decode() if isinstance(raw_name, bytes) else str(raw_name)
        found = base_arch(self.gcn_arch_name)
        if found != arch:
            raise BackendUnavailable(
                f"backend 'hip': device {device} is {found} ({self._device_name}), not {arch}; "
                f"ask for --arch {found} or --backend emu for {arch}"
            )
        self._modules: list[Any] = []

    def _call(self, fn: str, *args: Any) -> Any:
        return unwrap_status(fn, getattr(self.hip, fn)(*args), self._describe)

    def _describe(self, err: Any) -> str:
        _, text = self.hip.hipGetErrorString(err)
        return f"{err} {text}"

    def device_name(self) -> str:
        return f"{self._device_name} ({self.gcn_arch_name})"

    def runtime_info(self) -> dict[str, str]:
        info = {
            "hip_driver": str(self._call("hipDriverGetVersion")),
            "hip_runtime": str(self._call("hipRuntimeGetVersion")),
            "gcnArchName": self.gcn_arch_name,
        }
        uuid = self._uuid()
        if uuid is not None:
            info["uuid"] = uuid  # which GPU: compare judges absolute time on one GPU only
        return info

    def _uuid(self) -> str | None:
        """Which GPU (compare judges absolute time on one GPU only); None where the
        runtime does not report one."""
        try:
            raw = self._call("hipDeviceGetUuid", self.device)
            # hip-python's ``.bytes`` reads the char array as a C string (it stops at a
            # zero byte): read the struct's 16 bytes themselves
            return format_uuid(ctypes.string_at(raw.as_c_void_p(), 16))
        except Exception:  # a runtime or binding without it
            return None

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
        image = result.code_object.read_bytes()
        module = self._call("hipModuleLoadData", image)
        self._modules.append(module)
        symbol = spec.symbol
        function = self._call("hipModuleGetFunction", module, symbol.encode())
        return Program(spec=spec, symbol=symbol, handle=function,
                       provenance={"code_object": str(result.code_object),
                                   "sha256": hashlib.sha256(image).hexdigest()})

    def alloc(self, nbytes: int) -> Buffer:
        return Buffer(nbytes=nbytes, handle=self._call("hipMalloc", nbytes))

    def free(self, buf: Buffer) -> None:
        self._call("hipFree", buf.handle)

    def _at(self, buf: Buffer, offset: int) -> Any:
        return buf.handle if offset == 0 else ctypes.c_void_p(int(buf.handle) + offset)

    def view(self, buf: Buffer, offset: int, nbytes: int) -> Buffer:
        if offset < 0 or offset + nbytes > buf.nbytes:
            raise ValueError(f"view [{offset}, {offset + nbytes}) outside a {buf.nbytes} B buffer")
        return Buffer(nbytes=nbytes, handle=self._at(buf, offset))

    def copy_in(self, buf: Buffer, host: np.ndarray, offset: int = 0) -> None:
        data = np.ascontiguousarray(host).view(np.uint8).reshape(-1)
        if offset + data.nbytes > buf.nbytes:
            raise ValueError(f"copy_in of {data.nbytes} B at +{offset} overruns {buf.nbytes} B")
        self.synchronize()  # the copy waits for earlier work: wait here, under the deadline
        self._call("hipMemcpyHtoD", self._at(buf, offset), data, data.nbytes)

    def copy_out(self, buf: Buffer, nbytes: int | None = None, offset: int = 0) -> np.ndarray:
        n = buf.nbytes - offset if nbytes is None else nbytes
        out = np.empty(n, dtype=np.uint8)
        self.synchronize()  # the copy waits for earlier work: wait here, under the deadline
        self._call("hipMemcpyDtoH", out, self._at(buf, offset), n)
        return out

    def launch(
        self,
        program: Program,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: Sequence[Arg],
    ) -> LaunchInfo:
        extra = tuple(a.handle if isinstance(a, Buffer) else ctypes.c_void_p(0) if a is None
                      else ctypes.c_float(a) if isinstance(a, float) else ctypes.c_int32(a)
                      for a in args)
        deadline.current(self, f"launch of {program.symbol}").check(
            f"launching {program.symbol}")
        self._call("hipModuleLaunchKernel", program.handle, *grid, *block, 0, None, None, extra)
        return LaunchInfo()

    def synchronize(self) -> None:
        """Wait for all work on the device, polling an event against the deadline
        (``hqval.deadline``), then surface any error of that work."""
        event = self.record_event()
        try:
            self.wait_event(event, "synchronising the device")
        finally:
            self._call("hipEventDestroy", event)
        self._call("hipDeviceSynchronize")

    def wait_event(self, event: Any, doing: str) -> None:
        """Poll ``event`` until it completes; ``DeadlineExceeded`` past the deadline."""
        not_ready = self.hip.hipError_t.hipErrorNotReady

        def ready() -> bool:
            result = self.hip.hipEventQuery(event)
            err = result[0] if isinstance(result, tuple) else result
            if err == not_ready:
                return False
            if int(err) != 0:
                raise RuntimeError(f"hipEventQuery failed: {self._describe(err)}")
            return True

        deadline.wait_for(ready, deadline.current(self, doing), doing)

    def record_event(self) -> Any:
        event = self._call("hipEventCreate")
        self._call("hipEventRecord", event, None)
        return event

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Milliseconds between two recorded events; each pair is read once and released
        (the timing harness records one pair per sample)."""
        self.wait_event(end, "waiting for a timed sample")
        ms = float(self._call("hipEventElapsedTime", start, end))
        self._call("hipEventDestroy", start)
        self._call("hipEventDestroy", end)
        return ms

    def copy_device(self, dst: Buffer, src: Buffer, nbytes: int) -> None:
        self._call("hipMemcpyDtoD", dst.handle, src.handle, nbytes)
