"""reference_parity: a GEMV against the f64 oracle of its decoded weights.

Two fixtures: disjoint halves (each 128-half with its own range, so any header mix-up is
large) and gaussian (a realistic distribution).  Before any launch the check proves the
disjoint fixture discriminates: a decode with one header for both halves misses the oracle
by more than 0.5 relative, and every other misreading of the bytes (halves swapped,
scale/zero swapped, payload +4, 132 B stride, f32 header read, dropped residual) by more
than 100x the tolerance; else the cell is an error, not a pass.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from hqval import fixtures
from hqval.checks import inputs, per_matrix
from hqval.checks.cell import CheckContext
from hqval.checks.launch import decode
from hqval.formats import by_qt
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec, Manifest
    from hqval.matrix import Arch

NAME = "reference_parity"
TOLERANCE = 1e-4
# every tolerance a row of this check states (the judge refuses any other)
TOLERANCES = (TOLERANCE,)
DERIVATION = (
    "f32 accumulation of K<=4352 products in 32 lanes: error ~ sqrt(K)*2^-24*max|y| "
    "(<1e-5), so 1e-4 of max|y| leaves 10x margin while a header/offset slip misses by >0.5"
)
# The bar for the header mix-up the fixture exists for; every other misreading
# must still miss by two orders of magnitude more than the tolerance.
DISCRIMINATION_FLOORS = {"one_header_for_both_halves": 0.5}
MISREAD_FACTOR = 100.0
GEMV_KINDS = ("gemv", "gemv_qkv")


def not_applicable(spec: KernelSpec, arch: Arch, manifest: Manifest) -> str:
    """Why the GEMV oracle does not apply to the cell ('' when it does)."""
    if per_matrix.handles(spec):  # fused, multi-matrix, MoE and a tree's own signatures
        return per_matrix.not_applicable(NAME, spec, arch, manifest)
    if spec.kind not in GEMV_KINDS:
        return f"{spec.kind} kernels are judged by prefill_parity, not the GEMV oracle"
    if not spec.applies_to(arch):
        return f"{spec.name} does not apply to {arch.name} ({spec.not_for(arch)})"
    return ""


def check(ctx: CheckContext, spec: KernelSpec) -> Row:
    if per_matrix.handles(spec):  # fused, multi-matrix, MoE and a tree's own signatures
        return per_matrix.reference_parity(ctx, spec, sys.modules[__name__])
    why = not_applicable(spec, ctx.arch, ctx.manifest)
    if why:
        return ctx.row(NAME, spec, Status.UNSUPPORTED, why)
    fmt = by_qt(spec.qt)
    M, K = ctx.shape_for(spec).gemv_m, ctx.shape_for(spec).gemv_k
    x = inputs.activations(K, ctx.seed)
    try:
        blobs = {
            "disjoint_halves": inputs.fixture_blob(fixtures.disjoint_halves(M, K, ctx.seed),
                                                   spec.qt),
            "gaussian": inputs.fixture_blob(fixtures.gaussian(M, K, ctx.seed, qts=(spec.qt,)),
                                            spec.qt),
        }
    except inputs.FixtureError as exc:
        return ctx.row(NAME, spec, Status.ERROR, str(exc), tolerance=TOLERANCE,
                       derivation=DERIVATION)
    refs: dict[str, Any] = {}
    residuals: dict[str, Any] = {}
    misses: dict[str, dict[str, float]] = {}
    for name, blob in blobs.items():
        plain = inputs.oracle(fmt, blob, K, x, None)
        residuals[name] = inputs.residual_for(plain, ctx.seed) if spec.residual else None
        refs[name] = inputs.oracle(fmt, blob, K, x, residuals[name])
    # Discrimination, before any launch.
    ref = refs["disjoint_halves"]
    m = inputs.misread_misses(fmt, blobs["disjoint_halves"], K, x, residuals["disjoint_halves"],
                              ref)
    if spec.residual:
        m["residual_dropped"] = inputs.worst_rel(ref - residuals["disjoint_halves"], ref)
    misses["disjoint_halves"] = m
    try:
        inputs.require_discriminating(m, MISREAD_FACTOR * TOLERANCE, "disjoint_halves fixture",
                                      DISCRIMINATION_FLOORS)
    except inputs.FixtureError as exc:
        return ctx.row(NAME, spec, Status.ERROR, str(exc), tolerance=TOLERANCE,
                       derivation=DERIVATION, details={"misread_misses": misses})

    program = ctx.program(spec)
    errors: dict[str, float] = {}
    for name, blob in blobs.items():
        out = decode(ctx.backend, program, spec, blob, x, residuals[name])
        errors[name] = inputs.worst_rel(out.values, refs[name])
    worst = max(errors.values())
    status = Status.PASS if worst <= TOLERANCE else Status.FAIL
    which = max(errors, key=lambda k: errors[k])
    msg = f"worst relative error {worst:.3g} ({which}) vs tolerance {TOLERANCE:g}"
    return ctx.row(NAME, spec, status, msg, measured=worst, tolerance=TOLERANCE,
                   derivation=DERIVATION,
                   details={"errors": errors, "misread_misses": misses, "M": M, "K": K,
                            "residual": bool(spec.residual)})

