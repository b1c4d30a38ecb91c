"""The timing run: A/A control, v2-family vs qt=6 cells; copy, read-floor and torch.mv
ceilings.

Everything here runs sequentially on one device (timing cells are never concurrent).
For each rows-per-block R, mode and shape: an A/A cell (qt=6 against a second copy of
itself) first; if its ratio misses 1.00 by more than ``AA_TOLERANCE`` it is re-run up to
``max_reruns`` times, and a group whose A/A stays noisy has every row marked ERROR
("noisy") instead of trusted.  Then each candidate kernel against its qt=6 baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hqval.backends.base import Backend
from hqval.deadline import CELL_DEADLINE_S, DeadlineExceeded, bounded
from hqval.errors import infrastructure_details
from hqval.formats import HFQ4G256_QT
from hqval.result import Row, Status, cell_id
from hqval.timing import stats
from hqval.timing.baselines import Baseline, copy_bandwidth, stream_read, torch_mv_bf16
from hqval.timing.cost import ArchRates, KernelCost, predict_ratio
from hqval.timing.gate import (
    Gate,
    gate_derivation,
    measure_until_settled,
    mutant_status,
    row_status,
)
from hqval.timing.gate import verdict as gate_verdict
from hqval.timing.gemv import GemvSetup, Shape, effective_gbps, gemv_bytes, setup_gemv
from hqval.timing.harness import TimingConfig, filler_for, time_pair
from hqval.timing.lock import device_lock
from hqval.timing.mutants import timing_mutant
from hqval.timing.schedule import Mode, primes

# (kernel spec, mode) -> the policy's gate for it (hqval.timing.gate), or None: no gate.
GateLookup = Callable[[Any, str], Gate | None]
AA_DERIVATION = (
    "A/A (qt=6 vs itself) must be within 0.5% of 1.00: a quarter of the smallest change "
    "reported; otherwise order or clock effects dominate the run"
)


@dataclass(frozen=True)
class DeviceFacts:
    """What the gb/s figures are judged against, and where each number came from."""

    vram_peak_gbps: float
    llc_bytes: int
    source: str


@dataclass
class BenchPlan:
    arch: str
    shapes: list[Shape]
    modes: list[Mode]
    rows: list[int]
    candidates: tuple[int, ...] = (44, 45)
    config: TimingConfig = field(default_factory=TimingConfig)
    max_reruns: int = 2
    copy: bool = True
    read_floor: bool = True
    torch: bool = True
    seed: int = 0
    # Instruction costs per kernel name (hqval.timing.cost), for predictions beside
    # measurements; None: no predictions.
    costs: dict[str, KernelCost] | None = None
    # The gate of each candidate (policy.yaml via hqval.admission.Policy.gate_for_spec).
    gates: GateLookup | None = None
    # Timing mutants (hqval.timing.mutants tokens: slowK, extraM), for the candidates of
    # these qts; each timed against qt=6 and against its unslowed twin.
    timing_mutants: tuple[str | int, ...] = ()
    mutants_of: tuple[int, ...] = (44,)
    # Per "mode/shape" override of timing_mutants (the stability study picks k per cell).
    mutants_for: dict[str, tuple[str | int, ...]] | None = None
    # Re-measure inconclusive candidate cells up to the gate's max_runs.
    remeasure: bool = True
    # Each cell (a baseline, the A/A control, a candidate with its re-measured runs, a
    # mutant, a shape's buffer setup) must finish within this many seconds
    # (hqval.deadline); one that does not is an infrastructure error row naming it.
    deadline_s: float = CELL_DEADLINE_S

    def gate(self, spec: Any, mode: str) -> Gate:
        g = self.gates(spec, mode) if self.gates is not None else None
        if g is None:
            raise NotImplementedError(
                f"need a timing gate for {spec.name} (qt={spec.qt}, {mode}): add a timing "
                "section to its format's decode path in matrices/policy.yaml")
        return g

    def mutant_ks(self, mode: str, shape: Shape) -> tuple[str | int, ...]:
        if self.mutants_for is not None:
            return self.mutants_for.get(f"{mode}/{shape.name}", ())
        return self.timing_mutants


def policy_gates(policy: Any) -> GateLookup:
    """(spec, mode) -> the timing gate of the spec's format and path in ``policy`` (an
    ``hqval.admission.Policy``): the one place bench cells find their gate."""
    from hqval.admission import PATH_OF_KIND

    def gates(spec: Any, mode: str) -> Gate | None:
        path = PATH_OF_KIND.get(spec.kind)
        return policy.gate(spec.qt, path, mode) if path else None

    return gates


def device_facts(backend: Backend, arch: str) -> DeviceFacts:
    """VRAM peak and LLC size from ``hqval.matrix`` (arches, or the devices section for
    non-RDNA timing devices).  Where the device itself reports a larger LLC than the
    matrix, the larger one sizes cold mode (a copy set too small would leave weights
    cached) and the source says so."""
    from hqval.matrix import load_arches, load_devices

    props = getattr(backend, "properties", None) or {}
    arches = load_arches()
    if arch in arches:
        a = arches[arch]
        peak, llc, source = a.vram_gbps, a.last_level_cache_bytes, f"arches.yaml {arch}"
    else:
        devices = [d for d in load_devices().values() if d.arch == arch]
        if not devices:
            if props.get("memory_clock_khz") and props.get("memory_bus_bits"):
                # Double data rate: two transfers per memory clock on the bus.
                peak = 2.0 * props["memory_clock_khz"] * 1e3 * props["memory_bus_bits"] / 8e9
                return DeviceFacts(peak, int(props["l2_bytes"]), "device attributes only "
                                   f"({arch} is in neither arches nor devices of arches.yaml)")
            raise NotImplementedError(
                f"need the VRAM peak and LLC size of {arch}: add it to matrices/arches.yaml"
            )
        d = devices[0]
        peak, llc, source = d.hbm_gbps, d.l2_bytes, f"arches.yaml devices.{d.name}"
    reported = int(props.get("l2_bytes", 0))
    if reported > llc:
        source += f"; LLC {reported} B as the device reports (matrix says {llc} B)"
        llc = reported
    return DeviceFacts(float(peak), int(llc), source)


def arch_rates(backend: Backend | None, arch: str) -> ArchRates | None:
    """Rates for the cost model: arches.yaml for RDNA; the devices section plus the
    device's reported SM clock for NVIDIA (None when neither is known)."""
    from hqval.matrix import load_arches, load_devices

    arches = load_arches()
    if arch in arches:
        return ArchRates.from_arch(arches[arch])
    props = getattr(backend, "properties", None) or {}
    devices = [d for d in load_devices().values() if d.arch == arch]
    if devices and props.get("sm_clock_khz"):
        return ArchRates.from_device(devices[0], props["sm_clock_khz"] / 1000.0)
    return None


def find_kernels(manifest: Any, qt: int, rows: int) -> Any:
    """The non-residual GEMV kernel of ``qt`` with ``rows`` rows per block."""
    for spec in manifest.kernels:
        if (spec.kind == "gemv" and spec.qt == qt and spec.rows_per_block == rows
                and not spec.residual and not spec.is_mutant):
            return spec
    return None


def _cell_name(kernel: str, shape: Shape) -> str:
    return f"{kernel}@{shape.name}"


def _kernels_for(manifest: Any, plan: BenchPlan, R: int) -> tuple[Any, list[Any]]:
    """The qt=6 baseline and the candidate kernels the bench times at R rows per block
    (what ``_run_bench`` runs and ``planned_cells`` expects)."""
    v1_spec = find_kernels(manifest, HFQ4G256_QT, R)
    if v1_spec is None:
        raise NotImplementedError(f"need a qt=6 GEMV kernel with rows_per_block {R}")
    return v1_spec, [s for s in (find_kernels(manifest, qt, R) for qt in plan.candidates) if s]


def _shape_plan(plan: BenchPlan, v1_spec: Any, cands: Sequence[Any], shape: Shape,
                mode: Mode, backend: str, ceilings: set[tuple[str, str, str]]
                ) -> list[tuple[str, str]]:
    """(check, kernel) of every row ``_shape_cells`` writes for one shape and mode, in
    order; the ceilings already timed (``ceilings``, updated) are not timed again."""
    out = [(f"timing_aa_{mode}", _cell_name(v1_spec.name, shape))]
    for check, kernel, runs in (
            ("stream_read", "stream_read", plan.read_floor),
            ("torch_mv_bf16", "torch.mv", plan.torch and backend == "cuda")):
        if runs and (check, shape.name, mode) not in ceilings:
            ceilings.add((check, shape.name, mode))
            out.append((f"{check}_{mode}", _cell_name(kernel, shape)))
    out += [(f"timing_{mode}", _cell_name(s.name, shape)) for s in cands]
    for twin in {s.name: s for s in cands if s.qt in plan.mutants_of}.values():
        for k in plan.mutant_ks(mode, shape):
            m = _cell_name(timing_mutant(twin, k).name, shape)
            out += [(f"timing_{mode}", m), (f"timing_mutant_{mode}", m)]
    return out


def planned_cells(manifest: Any, plan: BenchPlan, backend: str) -> list[str]:
    """The identity of every row ``run_bench`` writes for ``plan`` on a backend named
    ``backend``, known before anything runs (``hqval.run.expected``): the run is complete
    only when each has a row.  Follows ``_run_bench`` and ``_shape_cells`` cell by cell
    (``_shape_plan``); a plan the bench cannot run (no qt=6 kernel with R rows) raises as
    the bench would."""
    out = [cell_id("copy_bandwidth", "device_copy", plan.arch, backend)] if plan.copy else []
    ceilings: set[tuple[str, str, str]] = set()
    for R in plan.rows:
        v1_spec, cands = _kernels_for(manifest, plan, R)
        for mode in plan.modes:
            for shape in plan.shapes:
                out += [cell_id(check, kernel, plan.arch, backend) for check, kernel
                        in _shape_plan(plan, v1_spec, cands, shape, mode, backend, ceilings)]
    return out


def infrastructure_row(plan: BenchPlan, backend: str, check: str, kernel: str,
                       exc: BaseException, message: str | None = None) -> Row:
    """The error row of a timing cell that hqval's machinery could not time (a missed
    deadline): ``details["infrastructure"]``, naming the cell."""
    what = cell_id(check, kernel, plan.arch, backend)
    return Row(kind="timing", check=check, kernel=kernel, arch=plan.arch, backend=backend,
               status=Status.ERROR, message=message or f"{what} not timed: {exc}",
               details=infrastructure_details(exc, cell=what))


class DeviceStuck(DeadlineExceeded):
    """After a cell missed its deadline the device did not drain either: nothing more
    can be timed on it in this run."""


def run_bench(
    backend: Backend,
    manifest: Any,
    plan: BenchPlan,
    progress: Callable[[str], None] = lambda s: None,
    emit: Callable[[Iterable[Row]], object] = lambda rows: None,
    on_lock_wait: Callable[[str], None] | None = None,
) -> list[Row]:
    """Run every timing cell of ``plan``; rows are also passed to ``emit`` as produced.
    Holds the device's timing lock for the whole run (never two timing runs at once);
    while another run holds it, ``on_lock_wait`` (else ``progress``) says who does."""
    device = f"{backend.name}{getattr(backend, 'device_index', 0)}-{backend.device_name()}"
    with device_lock(device, on_wait=on_lock_wait or progress):
        return _run_bench(backend, manifest, plan, progress, emit)


def _run_bench(
    backend: Backend,
    manifest: Any,
    plan: BenchPlan,
    progress: Callable[[str], None],
    emit: Callable[[Iterable[Row]], object],
) -> list[Row]:
    facts = device_facts(backend, plan.arch)
    rates = arch_rates(backend, plan.arch) if plan.costs else None
    filler = filler_for(backend)
    cfg = plan.config
    out: list[Row] = []
    name = backend.name

    def add(*rows: Row) -> None:
        out.extend(rows)
        emit(rows)

    copy: Baseline | None = None
    try:
        if plan.copy:
            try:
                with bounded(backend, cell_id("copy_bandwidth", "device_copy", plan.arch, name),
                             plan.deadline_s):
                    copy = copy_bandwidth(backend, cfg, filler)
            except DeadlineExceeded as exc:
                add(infrastructure_row(plan, name, "copy_bandwidth", "device_copy", exc))
                drain(backend, plan, exc)
            else:
                add(Row(kind="timing", check="copy_bandwidth", kernel="device_copy",
                        arch=plan.arch, backend=name, status=Status.PASS, measured=copy.gbps,
                        derivation="GB/s = (bytes read + bytes written) / median event time",
                        message=f"{copy.gbps:.0f} GB/s device-to-device",
                        details={"samples_us": copy.runs, "nbytes": copy.nbytes,
                                 "median_us": copy.median_us}))
                progress(f"device copy: {copy.gbps:.0f} GB/s")

        # Ceilings that do not depend on R (read floor, torch.mv): timed and reported once
        # per shape and mode, then reused by every R of a --sweep-rows run.
        ceilings: dict[tuple[str, str, Mode], Baseline] = {}
        timed: set[tuple[str, str, str]] = set()
        for R in plan.rows:
            v1_spec, cands = _kernels_for(manifest, plan, R)
            for mode in plan.modes:
                for shape in plan.shapes:
                    todo = _shape_plan(plan, v1_spec, cands, shape, mode, name, timed)
                    _shape_cells(backend, plan, facts, rates, filler, copy, ceilings, v1_spec,
                                 cands, shape, mode, progress, add, todo)
    except DeviceStuck as exc:
        # every cell not yet written is an infrastructure error naming why
        written = {r.identity for r in out}
        for ident in planned_cells(manifest, plan, name):
            if ident not in written:
                check, _, rest = ident.partition("[")
                add(infrastructure_row(plan, name, check, rest.split("|", 1)[0], exc,
                                       f"{ident} not timed: {exc}"))
    return out


def drain(backend: Backend, plan: BenchPlan, after: BaseException) -> None:
    """Wait for the device to finish what a cell that missed its deadline left queued;
    ``DeviceStuck`` when it does not within the deadline either."""
    try:
        with bounded(backend, "draining the device", plan.deadline_s):
            backend.synchronize()
    except DeadlineExceeded as exc:
        raise DeviceStuck(f"the device did not drain after a missed deadline ({after}); "
                          f"{exc}") from exc


def _shape_cells(
    backend: Backend, plan: BenchPlan, facts: DeviceFacts, rates: ArchRates | None,
    filler: Any, copy: Baseline | None, ceilings: dict[tuple[str, str, Mode], Baseline],
    v1_spec: Any, cands: Sequence[Any], shape: Shape, mode: Mode,
    progress: Callable[[str], None], add: Callable[..., None],
    todo: Sequence[tuple[str, str]],
) -> None:
    """Time one shape and mode, passing each row to ``add`` as its cell finishes.  Each
    cell runs under its own deadline (``plan.deadline_s``); a cell that misses it is an
    infrastructure error row naming it, and the next cell runs.  When the buffers or the
    A/A control miss theirs, every cell of the shape left (``todo``) is such a row."""
    cfg = mode_config(plan.config, mode)
    arch, name = plan.arch, backend.name
    nbytes = gemv_bytes(shape)
    setups: list[GemvSetup] = []
    written: set[tuple[str, str]] = set()

    def put(row: Row) -> None:
        written.add((row.check, row.kernel))
        add(row)

    def ident(check: str, kernel: str) -> str:
        return cell_id(check, kernel, arch, name)

    def missed(check: str, kernel: str, exc: DeadlineExceeded) -> None:
        put(infrastructure_row(plan, name, check, kernel, exc))
        drain(backend, plan, exc)

    aa_check, aa_kernel = f"timing_aa_{mode}", _cell_name(v1_spec.name, shape)
    try:
        try:
            with bounded(backend, f"{ident(aa_check, aa_kernel)} (buffers and A/A control)",
                         plan.deadline_s):
                a = setup_gemv(backend, v1_spec, shape, mode, facts.llc_bytes, plan.seed)
                setups.append(a)
                a2 = setup_gemv(backend, v1_spec, shape, mode, facts.llc_bytes, plan.seed)
                setups.append(a2)
                cand_setups = []
                for spec in cands:
                    s = setup_gemv(backend, spec, shape, mode, facts.llc_bytes, plan.seed)
                    setups.append(s)
                    cand_setups.append(s)

                # A/A control, re-run while noisy up to max_reruns times.
                aa_history: list[float] = []
                for _ in range(plan.max_reruns + 1):
                    aa = time_pair(backend, a.arm, a2.arm, cfg, filler)
                    aa_stats = stats.summarize(aa.runs_a, aa.runs_b, seed=plan.seed)
                    aa_history.append(aa_stats.ratio)
                    if not aa_stats.aa_noisy():
                        break
        except DeadlineExceeded as exc:
            for check, kernel in todo:
                put(infrastructure_row(
                    plan, name, check, kernel, exc,
                    None if (check, kernel) == (aa_check, aa_kernel) else
                    f"{ident(check, kernel)} not timed: its shape's buffers or A/A control "
                    f"missed the deadline ({exc})"))
            drain(backend, plan, exc)
            return
        noisy = aa_stats.aa_noisy()
        drained = any(aa.queue_drained)
        aa_ok = not noisy and not drained
        msg = (f"A/A {aa_stats.ratio:.4f} [{aa_stats.ci_low:.4f}, {aa_stats.ci_high:.4f}]"
               + (f"; noisy after {len(aa_history)} tries ("
                  + ", ".join(f"{t:.4f}" for t in aa_history) + ")" if noisy else "")
               + ("; host outran the queue filler" if drained else ""))
        put(Row(
            kind="timing", check=aa_check, kernel=aa_kernel,
            arch=arch, backend=name, status=Status.PASS if aa_ok else Status.ERROR,
            measured=aa_stats.ratio, tolerance=stats.AA_TOLERANCE, derivation=AA_DERIVATION,
            seed=plan.seed, message=msg,
            details={"mode": mode, "shape": shape.name, "rows_per_block": v1_spec.rows_per_block,
                     "stats": aa_stats.to_dict(), "samples_a": aa.runs_a, "samples_b": aa.runs_b,
                     "tries": aa_history, "queue_drained": aa.queue_drained,
                     "copies": len(a.weights)}))
        progress(f"[{mode} {shape.name} R={v1_spec.rows_per_block}] {msg}")

        # The read floor: arm A's own weight copies, each read once per sample (the
        # weights only: x and y, a few KB, are left out).
        floor = ceilings.get(("stream_read", shape.name, mode))
        fcheck, fkernel = f"stream_read_{mode}", _cell_name("stream_read", shape)
        if plan.read_floor and floor is None and (fcheck, fkernel) in todo:
            try:
                with bounded(backend, ident(fcheck, fkernel), plan.deadline_s):
                    floor = stream_read(backend, a.weights, a.weight_bytes, cfg, filler)
            except DeadlineExceeded as exc:
                missed(fcheck, fkernel, exc)
            else:
                ceilings["stream_read", shape.name, mode] = floor
                put(Row(
                    kind="timing", check=fcheck, kernel=fkernel, arch=arch, backend=name,
                    status=Status.PASS, measured=floor.median_us,
                    derivation="median event time (us) of reading the cell's weight bytes "
                               "once with a plain 16-byte-load kernel (kernels/"
                               "stream_read.hip): a GEMV that reads the same bytes is not "
                               "expected to beat it",
                    message=f"{floor.median_us:.2f} us, {floor.gbps:.0f} GB/s read floor",
                    details={"mode": mode, "shape": shape.name, "samples_us": floor.runs,
                             "gbps": floor.gbps, "nbytes": floor.nbytes,
                             "copies": len(a.weights)}))
                progress(f"[{mode} {shape.name}] read floor {floor.median_us:.2f} us "
                         f"{floor.gbps:.0f} GB/s")

        torch_base = ceilings.get(("torch_mv_bf16", shape.name, mode))
        tcheck, tkernel = f"torch_mv_bf16_{mode}", _cell_name("torch.mv", shape)
        if (plan.torch and backend.name == "cuda" and torch_base is None
                and (tcheck, tkernel) in todo):
            try:
                with bounded(backend, ident(tcheck, tkernel), plan.deadline_s):
                    torch_base = torch_mv_bf16(backend, shape, mode, facts.llc_bytes, cfg,
                                               filler)
            except DeadlineExceeded as exc:
                missed(tcheck, tkernel, exc)
            else:
                ceilings["torch_mv_bf16", shape.name, mode] = torch_base
                put(Row(
                    kind="timing", check=tcheck, kernel=tkernel, arch=arch, backend=name,
                    status=Status.PASS, measured=torch_base.median_us,
                    derivation="median event time (us) of torch.mv on bf16 weights",
                    message=f"{torch_base.median_us:.2f} us, {torch_base.gbps:.0f} GB/s",
                    details={"mode": mode, "shape": shape.name, "samples_us": torch_base.runs,
                             "gbps": torch_base.gbps, "nbytes": torch_base.nbytes}))

        untrusted = None
        if not aa_ok:
            untrusted = "noisy run: " + msg
        for s in cand_setups:
            ccheck, ckernel = f"timing_{mode}", _cell_name(s.spec.name, shape)
            try:
                with bounded(backend, ident(ccheck, ckernel), plan.deadline_s):
                    row = _candidate_row(backend, plan, facts, rates, filler, copy, floor,
                                         torch_base, a, s, shape, mode, aa_stats.ratio,
                                         untrusted, nbytes)
            except DeadlineExceeded as exc:
                missed(ccheck, ckernel, exc)
                continue
            put(row)
            progress(f"[{mode} {shape.name}] {s.spec.name}: {row.message}")
        twins = {s.spec.name: s for s in cand_setups if s.spec.qt in plan.mutants_of}
        for twin in twins.values():
            for k in plan.mutant_ks(mode, shape):
                mspec = timing_mutant(twin.spec, k)
                mkernel = _cell_name(mspec.name, shape)
                vcheck, kcheck = f"timing_{mode}", f"timing_mutant_{mode}"
                try:
                    with bounded(backend, ident(vcheck, mkernel), plan.deadline_s):
                        m = setup_gemv(backend, mspec, shape, mode, facts.llc_bytes, plan.seed)
                        setups.append(m)
                        row = _candidate_row(backend, plan, facts, rates, filler, copy, floor,
                                             torch_base, a, m, shape, mode, aa_stats.ratio,
                                             untrusted, nbytes, gate_spec=twin.spec)
                except DeadlineExceeded as exc:
                    put(infrastructure_row(plan, name, kcheck, mkernel, exc))
                    missed(vcheck, mkernel, exc)
                    continue
                put(row)
                try:
                    with bounded(backend, ident(kcheck, mkernel), plan.deadline_s):
                        row = _mutant_row(backend, plan, filler, twin, m, shape, mode,
                                          untrusted)
                except DeadlineExceeded as exc:
                    missed(kcheck, mkernel, exc)
                    continue
                put(row)
                progress(f"[{mode} {shape.name}] {mspec.name}: {row.message}")
    finally:
        for setup in setups:
            setup.free(backend)


def _candidate_row(
    backend: Backend, plan: BenchPlan, facts: DeviceFacts, rates: ArchRates | None,
    filler: Any, copy: Baseline | None, floor: Baseline | None, torch_base: Baseline | None,
    a: GemvSetup, s: GemvSetup, shape: Shape, mode: Mode, aa_ratio: float,
    untrusted: str | None, nbytes: int, gate_spec: Any = None,
) -> Row:
    """One candidate against its qt=6 baseline, judged on the policy's gate; an
    inconclusive cell is re-measured up to the gate's run budget."""
    cfg = mode_config(plan.config, mode)
    gate = plan.gate(gate_spec or s.spec, mode)
    drained: list[bool] = []

    def measure(n: int) -> tuple[list[list[float]], list[list[float]]]:
        pair = time_pair(backend, a.arm, s.arm, _with_runs(cfg, n), filler)
        drained.extend(pair.queue_drained)
        return pair.runs_a, pair.runs_b

    # Mutants are timed at the configured runs: their cells feed compare and the
    # detection rates, and re-measuring one that sits at ratio_max would not change that.
    if plan.remeasure and untrusted is None and s.spec.mutant_of is None:
        runs_a, runs_b, v = measure_until_settled(measure, gate, cfg.runs, seed=plan.seed)
    else:
        runs_a, runs_b = measure(cfg.runs)
        v = gate_verdict(runs_a, runs_b, gate, seed=plan.seed)
    st = stats.summarize(runs_a, runs_b, confidence=gate.confidence, seed=plan.seed)
    med_a = float(np.median(np.concatenate(runs_a)))
    med_b = float(np.median(np.concatenate(runs_b)))
    gb_a, gb_b = effective_gbps(nbytes, med_a), effective_gbps(nbytes, med_b)
    if untrusted is None and any(drained):
        untrusted = "host outran the queue filler"
    details: dict[str, Any] = {
        "mode": mode, "shape": shape.name, "M": shape.M, "K": shape.K,
        "qt": s.spec.qt, "kind": s.spec.kind,
        "rows_per_block": s.spec.rows_per_block, "baseline": a.spec.name,
        "stats": st.to_dict(), "samples_a": runs_a, "samples_b": runs_b,
        "gate": gate.to_dict(), "verdict": v.to_dict(),
        "median_us_a": med_a, "median_us_b": med_b, "bytes": nbytes,
        "gbps_a": gb_a, "gbps_b": gb_b,
        "vram_peak_gbps": facts.vram_peak_gbps, "facts_source": facts.source,
        "frac_peak_b": gb_b / facts.vram_peak_gbps,
        # Section 6's gfx1030 signature: faster than VRAM can deliver.
        "cache_resident": gb_b > facts.vram_peak_gbps or gb_a > facts.vram_peak_gbps,
        "copies": len(s.weights), "llc_bytes": facts.llc_bytes,
        "queue_drained": drained, "aa_ratio": aa_ratio,
        "verify_rel_error": s.max_rel_error,
    }
    if s.spec.mutant_of is not None:
        details["mutant_of"] = s.spec.mutant_of
        details["defines"] = [list(d) for d in s.spec.defines]
    if untrusted is not None:
        details["untrusted"] = untrusted
    if copy is not None:
        details["copy_gbps"] = copy.gbps
        details["frac_copy_b"] = gb_b / copy.gbps
    if rates is not None and plan.costs is not None:
        c1, c2 = plan.costs.get(a.spec.name), plan.costs.get(s.spec.name)
        if c1 is not None and c2 is not None:
            details.update(predict_ratio(c1, c2, shape, rates, mode,
                                         s.spec.rows_per_block).to_dict())
    if floor is not None:
        details["read_floor_us"] = floor.median_us
        details["read_floor_gbps"] = floor.gbps
        # 1.0 = as fast as merely reading the weights.
        details["frac_read_floor_b"] = floor.median_us / med_b
    if torch_base is not None:
        details["torch_us"] = torch_base.median_us
        details["speedup_vs_torch_b"] = torch_base.median_us / med_b
    status = Status.ERROR if untrusted else row_status(v.verdict, gate)
    why = f"not trusted ({untrusted})" if untrusted else str(v.verdict)
    return Row(
        kind="timing", check=f"timing_{mode}", kernel=_cell_name(s.spec.name, shape),
        arch=plan.arch, backend=backend.name, status=status, measured=v.ratio,
        tolerance=gate.ratio_max, derivation=gate_derivation(gate), seed=plan.seed,
        message=(f"{st.ratio:.4f} [{v.ci_low:.4f}, {v.ci_high:.4f}] over {v.runs} runs; "
                 f"{med_b:.2f} us {gb_b:.0f} GB/s; gate {v.describe()}; {why}"),
        details=details)


def _with_runs(cfg: TimingConfig, runs: int) -> TimingConfig:
    import dataclasses

    return dataclasses.replace(cfg, runs=runs)


def mode_config(cfg: TimingConfig, mode: Mode) -> TimingConfig:
    """``cfg`` with the mode's primer launches (hqval.timing.schedule.primes) and, hot,
    one weight copy per run."""
    import dataclasses

    return dataclasses.replace(cfg, prime=primes(mode), copy_per_run=mode == "hot")


def _mutant_row(
    backend: Backend, plan: BenchPlan, filler: Any, twin: GemvSetup, m: GemvSetup,
    shape: Shape, mode: Mode, untrusted: str | None,
) -> Row:
    """A timing mutant against its unslowed twin in the same run: its true slowdown, and
    whether the gate's change tolerance flags it (flagged = killed: PASS; a mutant the
    gate lets through survives: FAIL; inconclusive after the runs: the gate's noisy)."""
    gate = plan.gate(twin.spec, mode)
    pair = time_pair(backend, twin.arm, m.arm, mode_config(plan.config, mode), filler)
    v = gate_verdict(pair.runs_a, pair.runs_b, gate, tolerance=gate.change_max, seed=plan.seed)
    if untrusted is None and any(pair.queue_drained):
        untrusted = "host outran the queue filler"
    status, why = mutant_status(v.verdict, gate, untrusted)
    return Row(
        kind="timing", check=f"timing_mutant_{mode}", kernel=_cell_name(m.spec.name, shape),
        arch=plan.arch, backend=backend.name, status=status, measured=v.ratio,
        tolerance=gate.change_max,
        derivation=(f"timing mutant / its unslowed twin, flagged when the {gate.confidence:.0%} "
                    f"CI lies above change_max {gate.change_max:g} ({gate.source})"),
        seed=plan.seed,
        message=(f"true slowdown {v.ratio - 1:+.2%} [{v.ci_low - 1:+.2%}, "
                 f"{v.ci_high - 1:+.2%}]; {why}"),
        details={"mode": mode, "shape": shape.name, "qt": m.spec.qt, "kind": m.spec.kind,
                 "mutant_of": twin.spec.name, "twin": twin.spec.name,
                 "defines": [list(d) for d in m.spec.defines],
                 "samples_a": pair.runs_a, "samples_b": pair.runs_b,
                 "gate": gate.to_dict(), "verdict": v.to_dict(),
                 "queue_drained": pair.queue_drained, "verify_rel_error": m.max_rel_error,
                 **({"untrusted": untrusted} if untrusted else {})})
