"""What a run's rows are evidence for: the kernel table a run recorded (kernel -> qt,
path, arches, ...), the (qt, path) each row belongs to, the evidence a path needs on an
arch, and the cells a run expected up front that have no row.

Rows are mapped to formats and paths by their kernel: ``details["qt"]`` and
``details["kind"]`` (or ``details["path"]``) when the producing step put them there,
otherwise the kernel table recorded in the run envelope from the manifest.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from hqval.admission.policy import PATH_OF_KIND, PathPolicy, Policy
from hqval.audit.occupancy import vgpr_budget, vgpr_budget_derivation
from hqval.audit.rules import FIXED_TOLERANCES
from hqval.checks.cell import CHECKS, stated_tolerances
from hqval.matrix import Arch
from hqval.result import Row, Status
from hqval.signature import PATHS
from hqval.timing.gate import Gate, samples_problem, stored_samples


@dataclass(frozen=True)
class KernelInfo:
    qt: int
    path: str
    mutant_of: str | None = None
    kind: str = ""
    # the manifest's requires (any | wmma_gfx11 | wmma_gfx12); None when the run did not
    # record it (then a kernel is expected on an arch where it has rows that apply)
    requires: str | None = None
    # a mutant of the suite's own kernels run on an external tree: a suite self-test, never
    # evidence about the tree's cells
    self_test: bool = False
    # the manifest's ``production: false``: its rows are kept and reported, never gating
    production: bool = True
    # the arches of the run the kernel is built for (``KernelSpec.applies_to``: its WMMA
    # generation, its manifest ``arches``, a source named for one chip), as the run
    # recorded them; None in a run that did not (then ``requires`` alone decides)
    built_for: tuple[str, ...] | None = None

    def applies_to(self, arch: Arch) -> bool | None:
        if self.built_for is not None:
            return arch.name in self.built_for
        return self.required_on(arch)

    def limited_on(self, arch: Arch) -> bool:
        """Its WMMA generation would build it for ``arch``, but the tree limits it to other
        arches (the manifest's ``arches``, a source named for one chip)."""
        return self.built_for is not None and arch.name not in self.built_for \
            and self.required_on(arch) is not False

    def required_on(self, arch: Arch) -> bool | None:
        """What ``requires`` alone says of ``arch`` (None when the run did not record it)."""
        if self.requires is None:
            return None
        needed = {"any": None, "wmma_gfx11": "gfx11", "wmma_gfx12": "gfx12"}.get(self.requires)
        return needed is None or arch.wmma == needed


def kernel_table(envelopes: Iterable[Mapping[str, Any]]) -> dict[str, KernelInfo]:
    """Kernel -> (qt, path) from the kernel tables the runs recorded."""
    out: dict[str, KernelInfo] = {}
    for env in envelopes:
        table = env.get("kernels")
        for name, k in (table.items() if isinstance(table, Mapping) else ()):
            if not isinstance(k, Mapping):
                continue
            kind = k.get("kind")
            qt = k.get("qt")
            path = k.get("path") if k.get("path") in PATHS else PATH_OF_KIND.get(str(kind))
            if isinstance(qt, int) and not isinstance(qt, bool) and path is not None:
                req = k.get("requires")
                built = k.get("built_for")
                out[name] = KernelInfo(qt, path, k.get("mutant_of"), str(kind),
                                       str(req) if isinstance(req, str) else None,
                                       bool(k.get("self_test")),
                                       k.get("production") is not False,
                                       tuple(str(a) for a in built)
                                       if isinstance(built, list) else None)
    return out


def _classify(row: Row, kernels: Mapping[str, KernelInfo]) -> KernelInfo | None:
    """The (qt, path) a row is evidence for, or None.  Timing cells name their kernel as
    ``kernel@MxK``.  A mutant's own check rows are not evidence about the real kernel:
    only the kill-matrix rows (kind ``mutant``) count, as a gate."""
    d = row.details
    qt = d.get("qt")
    path = d.get("path") or PATH_OF_KIND.get(str(d.get("kind")))
    info: KernelInfo | None
    if isinstance(qt, int) and path in PATHS:
        info = KernelInfo(qt, str(path), d.get("mutant_of"))
    else:
        info = kernels.get(row.kernel.split("@", 1)[0])
        if info is None and isinstance(d.get("mutant_of"), str):
            info = kernels.get(d["mutant_of"])
    if info is not None and info.mutant_of is not None and row.kind != "mutant":
        return None
    return info


def _classify_any(row: Row, kernels: Mapping[str, KernelInfo]) -> KernelInfo | None:
    """Like ``_classify`` but keeps mutants' own rows (to recognise them as such)."""
    info = kernels.get(row.kernel.split("@", 1)[0])
    if info is None and isinstance(row.details.get("mutant_of"), str):
        return KernelInfo(0, "decode", str(row.details["mutant_of"]))
    return info


def is_infrastructure(row: Row) -> bool:
    """An error that says nothing about the kernels: a missing backend, tool or step."""
    return row.status is Status.ERROR and bool(row.details.get("infrastructure"))


def _failed(row: Row) -> bool:
    """A row that says the kernel failed: a failure, or an error of the kernel's own (an
    infrastructure error is hqval's machinery failing: no verdict about the kernel, so
    its cell is incomplete, never rejected for it)."""
    return row.status is Status.FAIL or (row.status is Status.ERROR
                                         and not is_infrastructure(row))


def emulator_gap(row: Row) -> str | None:
    """The instruction the emulator lacks, when that is why ``row`` reached no verdict."""
    gap = row.details.get("emulator_gap")
    return str(gap) if gap and row.status is Status.SKIPPED else None


def toolchain_gap(row: Row) -> str | None:
    """The target builtin the compiler lacks, when that is why ``row`` reached no verdict
    (``hqval.toolchain.missing_builtin``)."""
    gap = row.details.get("toolchain_gap")
    return str(gap) if gap and row.status is Status.SKIPPED else None


def _compiler_gap(row: Row) -> bool:
    """A skipped compile row is the toolchain's gap (``hqval.toolchain``'s compile row):
    its ``toolchain_gap`` is the builtin the compiler's own error, quoted in its message,
    says the compiler lacks."""
    from hqval.toolchain import missing_builtin

    gap = toolchain_gap(row)
    return gap is not None and missing_builtin(row.message) == gap


def _gaps(rows: Iterable[Row]) -> list[str]:
    return sorted({f"{r.kernel} ({r.check}): the emulator lacks {emulator_gap(r)}"
                   for r in rows if emulator_gap(r)}
                  | {f"{r.kernel} ({r.check}): the compiler lacks {toolchain_gap(r)}"
                     for r in rows if toolchain_gap(r)})


@functools.lru_cache(maxsize=1)
def _suite_kernels() -> dict[str, KernelInfo]:
    """(qt, path) of the suite's own kernels (kernels/kernels.yaml), for timing rows of runs
    that recorded no kernel table (bench runs before the table, held-out H200 runs): their
    cells find the same gate as any other run's."""
    from hqval.manifest import ManifestError, load_manifest

    try:
        specs = load_manifest(None).kernels
    except (ManifestError, OSError):
        return {}
    return {s.name: KernelInfo(s.qt, s.path) for s in specs}


def gate_for_row(
    policy: Policy, kernels: Mapping[str, KernelInfo]
) -> Callable[[Row], Gate | None]:
    """A function row -> the policy's timing gate for the row's (qt, path, mode), or None.
    A timing mutant's rows take the gate of the kernel it slows."""
    def gate_for(row: Row) -> Gate | None:
        d = row.details
        qt, mode = d.get("qt"), d.get("mode")
        path = d.get("path") or PATH_OF_KIND.get(str(d.get("kind")))
        if not (isinstance(qt, int) and path):
            name = row.kernel.split("@", 1)[0].split("+", 1)[0]  # a timing mutant: its real kernel
            info = kernels.get(name) or _suite_kernels().get(name)
            if info is None:
                return None
            qt, path = info.qt, info.path
        if mode not in ("hot", "cold"):
            return None
        return policy.gate(qt, str(path), str(mode))
    return gate_for




def _listed(items: Sequence[str], last: str = "and") -> str:
    """``a``, ``a and b``, ``a, b and c``: a list as a sentence reads it."""
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


@dataclass(frozen=True)
class Evidence:
    """What a path needs on an arch, kernel by kernel: the path's kernels that apply
    there, the expected cells without any row, and the gates the run skipped."""

    kernels: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    # the path's kernels that are built for other arches only (their manifest ``arches``,
    # ``requires`` or a per-chip source): none of them owes evidence here
    elsewhere: tuple[str, ...] = ()


def gate_skips(rows: Iterable[Row]) -> dict[str, list[str]]:
    """arch -> the gates a run was told to skip there (``--no-mutants``): the steps'
    own ``skipped`` rows that name the flag."""
    out: dict[str, list[str]] = {}
    for r in rows:
        flag = r.details.get("skipped_by")
        if r.kind == "step" and r.status is Status.SKIPPED and isinstance(flag, str):
            out.setdefault(r.arch, []).append(f"{r.check} gate skipped ({flag})")
    return out


def expected_evidence(
    pp: PathPolicy, arch: Arch, kernels: Mapping[str, KernelInfo], rows: Sequence[Row],
    qt_rows: Sequence[Row], skipped: Sequence[str] = (),
) -> Evidence:
    """Every expected cell of every kernel of the path on ``arch``: its compile row, its
    audit rows (when the policy audits), a row of each required check (each fallback
    check when the arch falls back) and a verdict for each of its mutants (unless the
    run skipped the mutants gate).  A cell with a row of any status is present; the
    status is judged by ``admit_cell``."""
    fallback = any(arch.cap(n.cap) not in n.allowed for n in pp.needs)
    present: dict[tuple[str, str], set[str]] = {}
    for r in [*rows, *qt_rows]:
        present.setdefault((r.kernel, r.kind), set()).add(r.check)
    path_kernels = sorted(n for n, k in kernels.items()
                          if k.qt == pp.qt and k.path == pp.path and k.mutant_of is None)
    mine: list[str] = []
    for name in path_kernels:
        applies = kernels[name].applies_to(arch)
        if applies is None:  # not recorded: expected where it has applicable rows
            applies = any(r.kernel == name and r.status is not Status.UNSUPPORTED
                          for r in rows)
        if applies or fallback:
            mine.append(name)
    missing: list[str] = []
    notes = list(skipped)
    if pp.mutants and not fallback and mine \
            and not any("mutants gate" in s for s in skipped) \
            and not any(k.mutant_of in mine and not k.self_test for k in kernels.values()):
        # not blocking (a tree need not ship mutants) but never silent
        notes.append(f"mutants gate: no mutant of this tree breaks {_listed(mine)}; the "
                     "kill matrix says nothing about these kernels")
    for name in mine:
        applies = kernels[name].applies_to(arch) is not False
        if applies and not fallback:
            if "compile" not in present.get((name, "compile"), set()):
                missing.append(f"compile of {name}")
            if pp.audit and not present.get((name, "audit")):
                missing.append(f"audit of {name}")
            elif pp.audit and arch.vendor == "amd" and _compiled(name, rows) \
                    and not _audit_verdict(name, rows):
                # the no-spill and VGPR budget rules judge every AMD code object: an audit
                # whose every rule says it does not apply reached no verdict at all
                missing.append(f"an ISA audit verdict of {name} (every rule says unsupported)")
        checks = pp.fallback_checks if fallback else pp.checks
        missing += [f"{c} of {name}" for c in checks
                    if c not in present.get((name, "check"), set())]
        if pp.mutants and not fallback and not any("mutants gate" in s for s in skipped):
            # the suite's own mutants on an external tree are a self-test of the checks,
            # not evidence about this tree's cells (they are dropped before this point)
            for m, k in kernels.items():
                if k.mutant_of == name and not k.self_test \
                        and "mutant" not in present.get((m, "mutant"), set()):
                    missing.append(f"mutant verdict of {m}")
    return Evidence(tuple(mine), tuple(missing), tuple(notes),
                    tuple(n for n in path_kernels
                          if n not in mine and kernels[n].limited_on(arch)))


def _compiled(name: str, rows: Sequence[Row]) -> bool:
    return any(r.kernel == name and r.kind == "compile" and r.status is Status.PASS
               for r in rows)


def _audit_verdict(name: str, rows: Sequence[Row]) -> bool:
    """A rule of the audit judged ``name``'s object (a verdict the manifest waived counts:
    the manifest decided it)."""
    return any(r.kernel == name and r.kind == "audit"
               and (r.status in (Status.PASS, Status.FAIL)
                    or (r.status is Status.SKIPPED and bool(r.details.get("waived"))))
               for r in rows)


EVIDENCE_STEPS = ("compile", "audit", "checks", "mutants", "timing")


def expected_cells_damage(envelope: Mapping[str, Any]) -> str:
    """Why the expected cells a ``hqval run`` recorded up front cannot be trusted, or "".
    Only a run's envelope (it names its ``steps``; schema 2 and later) has them; there
    every evidence step has a list covering every arch of the run (a step with nothing to
    do expects its note), whose length is the count recorded beside it.  An envelope
    without them would let a row be removed unnoticed wherever the kernels' own evidence
    does not reach."""
    if "steps" not in envelope:
        return ""  # a bench run, an older schema: judged on the kernels' own evidence
    cells, counts = envelope.get("expected_cells"), envelope.get("expected")
    if not isinstance(cells, Mapping):
        return "envelope.json has no expected_cells (the envelope is damaged; re-run)"
    for step in EVIDENCE_STEPS:
        ids = cells.get(step)
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return f"envelope.json expected_cells has no list for step {step} (damaged)"
        if isinstance(counts, Mapping) and counts.get(step) != len(ids):
            return (f"envelope.json expects {counts.get(step)!r} cells of step {step} but "
                    f"lists {len(ids)} (damaged)")
        lacking = [a for a in envelope.get("arch") or []
                   if not any(i.rsplit("|", 2)[-2:-1] == [a] for i in ids)]
        if lacking:
            return (f"envelope.json expected_cells lists no cell of step {step} on "
                    f"{', '.join(map(str, lacking))} (damaged)")
    return ""


def missing_cells(runs: Sequence[Any]) -> list[str]:
    """The expected cells each run recorded up front (envelope ``expected_cells``) that
    have no row in it."""
    out: list[str] = []
    for run in runs:
        damage = expected_cells_damage(run.envelope) \
            if getattr(run, "written_schema", 0) >= 2 else ""
        if damage:
            out.append(f"every expected cell: {damage} ({run.path})")
            continue
        expected = run.envelope.get("expected_cells") or {}
        have = {r.identity for r in run.rows}
        for step in EVIDENCE_STEPS:
            out += [f"{i} (step {step}, {run.path})" for i in expected.get(step, [])
                    if i not in have]
    return out




# ---------------------------------------------------------------------------- binding

# the schema from which a run names itself (``run_id``) and binds its rows to it and to
# the code objects they judged
BOUND_SCHEMA = 3
# the row kinds only ``hqval run``'s steps write: a run holding them recorded its steps
# and expected cells up front (a bench or timing-study run holds timing rows only)
RUN_STEP_KINDS = ("compile", "audit", "check", "mutant")
# a code object's sha256 as the run records it
_SHA256 = re.compile(r"[0-9a-f]{64}")
# the backend a row of each kind names (check, mutant and timing rows: the arch's backend)
_KIND_BACKEND = {"compile": "toolchain", "audit": "isa", "admit": "policy"}
# timing rows whose verdict rests on stored paired samples (device ceilings do not)
_SAMPLED_TIMING = ("timing_hot", "timing_cold", "timing_aa_hot", "timing_aa_cold",
                   "timing_mutant_hot", "timing_mutant_cold")


def envelope_damage(envelope: Mapping[str, Any], rows: Sequence[Row],
                    written_schema: int) -> list[str]:
    """Why the envelope's gating keys cannot be trusted: a run of the current schema must
    name itself and record its kernel table, steps and expected cells (a run without
    them would let rows be removed or added unnoticed)."""
    out: list[str] = []
    version = envelope.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        out.append(f"envelope.json schema_version {version!r} is not an integer")
    bound = written_schema >= BOUND_SCHEMA
    if not bound and ("run_id" in envelope or "objects" in envelope
                      or any(r.run_id or r.object_sha256 for r in rows)):
        out.append(f"envelope.json says schema_version {written_schema!r}, but the run names "
                   "itself (run_id) or its rows carry run ids: it was written by schema "
                   f"{BOUND_SCHEMA} or later and its schema_version is damaged")
    if not bound:
        if any(r.kind in RUN_STEP_KINDS for r in rows):
            out.append(f"written by schema {written_schema}, before rows were bound to their "
                       "run: its rows cannot be vouched for; re-run it with this hqval")
        return out
    run_id = envelope.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        out.append("envelope.json has no run_id (a string naming the run)")
    if not isinstance(envelope.get("kernels"), Mapping):
        out.append("envelope.json has no kernel table (kernels)")
    steps = envelope.get("steps")
    if any(r.kind in RUN_STEP_KINDS for r in rows):
        if not isinstance(steps, list) or not steps or not all(isinstance(s, str) for s in steps):
            out.append("envelope.json has no steps, but the run holds the rows of hqval run's "
                       "steps: its expected cells cannot be checked")
        if not isinstance(envelope.get("expected_cells"), Mapping):
            out.append("envelope.json has no expected_cells")
        if not isinstance(envelope.get("objects"), Mapping):
            out.append("envelope.json has no objects (the sha256 of each code object)")
        if not isinstance(envelope.get("expected"), Mapping):
            out.append("envelope.json has no expected (the count of each step's expected "
                       "cells)")
        arch_list = envelope.get("arch")
        if isinstance(arch_list, list) and len(set(map(str, arch_list))) != len(arch_list):
            out.append(f"envelope.json arch {arch_list!r} names an arch twice (a run lists "
                       "each arch it ran once)")
        backends = envelope.get("backends")
        single = envelope.get("backend")
        lacking = [] if isinstance(single, str) and single else [
            a for a in envelope.get("arch") or []
            if not (isinstance(backends, Mapping) and isinstance(backends.get(a), Mapping)
                    and isinstance(backends[a].get("backend"), str))]
        if lacking:
            out.append("envelope.json has no backends entry naming the backend of "
                       f"{', '.join(map(str, lacking))}: its rows' backends cannot be checked")
        # the summary the run writes beside the table (``run.chain._record_backends``)
        # must be the table's: the report and the run's summary show it
        arches = [a for a in envelope.get("arch") or [] if isinstance(a, str)]
        named = {a: backends[a].get("backend") for a in arches
                 if isinstance(backends, Mapping) and isinstance(backends.get(a), Mapping)}
        if isinstance(single, str) and single and arches and len(named) == len(arches) \
                and all(isinstance(v, str) for v in named.values()):
            summary = ",".join(sorted({str(v) for v in named.values()}))
            if single != summary:
                out.append(f"envelope.json backend is {single!r}, but its backends table "
                           f"says {summary!r}: the envelope is damaged")
    if any(r.kind == "check" for r in rows) and not _is_seed(envelope.get("seed")):
        # every check row's fixtures are drawn from the run's seed, which binding_damage
        # holds each row to: without it that check would be off
        out.append(f"envelope.json seed {envelope.get('seed', '(none)')!r} is not the run's "
                   "seed (an integer from 0 to 2**32-1), but the run holds check rows drawn "
                   "from it")
    table = envelope.get("kernels")
    for name, k in (table.items() if isinstance(table, Mapping) else ()):
        why = kernel_entry_damage(k)
        if why:
            out.append(f"envelope.json kernels[{name!r}]: {why}")
    return out


def _is_seed(value: Any) -> bool:
    """A seed ``hqval run --seed`` takes (``hqval.options.seed_value``)."""
    from hqval.options import SEED_MAX

    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= SEED_MAX


def kernel_entry_damage(entry: Any) -> str:
    """Why one entry of a run's kernel table cannot say which (qt, path) its rows are
    evidence for, or "" (an entry ``kernel_table`` would skip would silently take its
    kernel's rows out of every policy cell)."""
    if not isinstance(entry, Mapping):
        return f"is {type(entry).__name__}, not a mapping"
    qt = entry.get("qt")
    if isinstance(qt, bool) or not isinstance(qt, int):
        return f"qt {qt!r} is not an integer"
    if entry.get("path") not in PATHS and str(entry.get("kind")) not in PATH_OF_KIND:
        return f"kind {entry.get('kind')!r} names no path"
    for key in ("production", "self_test"):
        if key in entry and not isinstance(entry[key], bool):
            return f"{key} {entry[key]!r} is not true or false"
    built = entry.get("built_for")
    if built is not None and not (isinstance(built, list)
                                  and all(isinstance(a, str) for a in built)):
        return f"built_for {built!r} is not a list of arch names"
    return ""


def binding_damage(envelope: Mapping[str, Any], rows: Sequence[Row],
                   written_schema: int, judged: Sequence[Row] | None = None,
                   known_arches: Mapping[str, Arch] | None = None) -> list[str]:
    """Every row the envelope does not vouch for, named: a row of another run (its
    ``run_id``), of an arch or backend the run did not use, of a kernel its manifest does
    not hold, judging a code object other than the one the run compiled, or stating a
    bound its check or audit rule never compares with; and every row whose own fields
    contradict its status.  Empty: the run is its own.  ``judged``: the rows as ``judge``
    recomputed them (in the same order): a row the run never expected is damage unless
    its judged status is a failure or an error.  ``known_arches``: the arches the audit's
    per-kernel bounds are re-derived on (default: matrices/arches.yaml, as ``hqval run``
    resolves them)."""
    out = envelope_damage(envelope, rows, written_schema)
    out += [f"{r.identity}: {why}" for r in rows if (why := self_contradiction(r))]
    out += kill_damage(rows)
    if written_schema < BOUND_SCHEMA or out:
        return out
    run_id = envelope.get("run_id")
    arches = [a for a in envelope.get("arch") or [] if isinstance(a, str)]
    backends = envelope.get("backends")
    kernels = envelope.get("kernels") or {}
    objects = envelope.get("objects") or {}
    seed = envelope.get("seed")
    statuses = [j.status for j in judged] if judged is not None and len(judged) == len(rows) \
        else [r.status for r in rows]
    # the expected cells are read from the envelope once, not once per row (a matrix run
    # has ~8000 rows and as many expected cells: rebuilding the sets per row was quadratic)
    expected = _expected_ids(envelope) if "steps" in envelope else None
    known = known_arches

    def arch_of(name: str) -> Arch | None:
        nonlocal known
        if known is None:
            from hqval.matrix import load_arches
            known = load_arches()
        return known.get(name)

    for r, judged_status in zip(rows, statuses, strict=True):
        why = ""
        if r.run_id != run_id:
            why = (f"written by run {r.run_id or '(none)'}, not this run ({run_id})")
        elif r.arch not in arches:
            why = f"arch {r.arch} is not one of the run's ({', '.join(arches)})"
        else:
            want = _KIND_BACKEND.get(r.kind)
            if want is None and isinstance(backends, Mapping):
                b = backends.get(r.arch)
                want = str(b.get("backend")) if isinstance(b, Mapping) else None
            listed = envelope.get("backend")
            if want is None and isinstance(listed, str) and listed:
                # no per-arch table (a bench run): the backends the envelope lists
                want = listed if r.backend not in listed.split(",") else r.backend
            if r.kind == "step" and r.backend == "step":
                want = "step"
            if want is None and r.kind != "step":
                why = f"the envelope names no backend for {r.arch}: the row cannot be vouched for"
            elif want is not None and r.backend != want:
                why = f"backend {r.backend} is not the run's ({want}) on {r.arch}"
            elif r.kind in RUN_STEP_KINDS and r.kernel not in kernels:
                why = f"kernel {r.kernel} is not in the run's manifest (its kernel table)"
            elif r.kind == "check" and r.check in CHECKS and r.tolerance is not None \
                    and r.tolerance not in stated_tolerances(r.check):
                why = (f"states tolerance {r.tolerance:g}, which {r.check} never compares "
                       "with (its tolerances: "
                       f"{', '.join(f'{t:g}' for t in sorted(stated_tolerances(r.check)))})")
            elif r.kind == "audit" \
                    and (bad := audit_bound_damage(r, kernels.get(r.kernel), arch_of)):
                why = bad
            elif r.kind == "check" and r.seed != seed \
                    and (r.seed is not None or judged_status not in (Status.FAIL, Status.ERROR)):
                # a check's fixtures are drawn from the run's seed and every check row
                # states it (hqval.checks.cell): a row stating another, or none, was made in
                # another context (envelope_damage: the envelope's seed is an integer); a
                # failure or error stating none still fails, never hidden as damage
                why = (f"ran with seed {r.seed}, not the run's ({seed})" if r.seed is not None
                       else f"states no seed, but every check row states the run's ({seed})")
            elif r.kind in RUN_STEP_KINDS:
                obj = objects.get(f"{r.kernel}|{r.arch}")
                if r.kind == "compile" and r.status is Status.PASS \
                        and not (isinstance(obj, str) and _SHA256.fullmatch(obj)):
                    # the kernel built: the run recorded its object (the compile step
                    # writes every built object's sha256), which binds every row of it;
                    # without the record no row of the kernel is bound to anything
                    why = ("passes (the kernel built), but the envelope's objects record no "
                           f"code object of it ({obj!r}): its rows are bound to none")
                elif r.kind == "compile" and r.status is Status.PASS \
                        and r.object_sha256 is None:
                    why = "passes without naming the code object it built"
                elif r.object_sha256 is not None and r.object_sha256 != obj:
                    why = (f"judged code object {r.object_sha256[:12]}, not the one the run "
                           f"compiled ({str(obj)[:12] if obj else 'none'})")
                elif obj is not None and r.object_sha256 is None and r.status is Status.PASS:
                    # a check row names the object of its own kernel, which it loaded
                    # (the fallback check of a GEMM on an arch without WMMA runs the decode
                    # kernels: the GEMM has no object there, so nothing is owed)
                    why = "passes without naming the code object it judged"
                elif obj is not None and r.kind == "compile" \
                        and r.status is Status.UNSUPPORTED:
                    why = ("says the kernel is not built here, but the run compiled its code "
                           f"object ({str(obj)[:12]})")
                elif r.kind == "audit" and r.details.get("waived"):
                    why = _waiver_damage(r, kernels.get(r.kernel))
            if not why and "steps" in envelope:
                why = unexpected_row(r, envelope, judged_status, expected)
        if why:
            out.append(f"{r.identity}: {why}")
    return out


def audit_bound_damage(r: Row, entry: Any, arch_of: Callable[[str], Arch | None]) -> str:
    """Why an audit row states a bound its rule never compares with, or "".  A rule with
    one fixed bound (``FIXED_TOLERANCES``) states it in every row; ``vgpr_budget`` states
    the VGPR budget of the row's arch for its kernel's launch bounds (``hqval.audit.
    occupancy.vgpr_budget``), which a pass has only when they are the manifest's ``block``
    in wave32: re-derived here from the arch (``arch_of``: its name -> the Arch, None where
    this hqval has none) and the block of the kernel's ``entry`` in the run's kernel table.
    A pass of these rules without a bound is no row the rule wrote either (each of their
    verdicts states it)."""
    rule = r.check.removeprefix("audit_")
    fixed = FIXED_TOLERANCES.get(rule)
    if fixed is None and rule != "vgpr_budget":
        return ""
    t = r.tolerance
    if t is None:
        return (f"passes without the bound rule {rule} compares with (its tolerance)"
                if r.status is Status.PASS else "")
    if fixed is not None:
        return "" if t == fixed else \
            f"states tolerance {t:g}, but rule {rule} always compares with {fixed:g}"
    from hqval.manifest import block_problem

    block = entry.get("block") if isinstance(entry, Mapping) else None
    if not isinstance(block, int) or block_problem(block) is not None:
        # every run that writes audit rows records its kernels' block (hqval.manifest.
        # kernel_table): an entry without one is not what the run wrote
        return (f"its kernel's entry in the run's kernel table has no block ({block!r} is "
                "not a multiple of 32 from 32 to 1024): the VGPR budget rule vgpr_budget "
                "compares with cannot be re-derived (damaged)")
    arch = arch_of(r.arch)
    if arch is None:
        return (f"arch {r.arch} is none of this hqval's arches (matrices/arches.yaml): the "
                "VGPR budget rule vgpr_budget compares with cannot be re-derived")
    flat, wave, whose = block, 32, f"block {block}"
    if r.status is not Status.PASS:
        # the rule derives its bound from the object's launch bounds and wave size, and
        # fails an object whose launch bounds are not the block or whose waves are not
        # wave32: a row that did not pass is judged by the ones it states
        f, w = r.details.get("max_flat_workgroup_size"), r.details.get("wavefront_size")
        if _positive(f) and _positive(w) and (f, w) != (flat, 32):
            flat, wave, whose = f, w, f"the launch bounds {f} of wave{w} it states"
    bound = vgpr_budget(arch, flat, wave)
    if t == bound:
        return ""
    return (f"states tolerance {t:g}, but rule vgpr_budget compares with {bound} on "
            f"{r.arch} for {whose}: {vgpr_budget_derivation(arch, flat, wave)}")


def _positive(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _waiver_damage(r: Row, entry: Any) -> str:
    """Why an audit row's waiver is none the run's manifest made, or "": the kernel table
    records each kernel's ``audit_waive`` (rule, reason) pairs."""
    rule = r.check.removeprefix("audit_")
    listed = entry.get("audit_waive") if isinstance(entry, Mapping) else None
    rules = set()
    for w in listed if isinstance(listed, list) else []:
        if isinstance(w, (list, tuple)) and w:
            rules.add(str(w[0]))
        elif isinstance(w, Mapping) and "rule" in w:
            rules.add(str(w["rule"]))
    if rule in rules:
        return ""
    return (f"says the manifest waived rule {rule}, but the run's kernel table waives no such "
            f"rule for {r.kernel} (its audit_waive: {', '.join(sorted(rules)) or 'none'})")


# the flag that skips each gate a step can skip (``hqval run --no-mutants``, ...)
SKIP_FLAGS = {"mutants": "--no-mutants", "timing": "--no-timing"}
_EVIDENCE_KINDS = ("compile", "audit", "check", "mutant", "timing")


def _expected_ids(envelope: Mapping[str, Any]) -> tuple[dict[str, set[str]], set[str]]:
    cells = envelope.get("expected_cells")
    per = {str(k): {i for i in v if isinstance(i, str)} for k, v in
           (cells.items() if isinstance(cells, Mapping) else ()) if isinstance(v, list)}
    return per, set().union(*per.values()) if per else set()


def unexpected_row(r: Row, envelope: Mapping[str, Any], status: Status | None = None,
                   expected: tuple[dict[str, set[str]], set[str]] | None = None) -> str:
    """Why a row of a run that recorded its cells up front is none it expected, or "".
    A step row is vouched for like any other: a step's own note (a gate skipped, nothing
    to do on an arch) is one of that step's expected cells, and says it was skipped by
    the flag that skips that step's gate, if any; a step mark (``step[-|arch|step]``,
    done or an error) names one of the run's steps.  An evidence row that is neither a
    failure nor an error must be an expected cell: a passing or skipping row the run
    never planned (a check the kernel does not get, a timing cell of no bench plan) is
    not its evidence (``status``: the row's status as judged, its samples' verdict for a
    timing row); ``expected``: ``_expected_ids(envelope)``, when the caller has it."""
    per, every = expected if expected is not None else _expected_ids(envelope)
    if r.kind == "step":
        steps = envelope.get("steps") or []
        if r.check not in steps:
            return (f"names step {r.check!r}, which is not one of the run's steps "
                    f"({', '.join(map(str, steps))})")
        flag = r.details.get("skipped_by")
        if r.identity in per.get(r.check, set()):
            if flag is not None and flag != SKIP_FLAGS.get(r.check):
                return (f"says step {r.check} was skipped by {flag!r}, which skips no gate "
                        "of that step")
            return ""
        if r.backend == "step" and r.status in (Status.PASS, Status.ERROR) and flag is None:
            return ""  # a step mark: done, or an error (the run writes one per step and arch)
        return (f"a note of step {r.check} the run did not expect on {r.arch} (the step "
                "expected its own cells there: a skipped gate the run did not ask for)")
    if r.kind in _EVIDENCE_KINDS and (status or r.status) not in (Status.FAIL, Status.ERROR) \
            and r.identity not in every:
        return "a cell the run never expected (it is none of the envelope's expected cells)"
    return ""


def kill_damage(rows: Sequence[Row]) -> list[str]:
    """Every mutant verdict saying a check killed the mutant where the run's own row of
    that check on the mutant says otherwise (the verdict is made from those rows: a
    verdict contradicting them was not)."""
    last: dict[tuple[str, str, str], Row] = {}
    for r in rows:
        if r.kind in ("check", "audit"):
            last[(r.check, r.kernel, r.arch)] = r
    out = []
    for v in rows:
        killers = v.details.get("killed_by")
        if v.kind != "mutant" or v.status is not Status.PASS or not isinstance(killers, list):
            continue
        for k in killers:
            cell = last.get((str(k), v.kernel, v.arch))
            if cell is not None and cell.status is not Status.FAIL:
                out.append(f"{v.identity}: says {k} killed the mutant, but the run's row "
                           f"{cell.identity} says {cell.status}")
    return out


def self_contradiction(row: Row) -> str:
    """Why a row's own numbers contradict its status, or "": a pass whose measured value
    is not a finite number, or lies beyond its tolerance; a timing verdict without the
    paired samples it rests on."""
    m, t = row.measured, row.tolerance
    if row.kind == "timing" and row.check in _SAMPLED_TIMING \
            and (why := samples_problem(row)):
        return f"a timing row whose samples are no event times ({why})"
    if row.kind == "timing" and row.check in _SAMPLED_TIMING \
            and row.status in (Status.PASS, Status.FAIL) and stored_samples(row) is None:
        return "a timing verdict without its paired samples (samples_a, samples_b)"
    if t is not None and t < 0:
        return f"has a negative tolerance {t:g} (no measured value can lie within it)"
    if row.kind == "compile" and row.status is Status.SKIPPED and not _compiler_gap(row):
        return ("a compile is built (pass), failed, an error or not built here (unsupported), "
                "never skipped (but for a target builtin the compiler lacks, named by its "
                "own error)")
    if row.status is not Status.PASS:
        return ""
    if row.kind in ("check", "audit") and t is not None and m is None:
        return f"passes against tolerance {t:g} without the measured value it compared"
    if row.kind == "check" and m is not None and t is None:
        # (an audit rule may count without a bound: audit_wmma's WMMA instructions)
        return f"passes with measured {m:g} but no tolerance it was compared with"
    if row.kind == "mutant":
        killers = row.details.get("killed_by")
        cells = row.details.get("cells")
        if not isinstance(killers, list) or not killers \
                or not all(isinstance(k, str) for k in killers):
            return "says the mutant was killed but names no killer (details.killed_by)"
        if not isinstance(cells, Mapping) \
                or any(cells.get(k) != "fail" for k in killers):
            return ("says the mutant was killed by "
                    f"{', '.join(killers)}, but its cells do not say that check failed")
        if m is not None and m != len(killers):
            return f"counts {m:g} killers but names {len(killers)}"
    if m is not None and not math.isfinite(m):
        return f"passes with measured {m!r}"
    if t is not None and not math.isfinite(t):
        return f"passes with tolerance {t!r}"
    if row.kind in ("check", "audit") and m is not None and t is not None and m > t:
        return f"passes with measured {m:g} beyond its tolerance {t:g}"
    if row.kind == "audit" and (why := audit_detail_contradiction(row)):
        return why
    if row.kind == "check" and (why := check_detail_contradiction(row)):
        return why
    if row.kind == "check" and m is not None and m < 0:
        # a check measures an error or a count of differing outputs (an audit rule may
        # measure a signed delta against its baseline)
        return f"passes with measured {m:g}: an error or a count is never negative"
    return ""




def _count(value: Any) -> float | None:
    """A number a rule wrote into its details (never a boolean), or None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


# per audit rule, the details each of its passes states as zero (``hqval.audit.static``
# and ``executed``: a pass is made only when every one of them is)
_ZERO_WHEN_PASSING = {
    "audit_no_spill": (".vgpr_spill_count", ".sgpr_spill_count", ".private_segment_fixed_size",
                       "scratch_instructions"),
    "audit_payload_offset": ("cells_missing", "cells_extra", "bytes_beyond_matrix"),
    # not vgpr_budget's spill counts: that rule judges the VGPR count against the launch
    # bounds' budget and lists the spills as evidence (no_spill judges them); a spilling
    # kernel within its budget passes it (the engine's gemv_mq4g256v2_residual on gfx11)
}


def audit_detail_contradiction(row: Row) -> str:
    """Why an audit pass's own details say the rule did not pass, or "": a count the rule
    passes only at zero (no_spill's spills and scratch, unread or foreign payload bytes)
    above it; a
    header load the rule found per lane; W traffic above the baseline's; a VGPR count
    above the measured one, or launch bounds of another wave size (the rule fails
    those).  A detail the row does not hold is not read."""
    d = row.details
    for key in _ZERO_WHEN_PASSING.get(row.check, ()):
        v = _count(d.get(key))
        if v is not None and v != 0:
            return f"passes, but its details say {key} {v:g} (the rule passes only at 0)"
    if row.check == "audit_header_scalar":
        if d.get("evidence"):
            return ("passes, but its details hold evidence of header bytes read per lane "
                    "(the rule fails on it)")
        mine, theirs = _count(d.get("traffic_per_cell_tile")), \
            _count(d.get("baseline_traffic_per_cell_tile"))
        if mine is not None and theirs is not None and mine > theirs * (1 + 1e-9) + 1e-9:
            return (f"passes, but its details say W traffic {mine:g} per cell tile against "
                    f"the baseline's {theirs:g} (the rule fails on more)")
    if row.check == "audit_vgpr_budget":
        vgprs = _count(d.get("vgpr_count"))
        if vgprs is not None and row.measured is not None and vgprs > row.measured:
            # (the count the rule compares is the object's: a measured value below it is
            # one the rule never wrote)
            return (f"passes with measured {row.measured:g} VGPRs, but its details say "
                    f"vgpr_count {vgprs:g}")
        wave = _count(d.get("wavefront_size"))
        if wave is not None and wave != 32:
            return f"passes, but its details say wavefront_size {wave:g} (the ABI is wave32)"
    return ""


def check_detail_contradiction(row: Row) -> str:
    """Why a check pass's own details say it did not pass, or "": output words differing
    from the baseline (bit identity passes only at 0), or an error of a fixture (or of the
    per-token reference) beyond the row's tolerance or no number (a pass is made only when
    the worst of them is within it)."""
    d = row.details
    differ = _count(d.get("differing_words"))
    if differ is not None and differ != 0:
        return f"passes, but its details say {differ:g} output words differ (it passes at 0)"
    t = row.tolerance
    for key in ("errors", "per_token_errors"):
        errs = d.get(key)
        if t is None or not isinstance(errs, Mapping):
            continue
        for name, e in errs.items():
            v = _count(e)
            if v is None or not math.isfinite(v) or v > t:
                return (f"passes with tolerance {t:g}, but its details say {key} {name} "
                        f"{e!r}")
    return ""
