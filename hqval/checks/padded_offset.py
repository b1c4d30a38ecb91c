"""padded_offset (qt=45): the payload is at +8 behind a 4 B zero pad, the stride is 136 B.

Design note section 1b: the retired 132 B compact form put the payload at +4 with a 132 B
stride; a kernel that still reads either compiles and runs and is silently wrong.  The
padded fixture (wide-range groups using all 16 codes) is asserted before any launch: its pad
bytes are zero, every group's header is finite and non-degenerate, and decodes of the same
bytes at a +4 payload offset and at a 132 B stride miss the true dequant by at least
``MISREAD_FACTOR`` times the tolerance.  Then the kernel must match its own dequant.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

from hqval import fixtures
from hqval.checks import inputs, per_matrix
from hqval.checks.cell import CheckContext
from hqval.checks.launch import decode, gemm
from hqval.formats import by_qt
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec, Manifest
    from hqval.matrix import Arch

NAME = "padded_offset"
TOLERANCE = 1e-4
DERIVATION = (
    "rel-RMS of f32 accumulation over K<=4352 is ~sqrt(K)*2^-24 (<1e-5), so 1e-4 has 10x "
    "margin; GEMM X is f16 but the oracle uses the same f16 X"
)
# "Orders of magnitude more": a wrong offset or stride must miss by >= 100x the tolerance.
MISREAD_FACTOR = 100.0
MISREADINGS = ("payload_plus4", "stride_132")
# WMMA GEMMs consume f16 weights: one f16 rounding (2^-11) per weight, random-signed over K.
GEMM_TOLERANCE = 2e-3
# every tolerance a row of this check states (the judge refuses any other)
TOLERANCES = (TOLERANCE, GEMM_TOLERANCE)


def padded_fixture_assertions(blob: np.ndarray, K: int) -> None:
    fmt = by_qt(45)
    g = fmt.groups(blob, K)
    if np.any(g[:, :, 4:8]):
        raise inputs.FixtureError("padded fixture: pad bytes [4..8) are not zero")
    scale, zero = fmt.headers(blob, K)
    if not (np.all(np.isfinite(scale)) and np.all(np.isfinite(zero))):
        raise inputs.FixtureError("padded fixture: a header is not finite")
    if np.any(scale == 0):
        raise inputs.FixtureError("padded fixture: a degenerate (constant) group")
    if np.unique(fmt.nibbles(blob, K)).size < 16:
        raise inputs.FixtureError("padded fixture: fewer than 16 distinct codes")


def not_applicable(spec: KernelSpec, arch: Arch, manifest: Manifest) -> str:
    """Why the padded-offset check does not apply to the cell ('' when it does)."""
    if per_matrix.handles(spec):  # fused, multi-matrix, MoE and a tree's own signatures
        return per_matrix.not_applicable(NAME, spec, arch, manifest)
    if spec.qt != 45:
        return f"the padded layout is qt=45's; {spec.name} is qt={spec.qt}"
    if not spec.applies_to(arch):
        return f"{spec.name} does not apply to {arch.name} ({spec.not_for(arch)})"
    return ""


def check(ctx: CheckContext, spec: KernelSpec) -> Row:
    if per_matrix.handles(spec):  # fused, multi-matrix, MoE and a tree's own signatures
        return per_matrix.padded_offset(ctx, spec, sys.modules[__name__])
    why = not_applicable(spec, ctx.arch, ctx.manifest)
    if why:
        return ctx.row(NAME, spec, Status.UNSUPPORTED, why)
    fmt = by_qt(45)
    is_gemm = spec.kind == "gemm"
    sz = ctx.shape_for(spec)
    M, K = (sz.gemm_m, sz.gemm_k) if is_gemm else (min(sz.padded_m, sz.gemv_m), sz.gemv_k)
    tolerance = GEMM_TOLERANCE if is_gemm else TOLERANCE
    try:
        blob = inputs.fixture_blob(fixtures.padded_qt45(M, K, ctx.seed), 45)
        padded_fixture_assertions(blob, K)
    except inputs.FixtureError as exc:
        return ctx.row(NAME, spec, Status.ERROR, str(exc), tolerance=tolerance,
                       derivation=DERIVATION)
    xin = (inputs.token_batch(16, K, ctx.seed) if is_gemm
           else inputs.activations(K, ctx.seed))
    plain = inputs.oracle(fmt, blob, K, xin, None)
    residual = inputs.residual_for(plain, ctx.seed) if spec.residual else None
    ref = inputs.oracle(fmt, blob, K, xin, residual)
    misses = inputs.misread_misses(fmt, blob, K, xin, residual, ref, metric=inputs.rel_rms,
                                   names=MISREADINGS)
    try:
        inputs.require_discriminating(misses, MISREAD_FACTOR * tolerance, "padded fixture")
    except inputs.FixtureError as exc:
        return ctx.row(NAME, spec, Status.ERROR, str(exc), tolerance=tolerance,
                       derivation=DERIVATION, details={"misread_misses": misses})
    program = ctx.program(spec)
    if is_gemm:
        out = gemm(ctx.backend, program, spec, blob, np.asarray(xin, np.float16), residual)
    else:
        out = decode(ctx.backend, program, spec, blob, np.asarray(xin, np.float32), residual)
    err = inputs.rel_rms(out.values, ref)
    status = Status.PASS if err <= tolerance else Status.FAIL
    return ctx.row(NAME, spec, status,
                   f"rel-RMS {err:.3g} vs {tolerance:g}; misreads miss by "
                   + ", ".join(f"{k} {v:.3g}" for k, v in misses.items()),
                   measured=err, tolerance=tolerance, derivation=DERIVATION,
                   details={"misread_misses": misses, "M": M, "K": K})
