"""Per-token references for the multi-matrix and MoE prefill GEMMs: the matching decode
kernel of the manifest (the prefill signature's ``per_token`` signature, same format)
launched once per token on the GEMM case's own weights and activations, its outputs
assembled into the GEMM's output layout.

- A multi-matrix GEMM (``matmul`` outputs, ``gemm_qkv`` / ``gemm_gate_up`` /
  ``gemm_qkvza``): token n's decode launch takes row n of X (as f32) and the same
  matrices, in argument order; each decode output is row n of the GEMM output of the same
  matrix.
- A grouped MoE GEMM (``grouped_matmul``): the routing is read back from the case's tiles
  and slots (slot p of expert ``tiles[p // 16]`` is token ``s // k_top``, rank
  ``s % k_top``, ``s = sorted_slot_index[p]``); token t's decode launch takes its top-k
  experts and the activation rows its slots read.  A decode output of a row range
  (``rows: [lo, hi]``, the gate/up halves) fills those columns of each slot's row.  A
  decode output that sums the ranks scaled by routing weights (the down projection) is
  launched once per rank with the weights one-hot: the other ranks add exactly 0 times
  their product, so the result is that one slot's product, order-independent.
  Padding slots are 0; an unused tile's rows are left to the check's ``untouched`` mask.

What cannot be mapped (no decode kernel of the kind and format built for the arch, a
decode kernel specialised for other sizes, an activation layout the decode ABI has no
form for) gives no reference and says why; the caller then compares with the oracle only
and says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hqval.checks import oracle
from hqval.checks.dispatch import by_decode_preference
from hqval.checks.launch import (
    GuardViolation,
    LaunchValue,
    Output,
    Plan,
    launch_guarded_many,
    signature_plan,
)
from hqval.signature import builtin

if TYPE_CHECKING:
    from hqval.checks.cell import CheckContext
    from hqval.manifest import KernelSpec
    from hqval.signature import Arg, Signature

F64 = npt.NDArray[np.float64]


@dataclass
class Reference:
    """The decode kernel's results in the GEMM's output layout (``outputs``), or why there
    are none (``why``)."""

    kernel: KernelSpec | None
    outputs: dict[str, F64] | None
    why: str = ""
    launches: int = 0


def candidates(ctx: CheckContext, spec: KernelSpec) -> list[KernelSpec]:
    """Decode kernels that can serve ``spec`` token by token on this arch: of the
    signature's ``per_token`` ABI (that kind, or a kind of the tree's own declaring the same
    ABI under another name), same format, adding to its output exactly where ``spec`` does
    (``residual``), built here; in the order the engine picks a decode kernel for the arch
    (``dispatch.by_decode_preference``)."""
    want = spec.signature.per_token
    known = next((k.signature for k in ctx.manifest.kernels if k.kind == want), None)
    want_sig = known or (builtin().get(want) if want else None)
    abi = want_sig.abi() if want_sig is not None else None
    cands = [k for k in ctx.manifest.kernels
             if not k.is_mutant and k.qt == spec.qt and k.residual == spec.residual
             and k.applies_to(ctx.arch)
             and (k.kind == want or (abi is not None and k.signature.abi() == abi))]
    return by_decode_preference(cands, ctx.arch)


def _decode_dims(gsig: Signature, dsig: Signature, case: oracle.Case,
                 token: KernelSpec) -> dict[str, int] | str:
    """The decode signature's dims for the GEMM case, or why they cannot be set."""
    gw, dw = gsig.weights, dsig.weights
    if [a.role for a in gw] != [a.role for a in dw]:
        return (f"{dsig.name}'s weights ({', '.join(a.name for a in dw)}) are not "
                f"{gsig.name}'s ({', '.join(a.name for a in gw)})")
    dims: dict[str, int] = {}
    for g, d in zip(gw, dw, strict=True):
        blobs = case.blobs[g.name]
        rows = next(b.shape[0] for b in blobs if b is not None)
        for expr, value in ((d.rows, rows), (d.count, len(blobs))):
            if expr is None:
                continue
            name = expr.text.strip()
            if name not in {x.name for x in dsig.dims}:
                return f"{dsig.name}.{d.name}'s size {expr.text} is no plain dim"
            dims[name] = value
    g_role = {x.role: case.dims[x.name] for x in gsig.dims if x.name in case.dims}
    for x in dsig.dims:
        if x.name in dims:
            continue
        if x.role in ("k", "topk", "experts") and x.role in g_role:
            dims[x.name] = g_role[x.role]
        elif x.role == "tokens":
            dims[x.name] = 1
        else:
            return f"{dsig.name}'s dim {x.name} ({x.role}) has no value in a {gsig.name} case"
    for name, value in dict(token.dims).items():
        if dims.get(name, value) != value:
            return f"{token.name} is built for {name}={value}, the case has {dims[name]}"
    return dims


def _routing(gsig: Signature, case: oracle.Case) -> tuple[npt.NDArray[np.int64], int, int]:
    """(topk [N, k_top], k_top, x_row_div) read back from a grouped case's tiles and slots."""
    out = next(a for a in gsig.outputs if a.op is not None and a.op.kind == "grouped_matmul")
    op = out.op
    assert op is not None and op.tiles and op.slots and op.x_row_div is not None
    k_top = next(case.dims[x.name] for x in gsig.dims if x.role == "topk")
    N = next(case.dims[x.name] for x in gsig.dims if x.role == "tokens")
    tiles = np.asarray(case.host[op.tiles], np.int64).reshape(-1)
    slots = np.asarray(case.host[op.slots], np.int64).reshape(-1)
    topk = np.full((N, k_top), -1, np.int64)
    for p, s in enumerate(slots):
        if s >= 0:
            topk[s // k_top, s % k_top] = tiles[p // oracle.TILE]
    return topk, k_top, op.x_row_div.int(case.dims)


def reference(ctx: CheckContext, spec: KernelSpec, case: oracle.Case) -> Reference:
    """The per-token reference for every output of ``spec``'s case (module docstring)."""
    gsig = spec.signature
    cands = candidates(ctx, spec)
    if not cands:
        return Reference(None, None, f"no {gsig.per_token} kernel for qt={spec.qt} on "
                         f"{ctx.arch.name} in the manifest")
    why = ""
    for token in cands:
        dims = _decode_dims(gsig, token.signature, case, token)
        if isinstance(dims, str):
            why = dims
            continue
        grouped = any(a.op is not None and a.op.kind == "grouped_matmul" for a in gsig.outputs)
        got = (_grouped(ctx, spec, token, case, dims) if grouped
               else _stacked(ctx, spec, token, case, dims))
        if isinstance(got, str):
            why = got
            continue
        outputs, launches = got
        for name, res in case.residual.items():
            if res is not None and name in outputs:
                outputs[name] = outputs[name] + np.asarray(res, np.float64)
        return Reference(token, outputs, "", launches)
    return Reference(None, None, why)


def _weights(gsig: Signature, dsig: Signature, case: oracle.Case) -> dict[str, LaunchValue]:
    """The GEMM case's matrices under the decode signature's names (argument order)."""
    values: dict[str, LaunchValue] = {}
    full = case.values(gsig)
    for g, d in zip(gsig.weights, dsig.weights, strict=True):
        values[d.name] = full[g.name]
    return values


def _fresh(dsig: Signature, dims: Mapping[str, int], env: Mapping[str, int]
           ) -> dict[str, LaunchValue]:
    """Each decode output's initial contents: zeros where the kernel adds into it (a
    residual output), the never-written pattern elsewhere."""
    out: dict[str, LaunchValue] = {}
    for a in dsig.outputs:
        shape = tuple(e.int({**dims, **env}) for e in a.shape)
        out[a.name] = (Output(np.zeros(shape, np.float32)) if a.residual == "true"
                       else Output.unwritten(shape))
    return out


def _run(ctx: CheckContext, token: KernelSpec, dims: Mapping[str, int],
         launches: Sequence[Mapping[str, LaunchValue]]) -> list[dict[str, F64]]:
    plans: list[Plan] = [signature_plan(token, dims, v) for v in launches]
    try:
        outcomes = launch_guarded_many(ctx.backend, ctx.program(token), plans)
    except GuardViolation as exc:  # the prefill cell fails, naming the reference that did
        raise GuardViolation(f"the per-token reference {token.name}: {exc}") from exc
    return [{n: np.asarray(o.output(n), np.float64) for n in o.names} for o in outcomes]


def _single_activation(dsig: Signature) -> Arg | str:
    acts = dsig.by_role("activation")
    if len(acts) != 1:
        return f"{dsig.name} takes {len(acts)} activations, not one"
    return acts[0]


def _stacked(ctx: CheckContext, spec: KernelSpec, token: KernelSpec, case: oracle.Case,
             dims: dict[str, int]) -> tuple[dict[str, F64], int] | str:
    """Multi-matrix GEMM: one decode launch per token."""
    gsig, dsig = spec.signature, token.signature
    act = _single_activation(dsig)
    if isinstance(act, str):
        return act
    if len(act.shape) != 1:
        return f"{dsig.name}.{act.name} is not one token's activations"
    gx = [a for a in gsig.by_role("activation")]
    if len(gx) != 1:
        return f"{gsig.name} takes {len(gx)} activations, not one"
    X = np.asarray(case.host[gx[0].name])
    env = {"R": token.rows_per_block, "BT": 1, "block": token.block}
    base = _weights(gsig, dsig, case)
    launches = [{**base, act.name: X[n].astype(np.float32), **_fresh(dsig, dims, env)}
                for n in range(X.shape[0])]
    results = _run(ctx, token, dims, launches)
    by_weight = {g.name: d.name for g, d in zip(gsig.weights, dsig.weights, strict=True)}
    d_out = {a.op.weight: a.name for a in dsig.outputs if a.op is not None}
    outputs: dict[str, F64] = {}
    for a in gsig.outputs:
        assert a.op is not None
        name = d_out.get(by_weight.get(a.op.weight, ""))
        if name is None:
            return f"{dsig.name} has no output of {a.op.weight}'s matrix"
        outputs[a.name] = np.stack([r[name] for r in results])
    return outputs, len(launches)


def _grouped(ctx: CheckContext, spec: KernelSpec, token: KernelSpec, case: oracle.Case,
             dims: dict[str, int]) -> tuple[dict[str, F64], int] | str:
    """Grouped MoE GEMM: one decode launch per token (per rank where the decode sums
    scaled ranks), assembled slot by slot."""
    gsig, dsig = spec.signature, token.signature
    act = _single_activation(dsig)
    if isinstance(act, str):
        return act
    topk, k_top, div = _routing(gsig, case)
    out = next(a for a in gsig.outputs if a.op is not None and a.op.kind == "grouped_matmul")
    assert out.op is not None and out.op.slots is not None
    X = np.asarray(case.host[out.op.x])
    idx = dsig.by_role("index")
    if len(idx) != 1 or idx[0].of != "topk":
        return f"{dsig.name} takes no top-k index"
    scaled = [a for a in dsig.outputs if a.op is not None and a.op.scale is not None]
    if any(a.op is not None and a.op.reduce == "sum" and a.op.scale is None
           for a in dsig.outputs):
        return f"{dsig.name} sums the ranks unscaled: no launch isolates one slot"
    rw = dsig.by_role("routing_weights")
    env = {"R": token.rows_per_block, "BT": 1, "block": token.block}
    base = _weights(gsig, dsig, case)
    launches: list[dict[str, LaunchValue]] = []
    keys: list[tuple[int, int | None]] = []  # (token, the rank a one-hot launch isolates)
    for t in range(topk.shape[0]):
        if (topk[t] < 0).any():
            return f"token {t} of the case has fewer than {k_top} routed slots"
        rows = [(t * k_top + r) // div for r in range(k_top)]
        if len(act.shape) == 1:
            if len(set(rows)) != 1:
                return (f"{dsig.name}.{act.name} is one row for every rank; the slots of "
                        f"token {t} read rows {rows}")
            x = X[rows[0]].astype(np.float32)
        else:
            x = X[rows].astype(np.float32)
        common = {**base, idx[0].name: topk[t].astype(np.int32), act.name: x}
        for rank in (range(k_top) if scaled else [None]):
            v: dict[str, LaunchValue] = {**common, **_fresh(dsig, dims, env)}
            for w in rw:
                one = np.zeros(k_top, np.float32)
                if rank is not None:
                    one[rank] = 1.0
                v[w.name] = one
            launches.append(v)
            keys.append((t, rank))
    results = _run(ctx, token, dims, launches)
    M = next(b.shape[0] for b in case.blobs[out.op.weight] if b is not None)
    slots = np.asarray(case.host[out.op.slots], np.int64).reshape(-1)
    Y = np.zeros((slots.size, M))
    at = {k: i for i, k in enumerate(keys)}
    denv = {**dims, **env}
    for p, s in enumerate(slots):
        if s < 0:
            continue
        t, r = int(s // k_top), int(s % k_top)
        got = results[at[(t, r if scaled else None)]]
        for a in dsig.outputs:
            op = a.op
            assert op is not None
            lo, hi = ((op.rows[0].int(denv), op.rows[1].int(denv)) if op.rows is not None
                      else (0, M))
            y = got[a.name]
            # a summed output is the one rank's product ([rows]); a per-rank one [k_top, rows]
            Y[p, lo:hi] = y.reshape(-1) if op.reduce == "sum" else y.reshape(k_top, -1)[r]
    return {out.name: Y}, len(launches)
