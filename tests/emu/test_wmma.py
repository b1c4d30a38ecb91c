"""WMMA: each generation's operand layout, checked with distinct values against numpy.

The kernels load A, B and C into registers by the layout documented in hqval/emu/wmma.py
and store D back by the same rule; a wrong lane/VGPR mapping in the interpreter moves
values to other cells and the comparison fails."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from hqval.emu import Machine, Module

Ops = Callable[[str], tuple[Machine, Module]]


@pytest.mark.parametrize(("arch", "kernel"), [("gfx1100", "wmma_gfx11"),
                                              ("gfx1151", "wmma_gfx11"),
                                              ("gfx1201", "wmma_gfx12")])
def test_wmma_matches_matmul_with_distinct_values(ops: Ops, arch: str, kernel: str) -> None:
    m, mod = ops(arch)
    # distinct small integers and halves: every product and sum is exact in f32, so the
    # result must equal the f64 matmul bit for bit
    a = (np.arange(256).reshape(16, 16) % 29 - 14).astype(np.float16) * np.float16(0.5)
    b = (np.arange(256).reshape(16, 16).T % 31 - 15).astype(np.float16)
    c = np.arange(256, dtype=np.float32).reshape(16, 16) * 1000
    pa, pb, pc, pd = (m.alloc(n) for n in (512, 512, 1024, 1024))
    m.write(pa, a)
    m.write(pb, b)
    m.write(pc, c)
    stats = m.launch(mod, kernel, (1, 1, 1), (32, 1, 1), [pa, pb, pc, pd])
    d = m.read(pd, 1024).view(np.float32).reshape(16, 16)
    want = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)
    np.testing.assert_array_equal(d, want)
    assert stats.counts["WMMA"] == 1


def test_wmma_transposed_operand_would_be_caught() -> None:
    """The check above discriminates: A^T B differs from A B in most cells."""
    a = (np.arange(256).reshape(16, 16) % 29 - 14).astype(np.float64) * 0.5
    b = (np.arange(256).reshape(16, 16).T % 31 - 15).astype(np.float64)
    assert np.count_nonzero(a.T @ b != a @ b) > 200
