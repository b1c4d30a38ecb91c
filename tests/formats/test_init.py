"""The format registry (``hqval/formats/__init__.py``): lookups, aliases, geometry."""

from __future__ import annotations

import numpy as np
import pytest

from hqval.formats import SUITE_LOCAL_QT, all_formats, by_name, by_qt


def test_lookups_and_aliases() -> None:
    assert by_name("mq4").qt == 44 and by_name("mq4c").qt == 45 and by_name("mq4v1").qt == 13
    assert by_name("hfq4g256").qt == 6 and by_name("MQ4G256V2") is by_qt(44)
    assert by_qt(45).name == "mq4cg256" and by_name("mq4_k").status == "candidate"
    assert by_name("mq4c132").status == "retired" and by_name("mq4c132").group_bytes == 132


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(KeyError, match=r"known names: .*mq4"):
        by_name("mq5")
    with pytest.raises(KeyError, match=r"unknown qt=43; known formats: 6 \(hfq4g256\)"):
        by_qt(43)


def test_every_format_is_consistent() -> None:
    fmts = all_formats()
    assert len({f.qt for f in fmts}) == len(fmts)
    w = (np.random.default_rng(0).standard_normal((2, 512)) * 0.01).astype(np.float32)
    for f in fmts:
        assert f.group_weights == 256 and f.status in ("shipping", "retired", "candidate")
        assert (f.qt >= SUITE_LOCAL_QT) == (f.status != "shipping")
        assert f.rotated == (f.qt != 6)
        blob = f.encode(w)
        assert blob.dtype == np.uint8 and blob.shape == (2, 2 * f.group_bytes)
        assert f.payload_offset + 128 == f.group_bytes
        assert f.decode(blob, 512).dtype == np.float32
        assert f.nibbles(blob, 512).shape == (2, 512)
        s, z = f.headers(blob, 512)
        assert s.shape == z.shape == (2, 2, 256 // f.sub_block)
