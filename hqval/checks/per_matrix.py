"""The checks for kernels of any signature beyond the three single-launch forms the check
modules were written for (``gemv``, ``gemv_qkv``, ``gemm``): fused projections, multi-matrix
WMMA prefill, MoE indexed GEMVs and grouped GEMMs, and a tree's own signatures.

Each check module keeps its name, its verdicts and its tolerance, and hands such a kernel
here; the fixtures and the oracle come from ``hqval.checks.oracle`` (one fixture per weight
matrix, the format's misreadings applied one matrix at a time, structural misreadings,
poisoned unselected experts).  Tolerances are the check modules' own, with their
derivations:

- decode (matvec ops): ``reference_parity.TOLERANCE`` (f32 accumulation, sqrt(K) 2^-24 of
  max|y|); an MoE routed sum adds k_top f32 roundings in whatever order the ranks land,
  k_top 2^-24 of max|y|, four orders of magnitude inside it;
- prefill (matmul and grouped_matmul ops): ``prefill_parity.TOLERANCE``, with the bound of
  ``prefill_parity.error_bound`` computed on the fixture for each matrix (f16 weights, both
  WMMA summation orders), each weight rounded to f16 once from its exact value
  (``bounds.weight_rounding``: a mixed-precision fma, or an f16 fma of qt=44/45's f16
  header); a kernel that rounds q*scale and the sum separately in f16 is outside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hqval import fixtures
from hqval.checks import inputs, oracle, per_token
from hqval.checks.bounds import error_bound, mapping_misses
from hqval.checks.cell import CheckContext
from hqval.checks.dispatch import wmma_prefill_allowed
from hqval.checks.launch import launch_signature
from hqval.formats import V1_QTS, by_qt
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec, Manifest
    from hqval.matrix import Arch
    from hqval.signature import Signature

# The single-launch forms the check modules handle themselves.
LEGACY_KINDS = ("gemv", "gemv_qkv", "gemm")
MISREAD_FACTOR = 100.0
MAPPING_FLOOR = 0.5
FALLBACK_TOKENS = 3
DECODE_ROUTED_NOTE = ("; an MoE routed sum adds k_top f32 roundings in any rank order "
                      "(k_top 2^-24 of max|y|)")
PREFILL_NOTE = "; the bound computed on each matrix of the fixture"


def handles(spec: KernelSpec) -> bool:
    return spec.kind not in LEGACY_KINDS


def not_applicable(check: str, spec: KernelSpec, arch: Arch, manifest: Manifest) -> str:
    """Why ``check`` does not apply to ``spec`` on ``arch`` ('' when it does, or when only
    the check can say what is wrong): the same rules the checks below apply first."""
    sig = spec.signature
    if check == "reference_parity" and sig.is_prefill:
        return f"{spec.kind} kernels are judged by prefill_parity, not the GEMV oracle"
    if check == "prefill_parity" and not sig.is_prefill:
        return f"{spec.name} is a {spec.kind} kernel"
    if check == "padded_offset" and spec.qt != 45:
        return f"the padded layout is qt=45's; {spec.name} is qt={spec.qt}"
    if check == "bit_identity" and spec.qt not in (44, 45):
        return f"bit identity is defined for qt=44/45 against v1; {spec.name} is qt={spec.qt}"
    if check == "fallback":
        if not sig.is_prefill:
            return f"{spec.name} is a {spec.kind} kernel; fallback is about prefill"
        if wmma_prefill_allowed(spec.qt, arch):
            return f"{arch.name} has {arch.wmma} WMMA for qt={spec.qt}: no fallback needed"
        return ""
    if not spec.applies_to(arch):
        return f"{spec.name} does not apply to {arch.name} ({spec.not_for(arch)})"
    if check == "bit_identity":
        base = next((k for k in manifest.kernels if k.name == spec.baseline), None)
        if base is not None and base.kind == spec.kind and not base.applies_to(arch):
            return f"{base.name} does not apply to {arch.name} ({base.not_for(arch)})"
    return ""


def _run(ctx: CheckContext, spec: KernelSpec, case: oracle.Case) -> dict[str, Any]:
    out = launch_signature(ctx.backend, ctx.program(spec), spec, case.dims,
                           case.values(spec.signature))
    return {n: out.output(n) for n in out.names}


def _not_here(ctx: CheckContext, name: str, spec: KernelSpec) -> Row | None:
    if not spec.applies_to(ctx.arch):
        return ctx.row(name, spec, Status.UNSUPPORTED,
                       f"{spec.name} does not apply to {ctx.arch.name} "
                       f"({spec.not_for(ctx.arch)})")
    return None


def _mapping(ref: Mapping[str, Any], case: oracle.Case) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, y in ref.items():
        if y.ndim == 2:
            y = np.where(case.untouched[name][:, None], 0.0, y) if name in case.untouched else y
            for k, v in mapping_misses(y).items():
                out[f"{name}:{k}"] = v
    return out


def _bound(sig: Signature, spec: KernelSpec, case: oracle.Case,
           ref: Mapping[str, Any]) -> float:
    """The prefill error bound on this fixture (module docstring), over every matrix."""
    fmt = by_qt(spec.qt)
    K = next(case.dims[d.name] for d in sig.dims if d.role == "k")
    scale = 0.0
    for name, y in ref.items():
        keep = np.isfinite(y)
        if name in case.untouched:  # rows left as they were do not set the output's scale
            keep &= ~np.broadcast_to(case.untouched[name][:, None], y.shape)
        scale = max(scale, float(np.max(np.abs(np.where(keep, y, 0.0)))))
    acts = [np.asarray(case.host[a.name], np.float64) for a in sig.by_role("activation")]
    X = np.concatenate([x.reshape(-1, K) for x in acts])
    worst = 0.0
    for mats in oracle.decode_all(fmt, case, K).values():
        for w in mats:
            if w is None:
                continue
            worst = max(worst, max(error_bound(w, X, scale or 1.0).values()))
    return worst


def parity(ctx: CheckContext, name: str, spec: KernelSpec, *, tolerance: float,
           derivation: str, fixture: Callable[[int, int, int], fixtures.Fixture],
           metric: Callable[[npt.NDArray[np.floating], Any], float] = inputs.worst_rel,
           names: tuple[str, ...] | None = None, structural: bool = True,
           rows_base: int | None = None, tokens: bool = False) -> Row:
    """The kernel against the oracle of its signature on ``fixture``, after proving the
    fixture discriminates: every misreading misses by MISREAD_FACTOR x the tolerance.
    ``tokens``: a prefill kernel also against its per-token decode reference
    (``hqval.checks.per_token``), within the same tolerance."""
    sig = spec.signature
    prefill = sig.is_prefill
    if prefill:
        derivation += PREFILL_NOTE
    elif sig.has_table:
        derivation += DECODE_ROUTED_NOTE
    fmt = by_qt(spec.qt)
    try:
        dims = oracle.dims_for(sig, spec, ctx.shape_for(spec), rows_base=rows_base)
        case = oracle.build_case(sig, spec, dims, ctx.seed, fixture,
                                 (0.3, 0.5) if prefill else (0.1, 0.2))
    except inputs.FixtureError as exc:
        return ctx.row(name, spec, Status.ERROR, str(exc), tolerance=tolerance,
                       derivation=derivation)
    ref = oracle.reference(sig, fmt, case)
    misses = oracle.misses(sig, fmt, case, ref, metric, names, structural)
    floors: dict[str, float] = {}
    if prefill and structural:
        mapping = _mapping(ref, case)
        misses.update(mapping)
        floors = dict.fromkeys(mapping, MAPPING_FLOOR)
    for a in sig.outputs:
        res = case.residual.get(a.name)
        if res is not None:
            plain = ref[a.name] - res
            misses[f"{a.name}:residual_dropped"] = oracle.worst(
                {a.name: plain}, {a.name: ref[a.name]}, metric, case.untouched)[0]
    details: dict[str, Any] = {"dims": dict(case.dims), "signature": sig.name,
                               "misread_misses": misses}
    try:
        inputs.require_discriminating(misses, MISREAD_FACTOR * tolerance,
                                      f"{sig.name} fixture", floors)
    except inputs.FixtureError as exc:
        return ctx.row(name, spec, Status.ERROR, str(exc), tolerance=tolerance,
                       derivation=derivation, details=details)
    if prefill:
        bound = _bound(sig, spec, case, ref)
        details["bound"] = bound
        if bound > tolerance:
            return ctx.row(name, spec, Status.ERROR,
                           f"the error bound on this fixture ({bound:.3g}) exceeds the "
                           f"tolerance {tolerance:g}", tolerance=tolerance,
                           derivation=derivation, details=details)
    got = _run(ctx, spec, case)
    err, errs = oracle.worst(got, ref, metric, case.untouched)
    details["errors"] = errs
    which = max(errs, key=lambda k: errs[k])
    tail = ""
    if prefill and tokens:
        pt = per_token.reference(ctx, spec, case)
        details["per_token_kernel"] = pt.kernel.name if pt.kernel is not None else None
        if pt.outputs is None:
            details["per_token_missing"] = pt.why
            tail = f"; oracle only, no per-token reference: {pt.why}"
        else:
            e_tok, errs_tok = oracle.worst(got, pt.outputs, metric, case.untouched)
            details["per_token_errors"] = errs_tok
            details["per_token_launches"] = pt.launches
            tail = (f"; per token through {details['per_token_kernel']} "
                    f"({pt.launches} launches): {e_tok:.3g}")
            if e_tok > err:
                err, which = e_tok, f"per token: {max(errs_tok, key=lambda k: errs_tok[k])}"
    status = Status.PASS if err <= tolerance else Status.FAIL
    poisoned = sum(b is None for bl in case.blobs.values() for b in bl)
    extra = f"; {poisoned} unselected expert(s) poisoned" if poisoned else ""
    return ctx.row(name, spec, status,
                   f"worst error {err:.3g} ({which}) vs tolerance {tolerance:g} over "
                   f"{len(errs)} output(s){extra}{tail}", measured=err, tolerance=tolerance,
                   derivation=derivation, details=details)


def reference_parity(ctx: CheckContext, spec: KernelSpec, rp: ModuleType) -> Row:
    """The check module ``rp`` (reference_parity: its name, tolerance, derivation) on ``spec``."""

    if spec.signature.is_prefill:
        return ctx.row(rp.NAME, spec, Status.UNSUPPORTED,
                       f"{spec.kind} kernels are judged by prefill_parity, not the GEMV oracle")
    return _not_here(ctx, rp.NAME, spec) or parity(
        ctx, rp.NAME, spec, tolerance=rp.TOLERANCE, derivation=rp.DERIVATION,
        fixture=oracle.NamedFixture("disjoint_halves"))


def prefill_parity(ctx: CheckContext, spec: KernelSpec, pp: ModuleType) -> Row:
    """The check module ``pp`` (prefill_parity: its name, tolerance, derivation) on ``spec``."""

    if not spec.signature.is_prefill:
        return ctx.row(pp.NAME, spec, Status.UNSUPPORTED, f"{spec.name} is a {spec.kind} kernel")
    qt = spec.qt
    return _not_here(ctx, pp.NAME, spec) or parity(
        ctx, pp.NAME, spec, tolerance=pp.TOLERANCE, derivation=pp.DERIVATION,
        fixture=oracle.NamedFixture("gaussian", (("qts", (qt,)),)), tokens=True)


def padded_offset(ctx: CheckContext, spec: KernelSpec, po: ModuleType) -> Row:
    """The check module ``po`` (padded_offset: its name, tolerance, derivation) on ``spec``."""

    if spec.qt != 45:
        return ctx.row(po.NAME, spec, Status.UNSUPPORTED,
                       f"the padded layout is qt=45's; {spec.name} is qt={spec.qt}")
    prefill = spec.signature.is_prefill
    return _not_here(ctx, po.NAME, spec) or parity(
        ctx, po.NAME, spec, tolerance=po.GEMM_TOLERANCE if prefill else po.TOLERANCE,
        derivation=po.DERIVATION, fixture=oracle.NamedFixture("padded_qt45"),
        metric=inputs.rel_rms, names=po.MISREADINGS, structural=False,
        rows_base=None if prefill else ctx.shape_for(spec).padded_m)


def bit_identity(ctx: CheckContext, spec: KernelSpec, bi: ModuleType) -> Row:
    """The check module ``bi`` (bit_identity: its name, tolerance, derivation) on ``spec``."""

    name = bi.NAME
    if spec.qt not in (44, 45):
        return ctx.row(name, spec, Status.UNSUPPORTED,
                       f"bit identity is defined for qt=44/45 against v1; {spec.name} is "
                       f"qt={spec.qt}")
    if not spec.baseline:
        return ctx.row(name, spec, Status.ERROR,
                       f"{spec.name} names no v1 baseline: add 'baseline:' to its manifest entry")
    base = ctx.kernel(spec.baseline)
    if base.qt not in V1_QTS:
        return ctx.row(name, spec, Status.ERROR,
                       f"baseline {base.name} is qt={base.qt}, not a v1 (qt=6/13) kernel")
    if base.kind != spec.kind or base.residual != spec.residual:
        return ctx.row(name, spec, Status.ERROR,
                       f"baseline {base.name} ({base.kind}, residual={base.residual}) is not "
                       f"the same ABI as {spec.name} ({spec.kind}, residual={spec.residual})")
    for s in (spec, base):
        if not s.applies_to(ctx.arch):
            return ctx.row(name, spec, Status.UNSUPPORTED,
                           f"{s.name} does not apply to {ctx.arch.name} "
                           f"({s.not_for(ctx.arch)})")
    sig = spec.signature
    fmt = by_qt(spec.qt)
    try:
        dims = oracle.dims_for(sig, spec, ctx.shape_for(spec))
        fx = oracle.NamedFixture("equal_halves")
        case = oracle.build_case(sig, spec, dims, ctx.seed, fx)
        base_case = oracle.build_case(sig, base, dims, ctx.seed, fx)
    except inputs.FixtureError as exc:
        return ctx.row(name, spec, Status.ERROR, str(exc), tolerance=bi.TOLERANCE,
                       derivation=bi.DERIVATION)
    ref = oracle.reference(sig, fmt, case)
    misses = oracle.misses(sig, fmt, case, ref)
    for k in list(misses):
        if k.split(":")[-1] in bi.HALF_MISREADINGS:
            misses.pop(k)
    details: dict[str, Any] = {"baseline": base.name, "dims": dict(case.dims),
                               "misread_misses": misses}
    try:
        inputs.require_discriminating(misses, bi.DISCRIMINATION_FLOOR, "equal_halves fixture")
    except inputs.FixtureError as exc:
        return ctx.row(name, spec, Status.ERROR, str(exc), tolerance=bi.TOLERANCE,
                       derivation=bi.DERIVATION, details=details)
    cases = _order_free(sig, case)
    base_cases = _order_free(sig, base_case)
    if len(cases) > 1:
        details["one_hot_ranks"] = len(cases)
    gots = [_run(ctx, spec, c) for c in cases]
    try:
        wants = [_run(ctx, base, c) for c in base_cases]
    except Exception as exc:
        failed: Row | None = bi.baseline_failed(ctx, spec, base, exc)
        if failed is None:
            raise
        return failed
    got = gots[0]
    g = np.concatenate([np.asarray(o[n]).reshape(-1).view(np.uint32)
                        for o in gots for n in sorted(o)])
    w = np.concatenate([np.asarray(o[n]).reshape(-1).view(np.uint32)
                        for o in wants for n in sorted(o)])
    differ = np.flatnonzero(g != w)
    details["differing_words"] = int(differ.size)
    if differ.size:
        i = int(differ[0])
        return ctx.row(name, spec, Status.FAIL,
                       f"{differ.size} of {g.size} output words differ from {base.name}; first "
                       f"at {i}: 0x{int(g[i]):08x} vs 0x{int(w[i]):08x}",
                       measured=float(differ.size), tolerance=bi.TOLERANCE,
                       derivation=bi.DERIVATION, details=details)
    return ctx.row(name, spec, Status.PASS,
                   f"{g.size} output words of {len(got)} output(s) bit-identical to {base.name}"
                   + (f" ({len(cases)} launches, one per rank, routing weights one-hot: "
                      "the ranks' sum in any order)" if len(cases) > 1 else ""),
                   measured=0.0, tolerance=bi.TOLERANCE, derivation=bi.DERIVATION,
                   details=details)


def _order_free(sig: Signature, case: oracle.Case) -> list[oracle.Case]:
    """``case`` as launches whose outputs do not depend on the order the kernel's blocks
    add their parts in.  An output that sums scaled ranks (an MoE down projection: each
    rank a block of its own, added atomically) is bit-reproducible on hardware only up to
    that order; with the routing weights one-hot every other rank adds exactly 0, so the
    sum is the same in any order.  One launch per rank, so every rank is compared."""
    scales = sorted({a.op.scale for a in sig.outputs
                     if a.op is not None and a.op.reduce == "sum" and a.op.scale})
    if not scales:
        return [case]
    k_top = max(np.asarray(case.host[n]).shape[-1] for n in scales)
    out = []
    for r in range(k_top):
        host = dict(case.host)
        for n in scales:
            one = np.zeros_like(np.asarray(case.host[n], np.float32))
            one[..., r] = 1.0
            host[n] = one
        out.append(dataclasses.replace(case, host=host))
    return out


def per_token_kernel(ctx: CheckContext, spec: KernelSpec) -> KernelSpec | None:
    """The decode kernel that serves ``spec``'s prefill token by token on this arch: the
    signature's ``per_token`` kind, same format, built here, as the engine picks one
    (``per_token.candidates``)."""
    cands = per_token.candidates(ctx, spec)
    return cands[0] if cands else None


def fallback(ctx: CheckContext, spec: KernelSpec, fb: ModuleType) -> Row:
    """The check module ``fb`` (fallback: its name, tolerance, derivation) on ``spec``."""

    name = fb.NAME
    sig = spec.signature
    arch = ctx.arch
    if not sig.is_prefill:
        return ctx.row(name, spec, Status.UNSUPPORTED,
                       f"{spec.name} is a {spec.kind} kernel; fallback is about prefill")
    if wmma_prefill_allowed(spec.qt, arch):
        return ctx.row(name, spec, Status.UNSUPPORTED,
                       f"{arch.name} has {arch.wmma} WMMA for qt={spec.qt}: no fallback needed")
    if spec.applies_to(arch):
        return ctx.row(name, spec, Status.FAIL,
                       f"the manifest admits {spec.name} (requires {spec.requires}) on "
                       f"{arch.name}, which lacks the WMMA generation qt={spec.qt} needs")
    token = per_token_kernel(ctx, spec)
    if token is None:
        return ctx.row(name, spec, Status.ERROR,
                       f"no per-token decode to fall back to: no {sig.per_token} kernel for "
                       f"qt={spec.qt} on {arch.name} in the manifest")
    rows: list[Row] = []
    for t in range(FALLBACK_TOKENS):
        # the cell's programs and its record of what it loaded (the check row cache)
        sub = CheckContext(ctx.backend, ctx.arch, ctx.manifest, ctx.seed * 31 + t, ctx.sizes,
                           ctx._programs, loaded=ctx.loaded)
        rows.append(parity(sub, name, token, tolerance=fb.TOLERANCE, derivation=fb.DERIVATION,
                           fixture=oracle.NamedFixture("disjoint_halves")))
    worst = max(rows, key=lambda r: (r.status is not Status.PASS, r.measured or 0.0))
    details = {"decode_kernel": token.name, "route": "per_token_gemv", "tokens": FALLBACK_TOKENS,
               **worst.details}
    return ctx.row(name, spec, worst.status,
                   f"{FALLBACK_TOKENS} tokens through {token.name}: {worst.message}",
                   measured=worst.measured, tolerance=fb.TOLERANCE, derivation=fb.DERIVATION,
                   details=details)
