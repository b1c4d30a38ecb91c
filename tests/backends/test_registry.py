"""The backend registry: explicit names, errors for unknown or unavailable backends,
and ``auto`` recording its choice."""

from __future__ import annotations

import pytest

import hqval.backends as registry
from hqval.backends.base import Backend, BackendUnavailable


def test_registry_names_are_explicit_module_class_paths() -> None:
    assert registry.BACKENDS["cuda"] == "hqval.backends.cuda:CudaBackend"
    assert registry.BACKENDS["hip"] == "hqval.backends.hip:HipBackend"
    assert registry.BACKENDS["emu"] == "hqval.backends.emu:EmuBackend"
    for target in registry.BACKENDS.values():
        module, _, cls = target.partition(":")
        assert module.startswith("hqval.backends.") and cls.endswith("Backend")


def test_unknown_backend_names_the_choices() -> None:
    with pytest.raises(ValueError, match="choose one of emu, hip, cuda, auto"):
        registry.get("opencl", "gfx1100")


def test_hip_class_is_a_backend() -> None:
    assert issubclass(registry.backend_class("hip"), Backend)


def _hip_runs() -> bool:
    try:
        registry.get("hip", "gfx1100")
    except BackendUnavailable:
        return False
    return True


@pytest.mark.skipif(_hip_runs(), reason="a gfx1100 HIP device is present here")
def test_hip_by_name_without_device_raises_not_switches() -> None:
    with pytest.raises(BackendUnavailable, match="backend 'hip'"):
        registry.get("hip", "gfx1100")


def test_auto_for_nvidia_arch_without_cuda_is_an_error_not_emu() -> None:
    try:
        backend = registry.get("auto", "sm_90")
    except BackendUnavailable as exc:
        assert "emulator only runs RDNA" in str(exc)
    else:
        assert backend.name == "cuda" and backend.selection.startswith("auto: cuda")
