#!/usr/bin/env python3
"""Timing stability study (issue 13 item 5): clean re-runs, timing mutants, error rates.

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

    t0 = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    backend = _backend(args)
    arch = "sim" if args.dry_run else args.arch
    manifest = load_manifest(Path(args.manifest) if args.manifest else None)
    env_extra = {"timing": {"warmup": args.warmup, "iterations": args.iterations,
                            "runs": args.runs, "order": "ABBA", "modes": list(args.mode),
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


def analyze(args: argparse.Namespace) -> int:
    from hqval.timing.stability import analyze_study, write_checkpoint

    study = analyze_study(Path(args.dir), policy=args.policy)
    write_checkpoint(study, Path(args.out))
    print(study.summary())
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
    a = sub.add_parser("analyze", help="error rates from the stored samples")
    a.add_argument("dir")
    a.add_argument("--out", required=True)
    a.add_argument("--policy", default=None)
    args = p.parse_args(argv)
    if args.cmd == "measure":
        args.mode = args.mode or ["hot", "cold"]
        if args.shape is None:
            args.shape = ["256x1024", "384x1024"] if args.dry_run else ["17408x5120",
                                                                         "27648x5120"]
        return measure(args)
    return analyze(args)


if __name__ == "__main__":
    sys.exit(main())
