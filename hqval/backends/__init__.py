"""Backend registry: one explicit dict name -> "module:Class", plus ``auto``.

``get(name, arch)`` constructs the named backend for ``arch``.  A backend asked for by
name that cannot run raises ``BackendUnavailable`` naming what is missing; it is never
replaced by another one.  ``auto`` is the only name that chooses: the hardware backend
whose device matches the requested arch, else ``emu``; the choice and the reason are
recorded on the returned backend as ``selection``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from hqval.backends.base import Backend, BackendUnavailable

BACKENDS: dict[str, str] = {
    "emu": "hqval.backends.emu:EmuBackend",
    "hip": "hqval.backends.hip:HipBackend",
    "cuda": "hqval.backends.cuda:CudaBackend",
}

# Which hardware backend can serve an arch name: gfx* on HIP, sm_* on CUDA.
HARDWARE_FOR_PREFIX: dict[str, str] = {"gfx": "hip", "sm_": "cuda"}

__all__ = ["BACKENDS", "Backend", "BackendUnavailable", "auto", "backend_class", "get",
           "open_for"]


def backend_class(name: str) -> type[Backend]:
    """Import and return the class registered under ``name``."""
    try:
        target = BACKENDS[name]
    except KeyError:
        known = ", ".join([*BACKENDS, "auto"])
        raise ValueError(f"unknown backend {name!r}: choose one of {known}") from None
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise BackendUnavailable(
                f"backend {name!r}: module {module_name} is not part of this build"
            ) from exc
        raise BackendUnavailable(
            f"backend {name!r}: needs the Python package {exc.name!r} (pip install it)"
        ) from exc
    cls = getattr(module, class_name)
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise TypeError(f"{target} is not a hqval.backends.base.Backend subclass")
    return cls


def get(name: str, arch: str, cache_dir: str | None = None) -> Backend:
    """The backend ``name`` for ``arch``; ``auto`` chooses (see module docstring).
    ``cache_dir`` is where it compiles (``Backend.cache_dir``)."""
    backend = auto(arch) if name == "auto" else backend_class(name)(arch)
    if name != "auto":
        backend.selection = f"{name}: requested by name"
    backend.cache_dir = cache_dir
    return backend


def auto(arch: str) -> Backend:
    """The hardware backend matching ``arch`` if one runs here, else ``emu``."""
    reasons: list[str] = []
    for prefix, hw in HARDWARE_FOR_PREFIX.items():
        if not arch.startswith(prefix):
            continue
        try:
            backend = backend_class(hw)(arch)
        except BackendUnavailable as exc:
            reasons.append(str(exc))
            break
        backend.selection = f"auto: {hw} (device {backend.device_name()} is {arch})"
        return backend
    if arch.startswith("sm_"):
        why = "; ".join(reasons) or "no CUDA backend"
        raise BackendUnavailable(
            f"auto: {arch} is an NVIDIA arch and the emulator only runs RDNA; {why}"
        )
    backend = backend_class("emu")(arch)
    why = "; ".join(reasons) or f"no hardware backend serves {arch}"
    backend.selection = f"auto: emu ({why})"
    return backend


def open_for(name: str, arches: Iterable[str],
             cache_dir: str | None = None) -> dict[str, Backend]:
    """Open backend ``name`` for every arch before anything runs: one that cannot run here
    raises ``BackendUnavailable`` at once (never a silent switch, never once per step)."""
    return {arch: get(name, arch, cache_dir) for arch in arches}
