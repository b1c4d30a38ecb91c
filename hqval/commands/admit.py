"""``hqval admit RUN... [--baseline RUN...] [--json OUT]``: admission status per (qt, arch,
path) from the rows of one or more run directories and ``matrices/policy.yaml``.

Exit 0 when every admitted cell passes, 1 when a cell was rejected (a check or gate failed)
or regressed against ``--baseline``, 2 on bad input or an infrastructure problem (a missing
backend, tool or pipeline step: admission fails closed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hqval import options

if TYPE_CHECKING:
    from hqval.admission import Admission
    from hqval.results.compare import Comparison
    from hqval.results.store import Run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directories (hqval run --out)")
    add_admission_arguments(parser)
    options.JSON_OUT.add_to(parser)


def add_admission_arguments(parser: argparse.ArgumentParser) -> None:
    options.BASELINE.add_to(parser)
    parser.add_argument("--policy", default=None,
                        help="admission policy YAML (default: matrices/policy.yaml)")


def load_runs(paths: list[str], what: str = "RUN") -> list[Run]:
    from hqval.cli import UsageError
    from hqval.results.store import RunDirError, load

    runs = []
    for p in paths:
        try:
            runs.append(load(Path(p)))
        except RunDirError as exc:
            raise UsageError(f"{what} {exc}") from None
    return runs


def evaluate(args: argparse.Namespace) -> tuple[Admission, Comparison | None]:
    """(Admission, Comparison | None) for the command's runs, baseline and policy."""
    from hqval.admission import PolicyError, admit_runs, load_policy
    from hqval.cli import UsageError

    runs = load_runs(args.runs)
    baseline = load_runs(args.baseline, "--baseline")
    try:
        policy = load_policy(args.policy)
    except PolicyError as exc:
        raise UsageError(str(exc)) from None
    return admit_runs(runs, policy=policy, baseline=baseline)


def run(args: argparse.Namespace) -> int:
    from hqval.admission import dumps, to_markdown
    from hqval.results.compare import to_markdown as compare_markdown

    adm, cmp = evaluate(args)
    print(to_markdown(adm))
    if cmp is not None:
        print(compare_markdown(cmp))
    for line in adm.infrastructure:
        print(f"hqval admit: infrastructure: {line}", file=sys.stderr)
    for ident in adm.outside:
        print(f"hqval admit: failing on an arch outside the policy: {ident}", file=sys.stderr)
    if adm.unclassified:
        print(f"hqval admit: {adm.unclassified} row(s) map to no format and path "
              "(compile/audit of qt=6 baselines, device baselines): not evidence here",
              file=sys.stderr)
    if args.json:
        Path(args.json).write_text(dumps(adm))
    code = adm.exit_code
    verdict = {0: "every admitted cell passes", 1: "a cell was rejected or regressed",
               2: "infrastructure problem: admission fails closed"}[code]
    print(f"hqval admit: {verdict} (exit {code})", file=sys.stderr)
    return code
