"""Check inputs: distinctness, the oracle, the metrics and the misreadings that prove a
fixture discriminates."""

from __future__ import annotations

import numpy as np
import pytest

from hqval import fixtures
from hqval.checks import inputs
from hqval.formats import by_qt

M, K = 6, 1024


def test_activations_and_token_batches_are_distinct_and_seeded() -> None:
    x = inputs.activations(K, 3)
    assert np.unique(x).size == K
    assert np.array_equal(x, inputs.activations(K, 3))
    assert not np.array_equal(x, inputs.activations(K, 4))
    X = inputs.token_batch(32, K, 0)
    assert X.dtype == np.float16 and X.shape == (32, K)
    assert np.unique(X.astype(np.float64).sum(axis=1)).size == 32


def test_oracle_is_decode_times_x_in_f64() -> None:
    fmt = by_qt(44)
    blob = fixtures.gaussian(M, K, 0, qts=(44,)).blob(44)
    x = inputs.activations(K, 0)
    w = fmt.decode(blob, K).astype(np.float64)
    assert np.allclose(inputs.oracle(fmt, blob, K, x, None), w @ x, rtol=0, atol=1e-12)
    r = np.arange(M, dtype=np.float32)
    assert np.allclose(inputs.oracle(fmt, blob, K, x, r), w @ x + r, rtol=0, atol=1e-12)
    X = inputs.token_batch(3, K, 0)
    assert inputs.oracle(fmt, blob, K, X, None).shape == (3, M)


def test_metrics() -> None:
    ref = np.array([1.0, -2.0, 4.0])
    assert inputs.worst_rel(ref, ref) == 0.0
    assert inputs.worst_rel(ref + np.array([0, 0, 0.4]), ref) == pytest.approx(0.1)
    assert inputs.worst_rel(np.array([np.nan, 0, 0]), ref) == float("inf")
    assert inputs.rel_rms(2 * ref, ref) == pytest.approx(1.0)


def test_correct_read_is_not_a_misreading() -> None:
    # Each misreading is a different decode: applied to bytes where it changes nothing
    # (equal halves) the half misreadings are exact, the byte-level ones are not.
    fmt = by_qt(44)
    blob = fixtures.equal_halves(M, K, 0).blob(44)
    x = inputs.activations(K, 0)
    ref = inputs.oracle(fmt, blob, K, x, None)
    m = inputs.misread_misses(fmt, blob, K, x, None, ref)
    assert m["one_header_for_both_halves"] == 0.0 and m["halves_swapped"] == 0.0
    assert min(m["payload_plus4"], m["stride_132"], m["scale_zero_swapped"]) > 0.5
    assert m["f32_header_read"] > 0.5


@pytest.mark.parametrize("qt", [6, 44, 45])
def test_disjoint_fixture_discriminates_every_misreading(qt: int) -> None:
    fmt = by_qt(qt)
    blob = fixtures.disjoint_halves(M, K, 0).blob(qt)
    x = inputs.activations(K, 0)
    ref = inputs.oracle(fmt, blob, K, x, None)
    m = inputs.misread_misses(fmt, blob, K, x, None, ref)
    inputs.require_discriminating(m, 1e-2, "disjoint", {"one_header_for_both_halves": 0.5})
    assert ("one_header_for_both_halves" in m) == (qt == 44)


def test_non_discriminating_fixture_is_an_error_naming_the_misreading() -> None:
    fmt = by_qt(44)
    blob = fixtures.equal_halves(M, K, 0).blob(44)
    x = inputs.activations(K, 0)
    m = inputs.misread_misses(fmt, blob, K, x, None, inputs.oracle(fmt, blob, K, x, None))
    with pytest.raises(inputs.FixtureError, match="one_header_for_both_halves misses by only 0"):
        inputs.require_discriminating(m, 1e-2, "equal as disjoint")
    with pytest.raises(inputs.FixtureError, match="no misreadings"):
        inputs.require_discriminating({}, 1e-2, "empty")


def test_stride_132_misreading_reads_the_next_group_four_bytes_early() -> None:
    fmt = by_qt(45)
    blob = fixtures.padded_qt45(2, 512, 0).blob(45)
    wrong = inputs.misreadings(fmt)["stride_132"](blob, 512)
    right = fmt.decode(blob, 512)
    assert np.array_equal(wrong[:, :256], right[:, :256])  # group 0 starts at 0 either way
    assert not np.allclose(wrong[:, 256:], right[:, 256:])
