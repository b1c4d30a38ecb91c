"""``hqval history RUN... [-k TEXT] [--svg DIR] [--json OUT]``: each timing cell's v2/v1
ratio over the runs (oldest first: the nights), with asv-style step detection
(hqval.timing.history): one noisy night is not a step, and a real step is reported at its
first night.  A step up by more than the policy's ``change_max`` is a regression.

Exit 0 without a regression, 1 with at least one (the latest level is a step up beyond
``change_max``), 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directories, oldest first")
    parser.add_argument("-k", dest="select", default=None,
                        help="only cells whose identity contains this text")
    parser.add_argument("--svg", metavar="DIR", default=None,
                        help="write one SVG plot per cell into DIR")
    options.POLICY.add_to(parser)
    options.JSON_OUT.add_to(parser)


def run(args: argparse.Namespace) -> int:
    from hqval.admission import DamagedRun, PolicyError, load_policy
    from hqval.cli import UsageError
    from hqval.results.store import RunDirError, load_runs
    from hqval.timing.history import cell_histories, history_svg

    try:
        runs = load_runs(args.runs)
        policy = load_policy(args.policy)
    except (RunDirError, PolicyError) as exc:
        raise UsageError(str(exc)) from None
    if len(runs) < 2:
        raise UsageError("history needs at least 2 runs (oldest first), e.g. runs/*/")
    try:
        histories = cell_histories(runs, policy, select=args.select)
    except DamagedRun as exc:
        raise UsageError(str(exc)) from None
    if not histories:
        raise UsageError("no timing cell with stored samples in these runs"
                         + (f" matching -k {args.select!r}" if args.select else ""))
    regressed = 0
    out = []
    for h in histories:
        last = h.fit.steps[-1] if h.fit.steps else None
        flag = last is not None and last.regression
        regressed += flag
        steps = ", ".join(f"{s.after / s.before - 1:+.2%} at {s.night}"
                          + ("" if s.confirmed else " (one night: unconfirmed)")
                          + (" (back to an earlier level)" if s.recurring else "")
                          for s in h.fit.steps) or "no step"
        print(f"{'REGRESSED ' if flag else ''}{h.identity}: {len(h.fit.nights)} nights, "
              f"latest {h.fit.nights[-1].ratio:.4f}; {steps}")
        out.append(h.to_json())
        if args.svg:
            from hqval.safeio import make_dir, write_atomic

            d = Path(args.svg)
            make_dir(d, what="plot directory")
            write_atomic(d / f"{h.slug}.svg", history_svg(h.fit, h.identity,
                                                         tolerance=h.tolerance))
    if args.json:
        options.write_json({"cells": out}, args.json)
    print(f"{regressed} regression(s) among {len(histories)} cell(s)", file=sys.stderr)
    return 1 if regressed else 0
