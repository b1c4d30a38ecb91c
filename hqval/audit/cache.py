"""The audit of a matrix, cached by content (``<cache>/audit-v1``)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hqval.audit.static import analyze, audit_kernel
from hqval.audit.waivers import apply_waivers
from hqval.codeobject import CodeObjectError, find_objdump, tool_identity
from hqval.errors import (
    PROGRAM_ERRORS,
    infrastructure_details,
    is_infrastructure,
    is_program_error,
)
from hqval.result import Row, Status

if TYPE_CHECKING:
    from hqval.manifest import KernelSpec

IsaError = CodeObjectError

# ---- the audit of a matrix, cached by content ----------------------------------------
#
# A kernel's audit rows are a function of: the bytes of its code object (and of its
# baseline's), the disassembler that reads them, the code of the rules and what they
# import, the kernel's manifest entry (and its baseline's) and the arch's table row.  The
# cache key covers all of these, so an entry can only be found by an audit that would
# compute the same rows; the entry is re-checked (its key and a sha256 of its rows) when
# read, and a damaged one is recomputed.  Rows of an error (a tool that failed) are never
# cached.

AUDIT_CACHE_LAYOUT = 1
# The modules whose code decides an audit row (hqval.audit's own imports, checked by
# tests/audit/test_cache.py): their source bytes are in the key.  hqval.manifest and
# hqval.toolchain only find the baseline's code object, whose bytes are in the key.
# the executed rules launch through the checks' fixture and launch plan (the signature's
# arguments, dims and routing), so their source is part of what decides a rule's row
RULE_MODULES = ("hqval.audit", "hqval.codeobject", "hqval.emu", "hqval.formats",
                "hqval.result", "hqval.checks.cell", "hqval.checks.launch",
                "hqval.checks.oracle", "hqval.checks.inputs", "hqval.fixtures",
                "hqval.signature", "hqval.expr")


@functools.lru_cache(maxsize=1)
def rules_identity() -> str:
    """sha256 over the source of every module in ``RULE_MODULES`` (a package: each of its
    .py files), the cache layout, the Python version and msgpack's (it decodes the
    metadata note)."""
    import sys

    import msgpack

    from hqval import cacheauth
    from hqval.errors import InfrastructureError

    try:
        return cacheauth.source_identity(
            RULE_MODULES, f"{AUDIT_CACHE_LAYOUT}\0{sys.version}\0{msgpack.version}")
    except InfrastructureError as exc:
        raise IsaError(f"audit rules: {exc}") from None


def disassembler_identity() -> str:
    """The disassembler as the audit runs it (``hqval.codeobject.find_objdump``): a
    replaced or rebuilt tool is another tool."""
    return tool_identity(find_objdump())


def _facts(obj: Any) -> Any:
    """A manifest entry or arch table row as JSON-able data for the key."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _facts(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_facts(x) for x in obj]
    if isinstance(obj, Path):
        return str(obj)
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return repr(obj)


def _object_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class _Job:
    """One kernel's audit: its code object and, where it has one, its baseline's."""

    spec: KernelSpec
    arch: Any
    code_object: Path
    baseline: tuple[KernelSpec, Path] | None
    key: str = ""
    # (desired, final) where the compiler reported the declared minimum waves per EU unmet
    # (``CompileResult.details["occupancy_target_missed"]``): not in the object's bytes
    occupancy_miss: tuple[int, int] | None = None


def audit_key(job: _Job, tools: str) -> str:
    """The cache key of one kernel's audit rows (see the section comment)."""
    import json

    material = {
        "rules": rules_identity(), "tools": tools, "arch": _facts(job.arch),
        "spec": _facts(job.spec), "object": _object_sha256(job.code_object),
        "baseline": None if job.baseline is None else
        {"spec": _facts(job.baseline[0]), "object": _object_sha256(job.baseline[1])},
        "occupancy_miss": None if job.occupancy_miss is None else list(job.occupancy_miss),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def _cache_file(cache_dir: str | Path | None, key: str) -> Path:
    from hqval.toolchain import cache_base

    return cache_base(cache_dir) / f"audit-v{AUDIT_CACHE_LAYOUT}" / key[:2] / f"{key}.json"


def _rows_digest(rows: list[dict[str, Any]]) -> str:
    import json

    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def cached_rows(cache_dir: str | Path | None, key: str) -> list[Row] | None:
    """The rows stored under ``key``, or None (absent, unreadable, another key's, or
    rows that do not match their recorded sha256)."""

    from hqval import cacheauth, safeio
    from hqval.toolchain import cache_base

    try:
        entry = safeio.load_json(_cache_file(cache_dir, key), what="audit cache entry",
                                 limit=64 << 20)
        digest = _rows_digest(entry["rows"])
        if entry.get("key") != key or digest != entry.get("sha256"):
            return None
        if not cacheauth.usable(entry.get("mac"), cache_base(cache_dir), "audit", key, digest):
            return None  # rows another job (or another key) wrote: audited again
        return [Row.from_dict(d) for d in entry["rows"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _store_rows(cache_dir: str | Path | None, key: str, rows: list[Row]) -> None:
    import json
    import os
    import tempfile

    from hqval import cacheauth
    from hqval.toolchain import cache_base

    data = [r.to_dict() for r in rows]
    path = _cache_file(cache_dir, key)
    mac = cacheauth.seal_or_none(cache_base(cache_dir), "audit", key, _rows_digest(data))
    if mac is None:
        return  # no usable cache key: nothing is stored that could not be vouched for
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".json.tmp", dir=path.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump({"key": key, "sha256": _rows_digest(data), "rows": data, "mac": mac},
                      fh)
        os.replace(tmp, path)
    except OSError:  # an unwritable or full cache only costs the next run the audit
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


EXECUTED_RULES = ("header_scalar", "payload_offset", "v2_valu_delta")


# what auditing one kernel may raise short of a verdict: the disassembly or object cannot
# be read (IsaError, ValueError, OSError), or hqval's own code failed (PROGRAM_ERRORS)
_AUDIT_ERRORS: tuple[type[BaseException], ...] = (IsaError, ValueError, OSError,
                                                  *PROGRAM_ERRORS)


def _error_row(kernel: str, arch: str, exc: BaseException) -> Row:
    """The one row of a kernel whose code object could not be audited: an infrastructure
    error when hqval's own machinery failed (the disassembler missing or crashing, I/O, a
    bug of hqval's own code: ``errors.PROGRAM_ERRORS``), so the run exits 2 and
    ``--resume`` redoes it, never the kernel's error."""
    if is_program_error(exc):
        return Row(kind="audit", check="audit", kernel=kernel, arch=arch, backend="isa",
                   status=Status.ERROR,
                   message=(f"hqval's own code failed auditing it ({type(exc).__name__}: "
                            f"{exc}), not the kernel; rerun with -v and report it"),
                   details=infrastructure_details(exc, infrastructure_cause="hqval"))
    return Row(kind="audit", check="audit", kernel=kernel, arch=arch, backend="isa",
               status=Status.ERROR, message=str(exc),
               details=infrastructure_details(exc) if is_infrastructure(exc) else {})


def _audit_job(job: _Job) -> list[Row]:
    """The rule rows of one kernel (before waivers), or one error row when its code
    object cannot be read.  Where the emulator runs the kernel and its baseline, the rules
    of ``EXECUTED_RULES`` are decided from executed facts, each row keeping the static
    finding under ``details["static"]``."""
    arch_name = str(getattr(job.arch, "name", job.arch))
    try:
        code = analyze(job.code_object, arch_name)[job.spec.symbol]
        baseline = None
        if job.baseline is not None:
            bspec, bco = job.baseline
            baseline = analyze(bco, arch_name)[bspec.symbol]
        rows = audit_kernel(job.spec, job.arch, code, baseline,
                            occupancy_miss=job.occupancy_miss)
    except _AUDIT_ERRORS as exc:
        return [_error_row(job.spec.name, arch_name, exc)]
    return _with_executed(job, code, rows)


def _with_executed(job: _Job, code: Any, rows: list[Row]) -> list[Row]:
    from hqval.audit.executed import executed_rows
    from hqval.audit.rules import V2_VALU_BUDGET
    from hqval.audit.static import weight_args

    arch_name = str(getattr(job.arch, "name", job.arch))
    wargs = weight_args(job.spec)
    static_w = [f.instruction for _, f in sorted(code.address_flow().facts.items())
                if f.tags & wargs and not f.is_scratch]
    base = None if job.baseline is None else (job.baseline[0],
                                              Path(job.baseline[1]).read_bytes())
    done = executed_rows(job.spec, arch_name, Path(job.code_object).read_bytes(), base,
                         static_w, V2_VALU_BUDGET)
    if done is None:
        return rows
    out = []
    for r in rows:
        rule = r.check.removeprefix("audit_")
        ex = done.get(rule)
        if ex is None:
            out.append(r)
            continue
        static = {"status": str(r.status), "message": r.message, "details": r.details}
        details = {**ex.details, "static": static}
        decided = (Status.PASS, Status.FAIL)
        if r.status in decided and ex.status in decided and r.status is not ex.status:
            # the executed facts are the authority; the static finding stays as evidence
            details["static_disagrees"] = (f"the static rule said {r.status} from the "
                                           "loop bodies; the executed facts say "
                                           f"{ex.status}")
        out.append(dataclasses.replace(ex, details=details))
    return out


def _audit_jobs(jobs: list[_Job]) -> list[list[Row]]:
    return [_audit_job(j) for j in jobs]


def _workers(wanted: int | None, tasks: int) -> int:
    import multiprocessing
    import os

    if "fork" not in multiprocessing.get_all_start_methods():
        return 1  # a spawned worker would re-run the caller's __main__
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(tasks, wanted if wanted else cpus))


def _groups(misses: list[_Job]) -> list[list[_Job]]:
    """The misses in groups for the workers, one per code identity
    (``CodeObject.code_identity``: the objects of arches that differ only in the target
    they name are one group, so one worker computes what they share once: the address
    flow of each instruction stream, the executed facts of each execution identity); each
    group's rows are reported as soon as it is done, so the display follows cell by cell
    (a baseline several groups share is disassembled once: the disassembly is cached by
    its object's hash).  An object that cannot be read is a group of its own (its audit
    reports the error)."""
    from hqval.codeobject import load

    by: dict[str, list[_Job]] = {}
    for j in misses:
        try:
            ident = "code:" + load(j.code_object).code_identity
        except (IsaError, OSError, ValueError, KeyError):
            ident = "path:" + str(j.code_object)
        by.setdefault(ident, []).append(j)
    return list(by.values())


# a baseline launch: (baseline spec, arch, its code object, problem, the longer K or None)
_Launch = tuple[Any, str, Path, tuple[int, int, int], tuple[int, int, int] | None]


def _baseline_launch_groups(groups: list[list[_Job]]) -> list[list[_Launch]]:
    """The baseline launches of the executed rules that jobs of two or more groups make
    (a baseline judged against by several v2 kernels, whose groups go to different
    workers), in groups of one baseline code identity (its arches' identical objects run
    once); a launch of one group's jobs only is left to that group's worker."""
    from hqval.audit.executed import applies, marginal_problem, problem_for
    from hqval.codeobject import load

    wanted: dict[tuple[Any, ...], tuple[_Launch, set[int], str]] = {}
    for gi, group in enumerate(groups):
        for j in group:
            arch_name = str(getattr(j.arch, "name", j.arch))
            if j.baseline is None or not applies(j.spec, arch_name):
                continue
            bspec, bco = j.baseline
            problem = problem_for(j.spec, bspec)
            longer = marginal_problem(j.spec, bspec, problem)
            key = (bspec.name, arch_name, str(bco), problem, longer)
            if key not in wanted:  # each baseline object is read once, not once per job
                try:
                    ident = load(bco).code_identity
                except (IsaError, OSError, ValueError, KeyError):
                    continue  # the job's own audit reports it
                wanted[key] = ((bspec, arch_name, Path(bco), problem, longer), set(), ident)
            wanted[key][1].add(gi)
    by: dict[str, list[_Launch]] = {}
    for launch, users, ident in wanted.values():
        if len(users) > 1:
            by.setdefault(ident, []).append(launch)
    return list(by.values())


def _baseline_launches(launches: list[_Launch]) -> list[tuple[tuple[str, ...], Any]]:
    from hqval.audit.executed import baseline_launches

    out = []
    for bspec, arch_name, bco, problem, longer in launches:
        try:
            out += baseline_launches(bspec, arch_name, bco.read_bytes(), problem, longer)
        except (IsaError, KeyError, ValueError, OSError):
            continue  # raised again, and reported, by the job that needs it
    return out


def _share_baseline_launches(groups: list[list[_Job]], jobs: int | None) -> None:
    """Run the baseline launches several groups need once, over the workers, and keep
    their facts in this process (``executed.remember_facts``) before the groups' workers
    are forked from it: each group's audit finds them, as one process's audits would."""
    from hqval.audit.executed import remember_facts

    launches = _baseline_launch_groups(groups)
    if not launches:
        return
    workers = _workers(jobs, len(launches))
    if workers <= 1:
        results = [_baseline_launches(g) for g in launches]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers,
                                 mp_context=multiprocessing.get_context("fork")) as pool:
            results = list(pool.map(_baseline_launches, launches))
    for got in results:
        for key, facts in got:
            remember_facts(key, facts)


def _run_jobs(groups: list[list[_Job]], jobs: int | None
              ) -> Iterator[tuple[list[_Job], list[list[Row]]]]:
    """Each group with its audits, as each group finishes, the groups spread over worker
    processes (forked: the disassembler found and the modules imported are the caller's)."""
    workers = _workers(jobs, len(groups))
    if workers <= 1:
        for g in groups:
            yield g, _audit_jobs(g)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=workers,
                             mp_context=multiprocessing.get_context("fork")) as pool:
        futures = {pool.submit(_audit_jobs, g): i for i, g in enumerate(groups)}
        for fut in as_completed(futures):
            yield groups[futures[fut]], fut.result()


def _occupancy_miss(res: Any) -> tuple[int, int] | None:
    miss = getattr(res, "details", {}).get("occupancy_target_missed")
    return None if miss is None else (int(miss["desired"]), int(miss["final"]))


def audit_matrix(cells: Iterable[tuple[KernelSpec, Any]], arch: Any,
                 cache_dir: str | Path | None = None, jobs: int | None = None,
                 real_manifest: Path | None = None) -> list[Row]:
    """Audit rows for compiled ``(spec, CompileResult)`` cells of one arch.  A kernel's v1
    baseline is taken from the cells, or compiled from its manifest when absent (a
    mutant's: ``real_manifest`` when given, else its file's ``manifest:``)."""
    return audit_arches([(arch, list(cells))], cache_dir, jobs, real_manifest)[0]


def audit_arches(per_arch: Iterable[tuple[Any, Iterable[tuple[KernelSpec, Any]]]],
                 cache_dir: str | Path | None = None, jobs: int | None = None,
                 real_manifest: Path | None = None,
                 on_rows: Callable[[list[Row]], object] = lambda rows: None
                 ) -> list[list[Row]]:
    """``audit_matrix`` of several arches at once: each kernel's rows come from the audit
    cache (``audit_key``) or are computed, the arches' misses over ``jobs`` worker
    processes (default: the CPUs this process may use).  ``on_rows`` gets each audited
    cell's rows (the waived rows returned for it) as soon as they are known, cached ones
    first; the return value is in the order of ``per_arch`` and its cells."""
    from hqval.checks.oracle import memoised
    from hqval.toolchain import compile_kernel

    plans: list[tuple[Any, list[tuple[KernelSpec, _Job | Row]]]] = []
    tools: str | None = None
    for arch, arch_cells in per_arch:
        arch_name = str(getattr(arch, "name", arch))
        cells = list(arch_cells)
        by_name = {spec.name: (spec, res) for spec, res in cells}
        plan: list[tuple[KernelSpec, _Job | Row]] = []
        for spec, res in cells:
            if res is None or not res.ok or res.code_object is None:
                continue
            try:
                baseline = None
                if spec.baseline:
                    pair = by_name.get(spec.baseline)
                    if pair is None:
                        bspec = _baseline_spec(spec, real_manifest)
                        pair = (bspec, compile_kernel(bspec, arch_name, cache_dir))
                    bspec, bres = pair
                    if bres is not None and bres.ok and bres.code_object is not None:
                        baseline = (bspec, Path(bres.code_object))
                job = _Job(spec, arch, Path(res.code_object), baseline,
                           occupancy_miss=_occupancy_miss(res))
                if tools is None:
                    tools = disassembler_identity()
                plan.append((spec, dataclasses.replace(job, key=audit_key(job, tools))))
            except _AUDIT_ERRORS as exc:
                plan.append((spec, _error_row(spec.name, arch_name, exc)))
        plans.append((arch, plan))
    found: dict[str, list[Row]] = {}
    misses: list[_Job] = []
    waiting: dict[str, list[KernelSpec]] = {}  # key -> the cells whose rows it gives
    for _, plan in plans:
        for spec, item in plan:
            if isinstance(item, Row):
                on_rows([item])
                continue
            if item.key in waiting:
                waiting[item.key].append(spec)
                continue
            if item.key in found:
                on_rows(apply_waivers(spec, found[item.key]))
                continue
            rows = cached_rows(cache_dir, item.key)
            if rows is None:
                misses.append(item)
                waiting[item.key] = [spec]  # computed below (once, if two cells share it)
            else:
                found[item.key] = rows
                on_rows(apply_waivers(spec, rows))
    groups = _groups(misses)
    # the executed rules' launch inputs are built once per inputs (the oracle's memo,
    # inherited by the forked workers)
    with memoised():
        if _workers(jobs, len(groups)) > 1:
            _share_baseline_launches(groups, jobs)
        for group, results in _run_jobs(groups, jobs):
            for job, rows in zip(group, results, strict=True):
                found[job.key] = rows
                if not any(r.status is Status.ERROR for r in rows):  # a failed tool
                    _store_rows(cache_dir, job.key, rows)
                for spec in waiting.pop(job.key, []):
                    on_rows(apply_waivers(spec, rows))
    out: list[list[Row]] = []
    for _, plan in plans:
        rows_of_arch: list[Row] = []
        for spec, item in plan:
            if isinstance(item, Row):
                rows_of_arch.append(item)
            else:
                rows_of_arch += apply_waivers(spec, found[item.key])
        out.append(rows_of_arch)
    return out


def _baseline_spec(spec: KernelSpec, real_manifest: Path | None = None) -> KernelSpec:
    from hqval.manifest import load_manifest

    assert spec.baseline is not None
    if spec.manifest is not None and not spec.is_mutant:
        return load_manifest(spec.manifest).by_name(spec.baseline)
    if real_manifest is not None:  # a mutant whose real manifest the caller names
        return load_manifest(real_manifest).by_name(spec.baseline)
    if spec.manifest is not None:  # a mutant: its baseline is a kernel of its real manifest
        from hqval.manifest import load_mutants

        return load_manifest(load_mutants(spec.manifest).real_manifest).by_name(spec.baseline)
    return load_manifest().by_name(spec.baseline)
