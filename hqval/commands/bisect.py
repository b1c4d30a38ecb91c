"""``hqval bisect --tree REPO --manifest M --cell IDENTITY --good REF --bad REF [--fixed]``:
the first commit of a kernel tree's history where one cell fails (with ``--fixed``: the
first where it passes again), found with ``git bisect`` in a worktree of its own.

Each step compiles only what the cell needs and runs only the cell, on the emulator for a
check cell on ``emu`` or on the GPU for a hardware or timing cell; a commit that cannot be
judged (the manifest or kernel absent, a build failure, no verdict) is skipped.  Every
step is a run directory under ``--out`` (``hqval report -o OUT/report OUT/[0-9]*/``
shows them; ``OUT/bisect.md`` and ``bisect.json`` list the steps).
Exit 0 when a commit is named; 2 for bad input, a range whose ends do not differ as
claimed, or when only unjudgeable commits are left (their range is printed).  The user's
checkout is never touched.  docs/bisect.md has a worked example.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tree", required=True, metavar="REPO",
                        help="the kernel tree's git checkout (only read; never checked out)")
    parser.add_argument("--manifest", required=True, metavar="M",
                        help="its kernels.yaml: a file of the tree (each commit's own version "
                             "is used) or one outside it (paths relative to the tree's root)")
    parser.add_argument("--cell", required=True, metavar="IDENTITY",
                        help="the cell to follow, e.g. prefill_parity[K|gfx1100|emu], "
                             "compile[K|gfx1100|toolchain], timing_hot[K@4096x4096|gfx1100|hip]")
    parser.add_argument("--good", required=True, metavar="REF",
                        help="a commit where the cell passes")
    parser.add_argument("--bad", required=True, metavar="REF",
                        help="a commit where the cell fails")
    parser.add_argument("--fixed", action="store_true",
                        help="find the first good commit after --bad (the fix) instead of the "
                             "first bad one after --good")
    parser.add_argument("--out", type=options.path_value, default=None, metavar="DIR",
                        help="where each step's run directory and bisect.json go (default "
                             "runs/bisect-<UTC timestamp>)")
    parser.add_argument("--paths", action="append", default=[], metavar="PATH",
                        help="check out only this path of the tree at each step (repeatable; "
                             "for trees with large files outside the kernels)")
    parser.add_argument("--work-dir", default=None, metavar="DIR",
                        help="where the temporary worktree goes (default: the system's "
                             "temporary directory); removed at the end")
    options.CACHE_DIR.add_to(parser)
    options.SEED.add_to(parser)
    parser.add_argument("--timing-iterations", type=int, default=100,
                        help="timing cells: samples per arm per run (default 100)")
    parser.add_argument("--timing-runs", type=int, default=3,
                        help="timing cells: runs (default 3)")


def run(args: argparse.Namespace) -> int:
    from hqval.bisect import BisectInputError, Request, bisect
    from hqval.bisect.step import TimingSettings
    from hqval.cli import UsageError

    out = Path(args.out) if args.out else Path("runs") / time.strftime(
        "bisect-%Y%m%d-%H%M%S", time.gmtime())
    request = Request(
        tree=args.tree, manifest=args.manifest, cell=args.cell, good=args.good,
        bad=args.bad, out=out, fixed=args.fixed, cache_dir=args.cache_dir,
        paths=tuple(args.paths), seed=int(args.seed or 0),
        timing=TimingSettings(iterations=args.timing_iterations, runs=args.timing_runs),
        argv=tuple(sys.argv), work_dir=args.work_dir,
        log=lambda line: print(line, flush=True))
    try:
        result = bisect(request)
    except BisectInputError as exc:
        raise UsageError(str(exc)) from None
    stream = sys.stdout if result.exit_code == 0 else sys.stderr
    for line in result.lines(args.fixed):
        print(line, file=stream)
    print(f"hqval bisect: steps in {out}/bisect.json; report: hqval report -o "
          f"{out}/report {out}/[0-9]*/")
    return result.exit_code
