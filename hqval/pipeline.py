"""``hqval run``: the whole chain for one or more arches, as small steps.

    matrix -> compile -> audit -> checks -> mutants -> timing -> admit -> report

Each step is a function ``(ctx, arch) -> rows`` (nox's workflow style: small tasks run in
order); the chain appends every step's rows to the run directory as soon as the step
finishes for an arch (the check and mutant cells one by one, as each finishes), then
writes a ``step`` row marking it done.  ``--resume`` skips the (step, arch) pairs that have
their mark and, inside a step, every cell that already has a row, so an interrupted run
continues where it stopped; a step that hit a missing piece has no mark and is retried,
its new rows superseding the old ones.

A step whose module is not part of this build, or whose tool or backend cannot run,
produces an ``error`` row flagged ``infrastructure`` naming the missing piece: never a
pass, and admission then fails closed (exit 2).
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from hqval.result import Row, Status
from hqval.results.store import RunWriter, load, make_envelope

HARDWARE = ("hip", "cuda")


class MissingPiece(RuntimeError):
    """A step needs a module, function, tool or backend this build or machine lacks."""


def need(module: str, attr: str | None = None, issue: str = "") -> Any:
    """Import ``module`` (and fetch ``attr``), or raise MissingPiece naming what is absent."""
    where = f" (issue {issue})" if issue else ""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            raise MissingPiece(f"{module} is not part of this build{where}") from exc
        raise MissingPiece(f"{module} needs the Python package {exc.name!r}") from exc
    if attr is None:
        return mod
    if not hasattr(mod, attr):
        raise MissingPiece(f"{module}.{attr} is not part of this build{where}")
    return getattr(mod, attr)


# ---------------------------------------------------------------------------- progress


class Progress:
    """One-line progress bars on a terminal, plain lines otherwise (CI logs)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()

    def bar(self, label: str, done: int, total: int, note: str = "") -> None:
        width = 24
        fill = int(width * done / total) if total else width
        line = f"{label:<10} [{'#' * fill}{'.' * (width - fill)}] {done}/{total} {note}"
        if self.tty:
            end = "\n" if done >= total else ""
            self.stream.write("\r" + line.ljust(100) + end)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def say(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


# ---------------------------------------------------------------------------- config


@dataclass
class RunConfig:
    arches: list[str]
    out: Path
    backend: str = "auto"
    manifest: Path | None = None
    resume: bool = False
    baseline: list[Path] = field(default_factory=list)
    seed: int = 0
    workers: str = "2"
    mutants: bool = True
    timing: bool = True  # only ever runs on a hardware backend
    timing_iterations: int = 100
    timing_runs: int = 3
    cache_dir: str | None = None
    argv: Sequence[str] | None = None


@dataclass
class Context:
    config: RunConfig
    writer: RunWriter
    progress: Progress
    arches: dict[str, Any]  # name -> hqval.matrix.Arch
    manifest: Any  # hqval.manifest.Manifest
    backends: dict[str, Any] = field(default_factory=dict)  # arch -> Backend
    finished: set[str] = field(default_factory=set)  # step marks of a resumed run
    compiled: dict[tuple[str, str], Any] = field(default_factory=dict)  # (kernel, arch)


StepFn = Callable[[Context, str], list[Row]]


def _error(step: str, arch: str, message: str) -> Row:
    """The step's own cell (``step[-|arch|step]``) as an infrastructure error; a later
    successful retry's mark has the same identity and supersedes it."""
    return Row(kind="step", check=step, kernel="-", arch=arch, backend="step",
               status=Status.ERROR, message=message, details={"infrastructure": True})


def backend_label(ctx: Context, arch: str) -> str:
    b = ctx.backends.get(arch)
    return str(b.name) if b is not None else ctx.config.backend


# ---------------------------------------------------------------------------- steps


def is_rdna(arch: str) -> bool:
    return not arch.startswith("sm_")


def _nvrtc_note(step: str, arch: str) -> list[Row]:
    return [Row("step", step, "-", arch, "cuda", Status.SKIPPED,
                message=f"{step}: {arch} kernels are built by NVRTC when the cuda backend "
                        "loads them; no gfx code object to compile or audit")]


def step_compile(ctx: Context, arch: str) -> list[Row]:
    """Compile every kernel (and mutant) that applies to ``arch``.  Cached objects make a
    resumed run's recompile cheap; only cells without a row yet are reported again."""
    if not is_rdna(arch):
        return _nvrtc_note("compile", arch)
    compile_matrix = need("hqval.toolchain", "compile_matrix", "3")
    cells = compile_matrix(_all_kernels(ctx), [ctx.arches[arch]],
                           cache_dir=ctx.config.cache_dir, include_unsupported=True)
    for c in cells:
        if c.result is not None and c.result.ok:
            ctx.compiled[(c.spec.name, arch)] = c.result
    rows: list[Row] = [c.row() for c in cells]
    return [r for r in rows if r.identity not in ctx.writer.done]


def _ensure_compiled(ctx: Context, arch: str) -> None:
    """A resumed run that skipped the compile step still needs the code objects."""
    if not any(a == arch for _, a in ctx.compiled):
        step_compile(ctx, arch)


def step_audit(ctx: Context, arch: str) -> list[Row]:
    if not is_rdna(arch):
        return _nvrtc_note("audit", arch)
    audit = need("hqval.isa", "audit_matrix", "3")
    _ensure_compiled(ctx, arch)
    cells = [(spec, ctx.compiled[(spec.name, arch)]) for spec in _all_kernels(ctx)
             if (spec.name, arch) in ctx.compiled]
    rows: list[Row] = list(audit(cells, ctx.arches[arch], cache_dir=ctx.config.cache_dir))
    return rows


def _open_backend(ctx: Context, arch: str) -> Any:
    if arch not in ctx.backends:
        backends = need("hqval.backends", issue="5")
        try:
            ctx.backends[arch] = backends.get(ctx.config.backend, arch)
        except backends.BackendUnavailable as exc:
            raise MissingPiece(f"backend {ctx.config.backend!r} for {arch}: {exc}") from exc
    return ctx.backends[arch]


def _cells(ctx: Context, arch: str, manifests: list[Path], name: str) -> list[Row]:
    """Run the check cells of ``manifests`` for one arch under pytest (the checks plugin).
    Each finished cell is appended to the run at once (``hqval.results.live``) and the
    cells the run already has are deselected, so an interrupted run resumes per cell."""
    from hqval.results import live

    run_cells = need("hqval.commands.check", "run_cells", "5")
    backend = _open_backend(ctx, arch)
    junit = ctx.writer.path / f"junit-{name}-{arch}.xml"
    with tempfile.TemporaryDirectory(prefix="hqval-run-") as tmp, \
            live.attach(ctx.writer, set(ctx.writer.done), Path(tmp)):
        code, rows = run_cells([m.resolve() for m in manifests], [arch], backend.name,
                               json_out=Path(tmp) / "rows.json", checks=None, keyword=None,
                               workers=ctx.config.workers, junit_xml=str(junit),
                               seed=ctx.config.seed, quiet=True)
        already = set(live.appended)
    if code == 5:  # pytest: nothing collected, every cell was already in the run
        rows = []
    elif code not in (0, 1) and not rows:
        raise MissingPiece(f"the {name} cells did not run (pytest exit {code}); "
                           f"rerun `hqval check --arch {arch}` to see why")
    ctx.progress.bar(name, 1, 1, f"{arch}: {len(rows)} cells")
    # rows the live plugin appended are in the run already
    out: list[Row] = [r for r in rows if r.identity not in already]
    return out


def step_checks(ctx: Context, arch: str) -> list[Row]:
    return _cells(ctx, arch, [Path(ctx.manifest.path)], "checks")


def step_mutants(ctx: Context, arch: str) -> list[Row]:
    """The mutation kill matrix for one arch: every mutant's check cells, then one verdict
    row per mutant (``hqval.checks.mutation.verdicts``: killed = some check or audit rule
    failed it; an error is no kill)."""
    if not ctx.config.mutants:
        return [Row("step", "mutants", "-", arch, backend_label(ctx, arch), Status.SKIPPED,
                    message="mutants step disabled (--no-mutants)")]
    load_mutants = need("hqval.manifest", "load_mutants", "5")
    path = Path(need("hqval.manifest", "DEFAULT_MUTANTS", "5"))
    if not path.exists():
        raise MissingPiece(f"{path} is not part of this build (issue 5)")
    mutants = load_mutants(path)
    build = need("hqval.commands.mutants", "build", "5")
    verdicts = need("hqval.checks.mutation", "verdicts", "5")
    built, audit_rows = build(mutants, [arch])
    rows = _cells(ctx, arch, [path], "mutants")
    names = {m.name for m in mutants.kernels}
    # this session's cells plus those an interrupted earlier session left in the run
    stored = {r.identity: r for r in load(ctx.writer.path).rows
              if r.kernel in names and r.arch == arch and r.kind == "check"}
    stored.update({r.identity: r for r in rows})
    mutant_rows = [*stored.values(), *(r for r in audit_rows if r.kernel in names)]
    label = next(iter(stored.values())).backend if stored else backend_label(ctx, arch)
    verdict_rows: list[Row] = verdicts(mutants.kernels, [arch], label, built, mutant_rows)
    # the mutants' audit rows are the audit step's already
    return [*rows, *verdict_rows]


def step_timing(ctx: Context, arch: str) -> list[Row]:
    label = backend_label(ctx, arch)
    if not ctx.config.timing:
        return [Row("step", "timing", "-", arch, label, Status.SKIPPED,
                    message="timing disabled (--no-timing)")]
    backend = _open_backend(ctx, arch)
    if backend.name not in HARDWARE:
        return [Row("step", "timing", "-", arch, backend.name, Status.SKIPPED,
                    message=f"timing needs device events on hardware; {backend.name} has "
                            "no clock (cells stay emulated, not measured)")]
    bench = need("hqval.timing.bench", issue="6")
    harness = need("hqval.timing.harness", issue="6")
    load_shapes = need("hqval.matrix", "load_shapes", "2")
    a = ctx.arches[arch]
    shapes = [need("hqval.timing.gemv", "Shape", "6")(int(s.M), int(s.K))
              for s in load_shapes()]
    plan = bench.BenchPlan(
        arch=arch, shapes=shapes, modes=["hot", "cold"], rows=[int(a.gemv_rows_default)],
        config=harness.TimingConfig(iterations=ctx.config.timing_iterations,
                                    runs=ctx.config.timing_runs),
        seed=ctx.config.seed)
    total = len(shapes) * 2
    count = [0]

    def progress(line: str) -> None:
        if line.startswith("[") and "A/A" not in line:
            count[0] += 1
            ctx.progress.bar("timing", min(count[0], total), total, line[:60])

    rows: list[Row] = bench.run_bench(backend, ctx.manifest, plan, progress=progress)
    return rows


def step_admit(ctx: Context, arch: str) -> list[Row]:
    from hqval.admission import admit_runs

    if not is_rdna(arch):
        return [Row("step", "admit", "-", arch, backend_label(ctx, arch), Status.SKIPPED,
                    message=f"{arch} is not an admission target (the policy covers RDNA "
                            "gfx arches); its checks and timing are reported only")]
    run = load(ctx.writer.path)
    baseline = [load(p) for p in ctx.config.baseline]
    adm, _ = admit_runs([run], baseline=baseline, only_arches=[arch])
    return [c.to_row() for c in adm.cells]


STEPS: list[tuple[str, StepFn]] = [
    ("compile", step_compile),
    ("audit", step_audit),
    ("checks", step_checks),
    ("mutants", step_mutants),
    ("timing", step_timing),
    ("admit", step_admit),
]


# ---------------------------------------------------------------------------- the chain


def _all_kernels(ctx: Context) -> list[Any]:
    return [*ctx.manifest.kernels, *_mutant_specs()] if ctx.config.mutants else \
        list(ctx.manifest.kernels)


def _mutant_specs() -> list[Any]:
    try:
        manifest = need("hqval.manifest", issue="3")
        if not Path(manifest.DEFAULT_MUTANTS).exists():
            return []
        return list(manifest.load_mutants().kernels)
    except MissingPiece:
        return []


def kernel_table(specs: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """What the envelope records per kernel, so admission works offline from the run."""
    return {s.name: {"qt": s.qt, "kind": s.kind, "requires": s.requires,
                     "baseline": s.baseline, "rows_per_block": s.rows_per_block,
                     "batch_tile": s.batch_tile, "residual": s.residual,
                     "mutant_of": s.mutant_of, "source": str(s.source)}
            for s in specs}


def open_run(config: RunConfig, progress: Progress) -> Context:
    """Load the matrix and manifest and create (or resume) the run directory.  Raises
    ValueError for bad input (an unknown arch, a broken manifest) before anything is
    written."""
    resolve_arches = need("hqval.matrix", "resolve_arches", "2")
    nvidia = [a for a in config.arches if a.startswith("sm_")]
    rdna = [a for a in config.arches if not a.startswith("sm_")]
    arches = {a.name: a for a in resolve_arches(rdna)} if rdna else {}
    for name in nvidia:  # the cuda backend's targets: checks and timing, no admission
        arches[name] = need("hqval.checks.cell", "NvidiaArch", "5")(name)
    manifest = need("hqval.manifest", "load_manifest", "3")(config.manifest)
    specs = list(manifest.kernels) + (_mutant_specs() if config.mutants else [])
    compiler = None
    compiler_version = None
    try:
        c = need("hqval.toolchain", "find_compiler", "3")()
        compiler, compiler_version = c.path, c.version
    except Exception as exc:  # recorded; the compile step reports it as a row
        progress.say(f"hqval run: no compiler: {exc}")
    external = config.manifest is not None
    envelope = make_envelope(
        backend=config.backend, arch=list(arches), compiler=compiler,
        compiler_version=compiler_version,
        kernel_tree=Path(config.manifest).resolve().parent if external and config.manifest
        else None,
        argv=config.argv, kernels=kernel_table(specs),
        extra={"manifest": str(Path(manifest.path).resolve()), "seed": config.seed,
               "steps": [name for name, _ in STEPS] + ["report"]})
    writer = RunWriter.create(config.out, envelope, resume=config.resume)
    finished = set()
    if config.resume:
        finished = {r.identity for r in load(writer.path).rows
                    if r.kind == "step" and r.backend == "step" and r.status is Status.PASS}
    return Context(config, writer, progress, arches, manifest, finished=finished)


def _record_backends(ctx: Context) -> None:
    if not ctx.backends:
        return
    info = {}
    for arch, b in ctx.backends.items():
        try:
            device = b.device_name()
        except Exception as exc:  # a device that cannot name itself is still recorded
            device = f"unknown ({exc})"
        info[arch] = {"backend": b.name, "selection": getattr(b, "selection", ""),
                      "device": device, "runtime": b.runtime_info()}
    names = sorted({v["backend"] for v in info.values()})
    ctx.writer.update_envelope(
        backend=",".join(names), backends=info,
        device=", ".join(sorted({str(v["device"]) for v in info.values()})),
        runtime={a: v["runtime"] for a, v in info.items()})


def run_step(ctx: Context, name: str, fn: StepFn, arch: str) -> list[Row]:
    """One step for one arch: its rows appended, then its ``step`` mark."""
    ident = f"{name}[-|{arch}|step]"
    if ident in ctx.finished:
        ctx.progress.say(f"{name:<10} {arch}: done in an earlier run (--resume), skipped")
        return []
    t0 = time.monotonic()
    first = len(ctx.writer.written)
    try:
        rows = fn(ctx, arch)
    except MissingPiece as exc:
        rows = [_error(name, arch, f"{name}: {exc}")]
    except Exception as exc:
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        rows = [_error(name, arch, f"{name} step crashed: {tb}")]
    # Rows of a (re)run step are all appended: on load a later row supersedes an earlier
    # one of the same cell, so a retried step replaces what it produced before.
    ctx.writer.append(rows)
    secs = time.monotonic() - t0
    summary = _step_summary(ctx.writer.written[first:], {m.name for m in _mutant_specs()})
    if not any(r.details.get("infrastructure") for r in rows):
        # the step's mark: --resume skips it; a step that hit a missing piece has none,
        # so a resumed run retries it
        ctx.writer.append([Row("step", name, "-", arch, "step", Status.PASS,
                               measured=round(secs, 2), message=f"{summary}, {secs:.1f} s")])
    ctx.progress.say(f"{name:<10} {arch}: {summary}, {secs:.1f} s")
    return rows


def _step_summary(written: Sequence[Row], mutant_names: set[str]) -> str:
    """Rows a step wrote (live-appended check cells included); failures of real kernels
    apart from those of mutants, which are meant to fail (a mutant's verdict row passes
    when it was killed)."""
    bad = {Status.FAIL, Status.ERROR}
    real = [r for r in written if r.kernel not in mutant_names or r.kind == "mutant"]
    text = f"{len(written)} rows, {sum(r.status in bad for r in real)} fail/error"
    on_mutants = sum(r.status in bad for r in written if r.kernel in mutant_names
                     and r.kind != "mutant")
    if on_mutants:
        text += f" (+{on_mutants} failing mutant cells: kills)"
    return text


@dataclass(frozen=True)
class RunResult:
    path: Path
    exit_code: int
    report: dict[str, Path]
    summary: str


def run_pipeline(config: RunConfig, progress: Progress | None = None) -> RunResult:
    from hqval.admission import admit_runs, dumps, load_policy, to_markdown
    from hqval.report.render import build, write_report
    from hqval.results.compare import to_markdown as compare_markdown

    progress = progress or Progress()
    ctx = open_run(config, progress)
    progress.say(f"hqval run: {', '.join(ctx.arches)} -> {ctx.writer.path}"
                 + (f" (resuming: {len(ctx.writer.done)} rows already there)"
                    if config.resume and ctx.writer.done else ""))
    for name, fn in STEPS:
        for arch in ctx.arches:
            run_step(ctx, name, fn, arch)
        if name == "checks":
            _record_backends(ctx)
    _record_backends(ctx)
    run = load(ctx.writer.path)
    baseline = [load(p) for p in config.baseline]
    adm, cmp = admit_runs([run], baseline=baseline,
                          only_arches=[a for a in ctx.arches if is_rdna(a)])
    (ctx.writer.path / "admission.json").write_text(dumps(adm))
    md = compare_markdown(cmp) if cmp is not None else ""
    exit_code = adm.exit_code
    others = adm.outside
    data = build([run], adm, md, policy=load_policy())  # the policy admit_runs used
    paths = write_report(data, ctx.writer.path / "report")
    lines = [to_markdown(adm),
             "rows of the real kernels and steps: "
             + ", ".join(f"{n} {s}" for s, n in data.row_counts().items()),
             "mutants: " + (", ".join(f"{n} {s}" for s, n in data.mutant_counts().items())
                            or "none ran"),
             *(f"infrastructure: {m}" for m in adm.infrastructure),
             *(f"failing outside admission: {i}" for i in others[:20]),
             f"report: {paths['html']}", f"checkpoint: {paths['markdown']}"]
    if md:
        lines.insert(1, md)
    return RunResult(ctx.writer.path, exit_code, paths, "\n".join(lines))


def default_out(arch: Sequence[str]) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    tag = "-".join(arch) if len(arch) <= 2 else f"{len(arch)}arches"
    return Path("runs") / f"{tag}-{stamp}"

