"""fallback: where the arch lacks the WMMA generation a format's GEMM needs (qt=45 on gfx11,
everything on gfx10), prefill must go to per-token decode and still match the oracle.

The cell is keyed on a GEMM kernel and an arch.  On an arch that has the generation it is
``unsupported`` (prefill_parity covers it).  Otherwise it fails if the manifest admits the
GEMM there or the dispatcher routes to any GEMM, and then runs the dispatcher's per-token
decode over a token batch against the f64 oracle.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

from hqval import fixtures
from hqval.checks import inputs, per_matrix
from hqval.checks.cell import CheckContext
from hqval.checks.dispatch import NoRoute, prefill_route, wmma_prefill_allowed
from hqval.checks.launch import decode_many
from hqval.formats import by_qt
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec, Manifest
    from hqval.matrix import Arch

NAME = "fallback"
TOLERANCE = 1e-4
# every tolerance a row of this check states (the judge refuses any other)
TOLERANCES = (TOLERANCE,)
DERIVATION = (
    "per-token decode is the f32 GEMV: error ~ sqrt(K)*2^-24*max|y| (<1e-5), so 1e-4 "
    "leaves 10x margin while a misrouted or misread decode misses by >0.5"
)
# Every misreading must miss by two orders of magnitude more than the tolerance.
DISCRIMINATION_FLOOR = 100 * TOLERANCE
# Tokens in the fallback batch: ragged, and more than one so token order matters.
TOKENS = 5


def not_applicable(spec: KernelSpec, arch: Arch, manifest: Manifest) -> str:
    """Why the fallback check does not apply to the cell ('' when it does)."""
    if per_matrix.handles(spec):  # fused, multi-matrix, MoE and a tree's own signatures
        return per_matrix.not_applicable(NAME, spec, arch, manifest)
    if spec.kind != "gemm":
        return f"{spec.name} is a {spec.kind} kernel; fallback is about GEMM prefill"
    if wmma_prefill_allowed(spec.qt, arch):
        return f"{arch.name} has {arch.wmma} WMMA for qt={spec.qt}: no fallback needed"
    return ""


def check(ctx: CheckContext, spec: KernelSpec) -> Row:
    if per_matrix.handles(spec):  # fused, multi-matrix, MoE and a tree's own signatures
        return per_matrix.fallback(ctx, spec, sys.modules[__name__])
    why = not_applicable(spec, ctx.arch, ctx.manifest)
    if why:
        return ctx.row(NAME, spec, Status.UNSUPPORTED, why)
    arch = ctx.arch
    if spec.applies_to(arch):
        return ctx.row(NAME, spec, Status.FAIL,
                       f"the manifest admits {spec.name} (requires {spec.requires}) on "
                       f"{arch.name}, which lacks the WMMA generation qt={spec.qt} needs")
    try:
        route = prefill_route(ctx.manifest, spec.qt, arch, residual=spec.residual)
    except NoRoute as exc:
        return ctx.row(NAME, spec, Status.ERROR, f"no per-token decode to fall back to: {exc}")
    if route.path != "per_token_gemv":
        return ctx.row(NAME, spec, Status.FAIL,
                       f"dispatcher routed qt={spec.qt} prefill on {arch.name} to "
                       f"{route.kernel.name} ({route.path})")
    fmt = by_qt(spec.qt)
    M, K = ctx.shape_for(spec).gemv_m, ctx.shape_for(spec).gemv_k
    try:
        blob = inputs.fixture_blob(fixtures.disjoint_halves(M, K, ctx.seed), spec.qt)
    except inputs.FixtureError as exc:
        return ctx.row(NAME, spec, Status.ERROR, str(exc))
    X = inputs.token_batch(TOKENS, K, ctx.seed).astype(np.float32)
    # A residual GEMM's fallback is the residual GEMV, adding each token's own residual:
    # one that overwrites y, or the plain GEMV in its place, misses by the residual's share.
    residual = (inputs.residual_for(inputs.oracle(fmt, blob, K, X, None), ctx.seed)
                if spec.residual else None)
    ref = inputs.oracle(fmt, blob, K, X, residual)
    misses = inputs.misread_misses(fmt, blob, K, X, residual, ref)
    if residual is not None:
        misses["residual_dropped"] = inputs.worst_rel(ref - residual, ref)
    try:
        inputs.require_discriminating(misses, DISCRIMINATION_FLOOR, "fallback fixture")
    except inputs.FixtureError as exc:
        return ctx.row(NAME, spec, Status.ERROR, str(exc), tolerance=TOLERANCE,
                       derivation=DERIVATION, details={"misread_misses": misses})
    program = ctx.program(route.kernel)
    Y = np.stack([o.values for o in decode_many(
        ctx.backend, program, route.kernel, blob, [X[n] for n in range(TOKENS)],
        None if residual is None else [residual[n] for n in range(TOKENS)])])
    err = inputs.worst_rel(Y, ref)
    status = Status.PASS if err <= TOLERANCE else Status.FAIL
    return ctx.row(NAME, spec, status,
                   f"routed to {route.kernel.name} ({route.reason}); worst relative error "
                   f"{err:.3g} vs {TOLERANCE:g}",
                   measured=err, tolerance=TOLERANCE, derivation=DERIVATION,
                   details={"route": route.path, "decode_kernel": route.kernel.name,
                            "reason": route.reason, "misread_misses": misses})
