"""``hqval compile``: build every kernel of the manifest for every arch it applies to.

Exit 0 only if every applicable cell compiled; 1 if any failed (each failure is a row with
the compiler's message, and the rest of the matrix still builds); 2 for bad input or no
compiler.  ``--bench`` times a cold build (fresh cache) and a warm one (all cached) of the
same matrix as separate processes, against the compile targets (cold <= 120 s on two
cores, warm <= 3 s).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from hqval import options

COLD_TARGET_S = 120.0
WARM_TARGET_S = 3.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for opt in (options.ARCH, options.MANIFEST, options.JSON_OUT, options.CACHE_DIR,
                options.JOBS):
        opt.add_to(parser)
    parser.add_argument("--mutants", action="store_true",
                        help="also build kernels/mutants/mutants.yaml")
    parser.add_argument("--bench", action="store_true",
                        help=f"time a cold (fresh cache) and a warm build; targets cold <= "
                             f"{COLD_TARGET_S:.0f} s, warm <= {WARM_TARGET_S:.0f} s")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every cell")


def run(args: argparse.Namespace) -> int:
    from hqval.cli import UsageError
    from hqval.manifest import load_specs
    from hqval.matrix import gfx_arches
    from hqval.result import Status, row_lines
    from hqval.toolchain import ToolchainError, compile_matrix, find_compiler

    try:
        arches = gfx_arches(args.arch, "compile")
        specs = load_specs(args.manifest, args.mutants)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        compiler = find_compiler()
    except ToolchainError as exc:
        raise UsageError(str(exc)) from None
    if args.bench:
        return bench(args, compiler.version)
    t0 = time.perf_counter()
    cells = compile_matrix(specs, arches, jobs=args.jobs, cache_dir=args.cache_dir)
    rows = [c.row() for c in cells]
    seconds = time.perf_counter() - t0
    print("\n".join(row_lines(rows, args.verbose, "compile")))
    built = sum(1 for c in cells if c.result is not None and c.result.ok and not c.result.cached)
    print(f"hqval compile: {compiler.version} ({compiler.found_by}); {len(arches)} arches, "
          f"{built} code objects built, {seconds:.2f} s")
    if args.json:
        options.write_json([r.to_dict() for r in rows], args.json)
    if any(r.status is Status.ERROR for r in rows):
        return 2  # a refused input or hqval's own machinery (the cache): not the kernels'
    return 0 if all(r.status.ok for r in rows) else 1


def bench(args: argparse.Namespace, compiler_version: str) -> int:
    """Cold and warm builds as separate ``hqval compile`` processes (what a user waits for,
    interpreter start included)."""
    argv = [sys.executable, "-m", "hqval", "compile"]
    for a in args.arch or []:
        argv += ["--arch", a]
    if args.manifest:
        argv += ["--manifest", args.manifest]
    if args.mutants:
        argv.append("--mutants")
    if args.jobs:
        argv += ["--jobs", str(args.jobs)]
    results: dict[str, Any] = {"compiler": compiler_version, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="hqval-bench-") as cache:
        env = dict(os.environ, HQVAL_CACHE=cache)
        for label, target in (("cold", COLD_TARGET_S), ("warm", WARM_TARGET_S)):
            t0 = time.perf_counter()
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
            seconds = time.perf_counter() - t0
            last = proc.stdout.strip().splitlines()[-2:] if proc.stdout.strip() else []
            results[label] = {"seconds": round(seconds, 3), "target_s": target,
                              "exit": proc.returncode, "ok": seconds <= target,
                              "summary": last}
            print(f"hqval compile --bench: {label} {seconds:.2f} s (target <= {target:.0f} s)"
                  f" exit {proc.returncode}")
            if proc.returncode not in (0, 1):
                sys.stderr.write(proc.stderr)
                return 2
    if args.json:
        options.write_json(results, args.json)
    return 0 if results["cold"]["ok"] and results["warm"]["ok"] else 1
