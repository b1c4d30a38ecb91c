"""``hqval compare BASE NEW``: parity regressions and timing changes (at least 1% and
Mann-Whitney p < 0.002) between two run directories, as a markdown table for a review.

Exit 0 with no regression, 1 with at least one, 2 on bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", metavar="BASE", help="baseline run directory")
    parser.add_argument("new", metavar="NEW", help="new run directory")
    parser.add_argument("--all", action="store_true", help="list unchanged cells too")
    parser.add_argument("-o", "--output", default=None, help="also write the markdown here")


def run(args: argparse.Namespace) -> int:
    from hqval.cli import UsageError
    from hqval.results.compare import compare_rows, to_markdown
    from hqval.results.store import RunDirError, load_runs

    try:
        base, new = load_runs([args.base, args.new])
    except RunDirError as exc:
        raise UsageError(str(exc)) from None
    cmp = compare_rows(base.rows, new.rows, str(args.base), str(args.new))
    md = to_markdown(cmp, all_cells=args.all)
    print(md, end="")
    if args.output:
        Path(args.output).write_text(md)
    return 1 if cmp.regressions else 0
