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
