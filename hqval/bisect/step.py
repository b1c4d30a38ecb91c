"""One bisect step: the cell judged at one commit, its evidence kept as a run directory.

At a commit the step places the manifest in the checkout, loads it, compiles only what
the cell needs (its kernel, its baseline, the per-token decode GEMV a prefill check
compares with), then runs only the cell: its check through the check session
(``hqval.checks.session.run_cells``, every other cell deselected) or its timing through
the bench (``hqval.timing.bench.run_bench``: the A/A control, then the kernel against its
qt=6 baseline interleaved, so a clock drift moves both arms).  The rows go to a run
directory of their own (``hqval.results.store.RunWriter``), so ``hqval report`` reads a
bisect like any run, and every compile goes through the one code object cache.

The verdict is the cell's row: pass is good, fail is bad.  A commit that cannot be judged
is skipped, with the reason: the manifest is absent or does not load there, the kernel is
not in it, does not apply to the arch or does not compile (a compile cell excepted: there
a failed build is bad), the cell's row is skipped, unsupported or an error (no verdict
either way; a noisy timing cell, whose A/A control missed, is one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from hqval import provenance, toolchain
from hqval.bisect.cells import Target
from hqval.bisect.git import Commit, Worktree
from hqval.checks.cell import Cell
from hqval.manifest import kernel_table
from hqval.result import Row, Status
from hqval.results.store import RunWriter, make_envelope
from hqval.schema import SchemaError

if TYPE_CHECKING:
    from hqval.backends.base import Backend
    from hqval.manifest import KernelSpec, Manifest
    from hqval.matrix import Arch

Verdict = Literal["good", "bad", "skip"]
# (backend name, arch) -> an opened backend, for timing cells (default hqval.backends.get)
BackendOpener = Callable[[str, str], "Backend"]


@dataclass(frozen=True)
class Placement:
    """Where the manifest goes in each commit's checkout.  ``in_tree``: the manifest is
    the tree's own file at ``rel`` (its version at each commit is used); otherwise
    ``data`` (read once, before the first step) is written at ``rel``, the tree's root, so
    its paths are relative to the root."""

    rel: Path
    in_tree: bool
    data: bytes = b""


@dataclass(frozen=True)
class TimingSettings:
    iterations: int = 100
    runs: int = 3
    warmup: int = 32


@dataclass
class Job:
    """What every step of one bisect shares."""

    worktree: Worktree
    placement: Placement
    target: Target
    out: Path
    cache_dir: str | None = None
    seed: int = 0
    argv: tuple[str, ...] = ()
    timing: TimingSettings = field(default_factory=TimingSettings)
    open_backend: BackendOpener | None = None
    log: Callable[[str], None] = lambda line: None
    # timing cells: the backend opened once and reused by every step (one device context)
    backends: dict[tuple[str, str], Backend] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    commit: Commit
    verdict: Verdict
    reason: str
    rows: tuple[Row, ...] = ()  # the evidence: the cell's row first, then what it rests on
    run_dir: Path | None = None
    seconds: float = 0.0
    # the row is an error of hqval's machinery (details.infrastructure): it says nothing
    # about the commit, and the bisect stops rather than skip commits it could judge
    infrastructure: bool = False

    @property
    def cell_row(self) -> Row | None:
        return self.rows[0] if self.rows else None


def _placed(job: Job, commit: Commit) -> tuple[Path | None, str]:
    """Write this commit's manifest into the checkout under a name of its own (a check
    session keeps its backends per manifest path: a name per commit never reuses one
    loaded from another commit's sources).  Returns (its path, '') or (None, why not)."""
    p, tree = job.placement, job.worktree.path
    if p.in_tree:
        src = tree / p.rel
        if not src.is_file():
            hint = (f" (or --paths leaves it out: check out {p.rel.parent} too)"
                    if job.worktree.paths else "")
            return None, f"the manifest {p.rel} is not in the tree at this commit{hint}"
        data = src.read_bytes()
        dest = src.parent / f".hqval-bisect-{commit.short}-{src.name}"
    else:
        data = p.data
        dest = tree / f".hqval-bisect-{commit.short}-kernels.yaml"
    dest.write_bytes(data)
    return dest, ""


def evaluate(job: Job, commit: Commit, index: int) -> Outcome:
    """Check out ``commit`` in the worktree and judge the cell there."""
    t0 = time.monotonic()
    job.worktree.checkout(commit.sha)
    placed, why = _placed(job, commit)
    try:
        if placed is None:
            return Outcome(commit, "skip", why, seconds=time.monotonic() - t0)
        outcome = _judge(job, commit, index, placed)
    finally:
        if placed is not None:
            placed.unlink(missing_ok=True)
    return dataclasses.replace(outcome, seconds=time.monotonic() - t0)


def _judge(job: Job, commit: Commit, index: int, manifest_path: Path) -> Outcome:
    from hqval.manifest import load_manifest
    from hqval.matrix import resolve_arch

    target = job.target
    try:
        manifest = load_manifest(manifest_path)
    except (SchemaError, UnicodeDecodeError) as exc:
        first = " ".join(str(exc).split())[:300]
        return Outcome(commit, "skip", f"the manifest does not apply here: {first}")
    spec = _spec(manifest, target.kernel)
    if spec is None:
        return Outcome(commit, "skip", f"kernel {target.kernel} is not in the manifest at "
                                       "this commit")
    arch = resolve_arch(target.arch)
    why = spec.not_for(arch)
    if why:
        return Outcome(commit, "skip", f"{spec.name} does not apply to {arch.name} at this "
                                       f"commit ({why})")
    needs = _needed(manifest, spec, arch, target)
    run_dir = job.out / f"{index:02d}-{commit.short}"
    writer = _open_run(job, commit, manifest, needs, arch, run_dir)
    try:
        return _run(job, commit, manifest, spec, needs, arch, writer)
    finally:
        writer.close()


def _spec(manifest: Manifest, name: str) -> KernelSpec | None:
    return next((s for s in manifest.kernels if s.name == name), None)


def _needed(manifest: Manifest, spec: KernelSpec, arch: Arch, target: Target
            ) -> list[KernelSpec]:
    """The kernels the cell runs: its own, its baseline (which the audit and bit identity
    compare with), the qt=6 arm of a timing cell and the decode GEMV a prefill or fallback
    check compares with."""
    from hqval.checks.dispatch import NoRoute, per_token_reference, prefill_route
    from hqval.timing import bench

    out = [spec]
    if spec.baseline and (b := _spec(manifest, spec.baseline)) is not None:
        out.append(b)
    if target.kind == "timing":
        from hqval.formats import HFQ4G256_QT

        v1 = bench.find_kernels(manifest, HFQ4G256_QT, spec.rows_per_block)
        if v1 is not None:
            out.append(v1)
    if target.check == "prefill_parity" and spec.kind == "gemm":
        with contextlib.suppress(NoRoute):  # the check says so in its own row
            out.append(per_token_reference(manifest, spec, arch)[0])
    if target.check == "fallback" and spec.kind == "gemm":
        with contextlib.suppress(NoRoute):
            out.append(prefill_route(manifest, spec.qt, arch, residual=spec.residual).kernel)
    seen: dict[str, KernelSpec] = {}
    for s in out:
        seen.setdefault(s.name, s)
    return list(seen.values())


def _open_run(job: Job, commit: Commit, manifest: Manifest, specs: list[KernelSpec],
              arch: Arch, run_dir: Path) -> RunWriter:
    compiler = compiler_version = None
    try:
        c = toolchain.find_compiler()
        compiler, compiler_version = c.path, c.version
    except toolchain.ToolchainError:
        pass  # the compile rows say so
    target = job.target
    tree = provenance.tree(manifest.path)
    tree["manifest_sha256"] = hashlib.sha256(Path(manifest.path).read_bytes()).hexdigest()
    envelope = make_envelope(
        backend=target.backend if target.kind != "compile" else "toolchain",
        arch=[arch.name], compiler=str(compiler) if compiler else None,
        compiler_version=compiler_version, kernel_tree=job.worktree.path,
        argv=job.argv or None, kernels=kernel_table(specs),
        extra={"manifest": str(manifest.path), "seed": job.seed, "provenance": tree,
               "requested_backend": target.backend,
               "bisect": {"repository": str(job.worktree.repo.root), "commit": commit.sha,
                          "subject": commit.subject, "cell": target.identity,
                          "manifest": str(job.placement.rel),
                          "manifest_in_tree": job.placement.in_tree}})
    return RunWriter.create(run_dir, envelope)


def _run(job: Job, commit: Commit, manifest: Manifest, spec: KernelSpec,
         needs: list[KernelSpec], arch: Arch, writer: RunWriter) -> Outcome:
    target = job.target
    compile_rows: list[Row] = []
    cells: list[toolchain.CompileCell] = []
    if arch.is_amd:
        cells = toolchain.compile_matrix(needs, [arch], cache_dir=job.cache_dir)
        compile_rows = [c.row() for c in cells]
        deps = [d for c in cells if c.result is not None for d in c.result.dependencies]
        known = dict(writer.envelope.get("provenance") or {})
        known["files"] = provenance.files(deps, Path(manifest.path).parent)
        writer.update_envelope(provenance=known)
        writer.append(compile_rows)
    by_kernel = {r.kernel: r for r in compile_rows}
    own = by_kernel.get(spec.name)
    expected: dict[str, list[str]] = {"compile": [r.identity for r in compile_rows]}
    if target.kind == "compile":
        writer.update_envelope(expected_cells=expected,
                               expected={k: len(v) for k, v in expected.items()})
        return _verdict(commit, own, [], writer.path)
    for r in compile_rows:
        if r.details.get("infrastructure"):
            return Outcome(commit, "skip", f"infrastructure error compiling {r.kernel}: "
                                           f"{_first(r.message)}", (r,), writer.path,
                           infrastructure=True)
    for r in compile_rows:
        if not r.status.ok:
            what = "it" if r.kernel == spec.name else f"{r.kernel}, which the cell also runs,"
            return Outcome(commit, "skip", f"does not compile: {what} failed to build "
                                           f"({_first(r.message)})", (r,), writer.path)
    if target.kind == "audit":
        cell_rows, why = _audit(job, cells, arch, writer)
    elif target.kind == "check":
        cell_rows, why = _check(job, manifest, spec, arch, writer)
    else:
        cell_rows, why = _timing(job, manifest, spec, arch, writer)
    expected[target.kind] = [target.identity]
    writer.update_envelope(expected_cells=expected,
                           expected={k: len(v) for k, v in expected.items()})
    row = next((r for r in cell_rows if r.identity == target.identity), None)
    if row is None:
        return Outcome(commit, "skip", f"no row for the cell ({why or 'the step wrote none'})",
                       tuple(compile_rows), writer.path)
    others = [r for r in cell_rows if r is not row]
    return _verdict(commit, row, [*others, *compile_rows], writer.path)


def _first(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:240]


def _verdict(commit: Commit, row: Row | None, context: list[Row], run_dir: Path) -> Outcome:
    if row is None:
        return Outcome(commit, "skip", "the cell wrote no row", tuple(context), run_dir)
    rows = (row, *context)
    if row.details.get("infrastructure"):
        return Outcome(commit, "skip", f"infrastructure error: {_first(row.message)}", rows,
                       run_dir, infrastructure=True)
    if row.status is Status.PASS:
        return Outcome(commit, "good", _first(row.message) or "pass", rows, run_dir)
    if row.status is Status.FAIL:
        return Outcome(commit, "bad", _first(row.message) or "fail", rows, run_dir)
    return Outcome(commit, "skip", f"no verdict: the cell is {row.status} "
                                   f"({_first(row.message)})", rows, run_dir)


def _audit(job: Job, cells: list[toolchain.CompileCell], arch: Arch, writer: RunWriter
           ) -> tuple[list[Row], str]:
    """The ISA audit of the kernel's code object (and its baseline's, which the rules that
    compare with v1 read), through the audit cache like the run's audit step."""
    from hqval import audit

    pairs = [(c.spec, c.result) for c in cells if c.result is not None]
    rows = audit.audit_arches([(arch, pairs)], cache_dir=job.cache_dir)[0]
    writer.append(rows)
    return rows, ""


def _check(job: Job, manifest: Manifest, spec: KernelSpec, arch: Arch,
           writer: RunWriter) -> tuple[list[Row], str]:
    """The cell alone, through the check session: every other kernel's cell of this
    check and arch is deselected."""
    from hqval.checks import session

    target = job.target
    skip = [Cell(target.check, s.name, arch.name, target.backend).identity
            for s in manifest.kernels if s.name != spec.name]
    rows: list[Row] = []

    def on_row(row: Row) -> None:
        rows.append(row)
        writer.append([row])

    result = session.run_cells(
        [Path(manifest.path)], [arch.name], target.backend, checks=[target.check],
        workers="0", junit_xml=str(writer.path / "junit-bisect.xml"), seed=job.seed,
        skip=skip, on_row=on_row, cache_dir=job.cache_dir)
    return rows, result.problem()


def _timing(job: Job, manifest: Manifest, spec: KernelSpec, arch: Arch,
            writer: RunWriter) -> tuple[list[Row], str]:
    """The bench of this one cell: its A/A control (the qt=6 kernel against a copy of
    itself) first, then the kernel against the qt=6 kernel, interleaved."""
    from hqval.admission import load_policy
    from hqval.formats import HFQ4G256_QT
    from hqval.manifest import Manifest as ManifestType
    from hqval.timing import bench
    from hqval.timing.gemv import Shape
    from hqval.timing.harness import TimingConfig

    target = job.target
    v1 = bench.find_kernels(manifest, HFQ4G256_QT, spec.rows_per_block)
    if v1 is None:
        return [], (f"no qt=6 GEMV with rows_per_block {spec.rows_per_block} to time "
                    f"{spec.name} against")
    backend = _open(job, target.backend, arch.name)
    m, k = target.shape
    plan = bench.BenchPlan(
        arch=arch.name, shapes=[Shape(m, k)], modes=[target.mode],  # type: ignore[list-item]
        rows=[spec.rows_per_block], candidates=(spec.qt,),
        config=TimingConfig(warmup=job.timing.warmup, iterations=job.timing.iterations,
                            runs=job.timing.runs),
        copy=False, read_floor=False, torch=False, seed=job.seed,
        gates=bench.policy_gates(load_policy()))
    # the bench times the first GEMV of the qt at R: here only the cell's kernel is one
    only = ManifestType(path=manifest.path, kernels=[v1, spec])
    try:
        rows = bench.run_bench(backend, only, plan, emit=lambda batch: writer.append(batch))
    except NotImplementedError as exc:
        return [], str(exc)
    return rows, ""


def _open(job: Job, name: str, arch: str) -> Backend:
    if (name, arch) not in job.backends:
        if job.open_backend is not None:
            job.backends[(name, arch)] = job.open_backend(name, arch)
        else:
            from hqval.backends import get

            job.backends[(name, arch)] = get(name, arch, job.cache_dir)
    return job.backends[(name, arch)]


def describe(row: Row) -> str:
    """One evidence line for a row: identity, status, measured against tolerance, and the
    first line of its message."""
    bound = ""
    if isinstance(row.measured, float | int) and isinstance(row.tolerance, float | int):
        bound = f" ({row.measured:.3g} vs {row.tolerance:.3g})"
    first = _first(row.message)
    return f"{row.identity} {row.status}{bound}{': ' + first if first else ''}"
