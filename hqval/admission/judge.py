"""One judged run: ``judge(runs, policy) -> Judged``.

Every reader of a run's verdicts (``hqval admit``, ``compare``, ``report``, ``history``,
the run chain, ``hqval.results.store.load_run``) goes through ``judge``: each run is
judged with its own kernel table (timing verdicts recomputed from the stored samples
under the policy's gates), then the judged runs are combined into the one
``Admission``.  Nothing is merged by kernel name across runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hqval.admission.decision import Admission, admit, combine
from hqval.admission.evidence import (
    BOUND_SCHEMA,
    KernelInfo,
    binding_damage,
    gate_for_row,
    kernel_table,
    missing_cells,
)
from hqval.admission.policy import Policy, arch_caps_from_matrix, load_policy
from hqval.admission.table import confirm_table
from hqval.matrix import Arch
from hqval.result import Row
from hqval.timing.gate import Gate, rejudge_rows


class RunLike(Protocol):
    """What ``judge`` reads of a loaded run (``hqval.results.store.Run``)."""

    @property
    def path(self) -> Path: ...
    @property
    def envelope(self) -> dict[str, Any]: ...
    @property
    def rows(self) -> list[Row]: ...


@dataclass(frozen=True)
class JudgedRun:
    """One run judged on its own: its rows with every timing verdict recomputed from the
    stored samples under the policy (``details.gate``, ``details.verdict``), and the kernel
    table of its own envelope."""

    path: Path
    envelope: dict[str, Any]
    rows: tuple[Row, ...]
    kernels: Mapping[str, KernelInfo]
    written_schema: int = 0
    # rows the envelope does not vouch for, rows contradicting themselves, gating keys
    # missing (``hqval.admission.evidence.binding_damage``): the run is damaged, exit 2
    damage: tuple[str, ...] = ()
    # what of its kernel table nothing confirms (``hqval.admission.table``), or ""
    unconfirmed: str = ""


@dataclass(frozen=True)
class Judged:
    """The judged runs (and baselines) and the one admission over them."""

    runs: tuple[JudgedRun, ...]
    admission: Admission
    policy: Policy
    baseline: tuple[JudgedRun, ...] = ()
    comparison: Any = None  # hqval.results.compare.Comparison with a baseline, else None

    @property
    def rows(self) -> list[Row]:
        return [r for run in self.runs for r in run.rows]

    @property
    def exit_code(self) -> int:
        return self.admission.exit_code


class DamagedRun(ValueError):
    """A run the judge cannot vouch for (``JudgedRun.damage``), given to a reader whose
    answer rests on a whole run (a comparison, a history, a baseline): the message names
    the run and its first damaged rows."""


def undamaged(run: JudgedRun, what: str = "RUN") -> JudgedRun:
    """``run`` itself, or ``DamagedRun`` when its envelope does not vouch for its rows:
    ``hqval admit`` says a damaged run is exit 2, and so does every other reader of a
    judged run's verdicts (``hqval compare``, ``hqval history``, ``--baseline``), never
    comparing rows the run did not write."""
    if run.damage:
        shown = "; ".join(run.damage[:3])
        more = f" (+{len(run.damage) - 3} more)" if len(run.damage) > 3 else ""
        raise DamagedRun(f"{what} {run.path}: damaged: {shown}{more}; its rows cannot be "
                         "vouched for (hqval admit lists every one): re-run it into a fresh "
                         "--out")
    return run


def judge_run(run: RunLike, policy: Policy,
              arches: Mapping[str, Arch] | None = None) -> JudgedRun:
    """One run judged with its own kernel table: timing verdicts recomputed from the
    samples under ``policy``'s gates.  ``arches``: the arches the audit's per-kernel
    bounds are re-derived on (``binding_damage``; default: matrices/arches.yaml)."""
    kernels = kernel_table([run.envelope])
    schema = int(getattr(run, "written_schema", 0))
    rows = tuple(rejudge_rows(run.rows, gate_for_row(policy, kernels)))
    damage = tuple(binding_damage(run.envelope, run.rows, schema, rows, arches))
    note = ""
    if schema >= BOUND_SCHEMA and not damage:
        # the table the judge reads, confirmed by the run's manifest or its rows
        table = confirm_table(run.envelope, run.rows, rows,
                              missing_cells([_Missing(run.path, run.envelope, run.rows,
                                                      schema)]))
        damage, note = table.damage, table.note
    return JudgedRun(Path(run.path), run.envelope, rows, kernels, schema, damage, note)


@dataclass(frozen=True)
class _Missing:
    path: Path
    envelope: Mapping[str, Any]
    rows: Sequence[Row]
    written_schema: int


def applied_gate(row: Row) -> Gate | None:
    """The gate ``judge`` applied to a row (``details.gate``), None where none did."""
    g = row.details.get("gate")
    if not isinstance(g, Mapping):
        return None
    try:
        return Gate.from_dict(g)
    except (KeyError, TypeError, ValueError):
        return None


def judge(
    runs: Sequence[RunLike],
    policy: Policy,
    *,
    baseline: Sequence[RunLike] = (),
    arches: Mapping[str, Arch] | None = None,
    only_arches: Iterable[str] | None = None,
) -> Judged:
    """Every run judged on its own (``judge_run``), then one admission over them: each
    run's cells are decided with that run's own kernel table and the cells of several runs
    combined (``combine``); nothing is merged by kernel name.  ``baseline``: earlier runs
    the timing cells are compared against (a regression rejects its cell)."""
    from hqval.results.compare import compare_rows, same_device

    if arches is None:
        arches = arch_caps_from_matrix()
    judged = tuple(judge_run(r, policy, arches) for r in runs)
    base = tuple(judge_run(r, policy, arches) for r in baseline)
    _distinct_runs(judged, base)
    cmp = None
    regressed: list[str] = []
    mine: dict[int, list[str]] = {}  # each run's own regressions (by id of its JudgedRun)
    unpaired: tuple[str, ...] = ()
    if base:
        # each run against the baseline of its own (arch, backend), one pair at a time:
        # never the rows of every run merged by identity, where the last run's row of a
        # cell wins (a second run of one arch, or a second baseline, masked a regression)
        pairs, unpaired = pair_baselines(judged, base)
        parts = [compare_rows([r for r in b.rows if r.arch in arches_of],
                              [r for r in j.rows if r.arch in arches_of],
                              str(b.path), str(j.path), gate_for=applied_gate,
                              same_device=same_device(b.envelope, j.envelope))
                 for j, b, arches_of in pairs]
        cmp = _joined(parts, base, judged)
        regressed = list(dict.fromkeys(c.identity for c in cmp.regressions))
        for (j, _, _), part in zip(pairs, parts, strict=True):
            mine.setdefault(id(j), []).extend(c.identity for c in part.regressions)
    wanted = list(only_arches) if only_arches is not None else None
    each = [_admit_one(j, policy, arches, mine.get(id(j), []), wanted) for j in judged]
    adm = combine(each, [str(j.path) for j in judged])
    if regressed:
        adm = dataclasses.replace(adm, regressions=tuple(regressed))
    if unpaired:
        adm = dataclasses.replace(adm, unpaired=unpaired)
    apart = disagreement(judged)
    if apart:
        adm = dataclasses.replace(adm, disagree=apart)
    # a baseline the judge cannot vouch for is damaged evidence of this admission (its
    # rows decide what counts as a regression): exit 2, naming it
    base_damage = tuple(f"--baseline {b.path}: {d}" for b in base for d in b.damage)
    if base_damage:
        adm = dataclasses.replace(adm, damage=adm.damage + base_damage)
    return Judged(judged, adm, policy, base, cmp)


def run_slots(envelope: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The (arch, backend) pairs a run ran: its envelope's ``backends`` table (each arch
    and the backend it opened), else its ``arch`` list with its ``backend``."""
    table = envelope.get("backends")
    if isinstance(table, Mapping) and table:
        return {(str(a), str(v.get("backend") if isinstance(v, Mapping) else v))
                for a, v in table.items()}
    named = envelope.get("arch") or []
    arches = [named] if isinstance(named, str) else [str(a) for a in named]
    backends = [b.strip() for b in str(envelope.get("backend") or "").split(",") if b.strip()]
    return {(a, b) for a in arches for b in backends or ["?"]}


def _slot(slot: tuple[str, str]) -> str:
    return f"{slot[0]} ({slot[1]})"


def pair_baselines(runs: Sequence[JudgedRun], base: Sequence[JudgedRun]
                   ) -> tuple[list[tuple[JudgedRun, JudgedRun, set[str]]], tuple[str, ...]]:
    """Each run with the baseline run of each (arch, backend) it ran, and what does not
    pair: a run's (arch, backend) no baseline ran (its regressions cannot be seen), a
    baseline's that no run ran (nothing tonight to compare it with: not a kernel's
    regression), an (arch, backend) two baselines ran (which one is the baseline?).
    Returns ([(run, baseline, the arches they share)], the lines of what does not pair)."""
    owners: dict[tuple[str, str], list[JudgedRun]] = {}
    for b in base:
        for s in run_slots(b.envelope):
            owners.setdefault(s, []).append(b)
    lines: list[str] = []
    for s, bs in sorted(owners.items()):
        if len(bs) > 1:
            lines.append(f"--baseline: {len(bs)} baseline runs of {_slot(s)} "
                         f"({', '.join(str(b.path) for b in bs)}): which one is the "
                         "baseline is ambiguous; give one run per arch and backend")
    ran: set[tuple[str, str]] = set()
    pairs: dict[tuple[int, int], tuple[JudgedRun, JudgedRun, set[str]]] = {}
    for ji, j in enumerate(runs):
        for s in sorted(run_slots(j.envelope)):
            ran.add(s)
            bs = owners.get(s, [])
            if not bs:
                lines.append(f"{j.path}: no --baseline run of {_slot(s)}: its cells are "
                             "compared with nothing, so a regression there cannot be seen")
            for b in bs:
                bi = next(i for i, x in enumerate(base) if x is b)
                pairs.setdefault((ji, bi), (j, b, set()))[2].add(s[0])
    for s in sorted(set(owners) - ran):
        lines.append(f"--baseline {', '.join(str(b.path) for b in owners[s])}: "
                     f"{_slot(s)} has no run to compare with (no run of that arch, or "
                     "not on that backend): not a kernel's regression, a night that does "
                     "not match its baseline")
    return list(pairs.values()), tuple(lines)


def _joined(parts: Sequence[Any], base: Sequence[JudgedRun], runs: Sequence[JudgedRun]
            ) -> Any:
    """The comparisons of every (run, baseline) pair as one."""
    from hqval.results.compare import Comparison

    devices = {p.same_device for p in parts}
    return Comparison(", ".join(str(b.path) for b in base), ", ".join(str(j.path) for j in runs),
                      tuple(c for p in parts for c in p.changes),
                      tuple(sorted({g for p in parts for g in p.gates})),
                      devices.pop() if len(devices) == 1 else None)


# what a run validated: runs admitted together as one verdict (a night's) must agree on
# every one, or the verdict mixes evidence about different trees, suites or gates
VALIDATED = ("hqval_version", "suite_commit", "kernel_tree_commit", "manifest_sha256",
             "mutants_sha256", "policy_sha256")


def disagreement(runs: Sequence[JudgedRun]) -> tuple[str, ...]:
    """One line per envelope key of ``VALIDATED`` on which the runs differ (a runner that
    checked out another commit, ran an older hqval, another manifest or policy), naming
    each value and its runs; empty when they agree (a key no run records agrees)."""
    if len(runs) < 2:
        return ()
    lines = []
    for key in VALIDATED:
        values: dict[str, list[str]] = {}
        for j in runs:
            v = j.envelope.get(key)
            values.setdefault("none" if v is None else str(v)[:16], []).append(str(j.path))
        if len(values) > 1:
            shown = "; ".join(f"{v} ({', '.join(p)})" for v, p in sorted(values.items()))
            lines.append(f"the runs differ in {key}: {shown}: one admission of runs that "
                         "validated different things; re-run them from one checkout, or "
                         "admit each on its own")
    return tuple(lines)


def _distinct_runs(runs: Sequence[JudgedRun], base: Sequence[JudgedRun]) -> None:
    """A run given twice (the same ``run_id`` among the runs, or as a run and a baseline)
    is bad input (``ValueError``): its evidence would count twice, or a night be compared
    with itself, where no regression can ever show."""
    seen: dict[str, str] = {}
    for what, r in [*(("RUN", j) for j in runs), *(("--baseline", b) for b in base)]:
        rid = r.envelope.get("run_id")
        if not isinstance(rid, str) or not rid:
            continue
        here = f"{what} {r.path}"
        if rid in seen:
            raise ValueError(f"{here} is run {rid}, as {seen[rid]} is: the same run twice "
                             "(a copy of it, or a night given as its own baseline); give "
                             "each run once")
        seen[rid] = here


def _admit_one(run: JudgedRun, policy: Policy, arches: Mapping[str, Arch],
               regressed: Sequence[str], only_arches: Sequence[str] | None) -> Admission:
    if only_arches is None:  # every arch the run was asked for, rows or not
        asked = [a for a in run.envelope.get("arch") or [] if isinstance(a, str)]
        only_arches = list(dict.fromkeys(
            [a for a in asked if a in arches]
            + sorted({r.arch for r in run.rows if r.arch in arches})))
    adm = admit(list(run.rows), policy, arches, kernels=run.kernels, regressed=regressed,
                only_arches=only_arches, missing=missing_cells([run]))
    if run.damage:
        adm = dataclasses.replace(adm, damage=tuple(f"{run.path}: {d}" for d in run.damage))
    if run.unconfirmed:
        adm = dataclasses.replace(adm, unconfirmed=(f"{run.path}: {run.unconfirmed}",))
    return adm


def admit_runs(
    runs: Sequence[Any],
    *,
    policy: Policy | None = None,
    arches: Mapping[str, Arch] | None = None,
    baseline: Sequence[Any] = (),
    only_arches: Iterable[str] | None = None,
) -> tuple[Admission, Any]:
    """``judge``'s admission and comparison (for callers of the older interface)."""
    j = judge(runs, policy or load_policy(), baseline=baseline, arches=arches,
              only_arches=only_arches)
    return j.admission, j.comparison


def compare_runs(base: RunLike, new: RunLike, *, policy: Policy | None = None,
                 history: Sequence[RunLike] = (), same_device: bool | None = None) -> Any:
    """Two loaded runs compared under ``policy``'s timing gates (default
    matrices/policy.yaml), each judged on its own (``judge_run``) and compared under the
    gates that judged them; ``history``: earlier loaded runs; ``same_device``: True when
    the caller knows both were timed on one GPU, for runs that do not record its UUID
    (what the envelopes record takes precedence).  A damaged run raises ``DamagedRun``
    (``undamaged``)."""
    from hqval.results.compare import compare_rows
    from hqval.results.compare import same_device as envelopes_same_device

    pol = policy if policy is not None else load_policy()
    b = undamaged(judge_run(base, pol), "BASE")
    n = undamaged(judge_run(new, pol), "NEW")
    hist = [undamaged(judge_run(h, pol), "--history") for h in history]
    recorded = envelopes_same_device(base.envelope, new.envelope)  # what they record wins
    return compare_rows(b.rows, n.rows, str(base.path), str(new.path),
                        gate_for=applied_gate, history=[h.rows for h in hist],
                        same_device=recorded if recorded is not None else same_device)
