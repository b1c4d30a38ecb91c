"""``hqval run``: open the run (arches, manifests and backends checked and opened before
anything is compiled or written), then the steps of ``hqval.run.steps`` in order.

After each step the chain compares the rows in the run against the step's expected cells:
a step is done only when every one has a row.  Its mark (``step[-|arch|step]``, one per
arch) passes then; otherwise the mark is an infrastructure error naming what is missing
(a crashed worker, zero cells collected, a step that raised), which fails admission
closed.  ``--resume`` re-enters every step and runs only the cells without a row, and
refuses a run directory made with another manifest, arches, backend or suite commit.
"""

from __future__ import annotations

import hashlib
import shutil
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hqval import provenance
from hqval.admission import Admission, judge, load_policy, problem_lines
from hqval.backends import open_for
from hqval.manifest import KernelSpec, kernel_table, load_manifest, run_mutants
from hqval.matrix import Arch, resolve_arches
from hqval.result import Row, Status
from hqval.results.store import RunDirError, RunWriter, git_commit, load, make_envelope
from hqval.run.context import Progress, RunConfig, RunContext, StepResult
from hqval.run.expected import expected_cells
from hqval.run.progress import Silent, status_table
from hqval.run.steps import STEPS, Step
from hqval.toolchain import (
    ToolchainError,
    compiler_env,
    compiler_identity,
    file_sha256,
    find_compiler,
)

# the closing summary's lines of problems (the report and hqval admit list every one)
MAX_PROBLEM_LINES = 20
# what a resumed run must share with the run it continues
# what makes two invocations the same run: a resume that differs in any of them would add
# rows made under other inputs or options to the run's own (another seed's fixtures, the
# mutants step of a run made without it, another timing plan or policy)
RESUME_KEYS = ("manifest_sha256", "arch", "requested_backend", "suite_commit", "seed",
               "mutants_manifest", "mutants_sha256", "timing", "policy_sha256",
               # the compiler that builds the run's objects (its resolved binary, size, time
               # and --version text, as the cache keys on it) and the environment it reads:
               # a resume under another would judge objects the run did not compile
               "compiler_identity", "compiler_env",
               # hqval's own code and the suite's matrices (arches, shapes, signatures):
               # the commit says neither for an installed hqval (no git) or a checkout
               # with edits ("+dirty" is one value for every edit)
               "suite_sha256")
COMPILER_KEYS = ("compiler_identity", "compiler_env")


def suite_sha256() -> str:
    """sha256 over hqval's Python source and the suite's YAML matrices."""
    from hqval.cacheauth import source_identity
    from hqval.matrix import MATRICES_DIR

    h = hashlib.sha256(source_identity(("hqval",), "suite").encode())
    for f in sorted(Path(MATRICES_DIR).glob("*.yaml")):
        h.update(f"\0{f.name}\0".encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def source_hashes(specs: Sequence[KernelSpec], root: Path) -> dict[str, str]:
    """path -> sha256 of every source a kernel names (its source, per-arch variants and
    preincludes), relative to the tree ``root`` where inside it."""
    paths = {Path(p) for s in specs for p in (s.source, *(v for _, v in s.variants),
                                              *s.preinclude)}
    return provenance.files(((str(p), file_sha256(p)) for p in sorted(paths)), root)


def unrecorded_inputs(envelope: Mapping[str, object], specs: Sequence[KernelSpec],
                      root: Path) -> str:
    """Why the run's record of what it compiled cannot be checked, or "": every run
    records the sha256 of each source its kernels name (``sources``, made when it opened)
    and, once it built a code object, of every file the compiler read
    (``provenance.files``, the compile step).  An envelope without them would let
    ``changed_inputs`` and ``added_inputs`` find nothing to compare, and ``--resume``
    would judge an edited tree with the old rows."""
    sources = envelope.get("sources")
    named = set(source_hashes(specs, root))
    if not isinstance(sources, Mapping):
        return "envelope.json has no sources (the sha256 of each kernel source it compiled)"
    lacking = sorted(named - set(map(str, sources)))
    if lacking:
        return (f"envelope.json sources does not record {lacking[0]}, a source of its "
                "manifest's kernels")
    objects = envelope.get("objects")
    prov = envelope.get("provenance")
    files = prov.get("files") if isinstance(prov, Mapping) else None
    if isinstance(objects, Mapping) and objects \
            and not (isinstance(files, Mapping) and files):
        return ("envelope.json provenance records no file the compiler read, but the run "
                "built code objects")
    return ""


def changed_inputs(envelope: Mapping[str, object], root: Path) -> str:
    """The first source or included file whose contents differ from what the run recorded
    (its sources when it opened, every file the compiler read: ``provenance.files``), or
    "" when every one is unchanged."""
    recorded: dict[str, object] = {}
    prov = envelope.get("provenance")
    for table in (prov.get("files") if isinstance(prov, Mapping) else None,
                  envelope.get("sources")):
        if isinstance(table, Mapping):
            recorded.update({str(k): v for k, v in table.items()})
    for name, digest in sorted(recorded.items()):
        path = Path(name) if Path(name).is_absolute() else root / name
        try:
            now = file_sha256(path)
        except OSError as exc:
            return f"{path}: {exc.strerror or exc} (the run compiled it)"
        if now != digest:
            return (f"{path} changed since the run compiled it (sha256 {str(digest)[:12]} "
                    f"-> {now[:12]})")
    return ""


def added_inputs(envelope: Mapping[str, object], specs: Sequence[KernelSpec],
                 arches: Sequence[Arch], root: Path, cache_dir: str | None = None) -> str:
    """The first file the compiler reads now for a kernel the run compiled that it did not
    read then (a header added on the include path that shadows the one the run compiled
    with: no recorded file changed, yet the build would), or "".  Only where the run
    recorded what its compiles read (``provenance.files``)."""
    prov = envelope.get("provenance")
    files = prov.get("files") if isinstance(prov, Mapping) else None
    if not isinstance(files, Mapping) or not files:
        return ""
    try:
        compiler = find_compiler()
    except ToolchainError:
        return ""  # nothing can compile: the compile rows say so
    from hqval.containment import ContainmentError
    from hqval.toolchain import DependencyError, source_closure

    known = set(map(str, files))
    objects = envelope.get("objects")
    built = set(objects) if isinstance(objects, Mapping) else set()
    for arch in arches:
        for spec in specs:
            if f"{spec.name}|{arch.name}" not in built:
                continue  # not compiled by the run (a failed build read what it read)
            try:
                now = source_closure(spec, arch.name, compiler, cache_dir)
            except (ContainmentError, DependencyError, OSError, ValueError):
                continue  # the compile step reports it
            for path in provenance.files(now, root):
                if path not in known:
                    return (f"{path} is read by the compiler for {spec.name} on {arch.name} "
                            "now but was not when the run compiled it (a file added on the "
                            "include path)")
    return ""


def _resume_mismatch(old: Mapping[str, object], new: Mapping[str, object],
                     compiler: tuple[object, object] = (None, None), *,
                     compiler_bound: bool = True) -> str:
    """The RESUME_KEYS the run (``old``, its envelope) and this invocation (``new``)
    differ in; ``compiler``: this invocation's compiler path and version (the identity
    is a digest: the line names the binaries); ``compiler_bound``: whether the run's rows
    rest on objects its compiler built (else the compiler keys are not compared)."""
    diffs = []
    for k in RESUME_KEYS:
        if old.get(k) == new.get(k) or (not compiler_bound and k in COMPILER_KEYS):
            continue
        if k == "compiler_identity":
            diffs.append(f"compiler: the run was built by {old.get('compiler')!r} "
                         f"({old.get('compiler_version')!r}, identity "
                         f"{str(old.get(k))[:12]}), this invocation by {compiler[0]!r} "
                         f"({compiler[1]!r}, identity {str(new.get(k))[:12]})")
        else:
            diffs.append(f"{k}: the run has {old.get(k)!r}, this invocation {new.get(k)!r}")
    return "; ".join(diffs)


def open_run(config: RunConfig, progress: Progress) -> RunContext:
    """Arches, manifests, backends, then the run directory (created, or resumed after
    checking it is the same run).  Bad input raises ValueError (an ``ArchError``, a
    ``ManifestError``, a ``RunDirError``) and an unusable backend ``BackendUnavailable``,
    both before anything is written."""
    arches = resolve_arches(config.arches)
    try:
        manifest = load_manifest(config.manifest)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{config.manifest or 'the manifest'}: not UTF-8 ({exc.reason} at "
                         f"byte {exc.start}); save it as UTF-8") from None
    # the tree's own mutants, else the suite's (a suite self-test on an external tree)
    mutants, self_test = run_mutants(manifest, config.manifest is not None, config.mutants)
    opened = open_for(config.backend, [a.name for a in arches], config.cache_dir)
    policy = load_policy(config.policy)  # parsed once: the run's context carries it
    specs = [*manifest.kernels, *(mutants.kernels if mutants else [])]
    compiler = compiler_version = identity_of_compiler = None
    try:
        c = find_compiler()
        compiler, compiler_version = c.path, c.version
        identity_of_compiler = compiler_identity(c)
    except ToolchainError as exc:  # the compile rows report it, one per cell
        progress.note(f"hqval run: no compiler: {exc}")
    external = config.manifest is not None
    identity = {
        "manifest_sha256": _sha256(manifest.path),
        "arch": [a.name for a in arches],
        "requested_backend": config.backend,
        "suite_commit": git_commit(Path(__file__).resolve().parents[2]),
        "seed": config.seed,
        "mutants_manifest": str(Path(mutants.path).resolve()) if mutants else None,
        "mutants_sha256": _sha256(mutants.path) if mutants else None,
        "timing": {"enabled": config.timing, "iterations": config.timing_iterations,
                   "runs": config.timing_runs},
        "policy_sha256": _sha256(Path(policy.source)) if Path(policy.source).is_file()
        else None,
        "compiler_identity": identity_of_compiler,
        "compiler_env": compiler_env(),
        "suite_sha256": suite_sha256(),
    }
    envelope = make_envelope(
        backend=config.backend, arch=identity["arch"], compiler=compiler,  # type: ignore[arg-type]
        compiler_version=compiler_version,
        kernel_tree=Path(manifest.path).resolve().parent if external else None,
        argv=config.argv, kernels=kernel_table(specs, self_test, arches),
        # identity holds the seed and the mutant manifest the kernel table's mutants came
        # from (None: no mutants), so admission can re-derive the table
        # (hqval.admission.table)
        extra={"manifest": str(Path(manifest.path).resolve()),
               "provenance": provenance.tree(manifest.path),
               "sources": source_hashes(specs, Path(manifest.path).resolve().parent),
               "steps": [name for name, _ in STEPS], **identity})
    writer = RunWriter.create(config.out, envelope, resume=config.resume)
    if config.resume:
        # the compiler matters once the run's evidence rests on objects it built: a run
        # whose every compile failed in hqval's toolchain (a crashing clang) is resumed
        # with a working one, which the envelope then records
        built = writer.judged_objects or bool(writer.envelope.get("objects"))
        why = _resume_mismatch(writer.envelope, identity, (compiler, compiler_version),
                               compiler_bound=built)
        if why:
            writer.close()
            raise RunDirError(f"--resume {config.out}: not the same run ({why}); resume with "
                              "the same hqval, --manifest, --arch, --backend, --seed, --policy, "
                              "compiler (HQVAL_CLANG and its environment) and mutant and "
                              "timing options, or start a new --out")
        root = Path(manifest.path).resolve().parent
        unrecorded = unrecorded_inputs(writer.envelope, specs, root)
        if unrecorded:
            writer.close()
            raise RunDirError(f"--resume {config.out}: {unrecorded}: the envelope is damaged "
                              "and an edit since the run cannot be seen; start a new --out")
        changed = changed_inputs(writer.envelope, root) \
            or added_inputs(writer.envelope, specs, arches, root, config.cache_dir)
        if changed:
            writer.close()
            raise RunDirError(f"--resume {config.out}: {changed}: its rows judged the old "
                              "code; start a new --out (a resumed run never mixes objects)")
        if not built:
            writer.update_envelope(compiler=compiler, compiler_version=compiler_version,
                                   compiler_identity=identity["compiler_identity"],
                                   compiler_env=identity["compiler_env"])
    # which backend runs each arch, and why (auto chooses): said once the run directory is
    # open, so bad input above stays one line
    for arch_name, backend in opened.items():
        progress.note(f"hqval run: {arch_name}: backend {backend.name} ({backend.selection})")
    ctx = RunContext(config, arches, manifest, mutants, opened, writer, progress, policy)
    ctx.expected = expected_cells(ctx, policy)
    writer.update_envelope(expected={k: len(v) for k, v in ctx.expected.items()},
                           expected_cells=ctx.expected)
    _record_backends(ctx)
    return ctx


def _record_backends(ctx: RunContext) -> None:
    info: dict[str, dict[str, object]] = {}
    for arch, b in ctx.backends.items():
        try:
            device = b.device_name()
        except Exception as exc:  # a device that cannot name itself is still recorded
            device = f"unknown ({exc})"
        info[arch] = {"backend": b.name, "selection": b.selection, "device": device,
                      "runtime": b.runtime_info()}
    ctx.writer.update_envelope(
        backend=",".join(sorted({str(v["backend"]) for v in info.values()})), backends=info,
        device=", ".join(sorted({str(v["device"]) for v in info.values()})),
        runtime={a: v["runtime"] for a, v in info.items()})


def _arch_of(identity: str) -> str:
    return identity.rsplit("|", 2)[-2]


def _summary(rows: Sequence[Row], kills: frozenset[str]) -> str:
    bad = {Status.FAIL, Status.ERROR}
    real = [r for r in rows if r.kernel not in kills or r.kind == "mutant"]
    text = f"{len(rows)} rows, {sum(r.status in bad for r in real)} fail/error"
    on_mutants = sum(r.status in bad for r in rows if r.kernel in kills and r.kind != "mutant")
    if on_mutants:
        text += f" (+{on_mutants} failing mutant cells: kills)"
    return text


def run_step(ctx: RunContext, name: str, step: Step) -> StepResult:
    """One step over every arch, then its marks: pass when every expected cell has a row,
    else an infrastructure error naming what is missing (a resumed run redoes it)."""
    t0 = time.monotonic()
    try:
        result = step(ctx)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        result = StepResult(name, error=f"{name} step crashed: {tb}")
    expected = ctx.expected.get(name, [])
    missing = tuple(i for i in expected if i not in ctx.writer.done)
    secs = time.monotonic() - t0
    kills = frozenset(m.name for m in ctx.mutants.kernels) if ctx.mutants else frozenset()
    marks: list[Row] = []
    if name != "report":
        for a in ctx.arches:
            mine = [r for r in result.rows if r.arch == a.name]
            lost = [i for i in missing if _arch_of(i) == a.name]
            text = f"{_summary(mine, kills)}, {secs:.1f} s"
            if result.skipped:
                text += f"; gate skipped ({result.skipped})"
            if lost or result.error:
                why = result.error or "the step ended early"
                lost_text = (f"{len(lost)} of {len([i for i in expected if _arch_of(i) == a.name])}"
                             f" expected cells have no row (first: {', '.join(lost[:3])}); "
                             if lost else "")
                marks.append(Row("step", name, "-", a.name, "step", Status.ERROR,
                                 measured=round(secs, 2),
                                 message=f"{name}: {lost_text}{why}; rerun with --resume",
                                 details={"infrastructure": True, "missing": len(lost)}))
            else:
                marks.append(Row("step", name, "-", a.name, "step", Status.PASS,
                                 measured=round(secs, 2), message=text,
                                 details={"skipped": result.skipped} if result.skipped else {}))
        ctx.writer.append(marks)
    result = StepResult(name, result.rows, len(expected), missing, result.error,
                        result.skipped, secs)
    text = f"{_summary(result.rows, kills)}, {secs:.1f} s"
    if result.skipped:
        text += f"; gate skipped ({result.skipped})"
    if not result.done:
        lost = [f"{len(missing)} of {len(expected)} expected cells missing"] if missing else []
        text += "; NOT DONE: " + "; ".join([*lost, *([result.error] if result.error else [])])
    ctx.progress.finish(name, text)
    return result


@dataclass(frozen=True)
class RunResult:
    path: Path
    exit_code: int
    admission: Admission
    steps: tuple[StepResult, ...]
    summary: str


def run_pipeline(config: RunConfig, progress: Progress | None = None) -> RunResult:
    progress = progress or Silent()
    ctx = open_run(config, progress)
    try:
        progress.note(f"hqval run: {', '.join(a.name for a in ctx.arches)} -> "
                      f"{ctx.writer.path}" + (f" (resuming: {len(ctx.writer.done)} rows "
                                              "already there)" if config.resume else ""))
        results = tuple(run_step(ctx, name, step) for name, step in STEPS)
        judged = ctx.judged
        if judged is None:  # the admit step crashed: judge what the run holds
            judged = judge([load(ctx.writer.path)], ctx.policy,
                           baseline=[load(p) for p in config.baseline])
        adm = judged.admission
    finally:
        ctx.writer.close()
    report_dir = ctx.writer.path / "report"
    # a step that did not finish fails the run closed, the report step (which has no
    # cells of its own: its files are what it owes) included
    unfinished = [r for r in results if not r.done]
    problems = problem_lines(adm)
    more = len(problems) - MAX_PROBLEM_LINES
    lines = [status_table(adm, shutil.get_terminal_size((100, 24)).columns),
             *problems[:MAX_PROBLEM_LINES],
             *([f"... and {more} more (hqval admit {ctx.writer.path} lists them all)"]
               if more > 0 else []),
             *(f"step {r.name} did not finish: {r.error or f'{len(r.missing)} cells missing'}"
               for r in unfinished),
             f"report: {report_dir / 'report.html'}",
             f"checkpoint: {report_dir / 'checkpoint.md'}"]
    code = 2 if unfinished else adm.exit_code
    return RunResult(ctx.writer.path, code, adm, results, "\n".join(lines))


def default_out(arch: Sequence[str]) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    tag = "-".join(arch) if len(arch) <= 2 else f"{len(arch)}arches"
    return Path("runs") / f"{tag}-{stamp}"

