"""The YAML matrices under ``matrices/``: architectures, devices, formats and shapes, each
checked against its schema (``hqval.schema``) so an error names file, line, key and fix.

``Arch.gemv_rows_default`` is computed by the design note's section 6 rule
(``ArchCaps::gemv_rows_default``): 1 row per block on wave64-native targets, RDNA2 and
RDNA3 dGPUs, otherwise 2.  It is never typed into the YAML.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hqval import safeio, suite_dir
from hqval.schema import (
    MAX_YAML_BYTES,
    Problem,
    SchemaError,
    Spec,
    YamlDoc,
    check,
    load_yaml,
    problem,
)

if TYPE_CHECKING:
    from hqval.manifest import Manifest

MATRICES_DIR = suite_dir("matrices")
SCHEMA_VERSION = 1

FAMILIES = ("rdna1", "rdna2", "rdna3", "rdna3.5", "rdna4")
WMMA = ("none", "gfx11", "gfx12")
STATUSES = ("shipping", "retired", "candidate")


@dataclass(frozen=True)
class Arch:
    name: str
    family: str
    product: str
    apu: bool
    wave_size: int
    wmma: str
    is_rdna2: bool
    is_rdna3_dgpu: bool
    vgprs_per_simd: int
    lds_bytes: int
    cu_count: int
    boost_mhz: int
    f32_flop_per_clk_cu: int
    l2_mib: float
    infinity_cache_mib: float
    vram_gbps: float
    # "amd" for the gfx targets of arches.yaml; "nvidia" for an sm_XX target of the cuda
    # backend (checks and timing only: no gfx code object, no ISA audit, no admission)
    vendor: str = "amd"

    @classmethod
    def nvidia(cls, name: str) -> Arch:
        """An ``sm_XX`` target: no AMD WMMA, 32-wide warps, one row per block."""
        return cls(name=name, family="nvidia", product=name, apu=False, wave_size=32,
                   wmma="none", is_rdna2=False, is_rdna3_dgpu=False, vgprs_per_simd=0,
                   lds_bytes=0, cu_count=0, boost_mhz=0, f32_flop_per_clk_cu=0, l2_mib=0.0,
                   infinity_cache_mib=0.0, vram_gbps=0.0, vendor="nvidia")

    @property
    def is_amd(self) -> bool:
        """A gfx target: compiled by clang, audited, admitted by the policy."""
        return self.vendor == "amd"

    def cap(self, name: str) -> str:
        """A capability the admission policy names (wmma, wave_size, family) as text."""
        return str(getattr(self, name))

    @property
    def is_wave64_native(self) -> bool:
        return self.wave_size == 64

    @property
    def gemv_rows_default(self) -> int:
        """Design note section 6: ``if is_wave64_native || is_rdna2 || is_rdna3_dgpu {1}
        else {2}``.  An NVIDIA target runs one row per block."""
        if not self.is_amd:
            return 1
        return 1 if (self.is_wave64_native or self.is_rdna2 or self.is_rdna3_dgpu) else 2

    @property
    def l2_bytes(self) -> int:
        return int(self.l2_mib * 2**20)

    @property
    def infinity_cache_bytes(self) -> int:
        return int(self.infinity_cache_mib * 2**20)

    @property
    def last_level_cache_bytes(self) -> int:
        """What a weight matrix must exceed to be read from VRAM (gfx1030's 128 MB Infinity
        Cache is why its 5120 shape ran above VRAM peak, design note section 6)."""
        return max(self.l2_bytes, self.infinity_cache_bytes)

    @property
    def peak_f32_gflops(self) -> float:
        return self.cu_count * self.boost_mhz * self.f32_flop_per_clk_cu / 1000.0

    @property
    def gfx_major(self) -> int:
        """10, 11 or 12 (the ISA generation in the name)."""
        return int(self.name[3:-2])

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(gemv_rows_default=self.gemv_rows_default,
                 is_wave64_native=self.is_wave64_native, l2_bytes=self.l2_bytes,
                 infinity_cache_bytes=self.infinity_cache_bytes,
                 peak_f32_gflops=self.peak_f32_gflops)
        return d


@dataclass(frozen=True)
class Device:
    """A non-RDNA timing device (the cuda backend's H200)."""

    name: str
    vendor: str
    arch: str
    sm_count: int
    l2_mib: float
    hbm_gbps: float
    memory_gib: float

    @property
    def l2_bytes(self) -> int:
        return int(self.l2_mib * 2**20)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "l2_bytes": self.l2_bytes}


@dataclass(frozen=True)
class Latencies:
    """One family's instruction latencies in shader-clock cycles (arches.yaml
    ``latencies``): issue to the issue of an instruction that uses the result."""

    family: str
    valu: float
    trans: float
    salu: float
    smem: float
    lds: float
    vmem: float
    llc_ns: float | None = None   # a load that hits the Infinity Cache/MALL, ns
    vram_ns: float | None = None  # a load from VRAM, ns
    vgpr_banks: int | None = None  # VGPR banks, one dword read each per cycle (None: unknown)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Shape:
    name: str
    M: int
    K: int
    set: str
    role: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FormatEntry:
    name: str
    qt: int
    aliases: tuple[str, ...]
    group_bytes: int
    sub_block: int
    payload_offset: int
    header: str
    rotated: bool
    status: str

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "aliases": list(self.aliases)}


# -- schemas ----------------------------------------------------------------------------
def _positive(kind: type, fix: str) -> Spec:
    return Spec.scalar(kind, minimum=1, fix=fix)


def _k_multiple(value: Any) -> str | None:
    return None if value % 256 == 0 else f"K={value} is not a multiple of 256"


_VERSION = Spec.scalar(int, enum=(SCHEMA_VERSION,), fix=f"set schema_version: {SCHEMA_VERSION}")

ARCH_SPEC = Spec.mapping({
    "family": Spec.scalar(str, enum=FAMILIES),
    "product": Spec.scalar(str, fix="name the representative product"),
    "apu": Spec.scalar(bool, fix="true for an APU, false for a dGPU (AMDGPUUsage table)"),
    "wave_size": Spec.scalar(int, enum=(32, 64), fix="32 on every RDNA target"),
    "wmma": Spec.scalar(str, enum=WMMA),
    "is_rdna2": Spec.scalar(bool),
    "is_rdna3_dgpu": Spec.scalar(bool),
    "vgprs_per_simd": Spec.scalar(int, enum=(1024, 1536),
                                  fix="1536 with FeatureGFX11FullVGPRs, else 1024"),
    "lds_bytes": _positive(int, "65536 on gfx10-gfx12"),
    "cu_count": _positive(int, "the product's compute units"),
    "boost_mhz": _positive(int, "the product's boost clock in MHz"),
    "f32_flop_per_clk_cu": Spec.scalar(int, enum=(128, 256),
                                       fix="128 on RDNA1/2, 256 on RDNA3+ (dual issue)"),
    "l2_mib": Spec.scalar(float, minimum=0, fix="L2 size in MiB"),
    "infinity_cache_mib": Spec.scalar(float, minimum=0, fix="Infinity Cache/MALL MiB, 0 if none"),
    "vram_gbps": _positive(float, "peak memory bandwidth in GB/s"),
})

DEVICE_SPEC = Spec.mapping({
    "vendor": Spec.scalar(str, enum=("nvidia", "amd")),
    "arch": Spec.scalar(str),
    "sm_count": _positive(int, "streaming multiprocessors"),
    "l2_mib": _positive(float, "L2 size in MiB"),
    "hbm_gbps": _positive(float, "peak memory bandwidth in GB/s"),
    "memory_gib": _positive(float, "device memory in GiB"),
})

LATENCY_CLASSES = ("valu", "trans", "salu", "smem", "lds", "vmem")
# Optional, per level the weights are read from: a load's latency in ns (a clock of its own).
LATENCY_LEVELS = ("llc_ns", "vram_ns")
LATENCY_SPEC = Spec.mapping({
    **{c: Spec.scalar(float, minimum=1,
                      fix=f"cycles from a {c} instruction's issue to a dependent issue, with "
                          "its source in a comment") for c in LATENCY_CLASSES},
    **{lv: Spec.scalar(float, required=False, minimum=1,
                       fix=f"{lv.split('_')[0].upper()} load-to-use latency in ns, with its "
                           "source; omit when there is none") for lv in LATENCY_LEVELS},
    "vgpr_banks": Spec.scalar(int, required=False, minimum=1,
                              fix="the VGPR file's bank count (bank = index mod it), with its "
                                  "source; omit when there is none"),
})

ARCHES_SPEC = Spec.mapping({
    "schema_version": _VERSION,
    "arches": Spec.map_of(ARCH_SPEC),
    "latencies": Spec.map_of(LATENCY_SPEC, required=False),
    "devices": Spec.map_of(DEVICE_SPEC, required=False),
})

SHAPES_SPEC = Spec.mapping({
    "schema_version": _VERSION,
    "shapes": Spec.list_of(Spec.mapping({
        "name": Spec.scalar(str),
        "M": _positive(int, "rows of the weight matrix"),
        "K": Spec.scalar(int, minimum=256, validators=(_k_multiple,),
                         fix="K must be a positive multiple of 256"),
        "set": Spec.scalar(str, enum=("full", "emu")),
        "role": Spec.scalar(str, required=False),
    })),
})

FORMATS_SPEC = Spec.mapping({
    "schema_version": _VERSION,
    "formats": Spec.map_of(Spec.mapping({
        "qt": _positive(int, "the engine dtype id (>= 1000 for suite-local formats)"),
        "aliases": Spec.list_of(Spec.scalar(str)),
        "group_bytes": _positive(int, "bytes per 256-weight group"),
        "sub_block": Spec.scalar(int, enum=(32, 128, 256)),
        "payload_offset": _positive(int, "byte offset of the 128 nibble bytes"),
        "header": Spec.scalar(str),
        "rotated": Spec.scalar(bool),
        "status": Spec.scalar(str, enum=STATUSES),
    })),
})


def _path(path: str | Path | None, default: str) -> Path:
    return Path(path) if path is not None else MATRICES_DIR / default


# -- loaders ----------------------------------------------------------------------------
def _arch_consistency(doc: YamlDoc) -> list[Problem]:
    """Facts the file states twice must agree (the flags feed gemv_rows_default)."""
    out = []
    for name, a in doc.data["arches"].items():
        key = ("arches", name)
        if not (isinstance(name, str) and name.startswith("gfx") and name[3:].isdigit()):
            out.append(problem(doc, key, f"arch name {name!r} is not a gfx target",
                               "use the LLVM processor name, e.g. gfx1100"))
            continue
        checks = (
            ("is_rdna2", a["family"] == "rdna2", "true exactly when family is rdna2"),
            ("is_rdna3_dgpu", a["family"] == "rdna3" and not a["apu"],
             "true exactly when family is rdna3 and apu is false"),
        )
        for field_name, want, rule in checks:
            if a[field_name] != want:
                out.append(problem(doc, (*key, field_name),
                                   f"{a[field_name]} contradicts family={a['family']}, "
                                   f"apu={a['apu']}", f"set {want} ({rule})"))
        want_wmma = {"rdna3": "gfx11", "rdna3.5": "gfx11", "rdna4": "gfx12"}.get(
            a["family"], "none")
        if a["wmma"] != want_wmma:
            out.append(problem(doc, (*key, "wmma"),
                               f"{a['wmma']} contradicts family={a['family']}",
                               f"set {want_wmma}"))
    return out


def _checked(path: Path, spec: Spec) -> YamlDoc:
    doc = check(load_yaml(path), spec)
    return doc


# The arches a file of a given content holds, by path: every check cell resolves its arch,
# and parsing and checking arches.yaml each time cost a check session ~1.5 s.  The file is
# still read on every call; a changed file is parsed and checked again.
_ARCHES_READ: dict[str, tuple[str, dict[str, Arch]]] = {}


def load_arches(path: str | Path | None = None) -> dict[str, Arch]:
    p = _path(path, "arches.yaml")
    try:
        text: str | None = safeio.read_text(p, limit=MAX_YAML_BYTES)
    except safeio.SafeIOError:
        text = None  # load_yaml reads it again and names the problem
    seen = _ARCHES_READ.get(str(p))
    if text is not None and seen is not None and seen[0] == text:
        return dict(seen[1])
    doc = check(load_yaml(p, text), ARCHES_SPEC)
    extra = _arch_consistency(doc)
    if extra:
        raise SchemaError(extra)
    arches = {name: Arch(name=name, **fields) for name, fields in doc.data["arches"].items()}
    if text is not None:
        _ARCHES_READ[str(p)] = (text, arches)
    return dict(arches)


def load_latencies(path: str | Path | None = None) -> dict[str, Latencies]:
    """Per-family latencies (arches.yaml ``latencies``; a family may be absent)."""
    doc = _checked(_path(path, "arches.yaml"), ARCHES_SPEC)
    table = doc.data.get("latencies") or {}
    bad = [problem(doc, ("latencies", fam), f"{fam!r} is not an RDNA family",
                   f"use one of {', '.join(FAMILIES)}") for fam in table if fam not in FAMILIES]
    if bad:
        raise SchemaError(bad)
    return {fam: Latencies(family=fam, **{c: float(v[c]) for c in LATENCY_CLASSES},
                           **{lv: float(v[lv]) for lv in LATENCY_LEVELS if lv in v},
                           vgpr_banks=int(v["vgpr_banks"]) if "vgpr_banks" in v else None)
            for fam, v in table.items()}


def load_devices(path: str | Path | None = None) -> dict[str, Device]:
    doc = _checked(_path(path, "arches.yaml"), ARCHES_SPEC)
    return {name: Device(name=name, **f) for name, f in (doc.data.get("devices") or {}).items()}


def load_shapes(path: str | Path | None = None, set: str | None = None) -> list[Shape]:
    doc = _checked(_path(path, "shapes.yaml"), SHAPES_SPEC)
    shapes = [Shape(**s) for s in doc.data["shapes"]]
    seen: dict[str, int] = {}
    dups = []
    for i, s in enumerate(shapes):
        if s.name in seen:
            dups.append(problem(doc, ("shapes", i, "name"), f"duplicate shape name {s.name!r}",
                                f"rename it (first used at shapes[{seen[s.name]}])"))
        seen[s.name] = i
    if dups:
        raise SchemaError(dups)
    return [s for s in shapes if set is None or s.set == set]


def load_formats(path: str | Path | None = None) -> dict[str, FormatEntry]:
    doc = _checked(_path(path, "formats.yaml"), FORMATS_SPEC)
    out = {}
    qts: dict[int, str] = {}
    problems = []
    for name, f in doc.data["formats"].items():
        if f["qt"] in qts:
            problems.append(problem(doc, ("formats", name, "qt"),
                                    f"qt={f['qt']} already used by {qts[f['qt']]}",
                                    "every format needs its own qt"))
        qts[f["qt"]] = name
        out[name] = FormatEntry(name=name, **{**f, "aliases": tuple(f["aliases"])})
    if problems:
        raise SchemaError(problems)
    return out


NVIDIA_ARCH = re.compile(r"sm_\d+")


class ArchError(ValueError):
    """An ``--arch`` value that names no known target; the message names the known ones."""


def resolve_arches(names: Sequence[str] | None, path: str | Path | None = None) -> list[Arch]:
    """The one ``--arch`` resolver: repeatable values, comma lists, ``all`` (every gfx
    target of arches.yaml) and ``sm_XX`` (the cuda backend's targets) -> Arch list, in the
    order given, without duplicates.  Nothing given, an empty entry (``--arch ,``,
    ``HQVAL_ARCH=gfx1010,,`` from a list whose other entries expanded to nothing: an arch
    that silently vanished) or an unknown name is an ``ArchError`` naming the fix."""
    if not names:
        raise ArchError("no --arch given; pass --arch gfx1100 (repeatable, or a comma list), "
                        "or --arch all")
    entries = [n.strip() for raw in names for n in str(raw).split(",")]
    if not any(entries):
        raise ArchError(f"--arch {','.join(map(str, names))!r} names no arch; pass --arch "
                        "gfx1100 (repeatable, or a comma list), or --arch all")
    if not all(entries):
        raise ArchError(f"--arch {','.join(map(str, names))!r} has an empty entry (an arch "
                        "that expanded to nothing?); pass --arch gfx1100 (repeatable, or a "
                        "comma list without empty entries), or --arch all")
    flat = entries
    arches = load_arches(path)
    unknown = [n for n in flat if n != "all" and n not in arches and not NVIDIA_ARCH.fullmatch(n)]
    if unknown:
        raise ArchError(f"unknown arch {', '.join(unknown)}; known: {', '.join(arches)}, "
                        "sm_XX for the cuda backend (or 'all')")
    out: dict[str, Arch] = {}
    for n in flat:
        for a in (arches.values() if n == "all" else
                  [arches[n] if n in arches else Arch.nvidia(n)]):
            out.setdefault(a.name, a)
    return list(out.values())


def gfx_arches(names: Sequence[str] | None, what: str) -> list[Arch]:
    """``resolve_arches`` for a command that builds gfx code objects (compile, audit, the
    emulator): an ``sm_XX`` target is an ``ArchError`` naming why."""
    arches = resolve_arches(names)
    nvidia = [a.name for a in arches if not a.is_amd]
    if nvidia:
        raise ArchError(f"--arch {', '.join(nvidia)}: {what} takes gfx targets; NVIDIA kernels "
                        "are built by NVRTC when the cuda backend loads them (hqval check/run)")
    return arches


def resolve_arch(name: str, path: str | Path | None = None) -> Arch:
    """One target by name (a cell's arch)."""
    return resolve_arches([name], path)[0]


def matrix_dict(arches_path: str | Path | None = None,
                formats_path: str | Path | None = None,
                shapes_path: str | Path | None = None,
                manifest: Manifest | None = None) -> dict[str, Any]:
    """Everything ``hqval matrix --json`` prints.  Kernels come from ``manifest`` (loaded
    by the caller: the matrix never imports the manifest loader, which reads the matrix);
    with each kernel, the arches it applies to."""
    arches = load_arches(arches_path)
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "arches": {n: a.to_dict() for n, a in arches.items()},
        "devices": {n: d.to_dict() for n, d in load_devices(arches_path).items()},
        "formats": {n: f.to_dict() for n, f in load_formats(formats_path).items()},
        "shapes": [s.to_dict() for s in load_shapes(shapes_path)],
    }
    if manifest is None:
        out["kernels"], out["manifest"] = [], None
        return out
    m = manifest
    kernels = []
    for spec in m.kernels:
        entry = {k: v for k, v in vars(spec).items() if _jsonable(v)}
        entry["arches"] = [n for n, a in arches.items() if spec.applies_to(a)]
        kernels.append(entry)
    out["kernels"] = kernels
    out["manifest"] = str(m.path)
    return out


def _jsonable(v: Any) -> bool:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return True
    if isinstance(v, (list, tuple)):
        return all(_jsonable(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _jsonable(x) for k, x in v.items())
    return False
