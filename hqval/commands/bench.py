"""``hqval bench``: interleaved device-event timing of the GEMV cells on one device.

    hqval bench --backend cuda --arch sm_90 --mode both --json out.json
    hqval bench --backend hip --arch gfx1100 --shape 17408x5120 --sweep-rows --out runs/x

Cells run one at a time (never concurrently on a device).  Each candidate is judged on
the timing gate of its format's path in the policy (matrices/policy.yaml, ``--policy``):
fail when the whole CI of v2/v1 lies above ``ratio_max``, pass when below, otherwise
re-measured up to ``max_runs`` runs and then ``noisy``.  Exit 0 when every cell passed
(or was noisy under a policy that lets noisy pass), 1 when a cell failed its gate, stayed
noisy under a blocking policy or its run was not trusted, 2 on bad input or a backend that
cannot run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hqval import options
from hqval.formats import HFQ4G256_QT

SWEEP_ROWS = (1, 2, 4, 8)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.BACKEND.add_to(parser)
    options.ARCH.add_to(parser)
    options.MANIFEST.add_to(parser)
    options.JSON_OUT.add_to(parser)
    parser.add_argument("--out", type=options.path_value,
                        help="also write a results run directory (envelope + rows)")
    parser.add_argument("--policy", default=None,
                        help="policy YAML whose timing gates judge the cells "
                             "(default: matrices/policy.yaml)")
    parser.add_argument("--timing-mutants", metavar="TOKEN,...", default="",
                        help="also time timing mutants of the qt=44 kernels: slowK (K/256 of "
                             "the groups redone) or extraM (M extra steps a group), each "
                             "against qt=6 and against its unslowed twin")
    parser.add_argument("--shape", action="append",
                        help="MxK (repeatable; default: the 'full' set of shapes.yaml)")
    parser.add_argument("--mode", choices=("hot", "cold", "both"), default="both",
                        help="cache state: hot (same buffers), cold (rotating copies > LLC)")
    parser.add_argument("--rows", type=options.positive_int(64), action="append",
                        help="rows per block R (repeatable; default: the arch's "
                             "gemv_rows_default)")
    parser.add_argument("--sweep-rows", action="store_true",
                        help=f"time every R in {SWEEP_ROWS}")
    parser.add_argument("--candidates", default="44,45",
                        help="qt ids timed against qt=6 (comma-separated)")
    parser.add_argument("--warmup", type=options.nonneg_int(), default=32,
                        help="untimed A/B sample pairs before each run (module load, first "
                             "touch, clock ramp; default 32)")
    parser.add_argument("--iterations",
                        type=options.positive_int(options.TIMING_ITERATIONS_MAX), default=100,
                        help="samples per arm per run")
    parser.add_argument("--runs", type=options.positive_int(options.TIMING_RUNS_MAX), default=3,
                        help="independent timed runs per cell, pooled for the ratio "
                             "(default 3)")
    parser.add_argument("--max-reruns", type=options.nonneg_int(), default=2,
                        help="re-runs of a noisy A/A control before reporting it noisy")
    parser.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                        help="extra preprocessor define for every timed kernel (e.g. "
                             "HQ_GEMV_UNROLL=8); recorded in the envelope")
    parser.add_argument("--costs", metavar="FILE",
                        help="instruction costs (from --predict --costs-out) for predictions "
                             "beside measurements")
    parser.add_argument("--predict", action="store_true",
                        help="no hardware: print the cost model's v2/v1 predictions for the "
                             "arch from emulator instruction counts")
    parser.add_argument("--costs-out", metavar="FILE",
                        help="with --predict: save the measured costs for a device run")
    parser.add_argument("--no-copy", action="store_true", help="skip the copy-bandwidth ceiling")
    parser.add_argument("--no-read-floor", action="store_true",
                        help="skip the per-cell read floor (the weights read once, nothing else)")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch.mv baseline")


def _shapes(args: argparse.Namespace) -> list[Any]:
    from hqval.cli import UsageError
    from hqval.timing.gemv import Shape

    if args.shape:
        try:
            return [Shape.parse(s) for s in args.shape]
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    from hqval.matrix import load_shapes

    return [Shape(s.M, s.K) for s in load_shapes(set="full")]


def _rows(args: argparse.Namespace, arch: str) -> list[int]:
    from hqval.cli import UsageError

    if args.sweep_rows:
        return list(SWEEP_ROWS)
    if args.rows:
        return sorted(set(args.rows))
    from hqval.matrix import load_arches

    arches = load_arches()
    if arch in arches:
        return [arches[arch].gemv_rows_default]
    raise UsageError(f"{arch} has no gemv_rows_default (not an RDNA arch in arches.yaml); "
                     "pass --rows R or --sweep-rows")


def run(args: argparse.Namespace) -> int:
    from hqval.backends import BackendUnavailable, get
    from hqval.cli import UsageError
    from hqval.manifest import load_manifest
    from hqval.matrix import resolve_arches
    from hqval.result import Row
    from hqval.timing.bench import BenchPlan, run_bench
    from hqval.timing.harness import TimingConfig
    from hqval.timing.mutants import parse_slow_list
    from hqval.timing.schedule import MODES

    try:
        resolved = resolve_arches(args.arch)
    except ValueError as exc:  # empty (--arch ,) or unknown
        raise UsageError(str(exc)) from None
    if len(resolved) != 1:
        raise UsageError("bench times one device: pass exactly one --arch (e.g. sm_90, gfx1100)")
    arch = resolved[0].name
    if args.predict:
        return predict_only(args, arch)
    if args.backend in ("auto", "emu"):
        raise UsageError("bench needs device events: pass --backend cuda or --backend hip "
                         "(the emulator has no clock; use `hqval emu --bench`)")
    try:
        config = TimingConfig(warmup=args.warmup, iterations=args.iterations, runs=args.runs)
        candidates = tuple(int(v) for v in args.candidates.split(",") if v.strip())
        mutants = tuple(parse_slow_list(args.timing_mutants)) if args.timing_mutants else ()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    plan = BenchPlan(
        arch=arch, shapes=_shapes(args),
        modes=list(MODES) if args.mode == "both" else [args.mode],
        rows=_rows(args, arch), candidates=candidates, config=config,
        max_reruns=args.max_reruns, copy=not args.no_copy,
        read_floor=not args.no_read_floor, torch=not args.no_torch,
        costs=_load_costs(args.costs), gates=policy_gates(args.policy),
        timing_mutants=mutants,
    )
    if plan.costs is not None:
        _check_rates(arch)
    try:
        backend = get(args.backend, arch)
    except BackendUnavailable as exc:
        raise UsageError(str(exc)) from None
    manifest = with_defines(load_manifest(Path(args.manifest) if args.manifest else None),
                            args.define)

    envelope = bench_envelope(backend, arch, plan, manifest)
    envelope["timing"]["defines"] = list(args.define)
    envelope["timing"]["timing_mutants"] = list(mutants)
    envelope["timing"]["policy"] = args.policy or "matrices/policy.yaml"
    writer = None
    if args.out:
        from hqval.results.store import RunWriter

        writer = RunWriter.create(args.out, envelope)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    rows: list[Row] = run_bench(backend, manifest, plan, progress=progress,
                                emit=writer.append if writer else (lambda r: None))
    print(format_table(rows))
    if args.json:
        options.write_json({"envelope": envelope, "rows": [r.to_dict() for r in rows]},
                           args.json)
    return 0 if all(r.status.ok for r in rows) else 1


def policy_gates(path: str | None) -> Any:
    """(spec, mode) -> the timing gate of the spec's format and path in the policy."""
    from hqval.admission import PolicyError, load_policy
    from hqval.cli import UsageError
    from hqval.timing import bench

    try:
        policy = load_policy(path)
    except PolicyError as exc:
        raise UsageError(str(exc)) from None
    return bench.policy_gates(policy)


def _load_costs(path: str | None) -> Any:
    from hqval.cli import UsageError
    from hqval.timing.cost import load_costs

    if not path:
        return None
    try:
        return load_costs(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _check_rates(arch: str) -> None:
    """Predictions beside a device run need the arch's rates: an RDNA arch whose family
    has no latencies in arches.yaml is bad input, said before the device is touched."""
    from hqval.cli import UsageError
    from hqval.matrix import load_arches
    from hqval.timing.cost import ArchRates

    arches = load_arches()
    if arch in arches:
        try:
            ArchRates.from_arch(arches[arch])
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def predict_only(args: argparse.Namespace, arch: str) -> int:
    """Cost-model predictions for an RDNA arch, no hardware: emulator counts x arches.yaml."""
    from hqval.cli import UsageError
    from hqval.manifest import load_manifest
    from hqval.matrix import load_arches
    from hqval.timing.bench import find_kernels
    from hqval.timing.cost import ArchRates, measure_cost, predict_ratio, save_costs

    arches = load_arches()
    if arch not in arches:
        raise UsageError(f"--predict needs an RDNA arch from arches.yaml (got {arch}); NVIDIA "
                         "predictions come from a device run with --costs")
    manifest = load_manifest(Path(args.manifest) if args.manifest else None)
    try:
        rates = ArchRates.from_arch(arches[arch])
    except ValueError as exc:  # no latencies for the arch's family
        raise UsageError(str(exc)) from None
    rows = _rows(args, arch)
    candidates = [int(v) for v in args.candidates.split(",") if v.strip()]
    modes = ["hot", "cold"] if args.mode == "both" else [args.mode]
    saved = []
    # Per kernel: the three terms (us), the binding one, and the latency term's parts:
    # main-loop chain cycles per iteration, waves per SIMD held at once / given by the launch;
    # VGPR bank-conflict cycles per group-row in the issue term ("-": no bank count).
    print(f"{'kernel':24} {'shape':12} {'mode':5} {'pred v2/v1':>10} {'us(v1)':>8} "
          f"{'us(v2)':>8} {'bound v1/v2':15} {'resident':8} {'v1 mem/issue/lat us':>20} "
          f"{'v2 mem/issue/lat us':>20} {'chain v1/v2':>11} {'waves':>9} {'banks v1/v2':>11}")
    for R in rows:
        v1 = find_kernels(manifest, HFQ4G256_QT, R)
        if v1 is None:
            raise UsageError(f"no qt=6 GEMV kernel with rows_per_block {R} in the manifest")
        c1 = measure_cost(v1, arch)
        saved.append(c1)
        for qt in candidates:
            spec = find_kernels(manifest, qt, R)
            if spec is None:
                continue
            c2 = measure_cost(spec, arch)
            saved.append(c2)
            for mode in modes:
                for shape in _shapes(args):
                    p = predict_ratio(c1, c2, shape, rates, mode, R)
                    print(f"{spec.name:24} {shape.name:12} {mode:5} {p.ratio:10.4f} "
                          f"{p.v1.t_us:8.2f} {p.v2.t_us:8.2f} "
                          f"{p.v1.bound + '/' + p.v2.bound:15} "
                          f"{'yes' if p.v2.resident else 'no':8} {_terms(p.v1):>20} "
                          f"{_terms(p.v2):>20} {_chains(p):>11} {_waves(p.v2):>9} "
                          f"{_banks(p, rates):>11}")
    if args.costs_out:
        save_costs(saved, args.costs_out)
    return 0


def _terms(p: Any) -> str:
    return f"{p.t_mem_us:.2f}/{p.t_issue_us:.2f}/{p.t_latency_us:.2f}"


def _banks(p: Any, rates: Any) -> str:
    if not getattr(rates.latencies, "vgpr_banks", None):
        return "-"
    return f"{p.v1.bank_stalls:.2f}/{p.v2.bank_stalls:.2f}"


def _chains(p: Any) -> str:
    if p.v1.latency is None or p.v2.latency is None:
        return "-"
    return f"{p.v1.latency.chain_cycles:.0f}/{p.v2.latency.chain_cycles:.0f}"


def _waves(p: Any) -> str:
    t = p.latency
    return "-" if t is None else f"{t.concurrent:g}/{t.waves_per_simd:g}"


def with_defines(manifest: Any, defines: list[str]) -> Any:
    """The manifest with ``defines`` added to every kernel (the same TU stays one compile)."""
    import dataclasses

    from hqval.cli import UsageError

    extra = []
    for d in defines:
        name, sep, value = d.partition("=")
        if not name.isidentifier():
            raise UsageError(f"--define {d!r}: write NAME=VALUE, e.g. HQ_GEMV_UNROLL=8")
        extra.append((name, value if sep else ""))
    if not extra:
        return manifest
    kernels = [dataclasses.replace(k, defines=(*k.defines, *extra)) for k in manifest.kernels]
    return dataclasses.replace(manifest, kernels=kernels)


def bench_envelope(backend: Any, arch: str, plan: Any, manifest: Any = None) -> dict[str, Any]:
    import os

    from hqval.results.store import make_envelope
    from hqval.timing.harness import LAUNCH_PHASES

    return make_envelope(
        backend=backend.name, device=backend.device_name(), arch=arch,
        runtime=backend.runtime_info(),
        # what admission and compare need to find each cell's format, path and gate offline
        kernels={s.name: {"qt": s.qt, "kind": s.kind, "rows_per_block": s.rows_per_block,
                          "baseline": s.baseline, "residual": s.residual}
                 for s in manifest.kernels if s.kind == "gemv"} if manifest is not None else None,
        extra={"timing": {"warmup": plan.config.warmup, "iterations": plan.config.iterations,
                          "runs": plan.config.runs, "order": "ABBA",
                          "launch_phases": LAUNCH_PHASES,
                          "modes": list(plan.modes), "rows_per_block": plan.rows},
               "suite_commit_env": os.environ.get("HQVAL_COMMIT")},
    )


def format_table(rows: list[Any]) -> str:
    """Plain text: one line per timing cell, prediction beside measurement if present."""
    lines = [f"{'cell':58} {'status':6} {'ratio':>7} {'95% CI':>17} {'p':>8} "
             f"{'us(v1)':>8} {'us(B)':>8} {'GB/s':>6} {'%copy':>6} {'%floor':>6} {'xtorch':>6} "
             f"{'cache':>5} {'pred':>6}"]
    for r in rows:
        d = r.details
        if r.check in ("timing_hot", "timing_cold") and "stats" in d:
            st = d["stats"]
            v = d.get("verdict") or st  # the gate's CI; rows from before the gate: stats
            lines.append(
                f"{r.identity:58} {r.status!s:6} {v['ratio']:7.4f} "
                f"[{v['ci_low']:.4f},{v['ci_high']:.4f}] {st['mwu_p']:8.2g} "
                f"{d['median_us_a']:8.2f} {d['median_us_b']:8.2f} {d['gbps_b']:6.0f} "
                f"{100 * d.get('frac_copy_b', float('nan')):6.1f} "
                f"{100 * d.get('frac_read_floor_b', float('nan')):6.1f} "
                f"{d.get('speedup_vs_torch_b', float('nan')):6.2f} "
                f"{'yes' if d['cache_resident'] else 'no':>5} "
                f"{d.get('predicted_ratio', float('nan')):6.3f}")
        else:
            lines.append(f"{r.identity:58} {r.status!s:6} {r.message}")
    return "\n".join(lines)
