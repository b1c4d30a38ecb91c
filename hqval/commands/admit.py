"""``hqval admit RUN... [--baseline RUN...] [--json OUT]``: admission status per (qt, arch,
path) from the rows of one or more run directories and ``matrices/policy.yaml``.

Exit 0 with complete evidence and no failure; 1 when a row failed (a cell rejected, a
kernel-level finding outside every policy cell) or regressed against ``--baseline``; 2 on
bad input (a damaged run directory), an infrastructure problem or incomplete evidence
(admission fails closed).
"""

from __future__ import annotations

import argparse
import sys

from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directories (hqval run --out)")
    for opt in (options.BASELINE, options.POLICY, options.JSON_OUT):
        opt.add_to(parser)


def run(args: argparse.Namespace) -> int:
    from hqval.admission import dumps, judge, load_policy, problem_lines, to_markdown
    from hqval.cli import UsageError
    from hqval.results.compare import to_markdown as compare_markdown
    from hqval.results.store import load_runs, write_atomic

    try:
        judged = judge(load_runs(args.runs), load_policy(args.policy),
                       baseline=load_runs(args.baseline, "--baseline"))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    adm, cmp = judged.admission, judged.comparison
    print(to_markdown(adm))
    if cmp is not None:
        print(compare_markdown(cmp))
    for line in problem_lines(adm):
        print(f"hqval admit: {line}", file=sys.stderr)
    if adm.unclassified:
        print(f"hqval admit: {adm.unclassified} row(s) map to no format and path "
              "(compile/audit of qt=6 baselines, device baselines): not evidence here",
              file=sys.stderr)
    if args.json:
        write_atomic(args.json, dumps(adm))
    code = adm.exit_code
    verdict = {0: "complete evidence, no failure", 1: "a row failed or regressed",
               2: "damaged or incomplete evidence or an infrastructure problem: admission "
                  "fails closed"}[code]
    print(f"hqval admit: {verdict} (exit {code})", file=sys.stderr)
    return code
