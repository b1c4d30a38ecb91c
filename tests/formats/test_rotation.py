"""FWHT-256 rotation: it is H D / 16 with a seeded sign vector, orthonormal, and
``unrotate`` inverts it."""

from __future__ import annotations

import numpy as np
import pytest

from hqval.formats import rotate, sign_vector, unrotate


def hadamard(n: int) -> np.ndarray:
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def test_rotate_is_sylvester_hadamard_times_signs() -> None:
    w = np.random.default_rng(0).standard_normal((3, 512)).astype(np.float32)
    d = sign_vector(7)
    H = hadamard(256)
    want = (w.astype(np.float64).reshape(3, 2, 256) * d) @ H.T / 16.0
    got = rotate(w, 7)
    assert np.allclose(got, want.reshape(3, 512).astype(np.float32), rtol=0, atol=1e-6)
    # computed in f64 and rounded once: equals the f64 reference rounded to f32 exactly
    assert np.array_equal(got, want.reshape(3, 512).astype(np.float32))


def test_unrotate_inverts_and_preserves_norm() -> None:
    w = (np.random.default_rng(1).standard_normal((8, 1024)) * 0.02).astype(np.float32)
    y = rotate(w, 42)
    back = unrotate(y, 42)
    # two f32 roundings of values ~0.02: a few ulps
    assert np.abs(back - w).max() <= 4 * np.spacing(np.float32(np.abs(w).max()))
    assert np.isclose(np.linalg.norm(y.astype(np.float64)),
                      np.linalg.norm(w.astype(np.float64)), rtol=1e-6)
    assert not np.allclose(y, w)


def test_sign_vector_seeded() -> None:
    a, b = sign_vector(42), sign_vector(42)
    assert np.array_equal(a, b) and set(np.unique(a)) == {-1.0, 1.0} and a.size == 256
    assert not np.array_equal(sign_vector(42), sign_vector(1042))


def test_rotation_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="multiple of 256"):
        rotate(np.zeros((2, 100), np.float32), 0)
    with pytest.raises(ValueError, match="non-finite"):
        rotate(np.full((1, 256), np.inf, np.float32), 0)
