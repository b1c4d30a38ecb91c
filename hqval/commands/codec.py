"""``hqval codec``: the section 5 quality table for every format, or ``--bench``: the
encode + decode speed benchmark (target: qt=44, 17408 x 5120, <= 3 s on one core;
run it under ``taskset -c 0`` to measure one core)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", dest="formats", action="append", metavar="NAME|QT",
                        help="format name, alias or qt (repeatable; default: all)")
    parser.add_argument("--dataset", choices=("synthetic", "real", "all"), default="all",
                        help="synthetic: N(0, 0.011) post-FWHT-like; real: CREPE tiny "
                             "layers, FWHT-rotated (default: all)")
    parser.add_argument("--weights", metavar="FILE",
                        help="also measure a qt=0 float32 tensor file (hqval.formats."
                             "save_tensor), in the stored domain")
    parser.add_argument("--rotate", type=options.seed_value, metavar="SEED",
                        help="FWHT-rotate --weights with this sign seed first")
    parser.add_argument("-M", type=options.positive_int(1 << 20), default=256,
                        help="synthetic rows (default 256)")
    parser.add_argument("-K", type=options.positive_int(1 << 20), default=4096,
                        help="synthetic K (default 4096)")
    for opt in (options.SEED, options.JSON_PRINT):
        opt.add_to(parser)
    bench = parser.add_argument_group("benchmark")
    bench.add_argument("--bench", action="store_true",
                       help="time encode + decode instead of the quality table")
    bench.add_argument("--bench-format", default="mq4", metavar="NAME|QT",
                       help="format to time (default mq4 = qt=44)")
    bench.add_argument("--shape", default="17408x5120", metavar="MxK",
                       help="benchmark shape (default 17408x5120)")
    bench.add_argument("--repeats", type=options.positive_int(1000), default=3,
                       help="best of N (default 3)")
    bench.add_argument("--target-s", type=options.nonneg_float, default=3.0,
                       help="exit 1 when encode+decode exceeds this (default 3.0 s)")


def _format(token: str) -> Any:
    from hqval.cli import UsageError
    from hqval.formats import by_name, by_qt

    try:
        return by_qt(int(token)) if token.isdigit() else by_name(token)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None


def _shape(text: str) -> tuple[int, int]:
    from hqval.cli import UsageError

    try:
        m, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--shape {text!r}: expected MxK, e.g. 17408x5120") from None
    if m < 1 or k < 256 or k % 256:
        raise UsageError(f"--shape {text}: need M >= 1 and K a positive multiple of 256")
    return m, k


def run(args: argparse.Namespace) -> int:
    from hqval.cli import UsageError

    if args.bench:
        return _run_bench(args)

    from hqval import quality
    from hqval.formats import QT_F32, load_tensor, rotate

    fmts = [_format(t) for t in args.formats] if args.formats else None
    try:
        datasets = quality.default_datasets(
            M=args.M, K=args.K, seed=args.seed, real=args.dataset in ("real", "all"))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.dataset == "real":
        datasets.pop("synthetic")
    if args.weights:
        try:
            w = load_tensor(args.weights, QT_F32).data
            datasets[Path(args.weights).name] = rotate(w, args.rotate) if args.rotate is not None \
                else w
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    table = quality.quality_table(datasets, fmts)
    rows = quality.direction_rows(table)
    if args.json:
        options.write_json({"table": [q.to_dict() for q in table],
               "rows": [r.to_dict() for r in quality.table_rows(table) + rows]}, args.json)
    if args.json != "-":
        print(quality.format_table(table))
        for r in rows:
            print(f"{r.status.value.upper():5} {r.check} {r.kernel}: {r.message}")
    return 0 if all(r.status.ok for r in rows) else 1


def _run_bench(args: argparse.Namespace) -> int:
    from hqval.quality import bench_codec

    fmt = _format(args.bench_format)
    M, K = _shape(args.shape)
    res = bench_codec(qt=fmt.qt, M=M, K=K, repeats=max(1, args.repeats))
    res["target_s"] = args.target_s
    res["met"] = res["total_s"] <= args.target_s
    if args.json:
        options.write_json(res, args.json)
    if args.json != "-":
        print(f"{res['format']} (qt={res['qt']}) {M}x{K}: encode {res['encode_s']:.3f} s + "
              f"decode {res['decode_s']:.3f} s = {res['total_s']:.3f} s "
              f"({res['weights_per_s'] / 1e6:.0f} M weights/s; best of "
              f"{', '.join(f'{t:.3f}' for t in res['all_total_s'])} s; "
              f"cpus {res['cpus']}) -> target {args.target_s:.1f} s "
              f"{'met' if res['met'] else 'MISSED'}")
    return 0 if res["met"] else 1
