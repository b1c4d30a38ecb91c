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

import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from hqval import fixtures
from hqval.checks import inputs, per_matrix
from hqval.checks.bounds import F16_SUBNORMAL_ULP as F16_SUBNORMAL_ULP
from hqval.checks.bounds import LAMBDA as LAMBDA
from hqval.checks.bounds import U16 as U16
from hqval.checks.bounds import U32 as U32
from hqval.checks.bounds import error_bound, mapping_misses
from hqval.checks.cell import CheckContext
from hqval.checks.dispatch import NoRoute, per_token_reference
from hqval.checks.launch import decode_many, gemm_many
from hqval.formats import by_qt
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec, Manifest
    from hqval.matrix import Arch

NAME = "prefill_parity"
TOLERANCE = 2e-3
# every tolerance a row of this check states (the judge refuses any other)
TOLERANCES = (TOLERANCE,)
DERIVATION = (
    "WMMA takes f16 weights (<=2^-11 relative rounding each, random-signed over K) and "
    "accumulates in f32 in an order the ISA leaves open; error_bound() bounds both orders "
    "(16 exact products summed and rounded once per WMMA: K/16 roundings; sequential f32: K "
    "roundings) plus the per-token GEMV's own K/32+7, at 6 sigma per output, and the check "
    "proves that bound <= 2e-3 on its fixture; a transposed/shifted tile misses by >0.5"
)
# The bound and the mapping misreadings live in hqval.checks.bounds (the per-matrix checks
# use them too); the names stay importable from here.
MAPPING_FLOOR = 0.5
MISREAD_FACTOR = 100.0


def not_applicable(spec: KernelSpec, arch: Arch, manifest: Manifest) -> str:
    """Why prefill parity does not apply to the cell ('' when it does)."""
    if per_matrix.handles(spec):  # fused, multi-matrix, MoE and a tree's own signatures
        return per_matrix.not_applicable(NAME, spec, arch, manifest)
    if spec.kind != "gemm":
        return f"{spec.name} is a {spec.kind} kernel"
    if not spec.applies_to(arch):
        return (f"{spec.name} does not apply to {arch.name} ({spec.not_for(arch)}); "
                "fallback covers this arch")
    return ""


def check(ctx: CheckContext, spec: KernelSpec) -> Row:
    if per_matrix.handles(spec):  # fused, multi-matrix, MoE and a tree's own signatures
        return per_matrix.prefill_parity(ctx, spec, sys.modules[__name__])
    why = not_applicable(spec, ctx.arch, ctx.manifest)
    if why:
        return ctx.row(NAME, spec, Status.UNSUPPORTED, why)
    try:
        token_kernel, adds_residual = per_token_reference(ctx.manifest, spec, ctx.arch)
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
    token_res = [residual[n] for n in range(n_max)] if adds_residual and residual is not None \
        else None
    per_token = np.stack([
        o.values for o in decode_many(ctx.backend, token_program, token_kernel, blob,
                                      [X[n].astype(np.float32) for n in range(n_max)],
                                      token_res)
    ]).astype(np.float64)
    if residual is not None and not adds_residual:
        per_token = per_token + residual  # the plain GEMV: the residual added on the host
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
                   details={"by_n": by_n, "per_token_kernel": token_kernel.name,
                            "per_token_residual": ("kernel" if adds_residual else "host")
                            if spec.residual else None, "M": M, "K": K,
                            "misread_misses": misses, "bounds": bounds})
