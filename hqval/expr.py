"""A small, safe arithmetic expression language for kernel signatures (grid, block, shapes,
scalar values): integers, names, ``+ - * / // %``, parentheses and the functions
``cdiv(a, b)`` (ceiling division), ``ceil(x)``, ``floor(x)``, ``min(a, ...)``,
``max(a, ...)``.  No ``eval``: the text is tokenized and parsed by recursive descent into
a tree that is evaluated with exact fractions, so ``ceil(M / R)`` is exact and ``/`` never
rounds behind the reader's back.  A value used as a count (a grid dimension, a shape) must
come out an integer; ``Expr.int`` says which expression did not.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeAlias

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>//|[-+*/%(),]))")
FUNCTIONS = {"cdiv": 2, "ceil": 1, "floor": 1, "min": -1, "max": -1}
# Bounds that keep an evaluated expression a plausible launch dimension or shape (and a
# hostile one from building huge integers).
MAX_TEXT = 400
MAX_VALUE = 1 << 40


class ExprError(ValueError):
    """An expression that does not parse, names an unknown name, or cannot be evaluated."""


Node: TypeAlias = "int | str | tuple[str, tuple[Node, ...]]"


@dataclass(frozen=True)
class Expr:
    """One parsed expression; ``names`` are the free names it uses."""

    text: str
    tree: Node
    names: frozenset[str]

    def value(self, env: Mapping[str, int | Fraction]) -> Fraction:
        return _eval(self.tree, env, self.text)

    def int(self, env: Mapping[str, int | Fraction]) -> int:
        v = self.value(env)
        if v.denominator != 1:
            raise ExprError(f"{self.text!r} is {v} here, not an integer (use cdiv(a, b) or "
                            "ceil(a / b) for a count)")
        return int(v)

    def __str__(self) -> str:
        return self.text


def parse(text: str | int, names: frozenset[str] | None = None) -> Expr:
    """Parse ``text`` (an int is its own expression).  With ``names``, every free name must
    be one of them."""
    if isinstance(text, bool):
        raise ExprError(f"{text!r} is not an expression")
    if isinstance(text, int):
        return Expr(str(text), text, frozenset())
    if not isinstance(text, str) or not text.strip():
        raise ExprError(f"{text!r} is not an expression (an integer or arithmetic of names)")
    if len(text) > MAX_TEXT:
        raise ExprError(f"expression of {len(text)} characters (at most {MAX_TEXT})")
    tokens = _tokens(text)
    parser = _Parser(text, tokens)
    tree = parser.expr()
    if parser.i != len(tokens):
        raise ExprError(f"{text!r}: unexpected {tokens[parser.i]!r}")
    used = frozenset(_names(tree))
    if names is not None:
        unknown = sorted(used - names)
        if unknown:
            raise ExprError(f"{text!r} uses {', '.join(unknown)}, not a name here "
                            f"(known: {', '.join(sorted(names))})")
    return Expr(text, tree, used)


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            raise ExprError(f"{text!r}: cannot read {text[pos:].strip()[:10]!r} "
                            "(integers, names, + - * / // % ( ) , only)")
        out.append(m.group(m.lastgroup or "op"))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, tokens: list[str]) -> None:
        self.text, self.tokens, self.i, self.depth = text, tokens, 0, 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise ExprError(f"{self.text!r}: expected {want or 'more'}"
                            + (f", got {tok!r}" if tok else " at the end"))
        self.i += 1
        return tok

    def expr(self) -> Node:
        self.depth += 1
        if self.depth > 32:
            raise ExprError(f"{self.text!r}: nested too deeply")
        node = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            node = (op, (node, self.term()))
        self.depth -= 1
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.peek() in ("*", "/", "//", "%"):
            op = self.take()
            node = (op, (node, self.unary()))
        return node

    def unary(self) -> Node:
        if self.peek() == "-":
            self.take()
            return ("neg", (self.unary(),))
        if self.peek() == "+":
            self.take()
            return self.unary()
        return self.atom()

    def atom(self) -> Node:
        tok = self.take()
        if tok == "(":
            node = self.expr()
            self.take(")")
            return node
        if tok.isdigit():
            return int(tok)
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", tok):
            if self.peek() == "(":
                if tok not in FUNCTIONS:
                    raise ExprError(f"{self.text!r}: unknown function {tok!r} (known: "
                                    f"{', '.join(FUNCTIONS)})")
                self.take("(")
                args = [self.expr()]
                while self.peek() == ",":
                    self.take(",")
                    args.append(self.expr())
                self.take(")")
                arity = FUNCTIONS[tok]
                if (arity >= 0 and len(args) != arity) or (arity < 0 and len(args) < 1):
                    raise ExprError(f"{self.text!r}: {tok} takes "
                                    f"{arity if arity >= 0 else 'one or more'} argument(s)")
                return (tok, tuple(args))
            if tok in FUNCTIONS:
                raise ExprError(f"{self.text!r}: {tok} is a function; call it as {tok}(...)")
            return tok
        raise ExprError(f"{self.text!r}: unexpected {tok!r}")


def _names(node: Node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, int):
        return []
    return [n for a in node[1] for n in _names(a)]


def _eval(node: Node, env: Mapping[str, int | Fraction], text: str) -> Fraction:
    if isinstance(node, int):
        return Fraction(node)
    if isinstance(node, str):
        if node not in env:
            raise ExprError(f"{text!r}: {node} has no value here")
        return Fraction(env[node])
    op, args = node
    v = [_eval(a, env, text) for a in args]
    out: Fraction
    if op == "neg":
        out = -v[0]
    elif op == "+":
        out = v[0] + v[1]
    elif op == "-":
        out = v[0] - v[1]
    elif op == "*":
        out = v[0] * v[1]
    elif op in ("/", "//", "%", "cdiv"):
        if v[1] == 0:
            raise ExprError(f"{text!r}: division by zero")
        if op == "/":
            out = v[0] / v[1]
        elif op == "//":
            out = Fraction(math.floor(v[0] / v[1]))
        elif op == "%":
            out = v[0] - v[1] * math.floor(v[0] / v[1])
        else:
            out = Fraction(math.ceil(v[0] / v[1]))
    elif op == "ceil":
        out = Fraction(math.ceil(v[0]))
    elif op == "floor":
        out = Fraction(math.floor(v[0]))
    elif op == "min":
        out = min(v)
    elif op == "max":
        out = max(v)
    else:  # pragma: no cover - the parser builds no other node
        raise ExprError(f"{text!r}: unknown operator {op}")
    if abs(out) > MAX_VALUE:
        raise ExprError(f"{text!r}: a value beyond {MAX_VALUE} ({float(out):.3g})")
    return out
