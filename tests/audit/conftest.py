"""Fixtures the audit's tests share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def cache(code_cache: Path) -> Path:
    """The test run's shared code-object cache (tests/conftest.py)."""
    return code_cache
