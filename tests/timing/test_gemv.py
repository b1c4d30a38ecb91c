"""GEMV cell helpers: shapes, byte counts, tiled encodes that are real (never zeros)."""

from __future__ import annotations

import numpy as np
import pytest

from hqval.formats import by_qt
from hqval.timing import gemv


def test_shape_parse_and_errors() -> None:
    s = gemv.Shape.parse("17408x5120")
    assert (s.M, s.K, s.name) == (17408, 5120, "17408x5120")
    for bad in ("17408", "ax5120", "64x100", "0x256"):
        with pytest.raises(ValueError, match=r"MxK|multiple of 256"):
            gemv.Shape.parse(bad)


def test_bytes_count_weights_x_and_y_once() -> None:
    # 27648 x 5120 at 136 B per 256 weights: 75.2 MB of weights, x 20 KB, y 108 KB.
    s = gemv.Shape(27648, 5120)
    assert gemv.gemv_bytes(s) == 27648 * 20 * 136 + 4 * 5120 + 4 * 27648
    assert gemv.effective_gbps(gemv.gemv_bytes(s), 49.28) == pytest.approx(1528.8, abs=0.5)


@pytest.mark.parametrize("qt", [6, 44, 45])
def test_tiled_encode_is_the_format_and_not_zero(qt: int) -> None:
    shape = gemv.Shape(200, 1024)
    blob, deq = gemv._encode_tiled(qt, shape, seed=3)
    fmt = by_qt(qt)
    assert blob.shape == (200, fmt.row_bytes(1024)) and blob.dtype == np.uint8
    tile = gemv.TILE_ROWS
    np.testing.assert_array_equal(blob[tile:2 * tile], blob[:tile])  # rows tile
    np.testing.assert_array_equal(fmt.decode(blob[:tile], 1024), deq.astype(np.float32))
    assert np.count_nonzero(deq) > 0.9 * deq.size
