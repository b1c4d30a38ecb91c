"""CUDA backend through cuda-bindings: NVRTC program, driver-API module, cuMemAlloc allocator.

The same kernel sources as the AMD path are compiled with NVRTC through the portability
prelude (``kernels/include/hqval_prelude.h``, whose CUDA block maps the HIP spellings),
straight to a cubin for the device's ``sm_XX``.  NVRTC needs no GPU, so
:func:`compile_source` runs (and is tested) on a machine without one; everything else
needs the driver (``libcuda.so``), and its absence is a ``BackendUnavailable`` naming it.

Timing uses one CUDA event pair per sample on the legacy default stream, which PyTorch's
default stream also is, so a ``torch.mv`` baseline timed in the same process is ordered
with our launches.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hqval import deadline, suite_dir
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

REPO_ROOT = Path(__file__).resolve().parents[2]
PRELUDE_DIR = suite_dir("kernels") / "include"

# nvidia-smi fields recorded in the results envelope: a timing is only comparable with
# another taken at the same clocks.
SMI_FIELDS = (
    "name", "driver_version", "pci.bus_id", "clocks.sm", "clocks.mem", "clocks.max.sm",
    "clocks.max.mem", "power.limit", "temperature.gpu", "persistence_mode", "uuid",
)


def _driver() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        raise BackendUnavailable(
            "backend 'cuda': needs cuda-bindings (pip install 'cuda-bindings>=12')"
        ) from exc
    return driver


def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise BackendUnavailable(
            "backend 'cuda': needs cuda-bindings with NVRTC "
            "(pip install cuda-bindings nvidia-cuda-nvrtc)"
        ) from exc
    return nvrtc


class CompileError(RuntimeError):
    """NVRTC rejected the source; the message carries the NVRTC log."""


@dataclass(frozen=True)
class Cubin:
    image: bytes
    arch: str
    log: str
    source_sha256: str
    options: tuple[str, ...]


def parse_sm(arch: str) -> int:
    """``sm_90`` -> 90; anything else is a usage error naming the expected form."""
    if not arch.startswith("sm_") or not arch[3:].isdigit():
        raise ValueError(f"CUDA arch {arch!r} is not of the form sm_XX (e.g. sm_90 for H200)")
    return int(arch[3:])


def compile_source(
    source: str,
    arch: str,
    *,
    name: str = "kernel.hip",
    include_dirs: Sequence[Path] = (PRELUDE_DIR,),
    defines: Sequence[str] = (),
) -> Cubin:
    """NVRTC-compile ``source`` to a cubin for ``arch`` (``sm_XX``); needs no GPU."""
    parse_sm(arch)
    nvrtc = _nvrtc()
    options = (
        f"--gpu-architecture={arch}",
        "--std=c++17",
        "--device-as-default-execution-space",
        # Same float semantics as the HIP build: no fast-math, contraction allowed (FMA).
        "--fmad=true",
        *(f"--include-path={d}" for d in include_dirs),
        *(f"-D{d}" for d in defines),
    )
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _nvrtc_check(nvrtc, err, "nvrtcCreateProgram")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        log = _nvrtc_log(nvrtc, prog)
        if int(err) != 0:
            raise CompileError(f"NVRTC could not compile {name} for {arch}:\n{log}")
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _nvrtc_check(nvrtc, err, "nvrtcGetCUBINSize")
        image = b" " * size
        (err,) = nvrtc.nvrtcGetCUBIN(prog, image)
        _nvrtc_check(nvrtc, err, "nvrtcGetCUBIN")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return Cubin(image=image, arch=arch, log=log,
                 source_sha256=hashlib.sha256(source.encode()).hexdigest(), options=options)


def _nvrtc_check(nvrtc: Any, err: Any, what: str) -> None:
    if int(err) != 0:
        _, text = nvrtc.nvrtcGetErrorString(err)
        raise CompileError(f"{what} failed: {text.decode() if isinstance(text, bytes) else text}")


def _nvrtc_log(nvrtc: Any, prog: Any) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if int(err) != 0 or size <= 1:
        return ""
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    return bytes(log).rstrip(b"\x00 ").decode(errors="replace")


def kernel_source(spec: KernelSpec) -> tuple[str, str]:
    """(source text, file name) of a manifest kernel."""
    path = Path(spec.source)
    if not path.is_absolute() and spec.manifest is not None:
        path = Path(spec.manifest).parent / path
    elif not path.is_absolute():
        path = REPO_ROOT / path
    if not path.is_file():
        raise FileNotFoundError(f"{spec.name}: kernel source {path} does not exist")
    # a manifest's preinclude files come first, as clang -include puts them on the AMD path
    pre = "".join(f'#include "{p}"\n' for p in getattr(spec, "preinclude", ()))
    return pre + path.read_text(), path.name


def nvidia_smi() -> dict[str, str]:
    """Device name, driver and clocks from nvidia-smi; {} where it is not installed."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    first = out.strip().splitlines()[0] if out.strip() else ""
    values = [v.strip() for v in first.split(",")]
    if len(values) != len(SMI_FIELDS):
        return {}
    return {f"smi.{k}": v for k, v in zip(SMI_FIELDS, values, strict=True)}


def device_arch(device: int = 0) -> str:
    """``sm_XX`` of CUDA device ``device``; ``BackendUnavailable`` naming what is missing
    where no driver or no such device is (what ``--arch`` to ask for on this machine)."""
    cu = _driver()
    try:
        status = cu.cuInit(0)
    except Exception as exc:  # cuda-pathfinder's DynamicLibNotFoundError
        raise BackendUnavailable(
            f"backend 'cuda': the NVIDIA driver does not load ({exc}); run on a machine "
            "with an NVIDIA GPU and driver"
        ) from exc
    status = status[0] if isinstance(status, tuple) else status
    if int(status) != 0:
        raise BackendUnavailable(f"backend 'cuda': cuInit failed ({status}); no usable GPU")
    err, count = cu.cuDeviceGetCount()
    if int(err) != 0 or count <= device:
        raise BackendUnavailable(f"backend 'cuda': no CUDA device {device} ({count} present)")
    _, dev = cu.cuDeviceGet(device)
    attr = cu.CUdevice_attribute
    _, major = cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, minor = cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    return f"sm_{int(major)}{int(minor)}"


class CudaBackend(Backend):
    name = "cuda"

    def __init__(self, arch: str, device: int = 0) -> None:
        super().__init__(arch)
        try:
            wanted = parse_sm(arch)
        except ValueError as exc:
            raise BackendUnavailable(f"backend 'cuda': {exc}") from exc
        self.cu = _driver()
        try:
            self._call("cuInit", 0)
        except Exception as exc:  # cuda-pathfinder's DynamicLibNotFoundError, CUDA errors
            raise BackendUnavailable(
                f"backend 'cuda': the NVIDIA driver does not load ({exc}); run on a machine "
                "with an NVIDIA GPU and driver, or choose --backend emu for RDNA arches"
            ) from exc
        count = self._call("cuDeviceGetCount")
        if count <= device:
            raise BackendUnavailable(f"backend 'cuda': no CUDA device {device} ({count} present)")
        self.device_index = device
        self.dev = self._call("cuDeviceGet", device)
        attr = self.cu.CUdevice_attribute
        major = self._attr(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        minor = self._attr(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        found = major * 10 + minor
        raw = self._call("cuDeviceGetName", 256, self.dev)
        self._device_name = raw.split(b"\x00", 1)[0].decode()
        if found != wanted:
            raise BackendUnavailable(
                f"backend 'cuda': device {device} is sm_{found} ({self._device_name}), not "
                f"{arch}; ask for --arch sm_{found}"
            )
        # The primary context is the one PyTorch and CuPy use, so buffers and events are
        # shared with a torch baseline in the same process.
        self.ctx = self._call("cuDevicePrimaryCtxRetain", self.dev)
        self._call("cuCtxSetCurrent", self.ctx)
        self.properties = {
            "sm_count": self._attr(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            "l2_bytes": self._attr(attr.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
            "memory_clock_khz": self._attr(attr.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
            "memory_bus_bits": self._attr(attr.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
            "sm_clock_khz": self._attr(attr.CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            "warp_size": self._attr(attr.CU_DEVICE_ATTRIBUTE_WARP_SIZE),
        }
        self._modules: dict[tuple[Any, ...], tuple[Cubin, Any]] = {}

    # -- plumbing ---------------------------------------------------------------------
    def _call(self, fn: str, *args: Any) -> Any:
        return unwrap_status(fn, getattr(self.cu, fn)(*args), self._describe)

    def _describe(self, err: Any) -> str:
        _, text = self.cu.cuGetErrorString(err)
        msg = text.decode() if isinstance(text, bytes) else str(text)
        return f"{err.name if hasattr(err, 'name') else err} {msg}"

    def _attr(self, attribute: Any) -> int:
        return int(self._call("cuDeviceGetAttribute", attribute, self.dev))

    # -- device -----------------------------------------------------------------------
    def device_name(self) -> str:
        return f"{self._device_name} ({self.arch})"

    def l2_bytes(self) -> int:
        return int(self.properties["l2_bytes"])

    def runtime_info(self) -> dict[str, str]:
        info = {
            "cuda_driver": str(self._call("cuDriverGetVersion")),
            "nvrtc": ".".join(str(v) for v in _nvrtc().nvrtcVersion()[1:]),
            "device": self._device_name,
            "arch": self.arch,
            **{k: str(v) for k, v in self.properties.items()},
        }
        uuid = self._uuid()
        if uuid is not None:
            info["uuid"] = uuid  # which GPU: compare judges absolute time on one GPU only
        info.update(nvidia_smi())
        return info

    def _uuid(self) -> str | None:
        try:
            return format_uuid(self._call("cuDeviceGetUuid", self.dev))
        except Exception:  # an older binding without it: nvidia-smi's uuid still records it
            return None

    # -- program ----------------------------------------------------------------------
    def load(self, spec: KernelSpec) -> Program:
        if spec.amd_only:
            raise NotImplementedError(
                f"need an AMD backend: {spec.name} is amd_only (WMMA) and NVRTC cannot build it"
            )
        source, filename = kernel_source(spec)
        includes = (*spec.include_dirs, spec.source.parent, PRELUDE_DIR)
        defines = [f[2:] for f in spec.define_flags()]
        return self.load_source(source, spec.symbol, spec=spec, filename=filename,
                                defines=defines, include_dirs=includes)

    def load_source(
        self, source: str, symbol: str, *, spec: Any = None, filename: str = "kernel.cu",
        defines: Sequence[str] = (), include_dirs: Sequence[Path] = (PRELUDE_DIR,),
    ) -> Program:
        key = (source, filename, tuple(defines), tuple(str(d) for d in include_dirs))
        if key not in self._modules:  # one NVRTC compile and module per translation unit
            cubin = compile_source(source, self.arch, name=filename, defines=defines,
                                   include_dirs=include_dirs)
            self._modules[key] = (cubin, self._call("cuModuleLoadData", cubin.image))
        cubin, module = self._modules[key]
        function = self._call("cuModuleGetFunction", module, symbol.encode())
        return Program(spec=spec, symbol=symbol, handle=function, provenance={
            "nvrtc_source_sha256": cubin.source_sha256,
            "nvrtc_options": list(cubin.options),
            "cubin_bytes": len(cubin.image),
        })

    # -- allocator --------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Buffer:
        return Buffer(nbytes=nbytes, handle=self._call("cuMemAlloc", max(nbytes, 1)))

    def free(self, buf: Buffer) -> None:
        self._call("cuMemFree", buf.handle)

    def _at(self, buf: Buffer, offset: int) -> Any:
        return self.cu.CUdeviceptr(int(buf.handle) + offset)

    def copy_in(self, buf: Buffer, host: np.ndarray, offset: int = 0) -> None:
        data = np.ascontiguousarray(host).view(np.uint8).reshape(-1)
        if offset + data.nbytes > buf.nbytes:
            raise ValueError(f"copy_in of {data.nbytes} B at +{offset} overruns {buf.nbytes} B")
        self.synchronize()  # the copy waits for earlier work: wait here, under the deadline
        self._call("cuMemcpyHtoD", self._at(buf, offset), data.ctypes.data, data.nbytes)

    def copy_out(self, buf: Buffer, nbytes: int | None = None, offset: int = 0) -> np.ndarray:
        n = buf.nbytes - offset if nbytes is None else nbytes
        if offset + n > buf.nbytes:
            raise ValueError(f"copy_out of {n} B at +{offset} overruns {buf.nbytes} B")
        out = np.empty(n, dtype=np.uint8)
        self.synchronize()  # the copy waits for earlier work: wait here, under the deadline
        self._call("cuMemcpyDtoH", out.ctypes.data, self._at(buf, offset), n)
        return out

    def copy_device(self, dst: Buffer, src: Buffer, nbytes: int) -> None:
        if nbytes > min(dst.nbytes, src.nbytes):
            raise ValueError(f"device copy of {nbytes} B overruns a buffer")
        self._call("cuMemcpyDtoDAsync", dst.handle, src.handle, nbytes, self.cu.CUstream(0))

    # -- launch -----------------------------------------------------------------------
    def launch(
        self,
        program: Program,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: Sequence[Arg],
    ) -> LaunchInfo:
        # kernelParams is an array of pointers to each argument's bytes; the driver copies
        # them at launch, so the holders only need to live until cuLaunchKernel returns.
        holders = [
            np.array([int(a.handle)], dtype=np.uint64) if isinstance(a, Buffer)
            else np.array([0], dtype=np.uint64) if a is None
            else np.array([a], dtype=np.float32) if isinstance(a, float)
            else np.array([a], dtype=np.int32)
            for a in args
        ]
        params = np.array([h.ctypes.data for h in holders], dtype=np.uint64)
        deadline.current(self, f"launch of {program.symbol}").check(
            f"launching {program.symbol}")
        self._call("cuLaunchKernel", program.handle, *grid, *block, 0, self.cu.CUstream(0),
                   params.ctypes.data, 0)
        return LaunchInfo()

    def synchronize(self) -> None:
        """Wait for all work of the context, polling an event against the deadline
        (``hqval.deadline``), then surface any error of that work."""
        event = self.record_event()
        try:
            self.wait_event(event, "synchronising the device")
        finally:
            self._call("cuEventDestroy", event)
        self._call("cuCtxSynchronize")

    def wait_event(self, event: Any, doing: str) -> None:
        """Poll ``event`` until it completes; ``DeadlineExceeded`` past the deadline."""
        not_ready = self.cu.CUresult.CUDA_ERROR_NOT_READY

        def ready() -> bool:
            (err,) = self.cu.cuEventQuery(event)
            if err == not_ready:
                return False
            if int(err) != 0:
                raise RuntimeError(f"cuEventQuery failed: {self._describe(err)}")
            return True

        deadline.wait_for(ready, deadline.current(self, doing), doing)

    # -- events -----------------------------------------------------------------------
    def record_event(self) -> Any:
        event = self._call("cuEventCreate", self.cu.CUevent_flags.CU_EVENT_DEFAULT)
        self._call("cuEventRecord", event, self.cu.CUstream(0))
        return event

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Milliseconds between two recorded events; each pair is read once and released."""
        self.wait_event(end, "waiting for a timed sample")
        ms = float(self._call("cuEventElapsedTime", start, end))
        self._call("cuEventDestroy", start)
        self._call("cuEventDestroy", end)
        return ms
