"""bit_identity: a qt=44 (or qt=45) kernel and its v1 baseline agree bit for bit.

Design note section 1e: with scale_half0 == scale_half1 and zero_half0 == zero_half1, qt=44
is numerically identical to v1 on the same nibbles (qt=45 likewise with its one fp16 pair
and zero pad).  ``hqval.fixtures.equal_halves`` builds that
construction from one set of nibbles (qt=6/13 with the fp16 pair widened to f32, qt=44 with
the pair twice, qt=45 with the pair and the zero pad).

Fixture assertions before any launch: the fixture's own (all decode bit-identically, the
halves' headers are equal, all 16 codes used), then misreadings that a bit comparison
should catch (scale/zero swapped, payload +4, 132 B stride, an f32 header read of fp16
bytes) must move the output by more than ``DISCRIMINATION_FLOOR``.  The comparison is of
raw u32 output words, zero tolerance.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hqval import fixtures
from hqval.checks import inputs, per_matrix
from hqval.checks.cell import CheckContext
from hqval.checks.launch import Outcome, decode, gemm
from hqval.formats import V1_QTS, by_qt
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec, Manifest
    from hqval.matrix import Arch

NAME = "bit_identity"
TOLERANCE = 0.0
# every tolerance a row of this check states (the judge refuses any other)
TOLERANCES = (TOLERANCE,)
DERIVATION = (
    "equal half headers make qt=44/45 the same numbers as v1 on the same nibbles and the "
    "kernels the same instruction sequence on them: any differing output bit is a defect"
)
DISCRIMINATION_FLOOR = 0.5
# Misreadings an equal-halves fixture is blind to by construction (that is its point).
HALF_MISREADINGS = ("one_header_for_both_halves", "halves_swapped")

U8 = npt.NDArray[np.uint8]
# Tokens for GEMM bit identity: one full 16-wide tile.
GEMM_TOKENS = 16


def _run(ctx: CheckContext, spec: KernelSpec, blob: U8, K: int, seed: int) -> Outcome:
    """One launch on the shared inputs; residual kernels get the same residual."""
    program = ctx.program(spec)
    M = blob.shape[0]
    if spec.kind == "gemm":
        X = inputs.token_batch(GEMM_TOKENS, K, seed)
        residual = (inputs.residual_for(np.ones((GEMM_TOKENS, M)), seed) if spec.residual
                    else None)
        return gemm(ctx.backend, program, spec, blob, X, residual)
    x = inputs.activations(K, seed)
    residual = inputs.residual_for(np.ones(M), seed) if spec.residual else None
    return decode(ctx.backend, program, spec, blob, x, residual)


def not_applicable(spec: KernelSpec, arch: Arch, manifest: Manifest) -> str:
    """Why bit identity does not apply to the cell ('' when it does, or when only the
    check itself can say what is wrong: a missing or mismatched baseline is its error)."""
    if per_matrix.handles(spec):  # fused, multi-matrix, MoE and a tree's own signatures
        return per_matrix.not_applicable(NAME, spec, arch, manifest)
    if spec.qt not in (44, 45):
        return (f"bit identity is defined for qt=44/45 against v1; "
                f"{spec.name} is qt={spec.qt}")
    if not spec.applies_to(arch):
        return f"{spec.name} does not apply to {arch.name} ({spec.not_for(arch)})"
    base = next((k for k in manifest.kernels if k.name == spec.baseline), None)
    if base is None or base.qt not in V1_QTS or base.kind != spec.kind \
            or base.residual != spec.residual:
        return ""
    if not base.applies_to(arch):
        return f"{base.name} does not apply to {arch.name} ({base.not_for(arch)})"
    return ""


def check(ctx: CheckContext, spec: KernelSpec) -> Row:
    if per_matrix.handles(spec):  # fused, multi-matrix, MoE and a tree's own signatures
        return per_matrix.bit_identity(ctx, spec, sys.modules[__name__])
    why = not_applicable(spec, ctx.arch, ctx.manifest)
    if why:
        return ctx.row(NAME, spec, Status.UNSUPPORTED, why)
    if not spec.baseline:
        return ctx.row(NAME, spec, Status.ERROR,
                       f"{spec.name} names no v1 baseline: add 'baseline:' to its manifest entry")
    base = ctx.kernel(spec.baseline)
    if base.qt not in V1_QTS:
        return ctx.row(NAME, spec, Status.ERROR,
                       f"baseline {base.name} is qt={base.qt}, not a v1 (qt=6/13) kernel")
    if base.kind != spec.kind or base.residual != spec.residual:
        return ctx.row(NAME, spec, Status.ERROR,
                       f"baseline {base.name} ({base.kind}, residual={base.residual}) is not "
                       f"the same ABI as {spec.name} ({spec.kind}, residual={spec.residual})")
    if spec.kind == "gemm":
        M, K = ctx.shape_for(spec).gemm_m, ctx.shape_for(spec).gemm_k
    else:
        M, K = ctx.shape_for(spec).gemv_m, ctx.shape_for(spec).gemv_k
    fixture = fixtures.equal_halves(M, K, ctx.seed)
    try:
        blobs = {qt: inputs.fixture_blob(fixture, qt) for qt in (spec.qt, base.qt)}
    except inputs.FixtureError as exc:
        return ctx.row(NAME, spec, Status.ERROR, str(exc), tolerance=TOLERANCE,
                       derivation=DERIVATION)
    fmt = by_qt(spec.qt)
    blob = blobs[spec.qt]
    # Discrimination: the bytes read wrongly must move the output well away.
    x = inputs.activations(K, ctx.seed)
    ref = inputs.oracle(fmt, blob, K, x, None)
    misses = inputs.misread_misses(fmt, blob, K, x, None, ref)
    for name in HALF_MISREADINGS:
        misses.pop(name, None)
    try:
        inputs.require_discriminating(misses, DISCRIMINATION_FLOOR, "equal_halves fixture")
    except inputs.FixtureError as exc:
        return ctx.row(NAME, spec, Status.ERROR, str(exc), tolerance=TOLERANCE,
                       derivation=DERIVATION, details={"misread_misses": misses})

    got = _run(ctx, spec, blob, K, ctx.seed).raw
    try:
        want = _run(ctx, base, blobs[base.qt], K, ctx.seed).raw
    except Exception as exc:
        failed = baseline_failed(ctx, spec, base, exc)
        if failed is None:
            raise
        return failed
    differ = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
    details = {"baseline": base.name, "M": M, "K": K, "differing_words": int(differ.size),
               "misread_misses": misses}
    if differ.size:
        i = int(differ[0])
        g, w = int(got.reshape(-1)[i]), int(want.reshape(-1)[i])
        msg = (f"{differ.size} of {got.size} output words differ from {base.name}; first at "
               f"{i}: 0x{g:08x} vs 0x{w:08x}")
        base_row = _baseline_own_check(ctx, base)
        if base_row is not None and base_row.status is Status.FAIL:
            # the comparison is against a kernel that does not compute the format (it
            # misses the oracle): the difference says nothing about the v2 kernel, whose
            # own parity rows judge it.  No verdict, as for a baseline that traps or
            # breaks a guard; the row still never passes.
            details["baseline_fails"] = {"check": base_row.check,
                                         "status": str(base_row.status),
                                         "message": base_row.message}
            return ctx.row(NAME, spec, Status.ERROR,
                           f"no verdict: the baseline {base.name} itself fails its "
                           f"{base_row.check} ({base_row.status}: {base_row.message}); "
                           f"{msg}", measured=float(differ.size), tolerance=TOLERANCE,
                           derivation=DERIVATION, details=details)
        return ctx.row(NAME, spec, Status.FAIL, msg, measured=float(differ.size),
                       tolerance=TOLERANCE, derivation=DERIVATION, details=details)
    return ctx.row(NAME, spec, Status.PASS, f"{got.size} output words bit-identical to {base.name}",
                   measured=0.0, tolerance=TOLERANCE, derivation=DERIVATION, details=details)


def baseline_failed(ctx: CheckContext, spec: KernelSpec, base: KernelSpec,
                    exc: BaseException) -> Row | None:
    """The row of ``spec``'s bit identity when its baseline's own launch failed (it
    trapped or faulted, or broke a guard: read or wrote outside its buffers, the
    baseline's behaviour, never ``spec``'s), or None for any other exception.  No verdict
    about ``spec``: an error naming the baseline, its own rows carry its failure, and a
    mutant is never counted killed by it."""
    from hqval.checks.cell import kernel_fault
    from hqval.checks.launch import GuardViolation

    fault = "guard" if isinstance(exc, GuardViolation) else kernel_fault(exc)
    if not fault:
        return None
    return ctx.row(NAME, spec, Status.ERROR,
                   f"no verdict: the baseline {base.name} failed on its own launch "
                   f"({fault}: {exc}); {spec.name}'s output was never compared with it",
                   tolerance=TOLERANCE, derivation=DERIVATION,
                   details={"baseline": base.name,
                            "baseline_fails": {"check": NAME, "status": str(Status.FAIL),
                                               "message": f"{fault}: {exc}"}})


def _baseline_own_check(ctx: CheckContext, base: KernelSpec) -> Row | None:
    """The baseline's own parity check against the formats oracle (reference_parity for a
    GEMV, prefill_parity for a GEMM), run only when bit identity failed."""
    if base.kind == "gemm":
        from hqval.checks import prefill_parity as parity
    else:
        from hqval.checks import reference_parity as parity  # type: ignore[no-redef]
    return parity.check(ctx, base)
