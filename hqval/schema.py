"""A small YAML schema checker whose errors name the file, the line, the key, what was
expected and the fix.

``load_yaml(path)`` parses with a node-tracking loader (PyYAML's composer, so every value
keeps its line); ``validate(doc, spec)`` walks a ``Spec`` tree and returns every problem;
``check(doc, spec)`` raises ``SchemaError`` listing them all.  Specs are plain data::

    ARCH = Spec.mapping({
        "cu_count": Spec.scalar(int, minimum=1, fix="the CU count of the product"),
        "wmma": Spec.scalar(str, enum=("none", "gfx11", "gfx12")),
        "note": Spec.scalar(str, required=False),
    })
    FILE = Spec.mapping({"arches": Spec.map_of(ARCH)})
"""

from __future__ import annotations

import copy
import difflib
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hqval import safeio

Key = tuple[str | int, ...]
Validator = Callable[[Any], str | None]


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    key: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        fix = f"; fix: {self.fix}" if self.fix else ""
        return f"{self.file}:{self.line}: {self.key or '<top>'}: {self.message}{fix}"


class SchemaError(ValueError):
    """One or more schema problems; ``problems`` holds them, the message lists them all."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


@dataclass(frozen=True)
class YamlDoc:
    """Parsed YAML plus the line (1-based) of every key path."""

    path: str
    data: Any
    lines: Mapping[Key, int]

    def line(self, key: Key) -> int:
        while key and key not in self.lines:
            key = key[:-1]
        return self.lines.get(key, 1)


# Bounds on what a YAML file may cost to load (``hqval.safeio``, the one reader): 1 MiB,
# refused before it is read; anchors and aliases are allowed (the policy shares one timing
# gate through them) but their count, the nesting depth and the document they expand to are
# bounded while composing, which is linear in the text (an alias bomb of 9 levels of 9
# aliases would expand to 9**9 values).
MAX_YAML_BYTES = safeio.YAML_LIMIT
MAX_YAML_NODES = safeio.MAX_YAML_NODES
_MAX_DEPTH = safeio.MAX_DEPTH


def _yaml_problem(name: str, line: int, message: str, fix: str) -> SchemaError:
    return SchemaError([Problem(name, line, "", message, fix)])


def _from_safeio(name: str, exc: safeio.SafeIOError) -> SchemaError:
    return _yaml_problem(name, exc.line, exc.problem, exc.fix)


def load_yaml(path: str | Path, text: str | None = None) -> YamlDoc:
    """Parse ``path`` (or ``text``, reported as ``path``) keeping each value's line.
    The file is read through ``hqval.safeio`` (regular files only, at most
    ``MAX_YAML_BYTES``); a YAML syntax error, more aliases than ``safeio.MAX_ALIASES``,
    aliases expanding past ``MAX_YAML_NODES`` values, nesting deeper than 64, or bytes
    that are not UTF-8 become a ``SchemaError`` naming the line.

    The file is read on every call; the parse of a text this process parsed before under
    the same name is reused (``_parse``: a run loads its manifests, mutants and policy
    dozens of times, about 0.1 s each), and every caller gets its own copy of the data."""
    name = str(path)
    try:
        if text is None:
            text = safeio.read_text(path, limit=MAX_YAML_BYTES)
    except safeio.SafeIOError as exc:
        raise _from_safeio(name, exc) from None
    data, lines = _parse(name, text)
    return YamlDoc(name, copy.deepcopy(data), dict(lines))


@functools.lru_cache(maxsize=64)
def _parse(name: str, text: str) -> tuple[Any, Mapping[Key, int]]:
    """``load_yaml``'s parse of ``text`` (read from ``name``): its data and lines, shared by
    the calls with the same name and text, never handed out itself (a ``SchemaError`` is
    raised again on every call: lru_cache keeps no exception)."""
    try:
        if len(text) > MAX_YAML_BYTES:
            raise _yaml_problem(name, 0, f"{len(text)} characters is over the "
                                f"{MAX_YAML_BYTES} limit for a YAML file", "split it")
        loader, node = safeio.compose_yaml(text, what=name)
    except safeio.SafeIOError as exc:
        raise _from_safeio(name, exc) from None
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 0
        raise SchemaError([Problem(name, line, "", f"YAML syntax: {exc.problem}",
                                   "fix the YAML at that line")]) from None
    except yaml.YAMLError as exc:  # e.g. a reader error on a control character
        raise _yaml_problem(name, 0, f"YAML: {' '.join(str(exc).split())}",
                            "fix the YAML") from None
    try:
        lines: dict[Key, int] = {}
        data = _construct(loader, node, (), lines) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 0
        raise SchemaError([Problem(name, line, "", f"YAML syntax: {exc.problem}",
                                   "fix the YAML at that line")]) from None
    except yaml.YAMLError as exc:
        raise _yaml_problem(name, 0, f"YAML: {' '.join(str(exc).split())}",
                            "fix the YAML") from None
    except RecursionError:
        raise _yaml_problem(name, 0, "nested too deeply to read",
                            f"keep nesting under {_MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
    return data, lines


# the tags a mapping and a list carry when the YAML names none (``!!map``, ``!!seq``); any
# other on a collection (``!!python/object/apply:...``, ``!!set``, ``!!omap``, a local
# ``!tag``) asks for a type the schema never reads
_COLLECTION_TAGS: dict[type[yaml.Node], str] = {yaml.MappingNode: "tag:yaml.org,2002:map",
                                                yaml.SequenceNode: "tag:yaml.org,2002:seq"}


def _construct(loader: yaml.SafeLoader, node: yaml.Node, key: Key,
               lines: dict[Key, int]) -> Any:
    lines[key] = node.start_mark.line + 1
    want = _COLLECTION_TAGS.get(type(node))
    if want is not None and node.tag != want:
        # (the values are built here, not by the loader, which would refuse the tag)
        raise yaml.MarkedYAMLError(problem=f"the tag {node.tag!r} asks for a type no hqval "
                                   "YAML holds (plain mappings and lists only)",
                                   problem_mark=node.start_mark)
    if isinstance(node, yaml.MappingNode):
        # YAML merge keys (<<): flatten_mapping puts the merged pairs first, and a key the
        # mapping states itself overrides a merged one, as a later merge's does an
        # earlier's (YAML's own rule, PyYAML's order); a key stated twice is refused.  The
        # keys it states are taken before the (in-place) flattening, once per node: an
        # aliased mapping is built again from its flattened node
        merges = [k for k, _ in node.value if k.tag == "tag:yaml.org,2002:merge"]
        if len(merges) > 1:
            raise yaml.MarkedYAMLError(problem="duplicate key '<<' (merge several mappings "
                                       "with one: <<: [*a, *b])",
                                       problem_mark=merges[1].start_mark)
        memo: dict[int, set[int]] = loader.__dict__.setdefault("_hqval_stated", {})
        stated = memo.setdefault(id(node), {id(k) for k, _ in node.value
                                            if k.tag != "tag:yaml.org,2002:merge"})
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        own: set[Any] = set()
        for knode, vnode in node.value:
            k = loader.construct_object(knode, deep=True)
            if id(knode) in stated:
                if k in own:
                    raise yaml.MarkedYAMLError(problem=f"duplicate key {k!r}",
                                               problem_mark=knode.start_mark)
                own.add(k)
            sub = (*key, str(k))
            out[k] = _construct(loader, vnode, sub, lines)
            lines[sub] = knode.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(loader, v, (*key, i), lines) for i, v in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
               list: "a list", dict: "a mapping"}


@dataclass(frozen=True)
class Spec:
    """What one value must be.  ``kind`` is the Python type (``float`` accepts ints;
    ``int`` and ``float`` reject booleans).  For mappings, ``fields`` lists the fixed keys
    (unknown keys are errors unless ``extra``); ``values`` describes every value of a
    free-keyed mapping or every item of a list."""

    kind: type
    required: bool = True
    enum: tuple[Any, ...] | None = None
    minimum: float | None = None
    fields: Mapping[str, Spec] | None = None
    values: Spec | None = None
    extra: bool = False
    fix: str = ""
    validators: tuple[Validator, ...] = field(default_factory=tuple)

    @staticmethod
    def scalar(kind: type, *, required: bool = True, enum: tuple[Any, ...] | None = None,
               minimum: float | None = None, fix: str = "",
               validators: tuple[Validator, ...] = ()) -> Spec:
        return Spec(kind, required=required, enum=enum, minimum=minimum, fix=fix,
                    validators=validators)

    @staticmethod
    def mapping(fields: Mapping[str, Spec], *, required: bool = True, extra: bool = False,
                fix: str = "", validators: tuple[Validator, ...] = ()) -> Spec:
        return Spec(dict, required=required, fields=fields, extra=extra, fix=fix,
                    validators=validators)

    @staticmethod
    def map_of(values: Spec, *, required: bool = True, fix: str = "") -> Spec:
        return Spec(dict, required=required, values=values, fix=fix)

    @staticmethod
    def list_of(items: Spec, *, required: bool = True, fix: str = "") -> Spec:
        return Spec(list, required=required, values=items, fix=fix)


def _type_ok(value: Any, kind: type) -> bool:
    if kind in (int, float) and isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def _dotted(key: Key) -> str:
    out = ""
    for k in key:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


def validate(doc: YamlDoc, spec: Spec) -> list[Problem]:
    problems: list[Problem] = []
    _walk(doc, doc.data, spec, (), problems)
    return problems


def check(doc: YamlDoc, spec: Spec) -> YamlDoc:
    problems = validate(doc, spec)
    if problems:
        raise SchemaError(problems)
    return doc


def problem(doc: YamlDoc, key: Key, message: str, fix: str = "") -> Problem:
    """A problem at ``key`` of ``doc`` (for cross-field checks done by the caller)."""
    return Problem(doc.path, doc.line(key), _dotted(key), message, fix)


def _walk(doc: YamlDoc, value: Any, spec: Spec, key: Key, out: list[Problem]) -> None:
    def add(msg: str, fix: str = spec.fix) -> None:
        out.append(problem(doc, key, msg, fix))

    if not _type_ok(value, spec.kind):
        add(f"expected {_TYPE_NAMES.get(spec.kind, spec.kind.__name__)}, got "
            f"{type(value).__name__} {value!r}")
        return
    if spec.enum is not None and value not in spec.enum:
        close = difflib.get_close_matches(str(value), [str(e) for e in spec.enum], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        add(f"{value!r} is not one of {list(spec.enum)}{hint}",
            spec.fix or f"use one of {list(spec.enum)}")
        return
    if spec.minimum is not None and value < spec.minimum:
        add(f"{value!r} is below the minimum {spec.minimum}")
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                out.append(problem(doc, (*key, str(k)),
                                   f"key {k!r} is {type(k).__name__}, keys must be strings",
                                   "quote the key"))
        if spec.fields is not None:
            for name, sub in spec.fields.items():
                if name not in value:
                    if sub.required:
                        add(f"missing required key {name!r}",
                            sub.fix or f"add '{name}:' under {_dotted(key) or 'the top'}")
                    continue
                _walk(doc, value[name], sub, (*key, name), out)
            if not spec.extra:
                for k in value:
                    if isinstance(k, str) and k not in spec.fields:
                        close = difflib.get_close_matches(k, list(spec.fields), n=1)
                        hint = f"rename it to {close[0]!r}" if close else (
                            f"remove it (allowed: {', '.join(spec.fields)})")
                        out.append(problem(doc, (*key, k), f"unknown key {k!r}", hint))
        elif spec.values is not None:
            for k, v in value.items():
                _walk(doc, v, spec.values, (*key, str(k)), out)
    elif isinstance(value, list) and spec.values is not None:
        for i, v in enumerate(value):
            _walk(doc, v, spec.values, (*key, i), out)
    for fn in spec.validators:
        msg = fn(value)
        if msg:
            add(msg)
