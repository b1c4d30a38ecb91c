"""hqval.audit.cache: the audit of a matrix, cached by content: rows reused only for the
same object, tools and rules; the rules' identity covering every module the audit
imports; worker processes giving one process's rows; an unwritable cache."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hqval.audit import audit_matrix
from hqval.manifest import load_manifest, load_mutants
from hqval.matrix import load_arches
from hqval.result import Row, Status
from hqval.toolchain import compile_kernel

pytestmark = pytest.mark.skipif(
    not (shutil.which("clang-19") and shutil.which("llvm-objdump-19")),
    reason="needs clang-19 and llvm-objdump-19 (apt-get install clang-19 llvm-19)")

ARCHES = load_arches()
REAL = load_manifest()
MUTANTS = load_mutants()


LANE_MUTANT = "HQ_GEMV(gemv_mut_lane_header_address_r1, MutLaneHeaderAddress, 1, false)"


def test_audit_cache_reuses_rows_only_for_the_same_object_tools_and_rules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel first built correct passes rule (a) and its rows are cached; the source
    then gets the lane-dependent header mutation: the new object misses the cache and the
    rule says fail (a stale pass is never served).  A tampered entry, other rules and
    another disassembler miss too."""
    from hqval.audit import cache as isa

    cache = tmp_path / "cache"
    mutant = MUTANTS.by_name("gemv_mut_lane_header_address_r1")
    text = mutant.source.read_text()
    assert LANE_MUTANT in text
    src = tmp_path / "k.hip"
    src.write_text(text.replace(LANE_MUTANT, LANE_MUTANT.replace("MutLaneHeaderAddress",
                                                                 "HdrMq4v2")))
    spec = replace(mutant, source=src)
    base = REAL.by_name("gemv_hfq4g256_r1")
    computed: list[str] = []
    audit_jobs = isa._audit_jobs

    def counting(jobs: list[Any]) -> list[list[Row]]:
        computed.extend(j.spec.name for j in jobs)
        return audit_jobs(jobs)

    monkeypatch.setattr(isa, "_audit_jobs", counting)

    def run() -> tuple[Status, list[str]]:
        cells = [(s, compile_kernel(s, "gfx1030", cache)) for s in (base, spec)]
        computed.clear()
        rows = audit_matrix(cells, ARCHES["gfx1030"], cache_dir=cache, jobs=1)
        rule_a = f"audit_header_scalar[{spec.name}|gfx1030|isa]"
        return {r.identity: r for r in rows}[rule_a].status, sorted(computed)

    both = sorted([base.name, spec.name])
    assert run() == (Status.PASS, both)
    assert run() == (Status.PASS, [])  # every row from the cache
    src.write_text(text)  # the mutation: another object, same manifest entry
    assert run() == (Status.FAIL, [spec.name])
    assert run() == (Status.FAIL, [])
    # an entry whose rows were edited (a fail turned into a pass) is not used
    entries = [p for p in (cache / f"audit-v{isa.AUDIT_CACHE_LAYOUT}").rglob("*.json")
               if spec.name in p.read_text() and '"fail"' in p.read_text()]
    assert len(entries) == 1
    entries[0].write_text(entries[0].read_text().replace('"fail"', '"pass"'))
    assert run() == (Status.FAIL, [spec.name])
    monkeypatch.setattr(isa, "rules_identity", lambda: "other rules")
    assert run() == (Status.FAIL, both)
    monkeypatch.setattr(isa, "disassembler_identity", lambda: "another llvm-objdump")
    assert run() == (Status.FAIL, both)


def test_rules_identity_covers_the_source_of_every_module_the_audit_imports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ast
    import sys

    from hqval.audit import cache as isa

    imported: set[str] = set()
    for f in Path(isa.__file__).parent.glob("*.py"):
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("hqval"):
                # `from hqval import safeio` imports the module hqval.safeio
                imported |= ({f"hqval.{a.name}" for a in n.names} if n.module == "hqval"
                             else {n.module})
    covered = set(isa.RULE_MODULES)
    # manifest and toolchain only find the baseline's object, whose bytes are in the key;
    # the emulator runs the executed facts, whose rows record the launch they came from;
    # safeio reads and writes the entries and cacheauth tags them (and hashes the rule
    # modules' source), errors holds exception classes: none decides a row
    outside = {m for m in imported - {"hqval.manifest", "hqval.toolchain", "hqval.safeio",
                                      "hqval.cacheauth", "hqval.errors"}
               if not any(m == c or m.startswith(c + ".") for c in covered)}
    assert outside <= {"hqval.emu", "hqval.emu.runner", "hqval.backends.emu"}, outside
    # an edit to a rule module's source is another identity
    pkg = tmp_path / "rulepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rule.py").write_text("LIMIT = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(isa, "RULE_MODULES", ("rulepkg",))
    isa.rules_identity.cache_clear()
    try:
        before = isa.rules_identity()
        (pkg / "rule.py").write_text("LIMIT = 4\n")
        isa.rules_identity.cache_clear()
        assert isa.rules_identity() != before
    finally:
        sys.modules.pop("rulepkg", None)
        isa.rules_identity.cache_clear()


@pytest.mark.slow
def test_audit_arches_in_worker_processes_gives_the_rows_of_one_process(
        tmp_path: Path, cache: Path) -> None:
    """The misses spread over forked workers (one code object each) give the same rows,
    in the same order, as one process; and each cell's rows are reported as it finishes
    (``on_rows``, what the run's progress shows), every row once, misses and cache hits
    alike."""
    from hqval.audit import audit_arches

    names = ["gemv_hfq4g256_r1", "gemv_mq4g256v2_r1", "gemv_mq4c_r2", "gemm_hfq4g256_wmma_gfx11",
             "gemm_mq4g256v2_wmma_gfx11"]
    per_arch = []
    for arch in ("gfx1030", "gfx1100"):
        specs = [REAL.by_name(n) for n in names if REAL.by_name(n).applies_to(ARCHES[arch])]
        per_arch.append((ARCHES[arch], [(s, compile_kernel(s, arch, cache)) for s in specs]))

    def dicts(rows: list[list[Row]]) -> list[list[dict[str, Any]]]:
        return [[r.to_dict() for r in a] for a in rows]

    def streamed(cache_dir: Path, cells: list[Any]) -> list[list[dict[str, Any]]]:
        seen: list[list[Row]] = []
        rows = dicts(audit_arches(cells, cache_dir, jobs=2, on_rows=seen.append))
        assert all(len({(r.kernel, r.arch) for r in cell}) == 1 for cell in seen)
        key = sorted
        assert key(str(r.to_dict()) for c in seen for r in c) == key(
            str(r) for a in rows for r in a)
        assert len(seen) == sum(len(c) for _, c in cells)
        return rows

    one = dicts(audit_arches(per_arch, tmp_path / "one", jobs=1))
    assert sum(map(len, one)) >= 6 * 4
    assert streamed(tmp_path / "two", per_arch) == one
    assert streamed(tmp_path / "two-last", per_arch[1:]) == one[1:]
    assert streamed(tmp_path / "two", per_arch) == one  # from the cache


def test_an_unwritable_audit_cache_costs_time_not_verdicts(tmp_path: Path, cache: Path) -> None:
    spec = MUTANTS.by_name("gemv_mut_lane_header_address_r1")
    base = REAL.by_name("gemv_hfq4g256_r1")
    cells = [(s, compile_kernel(s, "gfx1030", cache)) for s in (base, spec)]
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory would be")
    rows = audit_matrix(cells, ARCHES["gfx1030"], cache_dir=blocker, jobs=1)
    by = {r.identity: r.status for r in rows}
    assert by[f"audit_header_scalar[{spec.name}|gfx1030|isa]"] is Status.FAIL
    assert [r.to_dict() for r in rows] == [
        r.to_dict() for r in audit_matrix(cells, ARCHES["gfx1030"], cache_dir=tmp_path / "c",
                                          jobs=1)]
    assert blocker.read_text().startswith("a file")



def test_an_audit_builds_each_launch_input_once(tmp_path: Path, cache: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """While audit_arches computes rows the oracle's memo is on (each executed launch's
    inputs built once per inputs, by every arch and launch that takes them), and it ends
    with the audit."""
    from hqval.audit import executed
    from hqval.checks import oracle

    spec = MUTANTS.by_name("gemv_mut_lane_header_address_r1")
    base = REAL.by_name("gemv_hfq4g256_r1")
    cells = [(s, compile_kernel(s, "gfx1030", cache)) for s in (base, spec)]
    memo_on: list[bool] = []
    real = executed.run_facts

    def watching(*args: Any, **kw: Any) -> Any:
        memo_on.append(oracle._MEMO is not None)
        return real(*args, **kw)

    monkeypatch.setattr(executed, "run_facts", watching)
    executed._FACTS.clear()
    audit_matrix(cells, ARCHES["gfx1030"], cache_dir=tmp_path / "c", jobs=1)
    assert memo_on and all(memo_on) and oracle._MEMO is None


def test_a_baseline_two_workers_judge_against_is_launched_once(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two v2 kernels of one baseline are two groups (two workers): the baseline's launches
    (the shared problem, the marginal count's longer K) run once, before the groups'
    workers are forked, and each group's audit finds them: no baseline launch is made
    again, and the rows are those of an audit that launched everything itself."""
    from hqval.audit import cache as audit_cache
    from hqval.audit import executed

    base = REAL.by_name("gemv_hfq4g256_r1")
    # (two objects: the suite's v2 GEMVs share one object, its mutants have their own)
    v2s = [REAL.by_name("gemv_mq4g256v2_r1"), MUTANTS.by_name("gemv_mut_lane_header_address_r1")]
    assert all(s.baseline == base.name for s in v2s)
    bco = compile_kernel(base, "gfx1030", cache).code_object
    assert bco is not None
    jobs = []
    for spec in v2s:
        co = compile_kernel(spec, "gfx1030", cache).code_object
        assert co is not None
        jobs.append(audit_cache._Job(spec, ARCHES["gfx1030"], co, (base, bco)))
    groups = audit_cache._groups(jobs)
    assert len(groups) == 2
    launches = audit_cache._baseline_launch_groups(groups)
    assert [[(b.name, p, longer) for b, _, _, p, longer in g] for g in launches] == [
        [(base.name, (16, 1280, 1), (16, 2304, 1))]]
    # a baseline only one group judges against is left to that group's worker
    assert audit_cache._baseline_launch_groups(groups[:1]) == []
    executed._FACTS.clear()
    alone = [r.to_dict() for j in jobs for r in audit_cache._audit_job(j)]
    executed._FACTS.clear()
    audit_cache._share_baseline_launches(groups, 2)
    shared = dict(executed._FACTS)
    assert len(shared) == 2  # the baseline on both K, run in a worker, kept here
    ran: list[str] = []
    real = executed.run_facts

    def counting(spec: Any, *args: Any, **kw: Any) -> Any:
        ran.append(spec.name)
        return real(spec, *args, **kw)

    monkeypatch.setattr(executed, "run_facts", counting)
    rows = [r.to_dict() for j in jobs for r in audit_cache._audit_job(j)]
    assert base.name not in ran and sorted(set(ran)) == sorted(s.name for s in v2s)
    assert rows == alone
