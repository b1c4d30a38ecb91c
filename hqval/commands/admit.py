"""``hqval admit RUN... [--baseline RUN...] [--expect-arch [ARCH]] [--json OUT]``: admission
status per (qt, arch, path) from the rows of one or more run directories and
``matrices/policy.yaml``.

Exit 0 with complete evidence and no failure; 1 when a row failed (a cell rejected, a
kernel-level finding outside every policy cell) or regressed against ``--baseline``; 2 on
bad input (a damaged run directory), an infrastructure problem or incomplete evidence
(admission fails closed).  ``--expect-arch`` names the arches that must each have a run
(bare or ``all``: every arch of ``matrices/arches.yaml``, the nightly's matrix): an arch
with none, a runner that was offline or whose job left no run, is incomplete evidence,
exit 2, with one line naming it.  ``--expect-backend`` names the backend every run must have run
on: an arch that ran on another (the emulator where the fleet expects hip) is exit 2, with
one line naming it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directories (hqval run --out)")
    for opt in (options.BASELINE, options.POLICY, options.JSON_OUT):
        opt.add_to(parser)
    parser.add_argument(
        "--expect-arch", action="append", nargs="?", const="all", metavar="ARCH",
        help="an arch that must have a run (repeatable, comma lists; bare or 'all': every "
             "arch of arches.yaml); one with none is incomplete evidence, exit 2")
    parser.add_argument(
        "--expect-backend", choices=("emu", "hip", "cuda"), metavar="BACKEND",
        help="the backend every run must have run on (the nightly's hip); an arch that ran "
             "on another (the emulator where the fleet expects hardware) is exit 2")


def run_arches(envelopes: Iterable[Mapping[str, Any]]) -> set[str]:
    """The arches the runs ran: each envelope's ``arch`` (a list, or a comma list) and
    the arches its ``backends`` table opened."""
    out: set[str] = set()
    for env in envelopes:
        named = env.get("arch") or []
        for item in [named] if isinstance(named, str) else named:
            out.update(a.strip() for a in str(item).split(",") if a.strip())
        backends = env.get("backends")
        if isinstance(backends, Mapping):
            out.update(str(a) for a in backends)
    return out


def missing_arches(expected: Sequence[str], envelopes: Iterable[Mapping[str, Any]]
                   ) -> list[str]:
    """The expected arches no run ran, in the order expected."""
    ran = run_arches(envelopes)
    return [a for a in expected if a not in ran]


def other_backends(expected: str | None, envelopes: Iterable[Mapping[str, Any]]
                   ) -> list[tuple[str, str]]:
    """The (arch, backend) pairs the runs ran on a backend other than ``expected``."""
    from hqval.admission.judge import run_slots

    if not expected:
        return []
    return sorted({s for env in envelopes for s in run_slots(env) if s[1] != expected})


def bisect_step(envelope: Mapping[str, Any]) -> str:
    """Why a directory ``hqval bisect`` made for one step is not a run to admit, or "": it
    ran one cell at one commit (``bisect`` in its envelope), so it has none of a run's
    steps, expected cells or code objects and admits nothing."""
    step = envelope.get("bisect")
    if not isinstance(step, Mapping):
        return ""
    commit = str(step.get("commit") or "?")[:12]
    return (f"a bisect step (commit {commit} of {step.get('repository') or 'the tree'}, cell "
            f"{step.get('cell') or '?'}), not a run: it ran only that cell and admits "
            "nothing; to admit that commit, check it out and run hqval run --manifest "
            "KERNELS.yaml --out DIR, then hqval admit DIR (hqval report shows the steps)")


def run(args: argparse.Namespace) -> int:
    from hqval.admission import dumps, judge, load_policy, problem_lines, to_markdown
    from hqval.cli import UsageError
    from hqval.matrix import resolve_arches
    from hqval.results.compare import to_markdown as compare_markdown
    from hqval.results.store import load_runs

    try:
        expected = ([a.name for a in resolve_arches(args.expect_arch)]
                    if args.expect_arch else [])
        for path in [*args.runs, *(args.baseline or [])]:
            here = Path(path)
            if (here / "bisect.json").is_file() and not (here / "envelope.json").exists():
                raise UsageError(f"{path}: the output of hqval bisect (bisect.json), not a run: "
                                 "each step in it ran one cell at one commit and admits "
                                 "nothing; to admit a commit, check it out and run hqval run "
                                 "--manifest KERNELS.yaml --out DIR, then hqval admit DIR")
        runs = load_runs(args.runs)
        baseline = load_runs(args.baseline, "--baseline")
        for run in [*runs, *baseline]:
            step = bisect_step(run.envelope)
            if step:
                raise UsageError(f"{run.path}: {step}")
        judged = judge(runs, load_policy(args.policy), baseline=baseline)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    missing = missing_arches(expected, (run.envelope for run in judged.runs))
    elsewhere = other_backends(args.expect_backend, (run.envelope for run in judged.runs))
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
    for arch in missing:
        print(f"hqval admit: {arch}: no run (--expect-arch): its runner was offline or its "
              f"job left no run directory; no cell of {arch} is admitted", file=sys.stderr)
    for arch, backend in elsewhere:
        print(f"hqval admit: {arch}: ran on {backend}, not {args.expect_backend} "
              f"(--expect-backend): no cell of {arch} is admitted as {args.expect_backend} "
              "evidence", file=sys.stderr)
    if args.json:
        doc = json.loads(dumps(adm))
        doc["missing_arches"] = missing
        doc["other_backends"] = [f"{a} ({b})" for a, b in elsewhere]
        # through the one writer (hqval.safeio.write_atomic): never through a link, over a
        # directory or over a run's own files
        options.write_json(doc, args.json)
    code = max(adm.exit_code, 2) if missing or elsewhere else adm.exit_code
    verdict = {0: "complete evidence, no failure", 1: "a row failed or regressed",
               2: "damaged, incomplete or unproven evidence or an infrastructure problem: "
                  "admission fails closed"}[code]
    print(f"hqval admit: {verdict} (exit {code})", file=sys.stderr)
    return code
