"""hqval.backends.base helpers shared by the hardware backends."""

from __future__ import annotations

import pytest

from hqval.backends.base import unwrap_status


def test_unwrap_status_returns_values_and_names_the_failing_call() -> None:
    def describe(err: object) -> str:
        return f"E{err}"

    assert unwrap_status("f", 0, describe) is None
    assert unwrap_status("f", (0,), describe) is None
    assert unwrap_status("f", (0, 7), describe) == 7
    assert unwrap_status("f", (0, 7, 8), describe) == (7, 8)
    with pytest.raises(RuntimeError, match="cuFoo failed: E3"):
        unwrap_status("cuFoo", (3, 7), describe)


def test_format_uuid_spells_a_device_uuid_as_nvidia_smi_does() -> None:
    from hqval.backends.base import format_uuid

    class Raw:  # cuda-bindings' CUuuid / hip-python's hipUUID: 16 bytes in .bytes
        def __init__(self, data: object) -> None:
            self.bytes = data

    want = "GPU-254ca734-3820-cf96-02de-4d3b943e4c6b"
    raw = bytes.fromhex("254ca7343820cf9602de4d3b943e4c6b")
    assert format_uuid(Raw(raw)) == want
    # as signed chars (a ctypes char array), the same device
    assert format_uuid(Raw([b - 256 if b > 127 else b for b in raw])) == want
    # no UUID to tell devices apart by: never a made-up identity
    assert format_uuid(Raw(bytes(16))) is None
    assert format_uuid(Raw(b"\x01" * 8)) is None
    assert format_uuid(Raw(None)) is None


def test_format_uuid_reads_the_real_binding_structs() -> None:
    """The structs the installed bindings return (zeroed here, as no GPU filled them):
    read without error, and all-zero is no identity."""
    import ctypes

    from hqval.backends.base import format_uuid

    assert format_uuid(bytes.fromhex("254ca7343820cf9602de4d3b943e4c6b")) \
        == "GPU-254ca734-3820-cf96-02de-4d3b943e4c6b"
    driver = pytest.importorskip("cuda.bindings.driver")
    assert len(driver.CUuuid().bytes) == 16 and format_uuid(driver.CUuuid()) is None
    hip = pytest.importorskip("hip.hip")
    raw = hip.hipUUID_t()
    assert format_uuid(ctypes.string_at(raw.as_c_void_p(), 16)) is None  # how hip.py reads it
