"""Declarative kernel signatures: a kernel's ABI described by the role of each argument,
its grid and block as expressions of the shape, and what each output holds.

A manifest entry's ``kind`` names a signature.  The suite ships its signatures in
``matrices/signatures.yaml`` (``gemv``, ``gemv_qkv`` and ``gemm`` among them); a kernel
tree may declare more under a top-level ``signatures:`` key of its ``kernels.yaml``, in
the same form.  One signature::

    gemv_gate_up:
      path: fused_decode          # the policy path its kernels are evidence for
      dims: {Mg: rows, Mu: rows, K: k}
      args:
        - {name: A_gate, role: weight, rows: Mg}
        - {name: A_up, role: weight, rows: Mu}
        - {name: x, role: activation, dtype: f32, shape: [K]}
        - {name: y_gate, role: output, shape: [Mg], op: matvec, weight: A_gate, x: x}
        - {name: y_up, role: output, shape: [Mu], op: matvec, weight: A_up, x: x}
        - {name: gate_m, role: scalar, value: Mg}
        - {name: up_m, role: scalar, value: Mu}
        - {name: K, role: scalar, value: K}
      grid: [cdiv(Mg, R) + cdiv(Mu, R), 1, 1]
      block: [block, 1, 1]

Dims (``dims``) are the shape's free sizes, each with a role the checks give a value to:
``rows`` (weight rows), ``k`` (the reduction length, a multiple of 256), ``tokens`` (a
batch), ``experts`` (a pointer table's length), ``topk`` (experts per token) and
``slots`` (a grouped GEMM's padded slot count, set by the routing); ``value:`` fixes one
(``k_top: {role: topk, value: 8}`` for a kernel specialised for eight).  Argument roles:

- ``weight``: one weight matrix of the kernel's format, ``rows`` x K;
- ``weight_table``: a table of ``count`` u64 pointers to weight matrices of ``rows`` x K;
- ``activation``: f32 or f16 ``shape``;
- ``routing_weights``: f32 per-rank weights (``shape``), e.g. an MoE's top-k weights;
- ``index``: i32 ``shape``, ``of`` ``topk`` (distinct experts per token), ``expert_tiles``
  (a grouped GEMM's expert per 16-slot tile, -1 for an unused tile) or ``sorted_slots``
  (its routed slot per row, token * k_top + rank, -1 for padding);
- ``output``: f32 ``shape``, and the op that computes it: ``matvec`` (``weight``, ``x``,
  optional ``rows: [lo, hi]``; with a weight table ``experts`` names the top-k index and
  the output gains a rank dimension; ``scale`` multiplies each rank by a routing weight,
  ``reduce: sum`` sums the ranks), ``matmul`` (``weight``, ``x`` [N, K]: [N, rows]) or
  ``grouped_matmul`` (``weight`` table, ``tiles``, ``slots``, ``x``, ``x_row_div``:
  [slots, rows]); ``residual: kernel`` (default: the manifest's ``residual``), ``true``
  (the output is read, added to and written) or ``false``;
- ``scalar``: an i32 (or ``dtype: f32``) ``value``.

``grid`` and ``block`` are three expressions (``block`` may be one) of the dims and of
``R`` (rows_per_block), ``BT`` (batch_tile) and ``block`` (the manifest's block size);
see ``hqval.expr``.  Errors name the file, the line, the key and the fix.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hqval import suite_dir
from hqval.expr import Expr, ExprError, parse
from hqval.schema import Problem, SchemaError, Spec, YamlDoc, load_yaml, problem, validate

SIGNATURES_PATH = suite_dir("matrices") / "signatures.yaml"
PATHS = ("decode", "prefill", "fused_decode", "fused_prefill", "moe_decode", "moe_prefill")
# A prefill path and the decode path whose kernels serve it token by token.
DECODE_OF = {"prefill": "decode", "fused_prefill": "fused_decode", "moe_prefill": "moe_decode"}
DECODE_PATHS = ("decode", "fused_decode", "moe_decode")
DIM_ROLES = ("rows", "k", "tokens", "experts", "topk", "slots")
ARG_ROLES = ("weight", "weight_table", "activation", "routing_weights", "index", "output",
             "scalar")
INDEX_OF = ("topk", "expert_tiles", "sorted_slots")
OPS = ("matvec", "matmul", "grouped_matmul")
# Names every grid/block/shape expression may use besides the dims: the manifest entry's
# rows_per_block, batch_tile and block.
LAUNCH_NAMES = ("R", "BT", "block")


class SignatureError(SchemaError):
    """A signature that cannot be used; every problem names file, line, key and fix."""


@dataclass(frozen=True)
class Dim:
    name: str
    role: str
    value: Expr | None = None
    multiple: int = 1


@dataclass(frozen=True)
class Op:
    """What an output holds, in terms of the other arguments (``hqval.checks.oracle``)."""

    kind: str
    weight: str
    x: str
    rows: tuple[Expr, Expr] | None = None
    experts: str | None = None
    scale: str | None = None
    reduce: str | None = None
    tiles: str | None = None
    slots: str | None = None
    x_row_div: Expr | None = None


@dataclass(frozen=True)
class Arg:
    name: str
    role: str
    dtype: str = ""
    shape: tuple[Expr, ...] = ()
    rows: Expr | None = None  # weight, weight_table
    count: Expr | None = None  # weight_table
    of: str = ""  # index
    value: Expr | None = None  # scalar
    op: Op | None = None  # output
    residual: str = "kernel"  # output: kernel | true | false

    @property
    def is_buffer(self) -> bool:
        return self.role != "scalar"


@dataclass(frozen=True)
class Signature:
    name: str
    path: str
    dims: tuple[Dim, ...]
    args: tuple[Arg, ...]
    grid: tuple[Expr, Expr, Expr]
    block: tuple[Expr, Expr, Expr]
    per_token: str | None = None
    where: str = ""  # file:line of its definition
    builtin: bool = field(default=False, compare=False)

    def abi(self) -> tuple[object, ...]:
        """What the kernel's launch and outputs depend on: the path, the dims, the
        arguments, the grid and the block, expressions compared parsed (not as text).  Two
        signatures of one ABI under two names (a tree's copy of the suite's) are equal."""
        def ex(e: Expr | None) -> object:
            return None if e is None else e.tree

        def op(o: Op | None) -> object:
            if o is None:
                return None
            return (o.kind, o.weight, o.x, None if o.rows is None else tuple(map(ex, o.rows)),
                    o.experts, o.scale, o.reduce, o.tiles, o.slots, ex(o.x_row_div))

        return (self.path,
                tuple((d.name, d.role, ex(d.value), d.multiple) for d in self.dims),
                tuple((a.name, a.role, a.dtype, tuple(map(ex, a.shape)), ex(a.rows),
                       ex(a.count), a.of, ex(a.value), op(a.op), a.residual)
                      for a in self.args),
                tuple(map(ex, self.grid)), tuple(map(ex, self.block)))

    def arg(self, name: str) -> Arg:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(f"signature {self.name} has no argument {name!r}")

    def by_role(self, *roles: str) -> list[Arg]:
        return [a for a in self.args if a.role in roles]

    def dims_of(self, role: str) -> list[Dim]:
        return [d for d in self.dims if d.role == role]

    @property
    def outputs(self) -> list[Arg]:
        return self.by_role("output")

    @property
    def weights(self) -> list[Arg]:
        """Every weight matrix argument and pointer table, in argument order."""
        return self.by_role("weight", "weight_table")

    @property
    def is_prefill(self) -> bool:
        return self.path in DECODE_OF

    @property
    def has_table(self) -> bool:
        return any(a.role == "weight_table" for a in self.args)

    def kernarg_offsets(self) -> dict[str, int]:
        """Byte offset of each argument in the kernarg segment: pointers 8 B, scalars 4 B,
        each aligned to its size (the AMDGPU ABI's layout of these arguments)."""
        out: dict[str, int] = {}
        off = 0
        for a in self.args:
            size = 4 if a.role == "scalar" else 8
            off = -(-off // size) * size
            out[a.name] = off
            off += size
        return out

    def arg_names(self) -> list[str]:
        return [a.name for a in self.args]

    def launch(self, env: Mapping[str, int]) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(grid, block) for the dims and launch names in ``env``."""
        grid = (self.grid[0].int(env), self.grid[1].int(env), self.grid[2].int(env))
        block = (self.block[0].int(env), self.block[1].int(env), self.block[2].int(env))
        for what, dims in (("grid", grid), ("block", block)):
            if any(d < 1 for d in dims):
                raise ExprError(f"signature {self.name}: {what} {list(dims)} has a dimension "
                                "below 1 for these sizes")
        return grid, block


# ---------------------------------------------------------------------------- schema

_EXPR_FIX = "an integer or an expression of the dims, R, BT and block, e.g. cdiv(M, R)"


def _expr_ok(value: Any) -> str | None:
    try:
        parse(value)
    except ExprError as exc:
        return str(exc)
    return None


_EXPR = Spec(object, validators=(_expr_ok,), fix=_EXPR_FIX)


def _expr_list(value: Any) -> str | None:
    if not isinstance(value, list) or not value:
        return f"{value!r} is not a list of expressions"
    return None


_DIM = Spec(object, fix=f"a role ({', '.join(DIM_ROLES)}) or {{role: ..., value: N}}")
_ARG = Spec.mapping({
    "name": Spec.scalar(str, fix="the argument's name, e.g. W"),
    "role": Spec.scalar(str, enum=ARG_ROLES),
    "dtype": Spec.scalar(str, required=False, enum=("f32", "f16", "i32"),
                         fix="f32 or f16 (activations), f32 or i32 (scalars)"),
    "shape": Spec.list_of(_EXPR, required=False, fix="a list of expressions, e.g. [N, K]"),
    "rows": Spec(object, required=False,
                 fix="weights: an expression; outputs: [lo, hi] of the weight's rows"),
    "count": Spec(object, required=False, validators=(_expr_ok,), fix=_EXPR_FIX),
    "of": Spec.scalar(str, required=False, enum=INDEX_OF),
    "value": Spec(object, required=False, validators=(_expr_ok,), fix=_EXPR_FIX),
    "op": Spec.scalar(str, required=False, enum=OPS),
    "weight": Spec.scalar(str, required=False, fix="the weight argument the op reads"),
    "x": Spec.scalar(str, required=False, fix="the activation argument the op reads"),
    "experts": Spec.scalar(str, required=False, fix="the top-k index argument"),
    "scale": Spec.scalar(str, required=False, fix="the routing_weights argument"),
    "reduce": Spec.scalar(str, required=False, enum=("sum",)),
    "tiles": Spec.scalar(str, required=False, fix="the expert_tiles index argument"),
    "slots": Spec.scalar(str, required=False, fix="the sorted_slots index argument"),
    "x_row_div": Spec(object, required=False, validators=(_expr_ok,), fix=_EXPR_FIX),
    "residual": Spec(object, required=False, enum=("kernel", True, False),
                     fix="kernel (the manifest's residual), true or false"),
})
SIGNATURE_SPEC = Spec.mapping({
    "path": Spec.scalar(str, enum=PATHS),
    "per_token": Spec.scalar(str, required=False,
                             fix="the decode signature whose per-token launches serve this "
                                 "prefill kernel where it falls back, e.g. gemv"),
    "dims": Spec.map_of(_DIM, fix="a mapping name -> role, e.g. {M: rows, K: k}"),
    "args": Spec.list_of(_ARG, fix="a list of arguments in ABI order"),
    "grid": Spec(list, validators=(_expr_list,), fix="three expressions, e.g. [cdiv(M, R), 1, 1]"),
    "block": Spec(object, fix="an expression or three, e.g. [block, 1, 1]"),
})
SIGNATURES_FILE_SPEC = Spec.mapping({
    "schema": Spec.scalar(int, enum=(1,)),
    "signatures": Spec.map_of(SIGNATURE_SPEC, fix="a mapping name -> signature"),
})


def parse_signatures(doc: YamlDoc, key: tuple[str | int, ...], data: Any,
                     known: Mapping[str, Signature] | None = None,
                     builtin: bool = False) -> tuple[dict[str, Signature], list[Problem]]:
    """The signatures of ``data`` (a mapping name -> signature at ``key`` of ``doc``) and
    every problem; ``known`` are the ones already defined (a tree's may not redefine them)."""
    problems = validate_at(doc, key, data, Spec.map_of(SIGNATURE_SPEC))
    out: dict[str, Signature] = {}
    if problems or not isinstance(data, dict):
        return out, problems
    for name, d in data.items():
        k = (*key, name)
        if known and name in known:
            problems.append(problem(doc, k, f"signature {name!r} is the suite's own "
                                    f"({known[name].where})", "give yours another name"))
            continue
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(name)):
            problems.append(problem(doc, k, f"{name!r} is not a C identifier",
                                    "name it with letters, digits and _"))
            continue
        sig = _one(doc, k, str(name), d, problems, builtin)
        if sig is not None:
            out[str(name)] = sig
    everything = {**(known or {}), **out}
    for name, sig in out.items():
        if sig.per_token is not None:
            k = (*key, name, "per_token")
            other = everything.get(sig.per_token)
            if other is None:
                problems.append(problem(doc, k, f"{sig.per_token!r} is not a signature",
                                        f"one of {', '.join(sorted(everything))}"))
            elif other.path not in DECODE_PATHS:
                problems.append(problem(doc, k, f"{sig.per_token} is a {other.path} signature, "
                                        "not a decode one",
                                        "name the decode signature of the same matrices"))
            elif sig.path in DECODE_OF and other.path != DECODE_OF[sig.path]:
                # the fallback evidence of a prefill path is its own decode path's kernels
                problems.append(problem(
                    doc, k, f"{sig.per_token} is a {other.path} signature; a {sig.path} "
                    f"signature falls back to a {DECODE_OF[sig.path]} one",
                    f"name a {DECODE_OF[sig.path]} signature of the same matrices, or put "
                    f"{sig.per_token} on path {DECODE_OF[sig.path]}"))
        elif sig.is_prefill:
            problems.append(problem(doc, (*key, name), f"{sig.path} signature {name} names no "
                                    "per_token decode signature",
                                    "add per_token: the decode signature that serves it "
                                    "token by token where it falls back"))
    return out, problems


def validate_at(doc: YamlDoc, key: tuple[str | int, ...], data: Any, spec: Spec) -> list[Problem]:
    sub = YamlDoc(doc.path, data, {k[len(key):]: v for k, v in doc.lines.items()
                                    if k[:len(key)] == key})
    return [Problem(p.file, p.line, _join(key, p.key), p.message, p.fix)
            for p in validate(sub, spec)]


def _join(key: tuple[str | int, ...], rest: str) -> str:
    head = ""
    for k in key:
        head += f"[{k}]" if isinstance(k, int) else (f".{k}" if head else str(k))
    if not rest:
        return head
    return f"{head}{rest}" if rest.startswith("[") else f"{head}.{rest}" if head else rest


def _one(doc: YamlDoc, key: tuple[str | int, ...], name: str, d: dict[str, Any],
         problems: list[Problem], builtin: bool) -> Signature | None:
    start = len(problems)

    def bad(sub: tuple[str | int, ...], msg: str, fix: str) -> None:
        problems.append(problem(doc, (*key, *sub), msg, fix))

    dims: list[Dim] = []
    for dn, dv in d["dims"].items():
        spec = {"role": dv} if isinstance(dv, str) else dv
        if not isinstance(spec, dict) or spec.get("role") not in DIM_ROLES \
                or set(spec) - {"role", "value", "multiple"}:
            bad(("dims", dn), f"{dv!r} is not a dim", f"a role ({', '.join(DIM_ROLES)}) or "
                "{role: ROLE, value: N, multiple: N}")
            continue
        if dn in LAUNCH_NAMES:
            bad(("dims", dn), f"{dn!r} is a launch name (R, BT, block)", "rename the dim")
            continue
        value = None
        if "value" in spec:
            try:
                value = parse(spec["value"], frozenset(LAUNCH_NAMES))
            except ExprError as exc:
                bad(("dims", dn, "value"), str(exc), "a fixed size, e.g. 8")
        mult = spec.get("multiple", 1)
        if not isinstance(mult, int) or isinstance(mult, bool) or mult < 1:
            bad(("dims", dn, "multiple"), f"{mult!r} is not a positive integer", "e.g. 2")
            mult = 1
        dims.append(Dim(str(dn), spec["role"], value, mult))
    if not any(x.role == "k" for x in dims):
        bad(("dims",), "no dim with role k", "add the reduction length, e.g. K: k")
    names = frozenset([x.name for x in dims] + list(LAUNCH_NAMES))

    def ex(sub: tuple[str | int, ...], v: Any) -> Expr | None:
        try:
            return parse(v, names)
        except ExprError as exc:
            bad(sub, str(exc), _EXPR_FIX)
            return None

    args: list[Arg] = []
    seen: set[str] = set()
    for i, a in enumerate(d["args"]):
        ak: tuple[str | int, ...] = ("args", i)
        an = a["name"]
        if an in seen:
            bad((*ak, "name"), f"argument {an!r} repeats", "give every argument its own name")
        seen.add(an)
        role = a["role"]
        allowed = {"weight": {"rows"}, "weight_table": {"rows", "count"},
                   "activation": {"dtype", "shape"}, "routing_weights": {"shape"},
                   "index": {"of", "shape"}, "scalar": {"value", "dtype"},
                   "output": {"shape", "op", "weight", "x", "rows", "experts", "scale",
                              "reduce", "tiles", "slots", "x_row_div", "residual"}}[role]
        for extra in sorted(set(a) - allowed - {"name", "role"}):
            bad((*ak, extra), f"{extra!r} is not a key of a {role} argument",
                f"remove it (a {role} takes {', '.join(sorted(allowed))})")
        needs = {"weight": ("rows",), "weight_table": ("rows", "count"),
                 "activation": ("dtype", "shape"), "routing_weights": ("shape",),
                 "index": ("of", "shape"), "scalar": ("value",),
                 "output": ("shape", "op", "weight", "x")}[role]
        for n in needs:
            if n not in a:
                bad(ak, f"{role} argument {an} has no {n!r}", f"add '{n}:'")
        shape = tuple(e for j, v in enumerate(a.get("shape", []))
                      if (e := ex((*ak, "shape", j), v)) is not None)
        dtype = str(a.get("dtype", {"activation": "f32", "scalar": "i32"}.get(role, "")))
        if role == "activation" and dtype not in ("f32", "f16"):
            bad((*ak, "dtype"), f"an activation is f32 or f16, not {dtype}", "f32 or f16")
        if role == "scalar" and dtype not in ("i32", "f32"):
            bad((*ak, "dtype"), f"a scalar is i32 or f32, not {dtype}", "i32 or f32")
        op = None
        if role == "output" and "op" in a:
            rows = a.get("rows")
            rr = None
            if rows is not None:
                if not isinstance(rows, list) or len(rows) != 2:
                    bad((*ak, "rows"), f"{rows!r} is not [lo, hi]", "e.g. [0, M / 2]")
                else:
                    lo, hi = ex((*ak, "rows", 0), rows[0]), ex((*ak, "rows", 1), rows[1])
                    rr = (lo, hi) if lo is not None and hi is not None else None
            op = Op(a["op"], str(a.get("weight", "")), str(a.get("x", "")), rr,
                    a.get("experts"), a.get("scale"), a.get("reduce"), a.get("tiles"),
                    a.get("slots"),
                    ex((*ak, "x_row_div"), a["x_row_div"]) if "x_row_div" in a else None)
        if role in ("weight", "weight_table") and isinstance(a.get("rows"), list):
            bad((*ak, "rows"), "a weight's rows is one expression", "e.g. rows: M")
        residual = a.get("residual", "kernel")
        args.append(Arg(
            name=an, role=role, dtype=dtype, shape=shape,
            rows=ex((*ak, "rows"), a["rows"]) if "rows" in a and role != "output"
            and not isinstance(a["rows"], list) else None,
            count=ex((*ak, "count"), a["count"]) if "count" in a else None,
            of=str(a.get("of", "")),
            value=ex((*ak, "value"), a["value"]) if "value" in a else None,
            op=op, residual=str(residual).lower() if isinstance(residual, bool) else residual,
        ))
    by_name = {a.name: a for a in args}
    for i, a in enumerate(args):
        if a.op is None:
            continue
        _check_op(a, i, by_name, bad)
    if not any(a.role == "output" for a in args):
        bad(("args",), f"signature {name} has no output", "add an output argument")
    if not any(a.role in ("weight", "weight_table") for a in args):
        bad(("args",), f"signature {name} has no weight matrix",
            "add a weight or weight_table argument")
    grid = [ex(("grid", j), v) for j, v in enumerate(d["grid"])]
    if len(grid) != 3:
        bad(("grid",), f"grid has {len(grid)} expressions", "give three: [x, y, z], and "
            "quote an expression with a comma in it (YAML splits \"cdiv(M, R)\" otherwise)")
    braw = d["block"] if isinstance(d["block"], list) else [d["block"], 1, 1]
    block = [ex(("block", j), v) for j, v in enumerate(braw)]
    if len(block) != 3:
        bad(("block",), f"block has {len(block)} expressions", "give one or three, and "
            "quote an expression with a comma in it")
    if len(problems) > start:
        return None
    g = [e for e in grid if e is not None]
    b = [e for e in block if e is not None]
    return Signature(name, d["path"], tuple(dims), tuple(args), (g[0], g[1], g[2]),
                     (b[0], b[1], b[2]), d.get("per_token"),
                     f"{doc.path}:{doc.line(key)}", builtin)


def _check_op(a: Arg, i: int, by_name: Mapping[str, Arg], bad: Any) -> None:
    op = a.op
    assert op is not None
    ak = ("args", i)

    def ref(key: str, value: str | None, roles: Sequence[str]) -> None:
        if value is None:
            return
        other = by_name.get(value)
        if other is None or other.role not in roles:
            bad((*ak, key), f"{value!r} is not a {' or '.join(roles)} argument",
                f"name one of {', '.join(n for n, x in by_name.items() if x.role in roles)}")

    ref("weight", op.weight, ("weight", "weight_table"))
    ref("x", op.x, ("activation",))
    ref("experts", op.experts, ("index",))
    ref("scale", op.scale, ("routing_weights",))
    ref("tiles", op.tiles, ("index",))
    ref("slots", op.slots, ("index",))
    w = by_name.get(op.weight)
    table = w is not None and w.role == "weight_table"
    if op.kind == "grouped_matmul":
        for key in ("tiles", "slots", "x_row_div"):
            if getattr(op, key) is None:
                bad(ak, f"a grouped_matmul needs {key!r}", f"add '{key}:'")
        if not table:
            bad((*ak, "weight"), "a grouped_matmul reads a weight_table", "name the table")
    elif table and op.experts is None:
        bad(ak, f"{op.kind} over a weight_table needs 'experts' (the top-k index)",
            "add 'experts:'")
    elif not table and (op.experts or op.scale or op.reduce):
        bad(ak, "experts/scale/reduce apply to a weight_table", "remove them")
    if op.kind == "matmul" and table:
        bad((*ak, "op"), "a matmul reads one weight matrix", "use grouped_matmul for a table")


# ---------------------------------------------------------------------------- registry


@functools.lru_cache(maxsize=1)
def builtin() -> dict[str, Signature]:
    """The suite's signatures (``matrices/signatures.yaml``)."""
    return load_signatures(SIGNATURES_PATH, builtin=True)


def load_signatures(path: str | Path, builtin: bool = False) -> dict[str, Signature]:
    doc = load_yaml(path)
    problems = validate(doc, SIGNATURES_FILE_SPEC)
    if problems:
        raise SignatureError(problems)
    sigs, problems = parse_signatures(doc, ("signatures",), doc.data["signatures"],
                                      builtin=builtin)
    if problems:
        raise SignatureError(problems)
    return sigs


def path_of(kind: str, tree: Mapping[str, Signature] | None = None) -> str | None:
    """The policy path of kernels of signature ``kind`` (a tree's own, else the suite's)."""
    sig = (tree or {}).get(kind) or builtin().get(kind)
    return sig.path if sig is not None else None
