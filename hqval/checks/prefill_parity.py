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
from hqval.checks.launch import decode, gemm
from hqval.formats import by_qt
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec

NAME = "prefill_parity"
TOLERANCE = 2e-3
DERIVATION = (
    "WMMA takes f16 weights: each dequantised weight carries <=2^-11 relative rounding, "
    "random-signed over K, so |Y-oracle| <~ 2^-11*max|Y| (~5e-4); 2e-3 is 4x that while a "
    "transposed/shifted tile misses by >0.5"
)
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


def check(ctx: CheckContext, spec: KernelSpec) -> Row:
    if spec.kind != "gemm":
        return ctx.row(NAME, spec, Status.UNSUPPORTED, f"{spec.name} is a {spec.kind} kernel")
    if not spec.applies_to(ctx.arch):
        return ctx.row(NAME, spec, Status.UNSUPPORTED,
                       f"{spec.name} does not apply to {ctx.arch.name} (requires {spec.requires}); "
                       "fallback covers this arch")
    try:
        token_kernel = decode_kernel(ctx.manifest, spec.qt, ctx.arch)
    except NoRoute as exc:
        return ctx.row(NAME, spec, Status.ERROR, f"no per-token reference: {exc}")
    fmt = by_qt(spec.qt)
    M, K = ctx.shape.gemm_m, ctx.shape.gemm_k
    Ns = ctx.shape.prefill_n
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

    token_program = ctx.program(token_kernel)
    per_token = np.stack([
        decode(ctx.backend, token_program, token_kernel, blob, X[n].astype(np.float32), None)
        .values for n in range(n_max)
    ]).astype(np.float64)
    if residual is not None:
        per_token = per_token + residual
    program = ctx.program(spec)
    by_n: dict[str, dict[str, Any]] = {}
    worst = 0.0
    for N in Ns:
        res_n = residual[:N] if residual is not None else None
        Y = gemm(ctx.backend, program, spec, blob, X[:N], res_n).values
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
                            "misread_misses": misses})
