"""A small evaluator for the RDNA ISA pseudocode (the text AMD publishes and tinygrad's
wheel ships in ``tinygrad.runtime.autogen.amd.rdna{3,4}.str_pcode``): the independent
oracle of tests/emu/test_pcode_oracle.py.  Written for this suite; it shares no code with
hqval.emu (floats round through exact rationals here, numpy there).

One instruction, one lane: ``run(op_name, pcode_table, regs, lane=0)`` evaluates the text
with the source registers given as raw bit patterns and returns what it wrote: ``D0`` (bits
and the mask of written bits), ``SCC``, the lane bits of ``VCC``/``EXEC``/``D0.u64[laneId]``.

Values: ints are Python ints; floats are ``Flt(fmt, bits)``.  Arithmetic on two floats of
one format is IEEE with round-to-nearest-even (exact rational, then rounded); a NaN operand
gives a NaN marked ``loose`` (its payload is not specified by the text: the oracle compares
only NaN-ness there).  A construct the evaluator does not model raises ``Unmodelled`` with
the construct named; the test sorts those into reasons."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any


class Unmodelled(Exception):
    """The pseudocode uses something this evaluator does not model (named in the message)."""


# format: (significand bits incl. the implicit one, exponent bits)
FMT = {"f16": (11, 5), "f32": (24, 8), "f64": (53, 11), "bf16": (8, 8)}
WIDTH = {"f16": 16, "f32": 32, "f64": 64, "bf16": 16}


@dataclass(frozen=True)
class Flt:
    fmt: str
    bits: int
    loose: bool = False  # a NaN whose payload the text leaves open

    @property
    def width(self) -> int:
        return WIDTH[self.fmt]

    def parts(self) -> tuple[int, int, int]:
        p, e = FMT[self.fmt]
        w = self.width
        return (self.bits >> (w - 1)) & 1, (self.bits >> (p - 1)) & ((1 << e) - 1), \
            self.bits & ((1 << (p - 1)) - 1)

    @property
    def is_nan(self) -> bool:
        _, ex, man = self.parts()
        return ex == (1 << FMT[self.fmt][1]) - 1 and man != 0

    @property
    def is_inf(self) -> bool:
        _, ex, man = self.parts()
        return ex == (1 << FMT[self.fmt][1]) - 1 and man == 0

    @property
    def is_snan(self) -> bool:
        return self.is_nan and not (self.bits >> (FMT[self.fmt][0] - 2)) & 1

    @property
    def negative(self) -> bool:
        return bool(self.parts()[0])

    def value(self) -> Fraction:
        """The exact value of a finite number."""
        s, ex, man = self.parts()
        p, e = FMT[self.fmt]
        bias = (1 << (e - 1)) - 1
        if ex == 0:
            v = Fraction(man) * Fraction(2) ** (1 - bias - (p - 1))
        else:
            v = Fraction(man + (1 << (p - 1))) * Fraction(2) ** (ex - bias - (p - 1))
        return -v if s else v


def make(fmt: str, q: Fraction | float, negative: bool = False, mode: str = "rne") -> Flt:
    """Round an exact value (or +-inf/nan as a float) to ``fmt``."""
    p, e = FMT[fmt]
    w = WIDTH[fmt]
    bias = (1 << (e - 1)) - 1
    emax, emin = bias, 1 - bias
    sign_bit = 1 << (w - 1)
    if isinstance(q, float):
        if math.isnan(q):
            return Flt(fmt, ((1 << e) - 1) << (p - 1) | 1 << (p - 2), loose=True)
        if math.isinf(q):
            return Flt(fmt, (sign_bit if q < 0 else 0) | ((1 << e) - 1) << (p - 1))
        if q == 0:
            return Flt(fmt, sign_bit if math.copysign(1.0, q) < 0 or negative else 0)
        q = Fraction(q)
    if q == 0:
        return Flt(fmt, sign_bit if negative else 0)
    neg = q < 0
    a = -q if neg else q
    ex = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** ex > a:
        ex -= 1
    ex = max(ex, emin)
    m = a * Fraction(2) ** (p - 1 - ex)
    fl = m.numerator // m.denominator
    rem = m - fl
    if mode == "rne":
        if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl & 1):
            fl += 1
    elif mode != "rtz":
        raise Unmodelled(f"rounding mode {mode}")
    if fl >> p:
        fl >>= 1
        ex += 1
    sb = sign_bit if neg else 0
    if ex > emax:
        if mode == "rtz":
            return Flt(fmt, sb | ((1 << e) - 2) << (p - 1) | ((1 << (p - 1)) - 1))
        return Flt(fmt, sb | ((1 << e) - 1) << (p - 1))
    if fl < (1 << (p - 1)):
        return Flt(fmt, sb | fl)  # denormal (or zero)
    return Flt(fmt, sb | (ex + bias) << (p - 1) | (fl - (1 << (p - 1))))


def convert(x: Flt, fmt: str, mode: str = "rne") -> Flt:
    """Numeric conversion; a NaN keeps its sign, quiet bit and top payload bits."""
    if x.fmt == fmt:
        return x
    if x.is_nan:
        ps, _ = FMT[x.fmt]
        pd, ed = FMT[fmt]
        man = x.bits & ((1 << (ps - 1)) - 1)
        man = man << (pd - ps) if pd >= ps else man >> (ps - pd)
        out = Flt(fmt, (x.negative << (WIDTH[fmt] - 1)) | ((1 << ed) - 1) << (pd - 1) | man,
                  x.loose)
        if not out.is_nan:  # payload shifted out: keep it a NaN
            out = Flt(fmt, out.bits | 1, x.loose)
        return out
    if x.is_inf:
        return make(fmt, -math.inf if x.negative else math.inf)
    return make(fmt, x.value(), x.negative, mode)


def quiet(x: Flt) -> Flt:
    if not x.is_nan:
        return x
    return Flt(x.fmt, x.bits | 1 << (FMT[x.fmt][0] - 2), x.loose)


def _num(x: Any) -> Fraction | float:
    """A float-like value as an exact Fraction (finite) or float (inf, nan)."""
    if isinstance(x, Flt):
        if x.is_nan:
            return math.nan
        if x.is_inf:
            return -math.inf if x.negative else math.inf
        return x.value()
    if isinstance(x, bool):
        return Fraction(int(x))
    if isinstance(x, int):
        return Fraction(x)
    if isinstance(x, Fraction):
        return x
    if isinstance(x, float):
        return x if not math.isfinite(x) else Fraction(x)
    raise Unmodelled(f"number from {type(x).__name__}")


def _arith(op: str, a: Any, b: Any) -> Any:
    fa, fb = isinstance(a, Flt), isinstance(b, Flt)
    if not fa and not fb:
        if isinstance(a, (float, Fraction)) or isinstance(b, (float, Fraction)):
            x, y = _num(a), _num(b)
            return _exact(op, x, y)
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                "/": lambda: _idiv(a, b), "%": lambda: a % b if b else 0}[op]()
    fmt = a.fmt if fa else b.fmt
    if fa and fb and a.fmt != b.fmt:
        raise Unmodelled(f"{op} of {a.fmt} and {b.fmt}")
    if (fa and a.is_nan) or (fb and b.is_nan):
        return make(fmt, math.nan)
    x, y = _num(a), _num(b)
    r = _exact(op, x, y)
    if isinstance(r, float):
        sa = a.negative if fa else x < 0
        sb = b.negative if fb else y < 0
        if op == "/" and math.isinf(r) and y == 0:
            r = -math.inf if sa != sb else math.inf
        if op == "/" and r == 0:
            return make(fmt, Fraction(0), sa != sb)
        return make(fmt, r)
    if r == 0:
        # IEEE signs of zero results (round-to-nearest)
        sa = a.negative if fa else x < 0
        sb = b.negative if fb else y < 0
        if op == "+":
            neg = sa and sb if x == 0 and y == 0 else False
        elif op == "-":
            neg = sa and not sb if x == 0 and y == 0 else False
        elif op in "*/":
            neg = sa != sb
        else:
            neg = False
        return make(fmt, Fraction(0), neg)
    return make(fmt, r)


def _idiv(a: int, b: int) -> int:
    if b == 0:
        raise Unmodelled("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _exact(op: str, x: Fraction | float, y: Fraction | float) -> Fraction | float:
    if isinstance(x, float) or isinstance(y, float):
        # an infinity (or NaN) is involved: only signs and zeros of the finite side matter
        def small(v: Fraction | float) -> float:
            if isinstance(v, float):
                return v
            return 0.0 if v == 0 else (1.0 if v > 0 else -1.0)
        fx, fy = small(x), small(y)
        if math.isnan(fx) or math.isnan(fy):
            return math.nan
        if op == "+":
            return math.nan if math.isinf(fx) and math.isinf(fy) and fx != fy else \
                (fx if math.isinf(fx) else fy)
        if op == "-":
            return math.nan if math.isinf(fx) and math.isinf(fy) and fx == fy else \
                (fx if math.isinf(fx) else -fy)
        if op == "*":
            if fx == 0 or fy == 0:
                return math.nan
            return math.copysign(math.inf, fx * fy)
        if op == "/":
            if math.isinf(fx) and math.isinf(fy):
                return math.nan
            if math.isinf(fx):
                return math.copysign(math.inf, fx * (fy if fy != 0 else 1.0))
            return 0.0  # finite / inf (sign: the caller's zero rule)
        raise Unmodelled(f"{op} with an infinity")
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        if y == 0:
            return math.nan if x == 0 else (math.inf if x > 0 else -math.inf)
        return x / y
    raise Unmodelled(f"operator {op} on floats")


# ------------------------------------------------------------------------------ parsing

_TOKEN = re.compile(r"""
    (?P<ws>\s+)|
    (?P<comment>//[^\n]*)|
    (?P<typed>\d+'(?:[FIUB]\(|-?0x[0-9a-fA-F]+|-?\d+\.\d+|-?\d+[UI]?|[FIUB](?=[\[;\s])))|
    (?P<num>0x[0-9a-fA-F]+(?:ULL|LL|U|L)?|\d+\.\d+(?:F)?|\d+(?:ULL|LL|U|L|F)?)|
    (?P<id>[A-Za-z_][A-Za-z0-9_]*)|
    (?P<op>\*\*|<<|>>|<=|>=|==|!=|<>|&&|\|\||\+=|-=|[-+*/%<>=!~&|^?:;,.()\[\]{}])
""", re.VERBOSE)


def tokenize(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise Unmodelled(f"token at {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.lastgroup in ("ws", "comment"):
            continue
        out.append(m.group())
    return out


_TYPES = re.compile(r"^(?P<k>[fiub]|bf)(?P<w>\d+)$")


@dataclass
class Node:
    kind: str
    args: list[Any] = field(default_factory=list)


class Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.t = tokens
        self.i = 0

    def peek(self, k: int = 0) -> str:
        return self.t[self.i + k] if self.i + k < len(self.t) else ""

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if want is not None and tok != want:
            raise Unmodelled(f"expected {want!r}, got {tok!r} near token {self.i}")
        self.i += 1
        return tok

    # statements
    def block(self, stop: tuple[str, ...]) -> list[Node]:
        body = []
        while self.peek() and self.peek() not in stop:
            if self.peek() == ";":
                self.take()
                continue
            body.append(self.stmt())
        return body

    def stmt(self) -> Node:
        tok = self.peek()
        if tok == "if":
            self.take()
            arms = []
            cond = self.expr()
            self.take("then")
            arms.append((cond, self.block(("elsif", "else", "endif"))))
            other: list[Node] = []
            while self.peek() == "elsif":
                self.take()
                c = self.expr()
                self.take("then")
                arms.append((c, self.block(("elsif", "else", "endif"))))
            if self.peek() == "else":
                self.take()
                other = self.block(("endif",))
            self.take("endif")
            return Node("if", [arms, other])
        if tok == "for":
            self.take()
            var = self.take()
            self.take("in")
            lo = self.expr()
            self.take(":")
            hi = self.expr()
            self.take("do")
            body = self.block(("endfor",))
            self.take("endfor")
            return Node("for", [var, lo, hi, body])
        if tok == "declare":
            self.take()
            name = self.take()
            self.take(":")
            typ = self.take()
            size = 1
            if self.peek() == "[":
                self.take()
                size = int(self.take().rstrip("UL"), 0)
                self.take("]")
            return Node("declare", [name, typ, size])
        if tok == "return":
            self.take()
            return Node("return", [self.expr()])
        if tok == "break":
            self.take()
            return Node("break", [])
        target = self.postfix()
        op = self.take()
        if op not in ("=", "+=", "-="):
            raise Unmodelled(f"statement operator {op!r}")
        if self.peek() == "lambda":
            return self.lambda_def(target)
        value = self.expr()
        return Node("assign", [target, op, value])

    def lambda_def(self, target: Node) -> Node:
        self.take("lambda")
        self.take("(")
        params = []
        while self.peek() != ")":
            params.append(self.take())
            if self.peek() == ",":
                self.take()
        self.take(")")
        self.take("(")
        start = self.i
        # a body is an expression or a statement list with return
        depth, j = 1, self.i
        while depth:
            if self.t[j].endswith("("):  # "(" and casts such as "64'F("
                depth += 1
            elif self.t[j] == ")":
                depth -= 1
            j += 1
        sub = Parser(self.t[start:j - 1])
        try:
            body: Any = ("expr", sub.expr())
            if sub.peek():
                raise Unmodelled("statements")
        except Unmodelled:
            sub = Parser(self.t[start:j - 1])
            body = ("stmts", sub.block(()))
        self.i = j
        return Node("lambda", [target.args[0], params, body])

    # expressions (precedence climbing)
    _BIN: tuple[tuple[str, ...], ...] = (
        ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!=", "<>"), ("<", ">", "<=", ">="),
        ("<<", ">>"), ("+", "-"), ("*", "/", "%"), ("**",))

    def expr(self) -> Node:
        c = self.binary(0)
        if self.peek() == "?":
            self.take()
            a = self.expr()
            self.take(":")
            b = self.expr()
            return Node("cond", [c, a, b])
        return c

    def binary(self, level: int) -> Node:
        if level == len(self._BIN):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self._BIN[level]:
            op = self.take()
            right = self.binary(level + 1)
            left = Node("bin", [op, left, right])
        return left

    def unary(self) -> Node:
        tok = self.peek()
        if tok in ("-", "!", "~", "+"):
            self.take()
            return Node("un", [tok, self.unary()])
        return self.postfix()

    def postfix(self) -> Node:
        node = self.primary()
        while True:
            tok = self.peek()
            if tok == ".":
                self.take()
                node = Node("type", [node, self.take()])
            elif tok == "[":
                self.take()
                a = self.expr()
                if self.peek() == ":":
                    self.take()
                    b = self.expr()
                    self.take("]")
                    node = Node("slice", [node, a, b])
                else:
                    self.take("]")
                    node = Node("index", [node, a])
            elif tok == "(" and node.kind == "name":
                self.take()
                args = []
                while self.peek() != ")":
                    args.append(self.expr())
                    if self.peek() == ",":
                        self.take()
                self.take(")")
                node = Node("call", [node.args[0], args])
            else:
                return node

    def primary(self) -> Node:
        tok = self.take()
        if tok == "(":
            e = self.expr()
            self.take(")")
            return e
        if tok == "{":
            parts = []
            while self.peek() != "}":
                parts.append(self.expr())
                if self.peek() == ",":
                    self.take()
            self.take("}")
            return Node("concat", parts)
        if "'" in tok:
            width, rest = tok.split("'", 1)
            if rest.endswith("("):
                e = self.expr()
                self.take(")")
                return Node("cast", [int(width), rest[0], e])
            return Node("typedlit", [int(width), rest])
        if re.match(r"^\d", tok):
            return Node("num", [tok])
        if re.match(r"^[A-Za-z_]", tok):
            return Node("name", [tok])
        raise Unmodelled(f"expression token {tok!r}")


def parse(text: str) -> list[Node]:
    p = Parser(tokenize(text))
    body = p.block(())
    if p.peek():
        raise Unmodelled(f"trailing {p.peek()!r}")
    return body


# ------------------------------------------------------------------------------ evaluation

class _Break(Exception):
    pass


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


def _view(bits: int, typ: str) -> Any:
    m = _TYPES.match(typ)
    if not m:
        raise Unmodelled(f"type .{typ}")
    k, w = m.group("k"), int(m.group("w"))
    bits &= (1 << w) - 1
    if k == "f":
        if w not in (16, 32, 64):
            raise Unmodelled(f"float width {w}")
        return Flt(f"f{w}", bits)
    if k == "bf":
        return Flt("bf16", bits)
    if k == "i":
        return bits - (1 << w) if bits >> (w - 1) & 1 else bits
    return bits


def _bits(v: Any, width: int | None = None) -> int:
    if isinstance(v, Flt):
        return v.bits
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v & ((1 << width) - 1) if width else v
    raise Unmodelled(f"bits of {type(v).__name__}")


def _type_width(typ: str) -> int:
    m = _TYPES.match(typ)
    if not m:
        raise Unmodelled(f"type .{typ}")
    return int(m.group("w"))


def _truthy(v: Any) -> bool:
    if isinstance(v, Flt):
        return v.bits & ((1 << (v.width - 1)) - 1) != 0
    return bool(v)


def _cmp(op: str, a: Any, b: Any) -> bool:
    if isinstance(a, Flt) or isinstance(b, Flt) or isinstance(a, float) or isinstance(b, float):
        x, y = _num(a), _num(b)
        if (isinstance(x, float) and math.isnan(x)) or (isinstance(y, float) and math.isnan(y)):
            return op == "!="  # "<>" is IEEE less-or-greater: false for NaN
        return bool({"==": x == y, "!=": x != y, "<>": x != y, "<": x < y, ">": x > y,
                     "<=": x <= y, ">=": x >= y}[op])
    return bool({"==": a == b, "!=": a != b, "<>": a != b, "<": a < b, ">": a > b,
                 "<=": a <= b, ">=": a >= b}[op])


@dataclass
class Result:
    d0: int = 0
    d0_mask: int = 0  # which bits of D0 the text wrote
    # (lowest bit, width, format) of D0 fields holding a NaN whose payload the text leaves
    # open (an arithmetic result with a NaN operand)
    loose: list[tuple[int, int, str]] = field(default_factory=list)
    scc: int | None = None
    vcc: int | None = None  # this lane's bit
    exec_: int | None = None
    d0_lane: int | None = None  # VOPC: D0.u64[laneId]


class Evaluator:
    def __init__(self, table: dict[str, str], regs: dict[str, int], lane: int = 0,
                 ieee: bool = True, depth: int = 0) -> None:
        self.table = table
        self.env: dict[str, Any] = dict(regs)
        self.env.setdefault("D0", 0)
        self.lane = lane
        self.ieee = ieee
        self.depth = depth
        self.res = Result()
        self.round_mode = "rne"
        self.lambdas: dict[str, tuple[list[str], Any]] = {}
        self.loose_vars: dict[str, list[tuple[int, int, str]]] = {}
        self._src_regions: list[tuple[int, int, str]] = []

    # -- statements
    def run(self, body: list[Node]) -> Result:
        self.exec_block(body)
        return self.res

    def exec_block(self, body: list[Node]) -> None:
        for st in body:
            self.exec_stmt(st)

    def exec_stmt(self, st: Node) -> None:
        k = st.kind
        if k == "if":
            arms, other = st.args
            for cond, block in arms:
                if _truthy(self.eval(cond)):
                    self.exec_block(block)
                    return
            self.exec_block(other)
        elif k == "for":
            var, lo, hi, body = st.args
            for i in range(int(self.eval(lo)), int(self.eval(hi)) + 1):
                self.env[var] = i
                try:
                    self.exec_block(body)
                except _Break:
                    break
        elif k == "declare":
            name, _typ, size = st.args
            if name == "S":
                self.env["S"] = [self.env.get(f"S{i}", 0) for i in range(3)]
            else:
                self.env[name] = [0] * size if size > 1 else 0
        elif k == "return":
            raise _Return(self.eval(st.args[0]))
        elif k == "break":
            raise _Break
        elif k == "lambda":
            name, params, body = st.args
            self.lambdas[name] = (params, body)
        elif k == "assign":
            target, op, value = st.args
            src = value.args[0] if value.kind == "type" else value
            self._src_regions = list(self.loose_vars.get(src.args[0], [])) \
                if src.kind == "name" else []
            v = self.eval(value)
            if op != "=":
                v = _arith(op[0], self.eval(target), v)
            self.store(target, v)
        else:
            raise Unmodelled(f"statement {k}")

    def store(self, target: Node, v: Any) -> None:
        k = target.kind
        if k == "name":
            name = target.args[0]
            if name == "ROUND_MODE":
                self.round_mode = v
                return
            if name == "SCC":
                self.res.scc = int(_truthy(v))
                self.env["SCC"] = self.res.scc
                return
            if name == "D0":
                self._write_d0(_bits(v, 64) if not isinstance(v, Flt) else v.bits,
                               (1 << 64) - 1 if not isinstance(v, Flt) else (1 << v.width) - 1,
                               v)
                return
            self._track(name, (1 << 64) - 1, v)
            self.env[name] = v
            return
        if k == "type" and target.args[0].kind == "name" and target.args[0].args[0] == "TRAPSTS":
            return  # trap status flags (TRAPSTS.INVALID = 1): not a result
        if k == "type":
            base, typ = target.args
            w = _type_width(typ)
            val = self._coerce(v, typ)
            if base.kind == "name":
                name = base.args[0]
                if name == "D0":
                    self._write_d0(_bits(val, w), (1 << w) - 1, val)
                    return
                if name == "SCC":
                    self.res.scc = int(_truthy(val))
                    self.env["SCC"] = self.res.scc
                    return
                if name in ("VCC", "EXEC"):
                    raise Unmodelled(f"whole-mask write to {name}")
                self._track(name, (1 << w) - 1, val)
                self.env[name] = val
                return
            if base.kind == "slice":
                self.store(base, val)
                return
            if base.kind == "index":
                self.store(base, val)
                return
            raise Unmodelled("typed store target")
        if k == "slice":
            base, hi, lo = target.args
            hi, lo = int(self.eval(hi)), int(self.eval(lo))
            if hi < lo:
                raise Unmodelled("reversed slice store")
            w = hi - lo + 1
            mask = ((1 << w) - 1) << lo
            bits = (_bits(v) & ((1 << w) - 1)) << lo
            if base.kind == "type":
                base = base.args[0]
            if base.kind != "name":
                raise Unmodelled("slice store target")
            name = base.args[0]
            if name == "D0":
                self._write_d0(bits, mask, v if isinstance(v, Flt) else None)
                return
            cur = self.env.get(name, 0)
            cur = _bits(cur, 64) if not isinstance(cur, list) else 0
            self._track(name, mask, v)
            self.env[name] = (cur & ~mask) | bits
            return
        if k == "index":
            base, idx = target.args
            i = int(self.eval(idx))
            lane_bit = idx.kind == "name" and idx.args[0] == "laneId"
            if base.kind == "type" and base.args[0].kind == "name" and not lane_bit:
                name = base.args[0].args[0]
                bit = 1 << i
                if name == "D0":
                    self._write_d0(bit if _truthy(v) else 0, bit, None)
                    return
                cur = _bits(self.env.get(name, 0))
                self.env[name] = (cur | bit) if _truthy(v) else (cur & ~bit)
                return
            if base.kind == "type" and base.args[0].kind == "name":
                name = base.args[0].args[0]
                bit = int(_truthy(v))
                if name == "VCC":
                    self.res.vcc = bit
                elif name == "EXEC":
                    self.res.exec_ = bit
                elif name == "D0":
                    self.res.d0_lane = bit
                else:
                    raise Unmodelled(f"bit store to {name}")
                return
            if base.kind == "name" and isinstance(self.env.get(base.args[0]), list):
                self.env[base.args[0]][i] = v
                return
            raise Unmodelled("index store")
        if k == "concat":
            raise Unmodelled("multi-destination { D1, D0 } store")
        raise Unmodelled(f"store to {k}")

    def _write_d0(self, bits: int, mask: int, val: Any) -> None:
        self.res.d0 = (self.res.d0 & ~mask) | (bits & mask)
        self.res.d0_mask |= mask
        self.env["D0"] = self.res.d0
        self.res.loose = self._regions(self.res.loose, mask, val)

    def _regions(self, old: list[tuple[int, int, str]], mask: int, val: Any
                 ) -> list[tuple[int, int, str]]:
        lo = (mask & -mask).bit_length() - 1
        keep = [r for r in old if not ((((1 << r[1]) - 1) << r[0]) & mask)]
        if isinstance(val, Flt) and val.is_nan and val.loose:
            keep.append((lo, val.width, val.fmt))
        keep += [(lo + r[0], r[1], r[2]) for r in self._src_regions
                 if (((1 << r[1]) - 1) << (lo + r[0])) & mask]
        return keep

    def _track(self, name: str, mask: int, val: Any) -> None:
        self.loose_vars[name] = self._regions(self.loose_vars.get(name, []), mask, val)

    def _coerce(self, v: Any, typ: str) -> Any:
        m = _TYPES.match(typ)
        if not m:
            raise Unmodelled(f"type .{typ}")
        k, w = m.group("k"), int(m.group("w"))
        if k in ("f", "bf"):
            fmt = "bf16" if k == "bf" else f"f{w}"
            if isinstance(v, Flt):
                return v if v.fmt == fmt else convert(v, fmt)
            if isinstance(v, (float, Fraction)):
                return make(fmt, v)
            return Flt(fmt, _bits(v) & ((1 << w) - 1))
        if isinstance(v, Flt):
            return v.bits & ((1 << w) - 1)
        return _bits(v) & ((1 << w) - 1)

    # -- expressions
    def eval(self, n: Node) -> Any:
        k = n.kind
        if k == "num":
            tok = n.args[0]
            t = tok.rstrip("ULF") if not tok.startswith("0x") else tok.rstrip("UL")
            if "." in t:
                return Flt("f32", make("f32", Fraction(t)).bits) if tok.endswith("F") \
                    else float(t)
            return int(t, 0)
        if k == "typedlit":
            w, rest = n.args
            if "." in rest:
                fmt = {16: "f16", 32: "f32", 64: "f64"}[w]
                return make(fmt, Fraction(rest))
            return int(rest.rstrip("UI"), 0) & ((1 << w) - 1)
        if k == "name":
            return self.name(n.args[0])
        if k == "type":
            base, typ = n.args
            if base.kind == "name" and base.args[0] in ("INF",):
                return make(f"f{_type_width(typ)}", math.inf)
            v = self.eval(base)
            if base.kind == "name" and base.args[0] in ("WAVE_MODE",):
                return v
            if isinstance(v, list):
                raise Unmodelled("type of an array")
            if isinstance(v, Flt) and v.fmt == ("bf16" if typ == "bf16" else f"f{typ[1:]}"):
                return v
            return _view(_bits(v) if not isinstance(v, Flt) else v.bits, typ)
        if k == "slice":
            v = self.eval(n.args[0])
            hi, lo = int(self.eval(n.args[1])), int(self.eval(n.args[2]))
            b = _bits(v) if not isinstance(v, Flt) else v.bits
            if hi < lo:  # reversed: bit i of the result is bit (hi + lo - i) ...
                w = lo - hi + 1
                x = (b >> hi) & ((1 << w) - 1)
                return int(f"{x:0{w}b}"[::-1], 2)
            return (b >> lo) & ((1 << (hi - lo + 1)) - 1)
        if k == "index":
            base = self.eval(n.args[0])
            i = int(self.eval(n.args[1]))
            if isinstance(base, list):
                return base[i]
            return (_bits(base) >> i) & 1
        if k == "concat":
            out = 0
            for part in n.args:
                w = self._static_width(part)
                out = (out << w) | (_bits(self.eval(part)) & ((1 << w) - 1))
            return out
        if k == "cast":
            w, kind, e = n.args
            return self.cast(w, kind, self.eval(e))
        if k == "cond":
            return self.eval(n.args[1]) if _truthy(self.eval(n.args[0])) else self.eval(n.args[2])
        if k == "un":
            op, e = n.args
            v = self.eval(e)
            if op == "-":
                if isinstance(v, Flt):
                    return Flt(v.fmt, v.bits ^ (1 << (v.width - 1)), v.loose)
                return -v
            if op == "+":
                return v
            if op == "!":
                return int(not _truthy(v))
            return ~_bits(v)
        if k == "bin":
            op, a, b = n.args
            if op == "&&":
                return int(_truthy(self.eval(a)) and _truthy(self.eval(b)))
            if op == "||":
                return int(_truthy(self.eval(a)) or _truthy(self.eval(b)))
            x, y = self.eval(a), self.eval(b)
            if op in ("==", "!=", "<>", "<", ">", "<=", ">="):
                return int(_cmp(op, x, y))
            if op in ("+", "-", "*", "/", "%"):
                return _arith(op, x, y)
            if op == "**":
                two = (isinstance(x, Flt) and not x.is_nan and not x.is_inf and x.value() == 2) \
                    or (isinstance(x, float) and x == 2.0)
                if two and isinstance(y, int):
                    return Fraction(2) ** max(min(y, 4000), -4000)
                raise Unmodelled("power other than 2.0 ** int")
            xi, yi = _bits(x), _bits(y)
            if op == "<<":
                return xi << yi if yi < 200 else 0
            if op == ">>":
                return xi >> yi if yi < 200 else (0 if xi >= 0 else -1)
            return {"&": xi & yi, "|": xi | yi, "^": xi ^ yi}[op]
        if k == "call":
            return self.call(n.args[0], [self.eval(a) for a in n.args[1]] if n.args[0] not in
                             self.lambdas else n.args[1])
        raise Unmodelled(f"expression {k}")

    def _static_width(self, n: Node) -> int:
        if n.kind == "type":
            return _type_width(n.args[1])
        if n.kind == "slice":
            hi, lo = int(self.eval(n.args[1])), int(self.eval(n.args[2]))
            return abs(hi - lo) + 1
        if n.kind in ("typedlit", "cast"):
            return int(n.args[0])
        raise Unmodelled("width of a concatenated part")

    def name(self, nm: str) -> Any:
        if nm in self.env:
            return self.env[nm]
        consts = {"laneId": self.lane, "WAVE32": 1, "WAVE64": 0, "ROUND_TOWARD_ZERO": "rtz",
                  "ROUND_NEAREST_EVEN": "rne", "PI": None}
        if nm in consts and consts[nm] is not None:
            return consts[nm]
        if nm == "INF":
            return math.inf
        if nm == "WAVE_MODE":
            return int(self.ieee)
        if nm == "ROUND_MODE":
            return self.round_mode
        if nm in ("VCC", "EXEC"):
            return self.env.get(nm, 0)
        raise Unmodelled(f"name {nm}")

    def cast(self, w: int, kind: str, v: Any) -> Any:
        if kind == "F":
            fmt = {16: "f16", 32: "f32", 64: "f64"}.get(w)
            if fmt is None:
                raise Unmodelled(f"{w}'F")
            if isinstance(v, Flt):
                return convert(v, fmt)
            if isinstance(v, (float, Fraction)):
                return make(fmt, v)
            return Flt(fmt, _bits(v) & ((1 << WIDTH[fmt]) - 1))  # 32'F(0xffc00000): bits
        if isinstance(v, Flt):
            raise Unmodelled(f"{w}'{kind} of a float")
        if isinstance(v, (float, Fraction)):
            raise Unmodelled(f"{w}'{kind} of an untyped float")
        b = v & ((1 << w) - 1)
        if kind == "I":
            return b - (1 << w) if b >> (w - 1) & 1 else b
        return b

    def call(self, fn: str, args: list[Any]) -> Any:
        if fn in self.lambdas:
            params, body = self.lambdas[fn]
            vals = [self.eval(a) for a in args]
            saved = dict(self.env)
            self.env.update(zip(params, vals, strict=True))
            try:
                if body[0] == "expr":
                    return self.eval(body[1])
                try:
                    self.exec_block(body[1])
                except _Return as r:
                    return r.value
                raise Unmodelled(f"lambda {fn} without return")
            finally:
                self.env = saved
        if re.match(r"^[vs]_", fn):
            return self.nested(fn, args)
        f = _FUNCS.get(fn)
        if f is None:
            raise Unmodelled(f"function {fn}")
        if fn in ("f32_to_f16", "f32_to_bf16"):
            return f(*args, mode=self.round_mode)
        return f(*args)

    def nested(self, fn: str, args: list[Any]) -> Any:
        up = fn.upper()
        text = next((self.table[n] for n in (up, up + "_E32", up + "_E64") if n in self.table),
                    None)
        if text is None or self.depth > 3:
            raise Unmodelled(f"nested op {fn}")
        regs = {f"S{i}": (a.bits if isinstance(a, Flt) else _bits(a, 64))
                for i, a in enumerate(args)}
        sub = Evaluator(self.table, regs, self.lane, self.ieee, self.depth + 1)
        res = sub.run(parse(text))
        fmt = next((t for t in ("f16", "f32", "f64") if f"D0.{t}" in text), None)
        if fmt is None:
            m = re.search(r"D0\.([iu]\d+)", text)
            if not m:
                raise Unmodelled(f"result type of nested {fn}")
            return _view(res.d0, m.group(1))
        loose = any(r[0] == 0 and r[2] == fmt for r in res.loose)
        return Flt(fmt, res.d0 & ((1 << WIDTH[fmt]) - 1), loose)


# ------------------------------------------------------------------------------ functions

def _need_flt(x: Any) -> Flt:
    if not isinstance(x, Flt):
        raise Unmodelled("float function of a non-float")
    return x


def _f2i(x: Any, lo: int, hi: int) -> int:
    x = _need_flt(x)
    if x.is_nan:
        return 0
    if x.is_inf:
        return lo if x.negative else hi
    v = x.value()
    t = math.trunc(v)
    return max(lo, min(hi, t))


def _exponent(x: Any) -> int:
    return _need_flt(x).parts()[1]


def _mantissa(x: Any) -> Flt:
    x = _need_flt(x)
    if x.is_nan or x.is_inf or x.value() == 0:
        return x
    v = abs(x.value())
    e = v.numerator.bit_length() - v.denominator.bit_length()
    while Fraction(2) ** e > v:
        e -= 1
    while Fraction(2) ** (e + 1) <= v:
        e += 1
    m = v / Fraction(2) ** (e + 1)
    return make(x.fmt, -m if x.negative else m)


def _fma(a: Any, b: Any, c: Any) -> Flt:
    a, b, c = _need_flt(a), _need_flt(b), _need_flt(c)
    fmt = a.fmt
    if a.is_nan or b.is_nan or c.is_nan:
        return make(fmt, math.nan)
    x, y, z = _num(a), _num(b), _num(c)
    p = _exact("*", x, y) if isinstance(x, float) or isinstance(y, float) else x * y
    if isinstance(p, float) and math.isnan(p):
        return make(fmt, math.nan)
    r = _exact("+", p, z) if isinstance(p, float) or isinstance(z, float) else p + z
    if isinstance(r, float):
        return make(fmt, r)
    if r == 0:
        pn = (a.negative != b.negative)
        if (p == 0 if not isinstance(p, float) else False) and z == 0:
            return make(fmt, Fraction(0), pn and c.negative)
        return make(fmt, Fraction(0), False)
    return make(fmt, r)


def _floorlike(f: Any) -> Any:
    def g(x: Any) -> Flt:
        x = _need_flt(x)
        if x.is_nan:
            return make(x.fmt, math.nan) if x.is_snan else x
        if x.is_inf:
            return x
        v = x.value()
        r = Fraction(f(v))
        return make(x.fmt, r, x.negative)
    return g


def _sqrt(x: Any) -> Flt:
    x = _need_flt(x)
    if x.is_nan:
        return make(x.fmt, math.nan)
    if x.negative and x.bits & ((1 << (x.width - 1)) - 1) != 0:
        return make(x.fmt, math.nan)
    if x.is_inf or x.value() == 0:
        return x
    v = x.value()
    # correctly rounded: integer square root with enough guard bits
    p = FMT[x.fmt][0] + 4
    e = (v.numerator.bit_length() - v.denominator.bit_length()) // 2
    scale = Fraction(2) ** (2 * (p - e))
    n = v * scale
    root = math.isqrt(n.numerator // n.denominator)
    exact = Fraction(root * root) == n
    r = Fraction(root) / Fraction(2) ** (p - e)
    if not exact:
        r += Fraction(1, 2) / Fraction(2) ** (p - e)  # sticky: strictly between
    return make(x.fmt, r)


def _ldexp(x: Any, n: int) -> Flt:
    x = _need_flt(x)
    if x.is_nan or x.is_inf or x.value() == 0:
        return quiet(x) if x.is_nan else x
    return make(x.fmt, x.value() * Fraction(2) ** max(min(n, 4000), -4000))


def _is_even(x: Any) -> int:
    if isinstance(x, Flt):
        if x.is_nan or x.is_inf:
            return 0
        return int(math.floor(x.value()) % 2 == 0)
    return int(x % 2 == 0)


def _int_to(fmt: str) -> Any:
    return lambda v: make(fmt, Fraction(int(v)))


def _to_fmt(fmt: str) -> Any:
    def conv(x: Any, mode: str = "rne") -> Flt:
        return quiet(convert(_need_flt(x), fmt, mode))
    return conv


_FUNCS: dict[str, Any] = {
    "isNAN": lambda x: int(_need_flt(x).is_nan),
    "isSignalNAN": lambda x: int(_need_flt(x).is_snan),
    "isQuietNAN": lambda x: int(_need_flt(x).is_nan and not _need_flt(x).is_snan),
    "cvtToQuietNAN": lambda x: quiet(_need_flt(x)),
    "sign": lambda x: int(_need_flt(x).negative),
    "abs": lambda x: Flt(x.fmt, x.bits & ((1 << (x.width - 1)) - 1), x.loose)
    if isinstance(x, Flt) else abs(x),
    "exponent": _exponent,
    "mantissa": _mantissa,
    "fma": _fma,
    "floor": _floorlike(math.floor),
    "trunc": _floorlike(math.trunc),
    "sqrt": _sqrt,
    "ldexp": _ldexp,
    "isEven": lambda x: _is_even(x),
    "signext": lambda x: x,
    "signext_from_bit": lambda x, w: 0 if w == 0 else
    ((x & ((1 << w) - 1)) ^ (1 << (w - 1))) - (1 << (w - 1)),
    "fract": lambda x: _arith("-", _need_flt(x), _floorlike(math.floor)(x)),
    "f16_to_f32": _to_fmt("f32"),
    "f32_to_f16": _to_fmt("f16"),
    "f32_to_f64": _to_fmt("f64"),
    "f64_to_f32": _to_fmt("f32"),
    "bf16_to_f32": _to_fmt("f32"),
    "u32_to_f32": _int_to("f32"),
    "i32_to_f32": _int_to("f32"),
    "i32_to_f64": _int_to("f64"),
    "u32_to_f64": _int_to("f64"),
    "u16_to_f16": _int_to("f16"),
    "i16_to_f16": _int_to("f16"),
    "f32_to_i32": lambda x: _f2i(x, -(2**31), 2**31 - 1),
    "f32_to_u32": lambda x: _f2i(x, 0, 2**32 - 1),
    "f64_to_i32": lambda x: _f2i(x, -(2**31), 2**31 - 1),
    "f64_to_u32": lambda x: _f2i(x, 0, 2**32 - 1),
    "f16_to_i16": lambda x: _f2i(x, -(2**15), 2**15 - 1),
    "f16_to_u16": lambda x: _f2i(x, 0, 2**16 - 1),
    "u8_to_u32": lambda x: x & 0xFF,
    "u4_to_u32": lambda x: x & 0xF,
    "u32_to_u16": lambda x: x & 0xFFFF,
    "i32_to_i16": lambda x: ((x & 0xFFFF) ^ 0x8000) - 0x8000,
}


def run(table: dict[str, str], name: str, regs: dict[str, int], lane: int = 0,
        ieee: bool = True) -> Result:
    """Evaluate op ``name`` of ``table`` (op name -> pseudocode) for one lane."""
    return Evaluator(table, regs, lane, ieee).run(parse(table[name]))
