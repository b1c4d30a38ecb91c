"""bit_identity: a qt=44 (or qt=45) kernel and its v1 baseline agree bit for bit.

Design note section 1e: with scale_half0 == scale_half1 and zero_half0 == zero_half1, qt=44
is numerically identical to v1 on the same nibbles (qt=45 likewise with its one fp16 pair
and zero pad).  The fixture builds that construction from one set of nibbles:

* qt=44 bytes from ``Format.encode`` of weights whose halves are permutations of each
  other (same min/max, so the two stored headers are equal; the nibbles differ per half);
* qt=1 bytes: the same nibbles, header = the fp16 pair widened to f32;
* qt=45 bytes: the same nibbles, header = the fp16 pair, 4 zero pad bytes.

Fixture assertions before any launch: the three decode bit-identically, the nibbles are
identical, and misreadings that a bit comparison should catch (scale/zero swapped, payload
+4, 132 B stride, an f32 header read of fp16 bytes) move the output by more than
``DISCRIMINATION_FLOOR``.  The comparison is of raw u32 output words, zero tolerance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hqval.checks import inputs
from hqval.checks.cell import CheckContext
from hqval.checks.launch import Outcome, decode, gemm
from hqval.formats import by_qt
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec

NAME = "bit_identity"
TOLERANCE = 0.0
DERIVATION = (
    "equal half headers make qt=44/45 the same numbers as v1 on the same nibbles and the "
    "kernels the same instruction sequence on them: any differing output bit is a defect"
)
DISCRIMINATION_FLOOR = 0.5
# Misreadings an equal-halves fixture is blind to by construction (that is its point).
HALF_MISREADINGS = ("one_header_for_both_halves", "halves_swapped")

U8 = npt.NDArray[np.uint8]


def equal_halves_blobs(M: int, K: int, seed: int) -> dict[int, U8]:
    """qt -> bytes for qt=1, 44 and 45 sharing every nibble; raises ``FixtureError``
    unless the headers are equal per half and all three decode bit-identically."""
    f1, f44 = by_qt(1), by_qt(44)
    w = inputs.equal_halves_weights(M, K, seed)
    b44 = f44.encode(w)
    g44 = f44.groups(b44, K)
    hdr = g44[:, :, 0:8].view("<u4")  # [M, G, 2]: (scale0|zero0<<16, scale1|zero1<<16)
    if not np.array_equal(hdr[..., 0], hdr[..., 1]):
        raise inputs.FixtureError("equal_halves: the two qt=44 half headers differ")
    pair = g44[:, :, 0:4].copy()
    f16 = pair.view("<f2")  # [M, G, 2]: scale, zero
    g1 = g44.copy()
    g1[:, :, 0:8] = f16.astype("<f4").view(np.uint8)
    g45 = g44.copy()
    g45[:, :, 0:4] = pair
    g45[:, :, 4:8] = 0
    blobs = {1: g1.reshape(M, -1), 44: b44, 45: g45.reshape(M, -1)}
    decoded = {qt: by_qt(qt).decode(b, K).view(np.uint32) for qt, b in blobs.items()}
    for qt in (1, 45):
        if not np.array_equal(decoded[qt], decoded[44]):
            raise inputs.FixtureError(f"equal_halves: qt={qt} does not decode bit-identically "
                                      "to qt=44 on the same nibbles")
        if not np.array_equal(by_qt(qt).nibbles(blobs[qt], K), f44.nibbles(b44, K)):
            raise inputs.FixtureError(f"equal_halves: qt={qt} nibbles differ from qt=44")
    if np.unique(f1.nibbles(blobs[1], K)).size < 16:
        raise inputs.FixtureError("equal_halves: fewer than 16 distinct codes in the payload")
    return blobs


def _run(ctx: CheckContext, spec: KernelSpec, blob: U8, K: int, seed: int) -> Outcome:
    program = ctx.program(spec)
    if spec.kind == "gemm":
        X = inputs.token_batch(16, K, seed)
        return gemm(ctx.backend, program, spec, blob, X, None)
    x = inputs.activations(K, seed)
    residual = None
    if spec.residual:
        residual = inputs.residual_for(np.ones(blob.shape[0]), seed)
    return decode(ctx.backend, program, spec, blob, x, residual)


def check(ctx: CheckContext, spec: KernelSpec) -> Row:
    if spec.qt not in (44, 45):
        return ctx.row(NAME, spec, Status.UNSUPPORTED,
                       f"bit identity is defined for qt=44/45 against v1; "
                       f"{spec.name} is qt={spec.qt}")
    if not spec.baseline:
        return ctx.row(NAME, spec, Status.ERROR,
                       f"{spec.name} names no v1 baseline: add 'baseline:' to its manifest entry")
    base = ctx.kernel(spec.baseline)
    if base.qt not in (1, 13):
        return ctx.row(NAME, spec, Status.ERROR,
                       f"baseline {base.name} is qt={base.qt}, not a v1 (qt=1/13) kernel")
    if base.kind != spec.kind or base.residual != spec.residual:
        return ctx.row(NAME, spec, Status.ERROR,
                       f"baseline {base.name} ({base.kind}, residual={base.residual}) is not "
                       f"the same ABI as {spec.name} ({spec.kind}, residual={spec.residual})")
    for s in (spec, base):
        if not s.applies_to(ctx.arch):
            return ctx.row(NAME, spec, Status.UNSUPPORTED,
                           f"{s.name} does not apply to {ctx.arch.name} (requires {s.requires})")
    if spec.kind == "gemm":
        M, K = ctx.shape.gemm_m, ctx.shape.gemm_k
    else:
        M, K = ctx.shape.gemv_m, ctx.shape.gemv_k
    blobs = equal_halves_blobs(M, K, ctx.seed)
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
    want = _run(ctx, base, blobs[1], K, ctx.seed).raw
    differ = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
    details = {"baseline": base.name, "M": M, "K": K, "differing_words": int(differ.size),
               "misread_misses": misses}
    if differ.size:
        i = int(differ[0])
        g, w = int(got.reshape(-1)[i]), int(want.reshape(-1)[i])
        msg = (f"{differ.size} of {got.size} output words differ from {base.name}; first at "
               f"{i}: 0x{g:08x} vs 0x{w:08x}")
        return ctx.row(NAME, spec, Status.FAIL, msg, measured=float(differ.size),
                       tolerance=TOLERANCE, derivation=DERIVATION, details=details)
    return ctx.row(NAME, spec, Status.PASS, f"{got.size} output words bit-identical to {base.name}",
                   measured=0.0, tolerance=TOLERANCE, derivation=DERIVATION, details=details)
