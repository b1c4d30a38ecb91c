"""Kernel manifests: ``kernels/kernels.yaml`` (the suite's own kernels), the mutants'
``kernels/mutants/mutants.yaml``, or an external tree's file passed with ``--manifest``.

Paths in a manifest are relative to the manifest file.  Top level::

    schema: 1
    include_dirs: [include]          # optional, for every kernel
    kernels:
      - name: gemv_mq4g256v2_r1      # identity in every row; default symbol
        source: gemv_hfq4g256.hip
        qt: 44
        kind: gemv                   # gemv | gemv_qkv | gemm
        requires: any                # any | wmma_gfx11 | wmma_gfx12
        baseline: gemv_hfq4g256_r1   # its qt=1 kernel (omit for qt=1 itself)
        rows_per_block: 1            # optional keys: see KEYS

A mutant manifest adds ``mutant_of``, ``mutation`` (one line) and ``expected_killer`` (the
check or audit rule that should kill it) to every entry.  Errors name the file, the line,
the key and the fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

KERNELS_DIR = Path(__file__).resolve().parents[1] / "kernels"
DEFAULT_MANIFEST = KERNELS_DIR / "kernels.yaml"
DEFAULT_MUTANTS = KERNELS_DIR / "mutants" / "mutants.yaml"
SCHEMA_VERSION = 1

KINDS = ("gemv", "gemv_qkv", "gemm")
REQUIRES = ("any", "wmma_gfx11", "wmma_gfx12")
# requires -> the Arch.wmma value it needs (None: every arch).
_REQUIRED_WMMA = {"any": None, "wmma_gfx11": "gfx11", "wmma_gfx12": "gfx12"}


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names file, line, key and fix."""


class HasWmma(Protocol):
    @property
    def wmma(self) -> str: ...


@dataclass(frozen=True)
class KernelSpec:
    """One kernel of a manifest: where its source is, its ABI kind and what it needs."""

    name: str
    source: Path
    symbol: str
    qt: int
    kind: str
    residual: bool = False
    rows_per_block: int = 1
    batch_tile: int = 1
    block: int = 32
    requires: str = "any"
    baseline: str | None = None
    defines: tuple[tuple[str, str], ...] = ()
    include_dirs: tuple[Path, ...] = ()
    amd_only: bool = False
    # Mutants only.
    mutant_of: str | None = None
    mutation: str = ""
    expected_killer: str = ""
    manifest: Path | None = field(default=None, compare=False)

    @property
    def is_mutant(self) -> bool:
        return self.mutant_of is not None

    @property
    def is_gemm(self) -> bool:
        return self.kind == "gemm"

    def applies_to(self, arch: HasWmma) -> bool:
        """Whether this kernel is built for ``arch`` (anything with an ``.wmma`` attribute in
        {"none", "gfx11", "gfx12"}, normally ``hqval.matrix.Arch``)."""
        needed = _REQUIRED_WMMA[self.requires]
        return needed is None or arch.wmma == needed

    def define_flags(self) -> list[str]:
        return [f"-D{k}" if v == "" else f"-D{k}={v}" for k, v in self.defines]


@dataclass(frozen=True)
class Manifest:
    path: Path
    kernels: list[KernelSpec]

    def by_name(self, name: str) -> KernelSpec:
        for spec in self.kernels:
            if spec.name == name:
                return spec
        hint = difflib.get_close_matches(name, [k.name for k in self.kernels], n=1)
        fix = f"; did you mean {hint[0]!r}?" if hint else ""
        raise KeyError(f"no kernel {name!r} in {self.path}{fix}")

    def names(self) -> list[str]:
        return [k.name for k in self.kernels]


# key -> (python type(s), default, help for the fix).  "name", "source", "qt", "kind" are
# required; everything else has a default.
_KERNEL_KEYS: dict[str, tuple[tuple[type, ...], Any, str]] = {
    "name": ((str,), None, "a unique identifier, e.g. gemv_mq4g256v2_r1"),
    "source": ((str,), None, "a .hip file path relative to the manifest"),
    "symbol": ((str,), None, "the extern \"C\" kernel name in the source (default: name)"),
    "qt": ((int,), None, "the engine dtype id, e.g. 1, 44 or 45"),
    "kind": ((str,), None, f"one of {', '.join(KINDS)}"),
    "residual": ((bool,), False, "true if the kernel accumulates (y +=)"),
    "rows_per_block": ((int,), 1, "rows of W per block (the R of grid.x = ceil(M/R))"),
    "batch_tile": ((int,), 1, "GEMM tokens per block in units of 16 (BT)"),
    "block": ((int,), 32, "threads per block: 32 (one wave32)"),
    "requires": ((str,), "any", f"one of {', '.join(REQUIRES)}"),
    "baseline": ((str, type(None)), None, "name of the qt=1 kernel with the same arithmetic"),
    "defines": ((dict,), {}, "a mapping NAME: value of preprocessor defines"),
    "include_dirs": ((list,), [], "a list of directories relative to the manifest"),
    "amd_only": ((bool,), None, "true for kernels NVRTC cannot build (WMMA)"),
}
_MUTANT_KEYS: dict[str, tuple[tuple[type, ...], Any, str]] = {
    "mutant_of": ((str,), None, "the name of the real kernel this mutant breaks"),
    "mutation": ((str,), None, "one line saying what is broken"),
    "expected_killer": ((str,), None, "the check or audit rule expected to kill it"),
}
_TOP_KEYS = ("schema", "include_dirs", "kernels")


def _fail(path: Path, node: yaml.Node | None, key: str, problem: str, fix: str) -> ManifestError:
    line = f":{node.start_mark.line + 1}" if node is not None else ""
    return ManifestError(f"{path}{line}: key '{key}': {problem}; fix: {fix}")


def _mapping(node: yaml.Node) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    assert isinstance(node, yaml.MappingNode)
    return {str(k.value): (k, v) for k, v in node.value}


def _suggest(key: str, known: Mapping[str, Any] | tuple[str, ...]) -> str:
    hint = difflib.get_close_matches(key, list(known), n=1)
    return f"did you mean '{hint[0]}'?" if hint else f"known keys: {', '.join(known)}"


def load_manifest(path: str | Path | None = None, *, mutants: bool | None = None) -> Manifest:
    """Load and validate a kernel manifest (default: the suite's ``kernels/kernels.yaml``;
    with ``mutants=True`` and no path, ``kernels/mutants/mutants.yaml``).  ``mutants=None``
    decides from the file: a manifest whose first entry has ``mutant_of`` is a mutant
    manifest, and then every entry needs the mutant keys."""
    if path is None:
        path = DEFAULT_MUTANTS if mutants else DEFAULT_MANIFEST
    path = Path(path).resolve()
    if not path.is_file():
        raise ManifestError(
            f"{path}: manifest not found; fix: pass --manifest with the path of a kernels.yaml"
        )
    text = path.read_text()
    try:
        root = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: not valid YAML ({exc}); fix the syntax") from exc
    if not isinstance(root, yaml.MappingNode) or not isinstance(data, dict):
        raise ManifestError(f"{path}:1: the manifest must be a mapping with a 'kernels' list; "
                            "fix: start the file with 'schema: 1' and 'kernels:'")
    nodes = _mapping(root)
    for key, (knode, _) in nodes.items():
        if key not in _TOP_KEYS:
            raise _fail(path, knode, key, "unknown top-level key", _suggest(key, _TOP_KEYS))
    schema = data.get("schema")
    if schema != SCHEMA_VERSION:
        node = nodes["schema"][1] if "schema" in nodes else root
        raise _fail(path, node, "schema", f"is {schema!r}, this hqval reads {SCHEMA_VERSION}",
                    f"set 'schema: {SCHEMA_VERSION}'")
    base = path.parent
    top_includes = _path_list(path, nodes.get("include_dirs"), data.get("include_dirs", []))
    if "kernels" not in nodes or not isinstance(data["kernels"], list) or not data["kernels"]:
        node = nodes["kernels"][1] if "kernels" in nodes else root
        raise _fail(path, node, "kernels", "missing or empty",
                    "give a list of kernel entries (name, source, qt, kind, requires)")
    seq = nodes["kernels"][1]
    assert isinstance(seq, yaml.SequenceNode)
    if mutants is None:
        first = data["kernels"][0]
        mutants = isinstance(first, dict) and "mutant_of" in first
    specs: list[KernelSpec] = []
    seen: dict[str, int] = {}
    for knode, entry in zip(seq.value, data["kernels"], strict=True):
        spec = _kernel(path, base, knode, entry, top_includes, mutants)
        if spec.name in seen:
            raise _fail(path, knode, "name", f"{spec.name!r} repeats the entry at line "
                        f"{seen[spec.name]}", "give every kernel a unique name")
        seen[spec.name] = knode.start_mark.line + 1
        specs.append(spec)
    if not mutants:
        names = {s.name: s for s in specs}
        for knode, spec in zip(seq.value, specs, strict=True):
            if spec.baseline is not None and spec.baseline not in names:
                raise _fail(path, _mapping(knode)["baseline"][1], "baseline",
                            f"{spec.baseline!r} is not a kernel of this manifest",
                            _suggest(spec.baseline, tuple(names)))
    return Manifest(path=path, kernels=specs)


def load_mutants(path: str | Path | None = None) -> Manifest:
    return load_manifest(path, mutants=True)


def _path_list(path: Path, node_pair: tuple[yaml.Node, yaml.Node] | None,
               value: Any) -> tuple[Path, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(path, node_pair[1] if node_pair else None, "include_dirs",
                    "must be a list of directory paths", "write e.g. 'include_dirs: [include]'")
    out = []
    for v in value:
        d = (path.parent / v).resolve()
        if not d.is_dir():
            raise _fail(path, node_pair[1] if node_pair else None, "include_dirs",
                        f"{d} is not a directory", "paths are relative to the manifest")
        out.append(d)
    return tuple(out)


def _kernel(path: Path, base: Path, node: yaml.Node, entry: Any,
            top_includes: tuple[Path, ...], mutants: bool) -> KernelSpec:
    if not isinstance(node, yaml.MappingNode) or not isinstance(entry, dict):
        raise _fail(path, node, "kernels", "every entry must be a mapping",
                    "write '- name: ...' entries")
    keys = dict(_KERNEL_KEYS, **(_MUTANT_KEYS if mutants else {}))
    nodes = _mapping(node)
    for key, (knode, _) in nodes.items():
        if key not in keys:
            raise _fail(path, knode, key, "unknown key", _suggest(key, keys))
    values: dict[str, Any] = {}
    for key, (types, default, help_text) in keys.items():
        if key not in entry:
            required = default is None and key not in ("symbol", "baseline", "amd_only")
            if required:
                raise _fail(path, node, key, "missing", f"add '{key}:' ({help_text})")
            values[key] = default
            continue
        value = entry[key]
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise _fail(path, nodes[key][1], key, f"{value!r} has the wrong type", help_text)
        values[key] = value
    name = values["name"]
    vnode = {k: v for k, (_, v) in nodes.items()}
    if values["kind"] not in KINDS:
        raise _fail(path, vnode["kind"], "kind", f"{values['kind']!r} is not a kernel kind",
                    f"use one of {', '.join(KINDS)}")
    if values["requires"] not in REQUIRES:
        raise _fail(path, vnode["requires"], "requires", f"{values['requires']!r} is unknown",
                    f"use one of {', '.join(REQUIRES)}")
    if values["kind"] == "gemm" and values["requires"] == "any":
        raise _fail(path, vnode.get("requires", node), "requires",
                    f"{name}: a gemm kernel is a WMMA kernel", "say wmma_gfx11 or wmma_gfx12")
    for key in ("rows_per_block", "batch_tile", "block"):
        if values[key] < 1:
            raise _fail(path, vnode[key], key, f"{values[key]} is not positive", "use >= 1")
    if values["block"] != 32:
        raise _fail(path, vnode["block"], "block", f"{values['block']} threads",
                    "the ABI is one wave32 per block: block: 32")
    source = (base / values["source"]).resolve()
    if not source.is_file():
        raise _fail(path, vnode["source"], "source", f"{source} does not exist",
                    "paths are relative to the manifest file")
    defines = values["defines"]
    for k, v in defines.items():
        if not isinstance(k, str) or not k.isidentifier() or isinstance(v, (dict, list)):
            raise _fail(path, vnode["defines"], "defines", f"bad define {k!r}: {v!r}",
                        "use NAME: value with scalar values")
    includes = top_includes + _path_list(path, nodes.get("include_dirs"),
                                         values["include_dirs"])
    amd_only = values["amd_only"]
    if amd_only is None:
        amd_only = values["requires"] != "any"
    return KernelSpec(
        name=name,
        source=source,
        symbol=values["symbol"] or name,
        qt=values["qt"],
        kind=values["kind"],
        residual=values["residual"],
        rows_per_block=values["rows_per_block"],
        batch_tile=values["batch_tile"],
        block=values["block"],
        requires=values["requires"],
        baseline=values["baseline"],
        defines=tuple(sorted((str(k), _define_value(v)) for k, v in defines.items())),
        include_dirs=includes,
        amd_only=bool(amd_only),
        mutant_of=values.get("mutant_of"),
        mutation=values.get("mutation") or "",
        expected_killer=values.get("expected_killer") or "",
        manifest=path,
    )


def _define_value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)
