"""Fixtures: each holds its own assertions, is deterministic in its seed, frozen, and
discriminates (a misreading it is built to catch is caught)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from hqval import fixtures as fx
from hqval.formats import by_qt


@pytest.mark.parametrize("name", sorted(fx.FIXTURES))
def test_every_fixture_holds(name: str) -> None:
    f = fx.FIXTURES[name]()
    assert f.assertions, "a fixture with no assertions proves nothing"
    assert f.ok, [a.detail for a in f.failures]
    assert f.require() is f


@pytest.mark.parametrize("name", ["equal_halves", "disjoint_halves", "padded_qt45",
                                  "degenerate", "gaussian"])
def test_seeded_and_sized(name: str) -> None:
    fn = fx.FIXTURES[name]
    a, b, c = fn(M=4, K=512, seed=5), fn(M=4, K=512, seed=5), fn(M=4, K=512, seed=6)
    assert a.M == 4 and a.K == 512
    for qt in a.blobs:
        assert np.array_equal(a.blob(qt), b.blob(qt))
        assert a.blob(qt).shape == (4, 2 * by_qt(qt).group_bytes)
    assert any(not np.array_equal(a.blob(q), c.blob(q)) for q in a.blobs)


def test_frozen_and_read_only() -> None:
    f = fx.gaussian(M=2, K=256)
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.seed = 3  # type: ignore[misc]
    assert f.weights is not None
    with pytest.raises(ValueError, match="read-only"):
        f.weights[0, 0] = 1.0
    with pytest.raises(TypeError):
        f.blobs[44] = f.blob(44)  # type: ignore[index]
    with pytest.raises(KeyError, match="has no qt=7"):
        f.blob(7)


def test_require_raises_on_a_failed_assertion() -> None:
    good = fx.disjoint_halves(M=1, K=256)
    bad = dataclasses.replace(good, assertions=(*good.assertions, fx.Assertion(
        "made_up", False, "deliberately false")))
    assert not bad.ok
    with pytest.raises(fx.FixtureError, match="made_up: deliberately false"):
        bad.require()


def test_equal_halves_decode_identically() -> None:
    f = fx.equal_halves(M=3, K=768, seed=2)
    d = {qt: by_qt(qt).decode(f.blob(qt), f.K) for qt in (6, 13, 44, 45)}
    for qt in (6, 13, 45):
        assert np.array_equal(d[qt].view(np.uint32), d[44].view(np.uint32))
    assert np.array_equal(by_qt(6).nibbles(f.blob(6), f.K), by_qt(44).nibbles(f.blob(44), f.K))


def test_disjoint_halves_ranges_and_shift() -> None:
    f = fx.disjoint_halves(M=2, K=512)
    assert f.weights is not None
    h = f.weights.reshape(2, 2, 2, 128)
    assert h[:, :, 0].min() == -1 and h[:, :, 0].max() == 1
    assert h[:, :, 1].min() == 96 and h[:, :, 1].max() == 160
    shifts = [a.measured for a in f.assertions if a.measured is not None]
    assert shifts and min(shifts) > fx.DISJOINT_MIN_SHIFT


def test_padded_qt45_catches_both_misreads() -> None:
    f = fx.padded_qt45(M=4, K=1024)
    b = f.blob(45)
    good = by_qt(45).decode(b, 1024)
    right = fx.misread_qt45(b, 1024, stride=136, payload_offset=8)
    assert np.array_equal(right, good)  # the misread helper reads correctly when told to
    for stride, off in ((136, 4), (132, 4)):
        wrong = fx.misread_qt45(b, 1024, stride=stride, payload_offset=off)
        # A header read from payload bytes can be a NaN/Inf fp16: that is a miss too (the
        # checks test NaN/Inf before any metric).
        with np.errstate(invalid="ignore"):
            miss = np.nan_to_num(np.abs(wrong - good), nan=np.inf)
        assert (miss.reshape(4, 4, 256).max(-1) > 0.01).all()
    assert {a.name for a in f.assertions} >= {"pad_bytes_zero", "scale_range", "zero_range",
                                             "adjacent_headers_differ", "payload_unlike_header"}
    # the retired 132 B blob of the same weights rides along as the negative control
    assert f.blob(1045).shape == (4, 4 * 132)


def test_padded_qt45_needs_two_groups() -> None:
    with pytest.raises(ValueError, match="at least 2 groups"):
        fx.padded_qt45(M=1, K=256)


def test_degenerate_has_constant_sub_blocks_for_every_format() -> None:
    f = fx.degenerate(M=5, K=512)
    assert all(a.measured and a.measured >= 1 for a in f.assertions)


def test_bad_sizes_refused() -> None:
    with pytest.raises(ValueError, match="multiple of 256"):
        fx.gaussian(M=2, K=100)
    with pytest.raises(ValueError, match="M=0"):
        fx.equal_halves(M=0, K=256)
    with pytest.raises(ValueError, match="sigma"):
        fx.gaussian(sigma=-1.0)


def test_real_weights_come_from_the_installed_package() -> None:
    layers = fx.real_layers()
    assert len(layers) == 7
    assert all(m.shape[1] % 256 == 0 for m in layers.values())
    assert layers["classifier"].shape == (360, 256)
    f = fx.real_weights(M=10, K=512)
    assert f.weights is not None and f.weights.shape == (10, 512)
    assert "sha256" in f.notes["source"]
    total = sum(m.size for m in layers.values()) // 256
    assert total == fx.real_weights(K=256, qts=(44,)).M
    with pytest.raises(ValueError, match="M=100000 must be 1"):
        fx.real_weights(M=100000, K=256)


def test_saved_fixture_files_carry_their_qt(tmp_path: Path) -> None:
    from hqval.formats import QT_F32, load_tensor

    f = fx.padded_qt45(M=2, K=512)
    paths = f.save(tmp_path)
    assert len(paths) == len(f.blobs) + 1
    t = load_tensor(tmp_path / "padded_qt45-s0-qt45.npz", 45)
    assert np.array_equal(t.data, f.blob(45)) and t.meta["fixture"] == "padded_qt45"
    with pytest.raises(ValueError, match="holds qt=45"):
        load_tensor(tmp_path / "padded_qt45-s0-qt45.npz", 1045)
    assert np.array_equal(load_tensor(tmp_path / "padded_qt45-s0-weights.npz", QT_F32).data,
                          f.weights)


SMALL = [(n, M, K) for n in ("equal_halves", "disjoint_halves", "padded_qt45", "degenerate",
                              "gaussian")
         for M, K in ((1, 256), (1, 512), (3, 512)) if not (n == "padded_qt45" and K < 512)]


@pytest.mark.parametrize("name, M, K", SMALL)
def test_fixtures_hold_at_emulator_sizes_for_many_seeds(name: str, M: int, K: int) -> None:
    failed = [(seed, [a.name for a in f.failures]) for seed in range(25)
              if not (f := fx.FIXTURES[name](M=M, K=K, seed=seed)).ok]
    assert failed == []
