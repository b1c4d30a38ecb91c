"""qt-tagged tensor files: round trip, refusal to load as another format, atomic writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hqval.formats import QT_F32, by_qt, load_tensor, save_tensor


def test_roundtrip_blob_and_weights(tmp_path: Path) -> None:
    w = (np.random.default_rng(0).standard_normal((4, 512)) * 0.01).astype(np.float32)
    blob = by_qt(44).encode(w)
    save_tensor(tmp_path / "w44.npz", blob, 44, {"seed": 3})
    t = load_tensor(tmp_path / "w44.npz", 44)
    assert t.qt == 44 and t.K == 512 and t.meta == {"seed": 3}
    assert np.array_equal(t.data, blob)
    save_tensor(tmp_path / "w.npz", w, QT_F32)
    assert np.array_equal(load_tensor(tmp_path / "w.npz", QT_F32).data, w)


def test_loading_as_another_format_is_refused(tmp_path: Path) -> None:
    blob = by_qt(6).encode(np.ones((2, 256), np.float32))
    save_tensor(tmp_path / "v1.npz", blob, 6)
    with pytest.raises(ValueError, match=r"holds qt=6 \(hfq4g256\) but was opened as qt=44"):
        load_tensor(tmp_path / "v1.npz", 44)
    with pytest.raises(ValueError, match="qt=0"):
        load_tensor(tmp_path / "v1.npz", QT_F32)


def test_untagged_file_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "plain.npz", data=np.zeros((1, 136), np.uint8))
    with pytest.raises(ValueError, match="not an hqval tensor file"):
        load_tensor(tmp_path / "plain.npz", 44)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable"):
        load_tensor(tmp_path / "junk.npz", 44)


def test_bad_data_refused_and_nothing_written(tmp_path: Path) -> None:
    target = tmp_path / "x.npz"
    with pytest.raises(ValueError, match="stride"):
        save_tensor(target, np.zeros((2, 135), np.uint8), 44)
    with pytest.raises(ValueError, match="float32"):
        save_tensor(target, np.zeros((2, 256), np.float64), QT_F32)
    with pytest.raises(KeyError, match="unknown qt=99"):
        save_tensor(target, np.zeros((2, 136), np.uint8), 99)
    assert list(tmp_path.iterdir()) == []


def test_interrupted_write_leaves_no_partial_file(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", boom)
    with pytest.raises(OSError, match="disk full"):
        save_tensor(tmp_path / "y.npz", np.zeros((1, 136), np.uint8), 45)
    assert list(tmp_path.iterdir()) == []


def test_version_1_files_tagged_qt1_load_as_hfq4g256_qt6(tmp_path: Path) -> None:
    """Version 1 called HFQ4G256 qt=1 (the engine's F16 id): such a file loads as qt=6, and
    is still refused as any other format."""
    blob = by_qt(6).encode(np.ones((2, 256), np.float32))
    np.savez(tmp_path / "old.npz", magic=np.array("hqval-tensor"), version=np.array(1),
             qt=np.array(1), K=np.array(256), data=blob, meta=np.array("{}"))
    t = load_tensor(tmp_path / "old.npz", 6)
    assert t.qt == 6 and np.array_equal(t.data, blob)
    with pytest.raises(ValueError, match=r"holds qt=6 \(hfq4g256\) but was opened as qt=44"):
        load_tensor(tmp_path / "old.npz", 44)
    np.savez(tmp_path / "v3.npz", magic=np.array("hqval-tensor"), version=np.array(3),
             qt=np.array(6), K=np.array(256), data=blob, meta=np.array("{}"))
    with pytest.raises(ValueError, match="tensor file version 3"):
        load_tensor(tmp_path / "v3.npz", 6)
