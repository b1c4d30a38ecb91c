"""The hip backend against the installed hip-python: names and signatures, and the
no-ROCm path that must raise ``BackendUnavailable`` (never skip or switch)."""

from __future__ import annotations

import inspect

import pytest

from hqval.backends.base import BackendUnavailable
from hqval.backends.hip import HIP_CALLS, HipBackend, base_arch, visible_devices

hip_module = pytest.importorskip("hip.hip", reason="needs hip-python (pip install hip-python)")


def _has_rocm() -> bool:
    """An AMD GPU usable through hip-python (a ROCm runtime without a GPU, as Debian's
    libamdhip64 on a CI machine, does not count)."""
    return visible_devices() > 0


@pytest.mark.parametrize("name", sorted(HIP_CALLS))
def test_every_hip_name_the_backend_calls_exists_with_that_signature(name: str) -> None:
    fn = getattr(hip_module, name, None)
    assert fn is not None, f"hip-python has no {name}"
    params = tuple(inspect.signature(fn).parameters)
    assert params == HIP_CALLS[name]


def test_backend_source_calls_only_checked_names() -> None:
    import re

    import hqval.backends.hip as mod

    source = inspect.getsource(mod)
    called = set(re.findall(r'"(hip[A-Z]\w+)"', source)) - {"hipError"}
    assert called <= set(HIP_CALLS), called - set(HIP_CALLS)
    assert "hipModuleLaunchKernel" in called and "hipEventElapsedTime" in called


def test_device_prop_has_gcn_arch_name() -> None:
    props = hip_module.hipDeviceProp_t()
    assert hasattr(props, "gcnArchName") and hasattr(props, "name")


def test_base_arch_strips_target_features() -> None:
    assert base_arch("gfx1100:sramecc-:xnack-") == "gfx1100"
    assert base_arch("gfx1201") == "gfx1201"


@pytest.mark.skipif(_has_rocm(),
                    reason="an AMD GPU is present: the no-device path cannot be exercised")
def test_without_rocm_the_backend_is_unavailable_and_says_why() -> None:
    with pytest.raises(BackendUnavailable, match=r"libamdhip64|ROCm"):
        HipBackend("gfx1100")


@pytest.mark.gpu
@pytest.mark.skipif(not _has_rocm(), reason="needs ROCm (libamdhip64.so) and an AMD GPU")
def test_on_rocm_the_device_arch_is_read_from_gcn_arch_name() -> None:
    props = hip_module.hipDeviceProp_t()
    hip_module.hipGetDeviceProperties(props, 0)
    arch = base_arch(props.gcnArchName.decode())
    backend = HipBackend(arch)
    assert backend.arch == arch
    buf = backend.alloc(64)
    import numpy as np

    data = np.arange(16, dtype=np.uint32)
    backend.copy_in(buf, data)
    assert (backend.copy_out(buf).view(np.uint32) == data).all()
    backend.free(buf)
