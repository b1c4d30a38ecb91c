"""``hqval audit``: read the machine code of every compiled kernel and apply the ISA rules
(``hqval.audit``): scalar header loads, no spills, VGPR budget, v2 VALU cost over v1, WMMA
generation, payload offset.  Exit 0 only if every applicable rule passed.
``--table`` prints the per-kernel facts (VGPR, SGPR, spills, LDS, occupancy, histogram)."""

from __future__ import annotations

import argparse
import time

from hqval import markdown as md
from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for opt in (options.ARCH, options.MANIFEST, options.JSON_OUT, options.CACHE_DIR,
                options.JOBS):
        opt.add_to(parser)
    parser.add_argument("--mutants", action="store_true",
                        help="also audit kernels/mutants/mutants.yaml")
    parser.add_argument("--table", action="store_true",
                        help="print VGPR/SGPR/spill/LDS/occupancy/histogram per kernel")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every row")


def run(args: argparse.Namespace) -> int:
    from hqval.audit import IsaError, analyze, audit_matrix, summary
    from hqval.cli import UsageError
    from hqval.manifest import load_specs
    from hqval.matrix import gfx_arches
    from hqval.result import Row, row_lines, rows_exit_code
    from hqval.toolchain import ToolchainError, compile_matrix, find_compiler

    try:
        arches = gfx_arches(args.arch, "audit")
        specs = load_specs(args.manifest, args.mutants)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        find_compiler()
    except ToolchainError as exc:
        raise UsageError(str(exc)) from None
    t0 = time.perf_counter()
    cells = compile_matrix(specs, arches, jobs=args.jobs, cache_dir=args.cache_dir)
    rows: list[Row] = [c.row() for c in cells if c.result is not None and not c.result.ok]
    for arch in arches:
        mine = [(c.spec, c.result) for c in cells if c.arch == arch.name]
        try:
            rows += audit_matrix(mine, arch, cache_dir=args.cache_dir)
        except IsaError as exc:
            raise UsageError(str(exc)) from None
        if args.table:
            print(f"## {arch.name}")
            table = []
            for spec, res in mine:
                if res is None or not res.ok or res.code_object is None:
                    continue
                s = summary(analyze(res.code_object, arch.name)[spec.symbol], arch)
                c, lc = s["classes"], s["loop_classes"]
                table.append([spec.name, s["vgpr"], s["sgpr"],
                              f"{s['vgpr_spill']}/{s['sgpr_spill']}", s["scratch"], s["lds"],
                              s["occupancy"], c.get("valu", 0), c.get("salu", 0),
                              c.get("smem", 0), c.get("vmem", 0), lc.get("valu", 0)])
            print(md.table(["kernel", "VGPR", "SGPR", "spill v/s", "scratch", "LDS",
                            "occupancy", "VALU", "SALU", "SMEM", "VMEM", "loop VALU"],
                           table, align="lrrlrrrrrrrr"))
    print("\n".join(row_lines(rows, args.verbose, "audit")))
    print(f"hqval audit: {len(arches)} arches, {time.perf_counter() - t0:.2f} s")
    if args.json:
        options.write_json([r.to_dict() for r in rows], args.json)
    return rows_exit_code(rows, "audit")
