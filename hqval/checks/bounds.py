"""Error bounds and output-mapping misreadings for WMMA prefill checks (prefill_parity and
the per-matrix checks of hqval.checks.per_matrix)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hqval.checks import inputs

# Bounds at LAMBDA standard deviations: Hoeffding for the weight roundings and Higham &
# Mary's probabilistic bound (SIAM J. Sci. Comput. 2019) for each summation order; each
# output exceeds it with probability <= 2 exp(-LAMBDA^2 / 2) ~ 3e-8.
LAMBDA = 6.0
U32 = 2.0**-24  # f32 unit roundoff
U16 = 2.0**-11  # f16 unit roundoff (relative, normal weights)
F16_SUBNORMAL_ULP = 2.0**-24  # absolute rounding of an f16-subnormal weight is <= half this


def _tile_transposed(Y: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Y [N, M] with every full 16x16 tile transposed (a wrong WMMA output mapping)."""
    out = Y.copy()
    N, M = Y.shape
    for n0 in range(0, N - 15, 16):
        for m0 in range(0, M - 15, 16):
            out[n0:n0 + 16, m0:m0 + 16] = Y[n0:n0 + 16, m0:m0 + 16].T
    return out


def mapping_misses(ref: npt.NDArray[np.float64]) -> dict[str, float]:
    """How far wrong output mappings of the oracle land from it."""
    out: dict[str, float] = {"row_shift": inputs.worst_rel(np.roll(ref, 1, axis=1), ref)}
    if ref.shape[0] >= 16 and ref.shape[1] >= 16:
        out["tile_transposed"] = inputs.worst_rel(_tile_transposed(ref), ref)
    if ref.shape[0] > 1:
        out["token_shift"] = inputs.worst_rel(np.roll(ref, 1, axis=0), ref)
    return out


def weight_rounding(w: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
    """The bound ``error_bound`` takes on each weight's f16 rounding: |fl16(w) - w| <=
    max(U16 |w|, 2^-25), w the exact dequantised weight q * scale + zero.

    Its assumption: the weight reaches the WMMA rounded to f16 ONCE from its exact value --
    a mixed-precision fma (v_fma_mix: f32 q * scale + zero, rounded to f16 once), or an f16
    fma of f16 scale and zero (qt=44/45's headers are f16: exact).  Normal f16 values round
    to within U16 relative, subnormals (below 2^-14) to within half their spacing 2^-24.
    A kernel that rounds the product and the sum separately (f16 multiply, then f16 add), or
    narrows qt=6's f32 header to f16 first, makes up to U16 (|q scale| + |w|) (+ U16 |zero|)
    per weight: outside this derivation (tests/checks/test_bounds.py computes the worst
    case of each form over every code and header)."""
    return np.maximum(U16 * np.abs(np.asarray(w, np.float64)), F16_SUBNORMAL_ULP / 2)


def error_bound(w: npt.NDArray[np.floating], X: npt.NDArray[np.floating],
                ref_scale: float) -> dict[str, float]:
    """max over outputs of the bound on |GEMM - oracle| and |GEMM - per-token GEMV|, over
    ``ref_scale`` (max |oracle|), for each WMMA summation order.

    Per output y = sum_k x_k w_k (K terms), with a_k = |x_k w_k|:
      f16 weights:  LAMBDA * sqrt(sum_k c_k^2), c_k = |x_k| max(U16 |w_k|, 2^-25)
                    (``weight_rounding``: the weight rounded to f16 once)
      accumulation: LAMBDA * sqrt(n) * U32 * sum_k a_k with n the roundings in the chain:
                    K/16 + 1 (exact_sum_round_once) or K + 1 (sequential_f32)
      per-token GEMV reference (f32 weights): LAMBDA * sqrt(K/32 + 7) * U32 * sum_k a_k."""
    w64 = np.asarray(w, np.float64)
    x64 = np.asarray(X, np.float64)
    K = w64.shape[1]
    abs_sum = np.abs(x64) @ np.abs(w64).T  # [N, M]
    c = weight_rounding(w64)
    weights = LAMBDA * np.sqrt((x64 * x64) @ (c * c).T)
    gemv = LAMBDA * np.sqrt(K / 32 + 7) * U32 * abs_sum
    out = {}
    for order, n in (("exact_sum_round_once", K / 16 + 1), ("sequential_f32", K + 1)):
        acc = LAMBDA * np.sqrt(n) * U32 * abs_sum
        # + one f32 rounding of the output (a residual add)
        out[order] = float(np.max(weights + acc + gemv)) / ref_scale + U32
    return out


