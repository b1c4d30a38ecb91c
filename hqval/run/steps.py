"""The steps of ``hqval run``, in order, each a plain function over the run's context:

    compile -> audit -> checks -> mutants -> timing -> admit -> report

A step covers every arch of the run.  It appends its rows through ``ctx.writer`` as they
are produced (the check cells one by one), reports each cell to ``ctx.progress`` and
returns a ``StepResult``; ``hqval.run.chain`` then compares the rows against the cells the
step was expected to produce (``ctx.expected``) and marks it done or not.  A step skips
the cells the run already has (``--resume``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hqval import isa, provenance, toolchain
from hqval import junit as junit_xml
from hqval.admission import Admission, Judged, JudgedRun, Policy, dumps, judge, load_policy
from hqval.checks import mutation, rowcache, session
from hqval.checks.cell import CHECKS, Cell
from hqval.manifest import KernelSpec
from hqval.result import Row, Status
from hqval.results import store
from hqval.run.context import RunContext, StepResult
from hqval.timing import bench, harness
from hqval.timing.gemv import Shape as GemvShape

if TYPE_CHECKING:
    from hqval.matrix import Arch

HARDWARE = ("hip", "cuda")

Step = Callable[[RunContext], StepResult]


def note_row(step: str, arch: str, backend: str, message: str,
             skipped_by: str = "") -> Row:
    """A step's own cell on an arch where it has nothing to do (``step[-|arch|backend]``);
    ``skipped_by`` names the flag that skipped a gate (admission says so in its reasons)."""
    return Row("step", step, "-", arch, backend, Status.SKIPPED, message=message,
               details={"skipped_by": skipped_by} if skipped_by else {})


def _emit(ctx: RunContext, rows: Sequence[Row], *, kills: frozenset[str] = frozenset()
          ) -> list[Row]:
    """Append the rows the run does not have yet, and report each as a finished cell."""
    new = [r for r in rows if r.identity not in ctx.writer.done]
    ctx.writer.append(new)
    for r in new:
        ctx.progress.cell(r.identity, _shown(r, kills))
    return new


def _shown(row: Row, kills: frozenset[str]) -> str:
    """A mutant's failing cell is a kill (the suite did its job), not a failure; a check
    that does not apply to its cell (stored as unsupported) is n/a, not unsupported."""
    if row.kernel in kills and row.kind != "mutant" and row.status is Status.FAIL:
        return "kill"
    if row.kind == "check" and row.status is Status.UNSUPPORTED:
        return "n/a"
    if row.kind == "mutant":
        return {Status.PASS: "kill", Status.FAIL: "survived"}.get(row.status, str(row.status))
    return str(row.status)


def kernels(ctx: RunContext) -> list[KernelSpec]:
    """Every kernel the run builds: the manifest's, then the mutants' (unless skipped)."""
    return [*ctx.manifest.kernels, *(ctx.mutants.kernels if ctx.mutants else [])]


def _mutant_names(ctx: RunContext) -> frozenset[str]:
    return frozenset(m.name for m in ctx.mutants.kernels) if ctx.mutants else frozenset()


# ---------------------------------------------------------------------------- compile


def _compile_all(ctx: RunContext, shown: bool = False) -> list[Row]:
    """``shown``: each cell goes to the progress display as it is compiled."""
    amd = [a for a in ctx.arches if a.is_amd]

    def done(c: toolchain.CompileCell) -> None:
        r = c.row()
        ctx.progress.cell(r.identity, _shown(r, frozenset()))

    cells = toolchain.compile_matrix(kernels(ctx), amd, cache_dir=ctx.config.cache_dir,
                                     include_unsupported=True,
                                     on_cell=done if shown else None) if amd else []
    for c in cells:
        if c.result is not None and c.result.ok:
            ctx.compiled[(c.spec.name, c.arch)] = c.result
        elif c.result is not None and c.result.details.get("infrastructure"):
            ctx.compile_infrastructure.add((c.spec.name, c.arch))
        elif c.result is not None and (gap := toolchain.missing_builtin(c.result.message)):
            ctx.compile_gaps[(c.spec.name, c.arch)] = gap
    if cells:  # every file the compiler read, by sha256 (hqval.provenance)
        known = dict(ctx.writer.envelope.get("provenance") or {})
        deps = [d for c in cells if c.result is not None for d in c.result.dependencies]
        known["files"] = provenance.files(deps, Path(ctx.manifest.path).parent)
        ctx.writer.update_envelope(provenance=known)
    rows = [c.row() for c in cells]
    # the sha256 of every (kernel, arch) object the run built: admission accepts a row
    # only when it judged the object recorded here
    objects = {f"{r.kernel}|{r.arch}": r.object_sha256 for r in rows if r.object_sha256}
    ctx.writer.update_envelope(objects=objects)
    for a in ctx.arches:
        if not a.is_amd:
            rows.append(note_row("compile", a.name, ctx.backend_label(a.name),
                                 f"compile: {a.name} kernels are built by NVRTC when the "
                                 "cuda backend loads them; no gfx code object to compile"))
    return rows


def compile(ctx: RunContext) -> StepResult:
    """Compile every kernel (and mutant) for every gfx arch it applies to; the validated
    cache makes a resumed run's recompile cheap."""
    t0 = time.monotonic()
    ctx.progress.start("compile", len(ctx.expected.get("compile", [])))
    rows = _emit(ctx, _compile_all(ctx, shown=True))
    return StepResult("compile", tuple(rows), seconds=time.monotonic() - t0)


# ---------------------------------------------------------------------------- audit


def audit(ctx: RunContext) -> StepResult:
    """The ISA audit of every compiled code object; a kernel that did not compile gets an
    error row per rule (no verdict: its compile row says why)."""
    t0 = time.monotonic()
    ctx.progress.start("audit", len(ctx.expected.get("audit", [])))
    if not ctx.compiled:
        _compile_all(ctx)  # a resumed run that skipped the compile step
    rows: list[Row] = []
    amd = [a for a in ctx.arches if a.is_amd]
    kills = _mutant_names(ctx)
    # every arch at once, so the audits the cache does not have run on every CPU; the
    # display follows cell by cell as each one's rows are known
    def shown(done: list[Row]) -> None:
        for r in done:
            ctx.progress.cell(r.identity, _shown(r, kills))

    by_arch: dict[str, list[Row]] = {}
    results = isa.audit_arches(
        [(a, [(s, ctx.compiled[(s.name, a.name)]) for s in kernels(ctx)
              if s.applies_to(a) and (s.name, a.name) in ctx.compiled]) for a in amd],
        cache_dir=ctx.config.cache_dir, on_rows=shown)
    for a, arch_rows in zip(amd, results, strict=True):
        by_arch[a.name] = arch_rows
    for a in ctx.arches:
        if not a.is_amd:
            rows.append(note_row("audit", a.name, ctx.backend_label(a.name),
                                 f"audit: {a.name} code is NVRTC's; no gfx ISA to audit"))
            continue
        specs = [s for s in kernels(ctx) if s.applies_to(a)]
        rows += [_judged_object(ctx, r) for r in by_arch[a.name]]
        for s in specs:
            if (s.name, a.name) not in ctx.compiled and (s.name, a.name) in ctx.compile_gaps:
                gap = ctx.compile_gaps[(s.name, a.name)]
                rows += [Row("audit", f"audit_{rule}", s.name, a.name, "isa", Status.SKIPPED,
                             message=f"untested: the compiler lacks {gap}: {s.name} was not "
                                     f"built for {a.name} (see compile[{s.name}|{a.name}|"
                                     "toolchain])", details={"toolchain_gap": gap})
                         for rule in isa.RULES]
            elif (s.name, a.name) not in ctx.compiled:
                infra = (s.name, a.name) in ctx.compile_infrastructure
                rows += [Row("audit", f"audit_{rule}", s.name, a.name, "isa", Status.ERROR,
                             message=f"not audited: {s.name} did not compile for {a.name} "
                                     f"(see compile[{s.name}|{a.name}|toolchain])",
                             details={"infrastructure": True} if infra else {})
                         for rule in isa.RULES]
    new = _emit(ctx, rows, kills=kills)
    return StepResult("audit", tuple(new), seconds=time.monotonic() - t0)


def _judged_object(ctx: RunContext, row: Row) -> Row:
    """``row`` naming the code object the run compiled for its (kernel, arch)."""
    res = ctx.compiled.get((row.kernel, row.arch))
    if res is None or res.code_object is None or row.object_sha256 is not None:
        return row
    return dataclasses.replace(row, object_sha256=toolchain.file_sha256(res.code_object))


# ---------------------------------------------------------------------------- checks


# A session's finished cells are appended in batches (one write + fsync each) of at most
# this many rows, or as soon as a row arrives this long after the last append, and always
# when the session ends or raises: a killed run loses no appended row (the store's
# guarantee), only cells finished since the last append, which --resume runs again.
SESSION_BATCH_ROWS = 64
SESSION_BATCH_SECONDS = 0.5


class _SessionRows:
    """The rows of one session's cells as they finish, appended in batches."""

    def __init__(self, ctx: RunContext, kills: frozenset[str]) -> None:
        self.ctx = ctx
        self.kills = kills
        self.pending: list[Row] = []
        self.ids: set[str] = set()
        self.rows: list[Row] = []
        self.last = time.monotonic()

    def add(self, row: Row) -> None:
        if row.identity in self.ids or row.identity in self.ctx.writer.done:
            return  # a cell reported again counts once
        self.pending.append(row)
        self.ids.add(row.identity)
        if len(self.pending) >= SESSION_BATCH_ROWS or \
                time.monotonic() - self.last >= SESSION_BATCH_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.rows.extend(_emit(self.ctx, self.pending, kills=self.kills))
            self.pending = []
        self.last = time.monotonic()


def _remembered(ctx: RunContext, manifests: list[Path], backend: str, arches: list[str],
                cells: list[str], out: _SessionRows) -> rowcache.SessionCache | None:
    """The check row cache of a session on the emulator (``hqval.checks.rowcache``; None
    where rows are not remembered): the rows it remembers of ``cells`` the run lacks are
    appended now, as the session's would be."""
    if not rowcache.enabled(backend):
        return None
    cache = rowcache.SessionCache(
        toolchain.cache_base(ctx.config.cache_dir), manifests, ctx.config.seed,
        {a: ctx.arch(a) for a in arches}, ctx.writer.envelope.get("objects") or {})
    for row in cache.remembered(c for c in cells if c not in ctx.writer.done):
        out.add(row)
    out.flush()
    return cache


def _session(ctx: RunContext, step: str, manifests: list[Path], cells: list[str],
             mutant_rows: list[Row] | None = None) -> tuple[list[Row], str]:
    """The check cells of ``manifests`` on every arch, one pytest session per backend
    (``cells``: the identities it must produce; on the emulator those the check row cache
    remembers are taken from it, and a session whose every cell it answered is not
    started);
    finished cells are appended in batches (``SESSION_BATCH_ROWS``), the last when the
    session ends, also when it raises.  Returns (rows, why the session fell short).
    ``mutant_rows``: the session runs the mutants' cells too (``_together``); their rows
    are appended in the same batches, shown as the mutants step shows them, and collected
    there, not in the rows returned."""
    # (a real kernel is never a mutant: the kills change only how mutants' cells show)
    kills = _mutant_names(ctx) if step == "mutants" or mutant_rows is not None \
        else frozenset()
    out = _SessionRows(ctx, kills)

    by_backend: dict[str, list[str]] = {}
    for a in ctx.arches:
        by_backend.setdefault(ctx.backend_label(a.name), []).append(a.name)
    problems: list[str] = []
    try:
        for backend, arches in by_backend.items():
            tag = "-".join(arches) if len(arches) < 3 else backend
            junit = ctx.writer.path / f"junit-{step}-{tag}.xml"
            remembered = _remembered(ctx, manifests, backend, arches, cells, out)
            if remembered is not None:
                junit_xml.add_cases(junit, remembered.junit_cases())
                if remembered.answered and all(c in ctx.writer.done for c in cells
                                               if c.rsplit("|", 2)[-2] in arches):
                    continue  # every cell answered or already run: no session to start
            result = session.run_cells(
                manifests, arches, backend, workers=ctx.config.workers,
                junit_xml=str(junit), seed=ctx.config.seed, verbose=ctx.config.verbose,
                skip=ctx.writer.done, on_row=out.add, cache_dir=ctx.config.cache_dir,
                on_objects=remembered.keep if remembered is not None else None)
            out.flush()
            why = result.problem()
            if why:
                problems.append(why)
    finally:
        out.flush()
        if mutant_rows is not None:
            mutant_rows.extend(r for r in out.rows if r.kernel in kills)
    if mutant_rows is not None:
        return [r for r in out.rows if r.kernel not in kills], "; ".join(problems)
    return out.rows, "; ".join(problems)


def _together(ctx: RunContext) -> bool:
    """Whether the checks step runs the mutants' check cells in its session too: one
    controller and one pair of workers for both, which decode, translate and compute the
    references once, and replay the baselines' launches the real kernels' cells made
    (the mutants' bit identity compares with the same v1 launches).  Only when the
    mutants resolve in the run's manifest as they do in a session of their own (a
    session naming one kernel manifest resolves its mutants there)."""
    if ctx.mutants is None:
        return False
    return Path(ctx.mutants.real_manifest).resolve() == Path(ctx.manifest.path).resolve()


def _mutant_cells(ctx: RunContext) -> list[str]:
    """The mutants step's check cells (its expected cells but the kill verdicts)."""
    return [i for i in ctx.expected.get("mutants", [])
            if not i.startswith(f"{mutation.VERDICT_CHECK}[")]


def checks(ctx: RunContext) -> StepResult:
    """Every check cell (check x kernel x arch) of the manifest under pytest."""
    t0 = time.monotonic()
    if not _together(ctx):
        ctx.progress.start("checks", len(ctx.expected.get("checks", [])))
        rows, why = _session(ctx, "checks", [Path(ctx.manifest.path)],
                             ctx.expected.get("checks", []))
        return StepResult("checks", tuple(rows), error=why, seconds=time.monotonic() - t0)
    assert ctx.mutants is not None
    ctx.progress.start("checks", len(ctx.expected.get("checks", [])) + len(_mutant_cells(ctx)))
    ctx.mutant_rows = []
    rows, why = _session(ctx, "checks", [Path(ctx.manifest.path), Path(ctx.mutants.path)],
                         [*ctx.expected.get("checks", []), *_mutant_cells(ctx)],
                         mutant_rows=ctx.mutant_rows)
    return StepResult("checks", tuple(rows), error=why, seconds=time.monotonic() - t0)


# ---------------------------------------------------------------------------- mutants


def mutants(ctx: RunContext) -> StepResult:
    """The mutation kill matrix: every mutant's check cells, then one verdict row per
    (mutant, arch): killed when a check cell or audit rule failed it (an error is no kill)."""
    t0 = time.monotonic()
    if ctx.mutants is None:
        rows = [note_row("mutants", a.name, ctx.backend_label(a.name),
                         "mutants step disabled (--no-mutants): the mutants gate was not "
                         "applied", skipped_by="--no-mutants") for a in ctx.arches]
        ctx.progress.start("mutants", len(rows))
        new = _emit(ctx, rows)
        return StepResult("mutants", tuple(new), skipped="--no-mutants",
                          seconds=time.monotonic() - t0)
    ctx.progress.start("mutants", len(ctx.expected.get("mutants", [])))
    # the cells the checks step's session ran (``_together``) count as this step's; a
    # session of its own runs what is left (all of them when the checks step did not run
    # them, those it lost when its session fell short, none otherwise)
    rows = list(ctx.mutant_rows)
    for r in rows:
        ctx.progress.cell(r.identity, _shown(r, _mutant_names(ctx)))
    why = ""
    if not _together(ctx) or any(i not in ctx.writer.done for i in _mutant_cells(ctx)):
        more, why = _session(ctx, "mutants", [Path(ctx.mutants.path)], _mutant_cells(ctx))
        rows += more
    names = _mutant_names(ctx)
    # this session's cells plus those an interrupted earlier session left in the run
    everything = store.load(ctx.writer.path).rows
    stored = [r for r in everything if r.kernel in names and r.kind in ("check", "audit")]
    # the real kernels' rows: a check or rule failing a mutant's real kernel is no kill
    real_rows = [r for r in everything if r.kernel not in names
                 and r.kind in ("check", "audit")]
    built: dict[tuple[str, str], mutation.Built] = {}
    for m in ctx.mutants.kernels:
        for a in ctx.arches:
            if not a.is_amd:
                built[(m.name, a.name)] = mutation.Built(not m.amd_only, "AMD-only source")
            elif not m.applies_to(a):
                built[(m.name, a.name)] = mutation.Built(False, m.not_for(a))
            else:
                ok = (m.name, a.name) in ctx.compiled
                built[(m.name, a.name)] = mutation.Built(ok, "" if ok else "did not compile")
    verdict_rows: list[Row] = []
    have = {r.identity for r in stored}
    expected = set(ctx.expected.get("mutants", []))
    for a in ctx.arches:
        for v in mutation.verdicts(ctx.mutants.kernels, [a.name], ctx.backend_label(a.name),
                                   built, [r for r in stored if r.arch == a.name],
                                   [r for r in real_rows if r.arch == a.name]):
            cells = [Cell(c, v.kernel, a.name, v.backend).identity for c in CHECKS]
            if v.status is Status.FAIL and any(c in expected and c not in have
                                               for c in cells):
                # not killed, but not every cell ran: no verdict (the step stays
                # incomplete and --resume runs the rest), never "survived"
                continue
            verdict_rows.append(_judged_object(ctx, v))
    if ctx.config.manifest is not None and ctx.manifest.mutants is None:
        for r in verdict_rows:  # the suite's own mutants on an external tree
            r.details["self_test"] = True
            r.details["label"] = "suite self-test"
    rows += _emit(ctx, verdict_rows)
    return StepResult("mutants", tuple(rows), error=why, seconds=time.monotonic() - t0)


# ---------------------------------------------------------------------------- timing


def timing_plan(ctx: RunContext, arch: Arch, policy: Policy) -> bench.BenchPlan:
    """The bench a run times on a hardware ``arch``: every shape of shapes.yaml, hot and
    cold, the arch's rows per block, gated by ``policy``.  ``hqval.run.expected`` derives
    the step's cells from this same plan before anything runs."""
    from hqval.matrix import load_shapes

    return bench.BenchPlan(
        arch=arch.name, shapes=[GemvShape(int(s.M), int(s.K)) for s in load_shapes()],
        modes=["hot", "cold"], rows=[arch.gemv_rows_default],
        config=harness.TimingConfig(iterations=ctx.config.timing_iterations,
                                    runs=ctx.config.timing_runs),
        seed=ctx.config.seed, gates=bench.policy_gates(policy))


def timing(ctx: RunContext) -> StepResult:
    """Interleaved device-event timing, on hardware backends only (the emulator has no
    clock: its cells stay emulated, never measured).  Every cell of the plan is expected
    up front (``hqval.run.expected``): one the bench did not write leaves the step, and
    the run, incomplete."""
    t0 = time.monotonic()
    ctx.progress.start("timing", len(ctx.expected.get("timing", [])))
    rows: list[Row] = []
    for a in ctx.arches:
        backend = ctx.backends[a.name]
        if not ctx.config.timing:
            rows += _emit(ctx, [note_row("timing", a.name, backend.name,
                                         "timing disabled (--no-timing)",
                                         skipped_by="--no-timing")])
            continue
        if backend.name not in HARDWARE:
            rows += _emit(ctx, [note_row(
                "timing", a.name, backend.name,
                f"timing needs device events on hardware; {backend.name} has no clock "
                "(cells stay emulated, not measured)")])
            continue
        rows += bench.run_bench(backend, ctx.manifest, timing_plan(ctx, a, ctx.policy),
                                on_lock_wait=ctx.progress.note,
                                emit=lambda batch: _emit(ctx, list(batch)))
    return StepResult("timing", tuple(rows), seconds=time.monotonic() - t0)


# ---------------------------------------------------------------------------- admit


def judged(ctx: RunContext) -> Judged:
    """The run's rows (and its baselines') judged under the run's policy."""
    run = store.load(ctx.writer.path)
    baseline = [store.load(p) for p in ctx.config.baseline]
    return judge([run], ctx.policy, baseline=baseline)


def admission(ctx: RunContext) -> Admission:
    return judged(ctx).admission


def admit(ctx: RunContext) -> StepResult:
    """Admission over the run's rows (``hqval.admission``): one row per (qt, arch, path)
    on the gfx arches; an NVIDIA arch is reported, not admitted."""
    t0 = time.monotonic()
    ctx.progress.start("admit", len(ctx.expected.get("admit", [])))
    ctx.judged = judged(ctx)
    adm = ctx.judged.admission
    rows = [c.to_row() for c in adm.cells]
    rows += [note_row("admit", a.name, ctx.backend_label(a.name),
                      f"{a.name} is not an admission target (the policy covers RDNA gfx "
                      "arches); its checks and timing are reported only")
             for a in ctx.arches if not a.is_amd]
    # admission is recomputed on every run (a resumed run's rows changed), so its rows
    # are always appended: the newest supersedes
    ctx.writer.append(rows)
    # the report shows the admission rows too: they join the judged run (not evidence,
    # nothing to re-judge)
    ctx.judged = _with_rows(ctx.judged, ctx.writer.written[-len(rows):] if rows else [])
    for r in rows:
        ctx.progress.cell(r.identity, str(r.status))
    return StepResult("admit", tuple(rows), seconds=time.monotonic() - t0)


# ---------------------------------------------------------------------------- report


def report(ctx: RunContext) -> StepResult:
    """admission.json, report.html and checkpoint.md in the run directory."""
    t0 = time.monotonic()
    ctx.progress.start("report", 0)
    out = ctx.writer.path / "report"
    for p in [out, *(out.rglob("*") if out.is_dir() and not out.is_symlink() else [])]:
        store.not_a_link(p)  # the report writes follow links: never outside --out
    # an earlier attempt's verdict files go first: a step cut short leaves none of them
    # saying what the rows no longer say (admission.json is written last)
    for stale in (ctx.writer.path / "admission.json", out / "admission.json",
                  out / "checkpoint.md", out / "report.html"):
        stale.unlink(missing_ok=True)
    j = ctx.judged if ctx.judged is not None else judged(ctx)
    write_report(j.runs, j.admission, j.comparison, out, ctx.writer.path / "admission.json",
                 policy=ctx.policy)
    return StepResult("report", (), seconds=time.monotonic() - t0)


def _with_rows(j: Judged, rows: Sequence[Row]) -> Judged:
    """``j`` with ``rows`` (a run's own admission rows, never re-judged) added to its
    single run: an admission row supersedes the run's earlier one of that cell."""
    if not rows or len(j.runs) != 1:
        return j
    (run,) = j.runs
    new = {r.identity for r in rows}
    kept = tuple(r for r in run.rows if r.identity not in new) + tuple(rows)
    return dataclasses.replace(j, runs=(dataclasses.replace(run, rows=kept),))


def write_report(runs: Sequence[JudgedRun], adm: Admission, cmp: object,
                 out_dir: Path, admission_json: Path | None = None,
                 policy: Policy | None = None) -> dict[str, Path]:
    """The report step's files (``hqval report`` writes the same): report.html,
    checkpoint.md and, where asked, admission.json, from judged runs
    (``hqval.admission.judge``).  ``policy`` is the one that judged them: the report
    draws its gates."""
    from hqval.report.render import build
    from hqval.report.render import write_report as render
    from hqval.results.compare import Comparison

    comparison = cmp if isinstance(cmp, Comparison) else None
    loaded = [store.Run(r.path, r.envelope, list(r.rows), r.written_schema) for r in runs]
    paths = render(build(loaded, adm, comparison, policy=policy or load_policy(),
                         judged=True), out_dir)
    if admission_json is not None:
        store.write_atomic(admission_json, dumps(adm))
        paths["admission"] = admission_json
    return paths


STEPS: tuple[tuple[str, Step], ...] = (
    ("compile", compile),
    ("audit", audit),
    ("checks", checks),
    ("mutants", mutants),
    ("timing", timing),
    ("admit", admit),
    ("report", report),
)
