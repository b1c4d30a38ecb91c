"""prefill_parity: every GEMM against the f64 oracle and against N per-token GEMV launches.

N runs over {1, 8, 12, 16, 32} and a ragged N that is no multiple of 16 (plus a larger one
on hardware), M is not a multiple of 16 either, so partial tiles in both directions run.
Weights and tokens are distinct per row and per column, so a transposed or shifted output
mapping (a gfx11 WMMA output mapping was once silently wrong for six weeks) reads other
values and misses by O(1).  The weights are the zero-mean gaussian fixture: with a mean
offset every row's output would be alike and a shifted row could hide.  Before any launch
the check proves it: the oracle with each 16x16 tile transposed, shifted by one row and by
one token misses by more than ``MAPPING_FLOOR``, and every misreading of the bytes by 100x
the tolerance.

The per-token reference is the manifest's decode GEMV for the same qt (``dispatch``); its
launches for tokens 0..N-1 are the same for every N, so they run once for the largest N.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hqval import fixtures
from hqval.checks import inputs
from hqval.checks.cell import CheckContext
from hqval.checks.dispatch import NoRoute, decode_kernel
from hqval.checks.launch import decode_many, gemm_many
from hqval.formats import by_qt
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec, Manifest
    from hqval.matrix import Arch

NAME = "prefill_parity"
TOLERANCE = 2e-3
DERIVATION = (
    "WMMA takes f16 weights (<=2^-11 relative rounding each, random-signed over K) and "
    "accumulates in f32 in an order the ISA leaves open; error_bound() bounds both orders "
    "(16 exact products summed and rounded once per WMMA: K/16 roundings; sequential f32: K "
    "roundings) plus the per-token GEMV's own K/32+7, at 6 sigma per output, and the check "
    "proves that bound <= 2e-3 on its fixture; a transposed/shifted tile misses by >0.5"
)
# Bounds at LAMBDA standard deviations: Hoeffding for the weight roundings and Higham &
# Mary's probabilistic bound (SIAM J. Sci. Comput. 2019) for each summation order; each
# output exceeds it with probability <= 2 exp(-LAMBDA^2 / 2) ~ 3e-8.
LAMBDA = 6.0
U32 = 2.0**-24  # f32 unit roundoff
U16 = 2.0**-11  # f16 unit roundoff (relative, normal weights)
F16_SUBNORMAL_ULP = 2.0**-24  # absolute rounding of an f16-subnormal weight is <= half this
# A wrong output mapping must miss by O(1); a misread of the bytes by 100x the tolerance.
MAPPING_FLOOR = 0.5
MISREAD_FACTOR = 100.0


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


def error_bound(w: npt.NDArray[np.floating], X: npt.NDArray[np.floating],
                ref_scale: float) -> dict[str, float]:
    """max over outputs of the bound on |GEMM - oracle| and |GEMM - per-token GEMV|, over
    ``ref_scale`` (max |oracle|), for each WMMA summation order.

    Per output y = sum_k x_k w_k (K terms), with a_k = |x_k w_k|:
      f16 weights:  LAMBDA * sqrt(sum_k c_k^2), c_k = |x_k| max(U16 |w_k|, 2^-25)
      accumulation: LAMBDA * sqrt(n) * U32 * sum_k a_k with n the roundings in the chain:
                    K/16 + 1 (exact_sum_round_once) or K + 1 (sequential_f32)
      per-token GEMV reference (f32 weights): LAMBDA * sqrt(K/32 + 7) * U32 * sum_k a_k."""
    w64 = np.asarray(w, np.float64)
    x64 = np.asarray(X, np.float64)
    K = w64.shape[1]
    abs_sum = np.abs(x64) @ np.abs(w64).T  # [N, M]
    c = np.maximum(U16 * np.abs(w64), F16_SUBNORMAL_ULP / 2)
    weights = LAMBDA * np.sqrt((x64 * x64) @ (c * c).T)
    gemv = LAMBDA * np.sqrt(K / 32 + 7) * U32 * abs_sum
    out = {}
    for order, n in (("exact_sum_round_once", K / 16 + 1), ("sequential_f32", K + 1)):
        acc = LAMBDA * np.sqrt(n) * U32 * abs_sum
        # + one f32 rounding of the output (a residual add)
        out[order] = float(np.max(weights + acc + gemv)) / ref_scale + U32
    return out


def not_applicable(spec: KernelSpec, arch: Arch, manifest: Manifest) -> str:
    """Why prefill parity does not apply to the cell ('' when it does)."""
    if spec.kind != "gemm":
        return f"{spec.name} is a {spec.kind} kernel"
    if not spec.applies_to(arch):
        return (f"{spec.name} does not apply to {arch.name} (requires {spec.requires}); "
                "fallback covers this arch")
    return ""


def check(ctx: CheckContext, spec: KernelSpec) -> Row:
    why = not_applicable(spec, ctx.arch, ctx.manifest)
    if why:
        return ctx.row(NAME, spec, Status.UNSUPPORTED, why)
    try:
        token_kernel = decode_kernel(ctx.manifest, spec.qt, ctx.arch)
    except NoRoute as exc:
        return ctx.row(NAME, spec, Status.ERROR, f"no per-token reference: {exc}")
    fmt = by_qt(spec.qt)
    M, K = ctx.shape_for(spec).gemm_m, ctx.shape_for(spec).gemm_k
    Ns = ctx.shape_for(spec).prefill_n
    n_max = max(Ns)
    try:
        blob = inputs.fixture_blob(fixtures.gaussian(M, K, ctx.seed, qts=(spec.qt,)), spec.qt)
    except inputs.FixtureError as exc:
        return ctx.row(NAME, spec, Status.ERROR, str(exc))
    X = inputs.token_batch(n_max, K, ctx.seed)
    plain = inputs.oracle(fmt, blob, K, X, None)
    # 30-50%: a dropped residual must miss by more than 100x the GEMM tolerance (0.2).
    residual = inputs.residual_for(plain, ctx.seed, (0.3, 0.5)) if spec.residual else None
    full_ref = inputs.oracle(fmt, blob, K, X, residual)
    mapping = mapping_misses(full_ref)
    misses = inputs.misread_misses(fmt, blob, K, X, residual, full_ref)
    misses.update(mapping)
    if spec.residual and residual is not None:
        misses["residual_dropped"] = inputs.worst_rel(full_ref - residual, full_ref)
    try:
        inputs.require_discriminating(misses, MISREAD_FACTOR * TOLERANCE, "prefill fixture",
                                      dict.fromkeys(mapping, MAPPING_FLOOR))
    except inputs.FixtureError as exc:
        return ctx.row(NAME, spec, Status.ERROR, str(exc), tolerance=TOLERANCE,
                       derivation=DERIVATION, details={"misread_misses": misses})

    # the tolerance must hold whichever order the WMMA sums in (docs/emu-semantics.md)
    bounds = error_bound(fmt.decode(blob, K), X, float(np.max(np.abs(full_ref))))
    if max(bounds.values()) > TOLERANCE:
        return ctx.row(NAME, spec, Status.ERROR,
                       f"the error bound on this fixture ({max(bounds.values()):.3g}) exceeds "
                       f"the tolerance {TOLERANCE:g}: the tolerance would not cover every "
                       f"WMMA summation order", tolerance=TOLERANCE, derivation=DERIVATION,
                       details={"bounds": bounds})

    token_program = ctx.program(token_kernel)
    # the per-token launches are independent: one batch (launch_many on the emulator)
    per_token = np.stack([
        o.values for o in decode_many(ctx.backend, token_program, token_kernel, blob,
                                      [X[n].astype(np.float32) for n in range(n_max)])
    ]).astype(np.float64)
    if residual is not None:
        per_token = per_token + residual
    program = ctx.program(spec)
    by_n: dict[str, dict[str, Any]] = {}
    worst = 0.0
    # the GEMMs of every N are independent launches: one batch
    outcomes = gemm_many(ctx.backend, program, spec, blob, [X[:N] for N in Ns],
                         [residual[:N] if residual is not None else None for N in Ns])
    for N, outcome in zip(Ns, outcomes, strict=True):
        Y = outcome.values
        e_oracle = inputs.worst_rel(Y, full_ref[:N])
        e_tokens = inputs.worst_rel(Y, per_token[:N])
        by_n[str(N)] = {"oracle": e_oracle, "per_token": e_tokens}
        worst = max(worst, e_oracle, e_tokens)
    status = Status.PASS if worst <= TOLERANCE else Status.FAIL
    bad = [n for n, e in by_n.items() if max(e.values()) > TOLERANCE]
    msg = (f"worst relative error {worst:.3g} vs {TOLERANCE:g} over N={list(Ns)}"
           + (f"; over tolerance at N={bad}" if bad else ""))
    return ctx.row(NAME, spec, status, msg, measured=worst, tolerance=TOLERANCE,
                   derivation=DERIVATION,
                   details={"by_n": by_n, "per_token_kernel": token_kernel.name, "M": M, "K": K,
                            "misread_misses": misses, "bounds": bounds})
