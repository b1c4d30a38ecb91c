"""Kernel manifests: ``kernels/kernels.yaml`` (the suite's own kernels), the mutants'
``kernels/mutants/mutants.yaml``, or an external tree's file passed with ``--manifest``.

Paths in a manifest are relative to the manifest file.  Top level::

    schema: 1
    include_dirs: [include]          # optional, for every kernel
    kernels:
      - name: gemv_mq4g256v2_r1      # identity in every row; default symbol
        source: gemv_hfq4g256.hip
        qt: 44                       # or format: mq4g256v2 (a name or alias)
        kind: gemv                   # gemv | gemv_qkv | gemm
        requires: any                # any | wmma_gfx11 | wmma_gfx12
        baseline: gemv_hfq4g256_r1   # its qt=6 kernel (omit for qt=6 itself)
        rows_per_block: 1            # optional keys: see _kernel_fields()

A mutant manifest adds ``mutant_of``, ``mutation`` (one line) and ``expected_killer`` (the
check or audit rule that should kill it) to every entry.  Errors name the file, the line,
the key and the fix (``hqval.schema``).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hqval import formats, suite_dir
from hqval.containment import flag_problem, include_dir_of
from hqval.safeio import kind_of
from hqval.schema import Problem, SchemaError, Spec, YamlDoc, load_yaml, problem, validate
from hqval.signature import Signature, parse_signatures
from hqval.signature import builtin as builtin_signatures

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hqval.matrix import Arch

KERNELS_DIR = suite_dir("kernels")
DEFAULT_MANIFEST = KERNELS_DIR / "kernels.yaml"
DEFAULT_MUTANTS = KERNELS_DIR / "mutants" / "mutants.yaml"
SCHEMA_VERSION = 2
# Schema 1 is the schema-2 subset without the engine-tree keys; it loads unchanged.
SCHEMA_VERSIONS = (1, 2)
SCHEMA2_KEYS = ("preinclude", "flags", "arches", "extra_args", "k_multiple", "shapes",
                "production", "audit_waive", "signatures", "dims")
# An engine build picks, per arch, ``name.gfx1201.hip`` over ``name.gfx12.hip`` over
# ``name.hip`` (hipfire scripts/compile-kernels.sh: chip tag, then the first five
# characters of the arch as the family tag).
VARIANT = re.compile(r"(?P<stem>.+)\.(?P<tag>gfx[0-9]+)\.hip")


def builtin_kinds() -> tuple[str, ...]:
    """The suite's own signatures' names (matrices/signatures.yaml); a tree may add its own.
    Read when a manifest loads, not at import (an install without the suite's files says
    so in one line)."""
    return tuple(builtin_signatures())
REQUIRES = ("any", "wmma_gfx11", "wmma_gfx12")
# requires -> the Arch.wmma value it needs (None: every arch).
_REQUIRED_WMMA = {"any": None, "wmma_gfx11": "gfx11", "wmma_gfx12": "gfx12"}


class ManifestError(SchemaError):
    """A manifest that cannot be used; every problem names file, line, key and fix."""


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
    # Schema 2 (engine trees).
    preinclude: tuple[Path, ...] = ()     # -include'd in order, as the engine prepends them
    flags: tuple[str, ...] = ()
    arches: tuple[str, ...] = ()          # only these arches (empty: every arch)
    variants: tuple[tuple[str, Path], ...] = ()  # (gfx tag, source) per-arch sources
    extra_args: tuple[int | float | None, ...] = ()  # after the ABI's: None = null pointer
    k_multiple: int = 256                 # K of every check shape is a multiple of it
    shapes: tuple[tuple[int, int], ...] = ()  # explicit (M, K) for a K-specialised build
    production: bool = True               # false: run and reported, never gating
    audit_waive: tuple[tuple[str, str], ...] = ()  # (rule, reason)
    dims: tuple[tuple[str, int], ...] = ()  # fixed sizes of the signature's dims
    # Mutants only.
    mutant_of: str | None = None
    mutation: str = ""
    expected_killer: str = ""
    manifest: Path | None = field(default=None, compare=False)
    # The signature ``kind`` names (the suite's, or the tree's own); None: the suite's.
    sig: Signature | None = field(default=None, compare=False, repr=False)

    @property
    def signature(self) -> Signature:
        """The declarative ABI of this kernel (``hqval.signature``)."""
        if self.sig is not None:
            return self.sig
        return builtin_signatures()[self.kind]

    @property
    def path(self) -> str:
        """The policy path this kernel is evidence for (its signature's)."""
        return self.signature.path

    @property
    def is_mutant(self) -> bool:
        return self.mutant_of is not None

    @property
    def is_gemm(self) -> bool:
        return self.kind == "gemm"

    def not_for(self, arch: Arch) -> str:
        """Why this kernel is not built for ``arch`` (``hqval.matrix.Arch``), '' when it
        is: its WMMA generation, its ``arches`` list, and a source named for one chip or
        family (``x.gfx12.hip``) applies only there.  The one reason every 'not built'
        and 'does not apply' message gives."""
        needed = _REQUIRED_WMMA[self.requires]
        if needed is not None and arch.wmma != needed:
            has = "no WMMA" if arch.wmma == "none" else f"{arch.wmma} WMMA"
            return f"requires {self.requires}; {getattr(arch, 'name', 'the arch')} has {has}"
        if self.arches and arch.name not in self.arches:
            return f"its arches are {', '.join(self.arches)}"
        m = VARIANT.fullmatch(self.source.name)
        if m is not None and not arch.name.startswith(m["tag"]):
            return f"its source {self.source.name} is for {m['tag']} only"
        return ""

    def applies_to(self, arch: Arch) -> bool:
        """Whether this kernel is built for ``arch``: ``not_for`` gives no reason."""
        return not self.not_for(arch)

    def source_for(self, arch: str) -> Path:
        """The source the engine's build compiles for ``arch``: ``name.<arch>.hip``, else
        ``name.<arch[:5]>.hip``, else ``source``."""
        tags = dict(self.variants)
        return tags.get(arch) or tags.get(arch[:5]) or self.source

    def define_flags(self) -> list[str]:
        return [f"-D{k}" if v == "" else f"-D{k}={v}" for k, v in self.defines]


@dataclass(frozen=True)
class Manifest:
    path: Path
    kernels: list[KernelSpec]
    # a kernel manifest's own mutants (top-level ``mutants: FILE``), run instead of the
    # suite's when the manifest is an external tree's
    mutants: Path | None = None
    # a mutant manifest's real manifest (top-level ``manifest: FILE``): its baselines,
    # mutant_of and fallback references resolve there (default: the suite's kernels.yaml)
    real: Path | None = None

    @property
    def real_manifest(self) -> Path:
        return self.real or DEFAULT_MANIFEST

    def by_name(self, name: str) -> KernelSpec:
        for spec in self.kernels:
            if spec.name == name:
                return spec
        hint = difflib.get_close_matches(name, [k.name for k in self.kernels], n=1)
        fix = f"; did you mean {hint[0]!r}?" if hint else ""
        raise KeyError(f"no kernel {name!r} in {self.path}{fix}")

    def names(self) -> list[str]:
        return [k.name for k in self.kernels]


# Kernel names become symbols, pytest ids, file names and report anchors; a C identifier is
# what every one of those accepts as written.
C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _c_identifier(value: Any) -> str | None:
    if isinstance(value, str) and C_IDENTIFIER.fullmatch(value):
        return None
    return f"{value!r} is not a C identifier (letters, digits and _, not starting with a digit)"


def _known_define(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    for k, v in value.items():
        if not isinstance(k, str) or not C_IDENTIFIER.fullmatch(k) \
                or isinstance(v, (dict, list)) or "\n" in str(v):
            return f"bad define {k!r}: {v!r} (use NAME: scalar value on one line)"
    return None


def _known_qt(value: Any) -> str | None:
    try:
        formats.by_qt(value)
    except KeyError as exc:
        return str(exc.args[0])
    return None


def _known_format(value: Any) -> str | None:
    try:
        formats.by_name(str(value))
    except KeyError as exc:
        return str(exc.args[0])
    return None


def block_problem(value: Any) -> str | None:
    """Why ``value`` is no manifest ``block`` (threads per block), or None."""
    if isinstance(value, int) and not isinstance(value, bool) and 32 <= value <= 1024 \
            and value % 32 == 0:
        return None
    return f"block {value!r} is not a multiple of 32 from 32 to 1024"


def _flag_list(value: Any) -> str | None:
    # the compiler's allow-list (hqval.containment): one definition for the loader and
    # for the toolchain, which checks again before clang runs
    for f in value if isinstance(value, list) else []:
        why = flag_problem(f)
        if why:
            return why
    return None


def _extra_arg(value: Any) -> str | None:
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        if isinstance(value, int) and not -(1 << 31) <= value < (1 << 31):
            return f"{value} does not fit the i32 an int argument is passed as"
        return None
    return f"{value!r} is not null (a null pointer), an int (i32) or a float (f32)"


def _shape(value: Any) -> str | None:
    ok = isinstance(value, list) and len(value) == 2 and all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    if not ok:
        return f"{value!r} is not [M, K] with positive integers"
    if value[1] % 256:
        return f"K={value[1]} is not a multiple of 256 (the group size)"
    return None


def _k_multiple(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0 and value % 256 == 0:
        return None
    return f"k_multiple {value!r} is not a positive multiple of 256 (the group size)"


def _known_arch(value: Any) -> str | None:
    from hqval.matrix import load_arches

    known = load_arches()
    if isinstance(value, str) and value in known:
        return None
    close = difflib.get_close_matches(str(value), list(known), n=1)
    return (f"{value!r} is not an arch of matrices/arches.yaml"
            + (f" (did you mean {close[0]!r}?)" if close else f" ({', '.join(known)})"))


def _schema2_fields(top: bool) -> dict[str, Spec]:
    fields = {
        "preinclude": Spec.list_of(Spec.scalar(str), required=False,
                                   fix="files prepended to the source, as the engine's build "
                                       "does, e.g. [gfx12_weight_cache_policy.inc]"),
        "flags": Spec.scalar(list, required=False, validators=(_flag_list,),
                             fix="compiler flags, e.g. [-ffast-math, -Wno-unused]"),
        "arches": Spec.list_of(Spec.scalar(str, validators=(_known_arch,),
                                           fix="an arch name of matrices/arches.yaml"),
                               required=False,
                               fix="the arches this kernel is built for, e.g. [gfx1100]"),
    }
    if not top:
        fields |= {
            "extra_args": Spec.list_of(Spec.scalar(object, validators=(_extra_arg,),
                                                   fix="null, an int or a float"),
                                       required=False,
                                       fix="trailing arguments after the ABI's: null, an "
                                           "int or a float each, e.g. [null, null, null]"),
            "k_multiple": Spec.scalar(int, required=False, validators=(_k_multiple,),
                                      fix="the K the build is specialised for divides it, "
                                          "e.g. 1024"),
            "shapes": Spec.list_of(Spec.scalar(list, validators=(_shape,),
                                               fix="[M, K] with K a multiple of 256"),
                                   required=False,
                                   fix="check shapes [[M, K], ...] for a K-specialised build"),
            "production": Spec.scalar(bool, required=False,
                                      fix="false: run and reported, never gating admission"),
            "dims": Spec.map_of(Spec.scalar(int, minimum=1, fix="a positive size"),
                                required=False,
                                fix="fixed sizes of the signature's dims, e.g. {k_top: 8} "
                                    "for a kernel specialised for eight experts a token"),
            "audit_waive": Spec.list_of(
                Spec.mapping({"rule": Spec.scalar(str, fix="an audit rule, e.g. "
                                                  "header_scalar"),
                              "reason": Spec.scalar(str, fix="one line: why the rule does "
                                                    "not apply to this kernel")}),
                required=False, fix="a list of {rule, reason}"),
        }
    return fields


def _kernel_fields(mutants: bool, schema: int = SCHEMA_VERSION,
                   kinds: tuple[str, ...] = ()) -> dict[str, Spec]:
    fields = {
        "name": Spec.scalar(str, validators=(_c_identifier,),
                            fix="a unique C identifier, e.g. gemv_mq4g256v2_r1"),
        "source": Spec.scalar(str, fix="a .hip file path relative to the manifest"),
        "symbol": Spec.scalar(str, required=False, validators=(_c_identifier,),
                              fix='the extern "C" kernel name in the source (default: name)'),
        "qt": Spec.scalar(int, required=False, validators=(_known_qt,),
                          fix="the engine dtype id of a registered format (hqval.formats), "
                              "e.g. 6, 44 or 45, or name it with format:"),
        "format": Spec.scalar(str, required=False, validators=(_known_format,),
                              fix="a format name or alias of hqval.formats, e.g. hfq4g256, "
                                  "mq4g256v2, mq4c"),
        "kind": Spec.scalar(str, enum=kinds or builtin_kinds(),
                            fix=f"a signature: one of {list(kinds)} (hqval/signature.py; a "
                                "tree declares its own under 'signatures:')"),
        "residual": Spec.scalar(bool, required=False, fix="true if the kernel does y +="),
        "rows_per_block": Spec.scalar(int, required=False, minimum=1,
                                      fix="rows of W per block (the R of grid.x = ceil(M/R))"),
        "batch_tile": Spec.scalar(int, required=False, minimum=1,
                                  fix="GEMM tokens per block in units of 16 (BT)"),
        "block": (Spec.scalar(int, required=False, enum=(32,),
                              fix="schema 1 is one wave32 per block: block: 32 (schema 2: "
                                  "any multiple of 32 up to 1024)") if schema == 1 else
                  Spec.scalar(int, required=False, validators=(block_problem,),
                              fix="threads per block: a multiple of 32 up to 1024")),
        "requires": Spec.scalar(str, enum=REQUIRES),
        "baseline": Spec.scalar(str, required=False, validators=(_c_identifier,),
                                fix="name of the qt=6 kernel with the same arithmetic"),
        "defines": Spec.scalar(dict, required=False, validators=(_known_define,),
                               fix="a mapping NAME: value of preprocessor defines"),
        "include_dirs": Spec.list_of(Spec.scalar(str), required=False,
                                     fix="a list of directories relative to the manifest"),
        "amd_only": Spec.scalar(bool, required=False,
                                fix="true for kernels NVRTC cannot build (WMMA)"),
    }
    if schema >= 2:
        fields |= _schema2_fields(top=False)
    if mutants:
        fields |= {
            "mutant_of": Spec.scalar(str, validators=(_c_identifier,),
                                     fix="the name of the real kernel this mutant breaks"),
            "mutation": Spec.scalar(str, fix="one line saying what is broken"),
            "expected_killer": Spec.scalar(
                str, fix="the check or audit rule expected to kill it, e.g. audit_header_scalar"),
        }
    return fields


def _file_spec(mutants: bool, schema: int = SCHEMA_VERSION,
               kinds: tuple[str, ...] = ()) -> Spec:
    top = _schema2_fields(top=True) if schema >= 2 else {}
    if schema >= 2:
        top["signatures"] = Spec.scalar(dict, required=False,
                                        fix="a mapping name -> signature (hqval/signature.py)")
    return Spec.mapping({
        "schema": Spec.scalar(int, enum=SCHEMA_VERSIONS,
                              fix=f"set 'schema: {SCHEMA_VERSION}' (1 still loads)"),
        **top,
        "include_dirs": Spec.list_of(Spec.scalar(str), required=False,
                                     fix="a list of directories relative to the manifest"),
        "allow_outside_tree": Spec.scalar(
            bool, required=False, fix="true to let source/include paths leave the manifest's "
            "directory (default false)"),
        **({"manifest": Spec.scalar(str, required=False,
                                    fix="the kernels.yaml whose kernels these mutants break "
                                        "(relative to this file; default: the suite's)")}
           if mutants else
           {"mutants": Spec.scalar(str, required=False,
                                   fix="this tree's mutants.yaml (relative to the manifest)")}),
        "kernels": Spec.list_of(Spec.mapping(_kernel_fields(mutants, schema, kinds)),
                                fix="a list of kernel entries (name, source, qt, kind, "
                                    "requires)"),
    })


def load_manifest(path: str | Path | None = None, *, mutants: bool | None = None,
                  real: str | Path | None = None) -> Manifest:
    """Load and validate a kernel manifest (default: the suite's ``kernels/kernels.yaml``;
    with ``mutants=True`` and no path, ``kernels/mutants/mutants.yaml``).  ``mutants=None``
    decides from the file: a manifest whose first entry has ``mutant_of`` is a mutant
    manifest, and then every entry needs the mutant keys.  Raises ``ManifestError`` listing
    every problem."""
    if path is None:
        path = DEFAULT_MUTANTS if mutants else DEFAULT_MANIFEST
    path = Path(path).resolve()
    if not path.is_file():
        # a FIFO or device is named as what it is (the reader never opens it)
        what = (f"is {kind_of(path.stat().st_mode)}, not a regular file" if path.exists()
                else "manifest not found")
        raise ManifestError([Problem(str(path), 0, "", what,
                                     "pass --manifest with the path of a kernels.yaml")])
    try:
        doc = load_yaml(path)
    except SchemaError as exc:
        raise ManifestError(exc.problems) from None
    data = doc.data
    if mutants is None:
        entries = data.get("kernels") if isinstance(data, dict) else None
        first = entries[0] if isinstance(entries, list) and entries else None
        mutants = isinstance(first, dict) and "mutant_of" in first
    schema = data.get("schema") if isinstance(data, dict) else None
    schema = schema if schema in SCHEMA_VERSIONS else SCHEMA_VERSION
    problems = _schema1_uses_schema2(doc) if schema == 1 else []
    sigs = _tree_signatures(doc, path, data, bool(mutants), problems)
    # a declared signature with problems still counts as a kind (its own problems say why)
    declared = data.get("signatures") if isinstance(data, dict) else None
    suite = builtin_kinds()
    kinds = (*suite, *(k for k in [*sigs, *(declared if isinstance(declared, dict) else [])]
                       if isinstance(k, str) and k not in suite))
    problems += validate(doc, _file_spec(mutants, 2 if problems else schema, kinds))
    if not problems and not data["kernels"]:
        problems.append(problem(doc, ("kernels",), "the kernel list is empty",
                                "give at least one kernel entry"))
    if problems:
        raise ManifestError(problems)
    base = path.parent
    tree = _Tree(doc, base, bool(data.get("allow_outside_tree", False)), problems)
    top_includes = _dirs(doc, ("include_dirs",), data.get("include_dirs", []), problems, tree)
    top_pre = _files(doc, ("preinclude",), data.get("preinclude", []), problems, tree)
    top_flags = _flags(doc, ("flags",), data.get("flags", []), base, tree)
    top_arches = tuple(data.get("arches", []))
    specs: list[KernelSpec] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(data["kernels"]):
        key = ("kernels", i)
        name = entry["name"]
        if name in seen:
            problems.append(problem(doc, (*key, "name"), f"{name!r} repeats the entry at line "
                                    f"{seen[name]}", "give every kernel a unique name"))
        seen[name] = doc.line(key)
        source = (base / entry["source"]).resolve()
        if tree.holds((*key, "source"), source) and not source.is_file():
            problems.append(problem(doc, (*key, "source"), f"{source} does not exist",
                                    "paths are relative to the manifest file"))
        sig = sigs.get(entry["kind"]) or builtin_signatures().get(entry["kind"])
        if sig is None:  # its declaration has problems of its own
            continue
        dims = _entry_dims(doc, key, entry, sig, problems)
        if entry["kind"] == "gemm" and entry["requires"] == "any":
            problems.append(problem(doc, (*key, "requires"), f"{name}: a gemm kernel is a "
                                    "WMMA kernel", "say wmma_gfx11 or wmma_gfx12"))
        includes = top_includes + _dirs(doc, (*key, "include_dirs"),
                                        entry.get("include_dirs", []), problems, tree)
        pre = top_pre + _files(doc, (*key, "preinclude"), entry.get("preinclude", []),
                               problems, tree)
        variants = _variants(source) if source.is_file() else ()
        waive = tuple((w["rule"], w["reason"]) for w in entry.get("audit_waive", []))
        _check_waivers(doc, key, waive, problems)
        qt = _entry_qt(doc, key, entry, problems)
        defines = entry.get("defines", {})
        amd_only = entry.get("amd_only")
        specs.append(KernelSpec(
            name=name,
            source=source,
            symbol=entry.get("symbol") or name,
            qt=qt,
            kind=entry["kind"],
            residual=entry.get("residual", False),
            rows_per_block=entry.get("rows_per_block", 1),
            batch_tile=entry.get("batch_tile", 1),
            block=entry.get("block", 32),
            requires=entry["requires"],
            baseline=entry.get("baseline"),
            defines=tuple(sorted((str(k), _define_value(v)) for k, v in defines.items())),
            include_dirs=includes,
            amd_only=entry["requires"] != "any" if amd_only is None else amd_only,
            preinclude=pre,
            flags=top_flags + _flags(doc, (*key, "flags"), entry.get("flags", []), base, tree),
            arches=tuple(entry.get("arches", top_arches)),
            variants=variants,
            extra_args=tuple(entry.get("extra_args", [])),
            k_multiple=entry.get("k_multiple", 256),
            shapes=tuple((int(m), int(k)) for m, k in entry.get("shapes", [])),
            production=entry.get("production", True),
            audit_waive=waive,
            dims=dims,
            mutant_of=entry.get("mutant_of"),
            mutation=entry.get("mutation", ""),
            expected_killer=entry.get("expected_killer", ""),
            manifest=path,
            sig=None if sig.builtin else sig,
        ))
    linked = _linked(doc, base, data, "manifest" if mutants else "mutants", tree, problems)
    if not mutants:
        names = [s.name for s in specs]
        where = "this manifest"
    else:
        # a mutant's baseline and mutant_of name kernels of its real manifest: its own
        # ``manifest:``, else the one the caller was given, else the suite's
        given = Path(real).resolve() if real is not None else None
        if linked is not None and given is not None and linked != given:
            problems.append(problem(doc, ("manifest",), f"names {linked} as its real "
                                    f"manifest, but {given} was given (--manifest)",
                                    "drop one of the two or make them the same file"))
        linked = linked or given
        real_path = linked or DEFAULT_MANIFEST
        try:
            names = (load_manifest(real_path, mutants=False).names() if real_path.is_file()
                     else [])
        except ManifestError as exc:
            problems.append(problem(doc, ("manifest",), f"its real manifest does not load: "
                                    f"{exc.problems[0]}", "fix that manifest first"))
            names = []
        where = f"{real_path}"
    if names or not mutants:
        for i, spec in enumerate(specs):
            for field_name, ref in (("baseline", spec.baseline),
                                    ("mutant_of", spec.mutant_of)):
                if ref is not None and ref not in names:
                    close = difflib.get_close_matches(ref, names, n=1)
                    problems.append(problem(
                        doc, ("kernels", i, field_name), f"{ref!r} is not a kernel of {where}",
                        f"did you mean {close[0]!r}?" if close else
                        "name a kernel listed there"))
    if problems:
        raise ManifestError(problems)
    return Manifest(path=path, kernels=specs, mutants=None if mutants else linked,
                    real=linked if mutants else None)


def _tree_signatures(doc: YamlDoc, path: Path, data: Any, mutants: bool,
                     problems: list[Problem]) -> dict[str, Signature]:
    """The signatures the file declares (``signatures:``), and for a mutant manifest those
    of its real manifest too (its kernels break that manifest's kernels)."""
    own: dict[str, Signature] = {}
    if not isinstance(data, dict):
        return own
    if isinstance(data.get("signatures"), dict):
        own, found = parse_signatures(doc, ("signatures",), data["signatures"],
                                      builtin_signatures())
        problems += found
    if mutants:
        real = data.get("manifest")
        f = (path.parent / str(real)).resolve() if isinstance(real, str) else DEFAULT_MANIFEST
        if f.is_file() and f != path:
            try:
                other = load_manifest(f, mutants=False)
            except ManifestError:
                return own  # reported when the real manifest is loaded below
            for spec in other.kernels:
                if spec.sig is not None:
                    own.setdefault(spec.kind, spec.sig)
    return own


def _entry_dims(doc: YamlDoc, key: tuple[str | int, ...], entry: dict[str, Any],
                sig: Signature, problems: list[Problem]) -> tuple[tuple[str, int], ...]:
    """A manifest entry's fixed dims (``dims: {k_top: 8}``), each a dim of its signature."""
    out = []
    names = [d.name for d in sig.dims]
    for name, value in (entry.get("dims") or {}).items():
        if name not in names:
            close = difflib.get_close_matches(str(name), names, n=1)
            problems.append(problem(doc, (*key, "dims", str(name)),
                                    f"{name!r} is not a dim of signature {sig.name}",
                                    f"did you mean {close[0]!r}?" if close else
                                    f"one of {', '.join(names)}"))
            continue
        out.append((str(name), int(value)))
    return tuple(out)


def _linked(doc: YamlDoc, base: Path, data: dict[str, Any], key: str, tree: _Tree,
            problems: list[Problem]) -> Path | None:
    """The file a top-level ``mutants:`` / ``manifest:`` key names, checked to exist."""
    value = data.get(key)
    if value is None:
        return None
    f = (base / str(value)).resolve()
    if not tree.holds((key,), f):
        return None
    if not f.is_file():
        problems.append(problem(doc, (key,), f"{f} is not a file",
                                "paths are relative to the manifest"))
        return None
    return f


def _entry_qt(doc: YamlDoc, key: tuple[str | int, ...], entry: dict[str, Any],
              problems: list[Problem]) -> int:
    """The entry's qt: given as ``qt``, as ``format`` (a name), or both when they agree."""
    qt, name = entry.get("qt"), entry.get("format")
    if name is None:
        if qt is None:
            problems.append(problem(doc, key, f"{entry['name']}: no qt and no format",
                                    "add 'qt: <id>' or 'format: <name>' (hqval.formats)"))
            return -1
        return int(qt)
    by_name = formats.by_name(str(name)).qt
    if qt is not None and int(qt) != by_name:
        problems.append(problem(doc, (*key, "qt"), f"qt={qt} but format {name!r} is "
                                f"qt={by_name}", "give one of them, or make them agree"))
    return by_name


def load_mutants(path: str | Path | None = None, *, real: str | Path | None = None) -> Manifest:
    """A mutant manifest; ``real`` is the manifest its baselines and ``mutant_of`` resolve
    in when the file names none (``manifest:``) -- the tree a command was given with
    ``--manifest``; else the suite's kernels.yaml."""
    return load_manifest(path, mutants=True, real=real)


@dataclass
class _Tree:
    """The manifest's directory: every path it names must resolve (symlinks followed)
    inside it unless the manifest says ``allow_outside_tree: true``.  A manifest that can
    point anywhere lets a compiler error echo any file's text into rows and reports."""

    doc: YamlDoc
    root: Path
    allow_outside: bool
    problems: list[Problem]

    def holds(self, key: tuple[str | int, ...], path: Path) -> bool:
        if self.allow_outside or path.is_relative_to(self.root):
            return True
        self.problems.append(problem(
            self.doc, key, f"{path} is outside the manifest's directory {self.root}",
            "keep sources and include dirs inside the kernel tree, or set "
            "'allow_outside_tree: true' at the top of the manifest"))
        return False


def _schema1_uses_schema2(doc: YamlDoc) -> list[Problem]:
    """Schema-2 keys in a schema-1 file: one problem each, naming the migration."""
    out = []
    data = doc.data
    where: list[tuple[tuple[str | int, ...], dict[str, Any]]] = [((), data)]
    kernels = data.get("kernels")
    if isinstance(kernels, list):
        where += [(("kernels", i), e) for i, e in enumerate(kernels) if isinstance(e, dict)]
    for key, mapping in where:
        for k in SCHEMA2_KEYS:
            if k in mapping:
                out.append(problem(doc, (*key, k), f"{k!r} is a schema 2 key",
                                   "set 'schema: 2' (schema 1 files load unchanged under 2)"))
        b = mapping.get("block")
        if key and isinstance(b, int) and b != 32:
            out.append(problem(doc, (*key, "block"), f"block: {b} needs schema 2",
                               "set 'schema: 2'"))
    return out


def _flags(doc: YamlDoc, key: tuple[str | int, ...], value: list[str], base: Path,
           tree: _Tree) -> tuple[str, ...]:
    """The manifest's flags as clang gets them: an ``-I`` directory is relative to the
    manifest, must be inside the tree (clang runs in a private directory, so it is passed
    on absolute); every other flag as written (the schema checked it is allowed)."""
    out = []
    for i, f in enumerate(value):
        d = include_dir_of(f) if isinstance(f, str) else None
        if d is None:
            out.append(f)
            continue
        path = (base / d).resolve()
        tree.holds((*key, i), path)
        out.append(f"-I{path}")
    return tuple(out)


def _variants(source: Path) -> tuple[tuple[str, Path], ...]:
    """``name.gfxNNNN.hip`` / ``name.gfxNN.hip`` beside ``name.hip``: the engine's per-arch
    sources for one kernel (none when the source is itself a variant)."""
    if VARIANT.fullmatch(source.name) or source.suffix != ".hip":
        return ()
    stem = source.name[:-len(".hip")]
    out = []
    for p in sorted(source.parent.glob(f"{stem}.gfx*.hip")):
        m = VARIANT.fullmatch(p.name)
        if m and m["stem"] == stem and p.is_file():
            out.append((m["tag"], p.resolve()))
    return tuple(out)


def _check_waivers(doc: YamlDoc, key: tuple[str | int, ...], waive: tuple[tuple[str, str], ...],
                   problems: list[Problem]) -> None:
    from hqval.audit_rules import RULES

    for j, (rule, reason) in enumerate(waive):
        if rule not in RULES:
            close = difflib.get_close_matches(rule, RULES, n=1)
            problems.append(problem(doc, (*key, "audit_waive", j, "rule"),
                                    f"{rule!r} is not an audit rule",
                                    f"did you mean {close[0]!r}?" if close else
                                    f"one of {', '.join(RULES)}"))
        if not reason.strip() or "\n" in reason.strip():
            problems.append(problem(doc, (*key, "audit_waive", j, "reason"),
                                    "a waiver needs a one-line reason",
                                    "say why the rule does not apply to this kernel"))


def _files(doc: YamlDoc, key: tuple[str | int, ...], value: list[str],
           problems: list[Problem], tree: _Tree) -> tuple[Path, ...]:
    out = []
    for v in value:
        f = (Path(doc.path).parent / v).resolve()
        if not tree.holds(key, f):
            continue
        if not f.is_file():
            problems.append(problem(doc, key, f"{f} does not exist",
                                    "paths are relative to the manifest"))
        out.append(f)
    return tuple(out)


def _dirs(doc: YamlDoc, key: tuple[str | int, ...], value: list[str],
          problems: list[Problem], tree: _Tree) -> tuple[Path, ...]:
    out = []
    for v in value:
        d = (Path(doc.path).parent / v).resolve()
        if not tree.holds(key, d):
            continue
        if not d.is_dir():
            problems.append(problem(doc, key, f"{d} is not a directory",
                                    "paths are relative to the manifest"))
        out.append(d)
    return tuple(out)


def _define_value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def load_specs(manifest: str | Path | None, mutants: bool = False) -> list[KernelSpec]:
    """The kernels of ``manifest`` (default the suite's), then the suite's mutants."""
    specs = list(load_manifest(manifest).kernels)
    if mutants:
        specs += load_mutants().kernels
    return specs


def kernel_table(specs: Sequence[KernelSpec],
                 self_test: frozenset[str] = frozenset(),
                 arches: Sequence[Arch] | None = None) -> dict[str, dict[str, object]]:
    """What the envelope records per kernel, so admission works offline from the run.
    ``self_test``: the suite's own mutants run on an external tree (a suite self-test);
    ``arches``: the run's, recorded per kernel as those it is built for (``built_for``,
    from ``KernelSpec.applies_to``: a kernel limited to gfx1100 expects no evidence on
    gfx1151)."""
    return {s.name: {"qt": s.qt, "kind": s.kind, "path": s.path, "requires": s.requires,
                     **({"built_for": [a.name for a in arches if s.applies_to(a)]}
                        if arches is not None else {}),
                     "baseline": s.baseline, "rows_per_block": s.rows_per_block,
                     "batch_tile": s.batch_tile, "residual": s.residual,
                     "mutant_of": s.mutant_of, "source": str(s.source),
                     **({"self_test": True} if s.name in self_test else {}),
                     # manifest schema 2 (engine trees)
                     "block": s.block, "arches": list(s.arches),
                     "variants": {tag: str(p) for tag, p in s.variants},
                     "preinclude": [str(p) for p in s.preinclude], "flags": list(s.flags),
                     "extra_args": list(s.extra_args), "production": s.production,
                     "dims": dict(s.dims),
                     "audit_waive": [{"rule": r, "reason": why} for r, why in s.audit_waive]}
            for s in specs}


def mutants_file(manifest: Manifest) -> Path | None:
    """The mutants that break ``manifest``'s tree, for ``hqval run`` and ``hqval mutants``
    alike: the tree's own (``mutants:``), else the suite's (kernels/mutants/mutants.yaml,
    which on an external tree break the suite's kernels, a self-test), else None."""
    if manifest.mutants is not None:
        return manifest.mutants
    return Path(DEFAULT_MUTANTS) if Path(DEFAULT_MUTANTS).is_file() else None


def run_mutants(manifest: Manifest, external: bool, enabled: bool = True
                ) -> tuple[Manifest | None, frozenset[str]]:
    """The mutants ``hqval run`` runs with ``manifest`` (``mutants_file``) and the names
    of those that are a suite self-test (the suite's on an external tree, ``--manifest``);
    None with ``--no-mutants``."""
    path = mutants_file(manifest) if enabled else None
    if path is None:
        return None, frozenset()
    mutants = load_mutants(path)
    own = manifest.mutants is not None
    return mutants, (frozenset(k.name for k in mutants.kernels) if external and not own
                     else frozenset())
