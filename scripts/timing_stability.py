#!/usr/bin/env python3
"""Timing stability study: clean re-runs, timing mutants, error rates.

Measure (on the device; resumable, time-budgeted so it fits a 10-minute command):

    python3 scripts/timing_stability.py measure --out DIR --backend cuda --arch sm_90 \\
        --reruns 20 --shape 17408x5120 --shape 27648x5120 --budget-s 500

  1. Calibration: one bench of qt=6 / qt=44 / qt=45 with a ladder of timing mutants
     (hqval.timing.mutants: extraM, M redundant steps a group; slowK, K/256 of the groups
     redone), each timed against its unslowed twin; per (mode, shape) the mutant whose
     measured slowdown is nearest each target (+1, +2, +3, +5%) is kept
     (DIR/calibration.json).
  2. Re-runs: ``--reruns`` clean benches of the same build, each a run directory
     DIR/runs/NN (envelope + rows with every raw sample): A/A control, qt=44 and qt=45
     against qt=6, and the chosen mutants against qt=6 and against their twin.  Every
     re-run re-creates its buffers, re-verifies every kernel against the f64 oracle and
     re-times every cell from its own warm-ups; the compiled modules are reused.
  A command that runs out of ``--budget-s`` stops between re-runs; the same command with
  the same DIR continues where it stopped.

Analyze (anywhere, from the stored samples only; hqval.timing.stability):

    python3 scripts/timing_stability.py analyze DIR --out reports/checkpoints/X

Placement (on the device): the hot-mode cache experiment behind the primer launch
(hqval.timing.schedule.primes).  Per shape, ``--allocations`` independent buffer sets
(fresh allocations of qt=6, a second qt=6 and qt=44), each timed hot unprimed (the old
schedule: half of each arm's samples follow the other arm) and primed (every sample
follows its own arm), A/A and qt=44 against qt=6, plus cold:

    python3 scripts/timing_stability.py placement --out DIR --allocations 8

``--dry-run`` measures on the simulated device (hqval.timing.simulate, small shapes) to
test this script without a GPU; its numbers are a model, never a result.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LADDER = ("extra1", "extra2", "extra3", "extra4", "extra6", "extra8", "extra12", "extra16",
          "extra24", "slow8", "slow16", "slow32")
TARGETS = (0.01, 0.02, 0.03, 0.05)


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _backend(args: argparse.Namespace) -> Any:
    if args.dry_run:
        from hqval.timing.simulate import SimulatedDevice

        return SimulatedDevice(seed=args.seed)
    from hqval.backends import get

    return get(args.backend, args.arch)


def _plan(args: argparse.Namespace, arch: str, **kw: Any) -> Any:
    from hqval.admission import load_policy
    from hqval.timing.bench import BenchPlan, policy_gates
    from hqval.timing.gemv import Shape
    from hqval.timing.harness import TimingConfig

    shapes = [Shape.parse(s) for s in args.shape]
    return BenchPlan(
        arch=arch, shapes=shapes, modes=args.mode, rows=[args.rows],
        config=TimingConfig(warmup=args.warmup, iterations=args.iterations, runs=args.runs),
        copy=False, read_floor=False, torch=False, seed=args.seed,
        gates=policy_gates(load_policy(args.policy)), **kw)


def choose_mutants(rows: list[Any], targets: tuple[float, ...]) -> dict[str, dict[str, Any]]:
    """Per "mode/shape": the measured slowdown of every ladder k, and for each target the
    k measured nearest to it (each k used once)."""
    from hqval.timing.mutants import token_of

    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        if not r.check.startswith("timing_mutant_") or r.measured is None:
            continue
        key = f"{r.details['mode']}/{r.details['shape']}"
        k = token_of({d[0]: d[1] for d in r.details["defines"]})
        out.setdefault(key, {"ladder": {}, "chosen": {}})["ladder"][str(k)] = r.measured - 1.0
    for cell in out.values():
        ladder = {str(k): v for k, v in cell["ladder"].items()}
        free = dict(ladder)
        for t in targets:
            if not free:
                break
            k = min(free, key=lambda j: abs(free[j] - t))
            cell["chosen"][f"{t:.0%}"] = {"k": k, "calibrated_slowdown": free.pop(k)}
    return out


def measure(args: argparse.Namespace) -> int:
    from hqval.manifest import load_manifest
    from hqval.results.store import RunWriter, load, make_envelope
    from hqval.timing.bench import run_bench
    from hqval.timing.harness import LAUNCH_PHASES

    t0 = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    backend = _backend(args)
    arch = "sim" if args.dry_run else args.arch
    manifest = load_manifest(Path(args.manifest) if args.manifest else None)
    env_extra = {"timing": {"warmup": args.warmup, "iterations": args.iterations,
                            "runs": args.runs, "order": "ABBA", "modes": list(args.mode),
                            "launch_phases": LAUNCH_PHASES,
                            "rows_per_block": [args.rows]},
                 "study": "timing stability (scripts/timing_stability.py)",
                 "simulated": bool(args.dry_run)}

    def envelope(what: str) -> dict[str, Any]:
        env = make_envelope(backend=backend.name, device=backend.device_name(), arch=arch,
                            runtime=backend.runtime_info(), extra=env_extra)
        env["study_part"] = what
        return env

    cal_path = out / "calibration.json"
    if args.no_mutants and not cal_path.is_file():
        cal_path.write_text(json.dumps({"targets": [], "ladder": [], "cells": {},
                                        "note": "clean re-runs only (--no-mutants)"}) + "\n")
    if cal_path.is_file():
        calibration = json.loads(cal_path.read_text())
        _progress(f"calibration: reused {cal_path}")
    else:
        plan = _plan(args, arch, timing_mutants=tuple(args.ladder), remeasure=False)
        writer = RunWriter.create(out / "calibration", envelope("calibration"))
        try:
            rows = run_bench(backend, manifest, plan, progress=_progress, emit=writer.append)
        finally:
            writer.close()
        calibration = {"targets": list(args.targets), "ladder": list(args.ladder),
                       "cells": choose_mutants(rows, tuple(args.targets)),
                       "seconds": time.monotonic() - t0}
        cal_path.write_text(json.dumps(calibration, indent=2) + "\n")
        _progress(f"calibration: {time.monotonic() - t0:.0f} s")
    mutants_for = {key: tuple(sorted(str(c["k"]) for c in cell["chosen"].values()))
                   for key, cell in calibration["cells"].items()}

    runs_dir = out / "runs"
    done = sorted(p for p in runs_dir.glob("[0-9][0-9]") if (p / "envelope.json").is_file())
    for p in done:  # a re-run interrupted mid-way is redone from scratch
        try:
            complete = load(p).envelope.get("complete")
        except Exception:
            complete = False
        if not complete:
            import shutil

            shutil.rmtree(p)
    i = len([p for p in done if p.exists()])
    per_run: list[float] = []
    while i < args.reruns:
        est = max(per_run) if per_run else 0.0
        if time.monotonic() - t0 + est > args.budget_s:
            _progress(f"budget: stopping after re-run {i - 1}; run again to continue")
            break
        t1 = time.monotonic()
        if args.dry_run:  # the simulated clock's run-to-run offset
            backend.drift = 1.0 + 0.01 * ((i * 7919) % 11 - 5) / 5
        plan = _plan(args, arch, mutants_for=mutants_for)
        writer = RunWriter.create(runs_dir / f"{i:02d}", envelope(f"rerun {i}"))
        try:
            run_bench(backend, manifest, plan, progress=_progress, emit=writer.append)
            writer.update_envelope(complete=True, seconds=time.monotonic() - t1)
        finally:
            writer.close()
        per_run.append(time.monotonic() - t1)
        _progress(f"re-run {i}: {per_run[-1]:.0f} s")
        i += 1
    _progress(f"measured {i} of {args.reruns} re-runs in {time.monotonic() - t0:.0f} s")
    return 0 if i >= args.reruns else 3


def _split(runs: list[list[float]], arm: int) -> tuple[list[float], list[float]]:
    """(samples after the same arm, samples after the other arm) of an unprimed ABBA arm:
    ABBA's stream is A B B A A B ...; A's even-indexed samples follow A, B's odd ones B."""
    same: list[float] = []
    other: list[float] = []
    for r in runs:
        first, second = (r[0::2], r[1::2]) if arm == 0 else (r[1::2], r[0::2])
        same += first
        other += second
    return same, other


def placement(args: argparse.Namespace) -> int:
    import dataclasses

    import numpy as np

    from hqval.manifest import load_manifest
    from hqval.timing import stats
    from hqval.timing.bench import device_facts, find_kernels
    from hqval.timing.gemv import Shape, setup_gemv
    from hqval.timing.harness import TimingConfig, filler_for, time_pair

    t0 = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    backend = _backend(args)
    if args.dry_run:
        backend.displaced = 0.03
    arch = "sim" if args.dry_run else args.arch
    manifest = load_manifest(Path(args.manifest) if args.manifest else None)
    facts = device_facts(backend, arch)
    filler = filler_for(backend)
    v1 = find_kernels(manifest, 6, args.rows)
    v2 = find_kernels(manifest, 44, args.rows)
    base = TimingConfig(warmup=args.warmup, iterations=args.iterations, runs=args.runs)
    records: list[dict[str, Any]] = []
    for shape in (Shape.parse(t) for t in args.shape):
        for alloc in range(args.allocations):
            for mode in args.mode:
                # a spacer allocation kept alive under each set moves it to other addresses
                # (without one the driver hands back the same ones after each free)
                spacer = (backend.alloc(alloc * args.spacer_mb << 20)
                          if args.spacer_mb and alloc else None)
                sets = [setup_gemv(backend, spec, shape, mode, facts.llc_bytes, args.seed)
                        for spec in (v1, v1, v2)]
                try:
                    primes = (0, 1) if mode == "hot" else (0,)
                    for prime in primes:
                        cfg = dataclasses.replace(base, prime=prime,
                                                  copy_per_run=mode == "hot")
                        for what, (x, y) in (("aa", (sets[0], sets[1])),
                                             ("v2", (sets[0], sets[2]))):
                            pair = time_pair(backend, x.arm, y.arm, cfg, filler)
                            st = stats.summarize(pair.runs_a, pair.runs_b, seed=args.seed)
                            rec: dict[str, Any] = {
                                "shape": shape.name, "alloc": alloc, "mode": mode,
                                "prime": prime, "cell": what, "ratio": st.ratio,
                                "ci": [st.ci_low, st.ci_high],
                                "median_us_a": float(np.median(np.concatenate(
                                    pair.runs_a))),
                                "weight_bytes": x.weight_bytes,
                                "llc_bytes": facts.llc_bytes,
                                "drained": any(pair.queue_drained),
                                "ptrs": [int(getattr(b.handle, "__int__", lambda: 0)())
                                         for b in (x.weights[0], y.weights[0])],
                                "samples_a": pair.runs_a, "samples_b": pair.runs_b}
                            if prime == 0:
                                sa, oa = _split(pair.runs_a, 0)
                                sb, ob = _split(pair.runs_b, 1)
                                rec["after_other_over_same_a"] = float(
                                    np.median(oa) / np.median(sa))
                                rec["after_other_over_same_b"] = float(
                                    np.median(ob) / np.median(sb))
                                rec["ratio_same"] = float(np.median(sb) / np.median(sa))
                                rec["ratio_other"] = float(np.median(ob) / np.median(oa))
                            records.append(rec)
                            _progress(f"{shape.name} alloc {alloc} {mode} prime {prime} "
                                      f"{what}: {st.ratio:.4f} [{st.ci_low:.4f}, "
                                      f"{st.ci_high:.4f}]"
                                      + (f" gap A {rec['after_other_over_same_a']:.4f}"
                                         if prime == 0 else ""))
                finally:
                    for st_ in sets:
                        st_.free(backend)
                    if spacer is not None:
                        backend.free(spacer)
    (out / "placement.json").write_text(json.dumps(
        {"device": backend.device_name(), "arch": arch, "llc_bytes": facts.llc_bytes,
         "config": dataclasses.asdict(base), "allocations": args.allocations,
         "spacer_mb": args.spacer_mb,
         "seconds": time.monotonic() - t0, "records": records}) + "\n")
    print(placement_table(records))
    return 0


def placement_table(records: list[dict[str, Any]]) -> str:
    """Per shape, mode, schedule and cell: ratio min / median / max and spread over the
    allocations; the unprimed two-mode gap."""
    import numpy as np

    keys = sorted({(r["shape"], r["mode"], r["prime"], r["cell"]) for r in records},
                  key=lambda k: (int(k[0].split("x")[0]), k[1], k[2], k[3]))
    lines = ["| shape | MB | mode | schedule | cell | ratio min / median / max | spread "
             "(max-min) | sd | CI half-width median | other/same (A) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for shape, mode, prime, cell in keys:
        rs = [r for r in records if (r["shape"], r["mode"], r["prime"], r["cell"])
              == (shape, mode, prime, cell)]
        v = np.array([r["ratio"] for r in rs])
        hw = np.median([(r["ci"][1] - r["ci"][0]) / 2 for r in rs])
        gap = [r["after_other_over_same_a"] for r in rs if "after_other_over_same_a" in r]
        sched = "cold" if mode == "cold" else ("primed" if prime else "unprimed")
        lines.append(
            f"| {shape} | {rs[0]['weight_bytes'] / 1e6:.0f} | {mode} | {sched} | {cell} | "
            f"{v.min():.4f} / {np.median(v):.4f} / {v.max():.4f} | "
            f"{(v.max() - v.min()) * 100:.2f}% | {v.std(ddof=1) * 100 if v.size > 1 else 0:.2f}% "
            f"| {hw * 100:.2f}% | "
            + (f"{min(gap):.4f}-{max(gap):.4f}" if gap and mode == "hot" else "") + " |")
    return "\n".join(lines)


def analyze(args: argparse.Namespace) -> int:
    from hqval.timing.stability import analyze_study, write_checkpoint

    study = analyze_study(Path(args.dir), policy=args.policy)
    write_checkpoint(study, Path(args.out))
    print(study.summary())
    return 0


def cross(args: argparse.Namespace) -> int:
    from hqval.timing.stability import cross_device

    rows = cross_device([Path(d) for d in args.dirs], policy=args.policy)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    for r in rows:
        print(f"{r['a']} vs {r['b']}: {r['flagged']}/{r['pairs']} ordered pairs with a "
              f"regression; largest change CI low {r['max_change_low']:.4f} "
              f"({r['max_change_low_cell']})")
    return 0


def spread(args: argparse.Namespace) -> int:
    from hqval.timing.stability import estimator_spread

    for d in args.dirs:
        for r in estimator_spread(Path(d)):
            print(f"{d} {r['mode']} {r['shape']}: {r['cells']} clean cells x {r['reruns']} "
                  f"re-runs; sd of the ratio, cell ratio {r['sd_cell_ratio']:.3%}, pooled "
                  f"median {r['sd_pooled_median']:.3%}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="calibrate timing mutants, then the clean re-runs")
    m.add_argument("--out", required=True)
    m.add_argument("--backend", default="cuda")
    m.add_argument("--arch", default="sm_90")
    m.add_argument("--manifest", default=None)
    m.add_argument("--policy", default=None)
    m.add_argument("--shape", action="append")
    m.add_argument("--mode", action="append", choices=("hot", "cold"))
    m.add_argument("--rows", type=int, default=8)
    m.add_argument("--reruns", type=int, default=20)
    m.add_argument("--warmup", type=int, default=32)
    m.add_argument("--iterations", type=int, default=100)
    m.add_argument("--runs", type=int, default=3)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--ladder", type=lambda s: [v for v in s.split(",") if v],
                   default=list(LADDER), help="timing mutant tokens (slowK, extraM)")
    m.add_argument("--targets", type=lambda s: [float(v) for v in s.split(",")],
                   default=list(TARGETS))
    m.add_argument("--budget-s", type=float, default=500.0,
                   help="stop between re-runs before this many seconds (resume later)")
    m.add_argument("--no-mutants", action="store_true",
                   help="clean re-runs only: no calibration, no timing mutants (e.g. one "
                        "re-run per process: run with --reruns 1, 2, ... in turn)")
    m.add_argument("--dry-run", action="store_true",
                   help="the simulated device (no GPU; numbers are a model)")
    pl = sub.add_parser("placement", help="hot mode: unprimed vs primed over independent "
                                          "allocations")
    pl.add_argument("--out", required=True)
    pl.add_argument("--backend", default="cuda")
    pl.add_argument("--arch", default="sm_90")
    pl.add_argument("--manifest", default=None)
    pl.add_argument("--shape", action="append")
    pl.add_argument("--mode", action="append", choices=("hot", "cold"))
    pl.add_argument("--rows", type=int, default=8)
    pl.add_argument("--allocations", type=int, default=8)
    pl.add_argument("--spacer-mb", type=int, default=0,
                    help="allocation i first allocates i * this many MiB and keeps it while "
                         "it is timed, so each set lands at other addresses")
    pl.add_argument("--warmup", type=int, default=32)
    pl.add_argument("--iterations", type=int, default=100)
    pl.add_argument("--runs", type=int, default=3)
    pl.add_argument("--seed", type=int, default=0)
    pl.add_argument("--dry-run", action="store_true")
    a = sub.add_parser("analyze", help="error rates from the stored samples")
    a.add_argument("dir")
    a.add_argument("--out", required=True)
    a.add_argument("--policy", default=None)
    x = sub.add_parser("cross", help="clean re-runs of studies on different GPUs, compared")
    x.add_argument("dirs", nargs="+")
    x.add_argument("--out", required=True, help="JSON file of the figures")
    x.add_argument("--policy", default=None)
    sp = sub.add_parser("spread", help="re-run spread of clean cells' ratios: the cell "
                                       "ratio against the pooled median it replaced")
    sp.add_argument("dirs", nargs="+")
    args = p.parse_args(argv)
    if args.cmd == "spread":
        return spread(args)
    if args.cmd == "cross":
        return cross(args)
    if args.cmd == "measure":
        args.mode = args.mode or ["hot", "cold"]
        if args.shape is None:
            args.shape = ["256x1024", "384x1024"] if args.dry_run else ["17408x5120",
                                                                         "27648x5120"]
        return measure(args)
    if args.cmd == "placement":
        args.mode = args.mode or ["hot", "cold"]
        if args.shape is None:
            args.shape = (["64x1024", "128x1024"] if args.dry_run else
                          ["8192x5120", "12288x5120", "17408x5120", "22528x5120",
                           "27648x5120"])
        return placement(args)
    return analyze(args)


if __name__ == "__main__":
    sys.exit(main())
