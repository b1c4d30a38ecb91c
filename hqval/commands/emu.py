"""``hqval emu``: run manifest kernels on the RDNA wave interpreter against the numpy
oracle (error, tolerance, dynamic instruction counts), or ``--bench``: the interpreter's
speed targets (512x4096 qt=44 GEMV on gfx1100 <= 1.5 s; 256x1024x32 prefill GEMM on
gfx1100 and gfx1201 <= 10 s).  Run under ``taskset -c 0`` to measure one core."""

from __future__ import annotations

import argparse
from typing import Any

from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.ARCH.add_to(parser)
    options.MANIFEST.add_to(parser)
    options.CACHE_DIR.add_to(parser)
    parser.add_argument("--kernel", action="append", metavar="NAME",
                        help="manifest kernel (repeatable; default: every gemv/gemm kernel "
                             "that applies to the arch)")
    parser.add_argument("-M", type=options.positive_int(options.EMU_MAX_ROWS), default=None,
                        help="rows (default 64 gemv, 32 gemm)")
    parser.add_argument("-K", type=options.positive_int(options.EMU_MAX_K), default=1024,
                        help="K, a multiple of 256 (default 1024)")
    parser.add_argument("-N", type=options.positive_int(options.EMU_MAX_N), default=32,
                        help="GEMM batch (default 32)")
    for opt in (options.SEED, options.JSON_PRINT):
        opt.add_to(parser)
    parser.add_argument("--bench", action="store_true",
                        help="time the issue's benchmark launches (exit 1 over target)")
    parser.add_argument("--repeats", type=options.positive_int(1000), default=3,
                        help="--bench: best of N (default 3)")
    parser.add_argument("--trace", type=options.nonneg_int(), default=0, metavar="N",
                        help="print the first N executed instructions of each launch "
                             "(address, waves, instruction)")
    parser.add_argument("--coverage", action="store_true",
                        help="do not run: list, per kernel and arch, the instructions the "
                             "interpreter has no semantics for (exit 1 if any); of the code "
                             "objects given as OBJECTS, or of the manifest kernels for --arch")
    parser.add_argument("--isa-coverage", action="store_true",
                        help="the share of LLVM's opcode table for each --arch that the "
                             "interpreter implements (decoded by llvm-mc-19)")
    parser.add_argument("objects", nargs="*", metavar="OBJECTS",
                        help="--coverage: AMDGPU code objects (.co/.hsaco ELF files)")


def run(args: argparse.Namespace) -> int:
    from hqval.cli import UsageError
    from hqval.emu import EmuError
    from hqval.emu.runner import bench, run_kernel
    from hqval.manifest import load_manifest
    from hqval.result import Row, Status

    manifest = load_manifest(args.manifest)
    rows: list[Row] = []
    status = 0
    if args.objects and not args.coverage:
        raise UsageError(f"{args.objects[0]}: code objects are read by --coverage only "
                         f"(hqval emu --coverage OBJECTS...)")
    if args.coverage and args.objects:
        return _object_coverage(args)
    if args.coverage:
        return _coverage(args, manifest)
    if args.isa_coverage:
        return _isa_coverage(args)
    if args.bench:
        for r, target in bench(manifest, repeats=max(1, args.repeats)):
            oracle = r.row()
            rows.append(oracle)
            rows.append(Row(
                kind="timing", check="emu_speed", kernel=r.kernel, arch=r.arch, backend="emu",
                status=Status.PASS if r.seconds <= target else Status.FAIL,
                measured=r.seconds, tolerance=target,
                derivation="the interpreter's speed target on one core",
                details=dict(oracle.details)))
            print(f"{r.kernel:32s} {r.arch:8s} {'x'.join(map(str, r.shape)):>14s} "
                  f"{r.seconds:7.3f} s (target {target:g} s)  "
                  f"{r.rate / 1e6:6.2f} M wave-instr/s  err {r.error:.1e}")
            if r.seconds > target or not r.ok:
                status = 1
    else:
        if args.K < 256 or args.K % 256:
            raise UsageError(f"-K {args.K}: must be a positive multiple of 256")
        rows_m = args.M or 64
        if rows_m * args.K > options.EMU_MAX_WEIGHTS:
            raise UsageError(f"-M {rows_m} -K {args.K}: {rows_m * args.K} weights is over the "
                             f"emulator's {options.EMU_MAX_WEIGHTS}; give a smaller shape")
        if not args.arch:
            raise UsageError("--arch is required (e.g. --arch gfx1100; 'all' for every arch)")

        arches = _emulated(args.arch)
        names = args.kernel
        for n in names or []:
            try:
                manifest.by_name(n)
            except KeyError as exc:  # names the close match
                raise UsageError(f"--kernel {exc.args[0]}") from None
        for arch in arches:
            specs = ([manifest.by_name(n) for n in names] if names else
                     [s for s in manifest.kernels if s.kind in ("gemv", "gemv_qkv", "gemm")
                      and s.applies_to(arch) and not s.is_mutant])
            for spec in specs:
                try:
                    r = run_kernel(spec, arch.name, M=args.M, K=args.K, N=args.N,
                                   seed=args.seed, trace=_tracer(args.trace),
                                   cache_dir=args.cache_dir)
                except (EmuError, RuntimeError, ValueError) as exc:
                    print(f"{spec.name:32s} {arch.name:8s} ERROR {exc}")
                    rows.append(Row(kind="check", check="emu_oracle", kernel=spec.name,
                                    arch=arch.name, backend="emu", status=Status.ERROR,
                                    message=str(exc)))
                    status = 1
                    continue
                rows.append(r.row())
                exact = "" if r.bit_mismatches is None else (
                    " bit-exact" if r.bit_mismatches == 0 else f" {r.bit_mismatches} differ")
                print(f"{r.kernel:32s} {r.arch:8s} {'PASS' if r.ok else 'FAIL'} "
                      f"err {r.error:.2e} (tol {r.tolerance:.1e}){exact}  {r.seconds:.3f} s  "
                      f"per wave: " + " ".join(f"{k}={v:.0f}" for k, v in r.per_wave.items()
                                               if v))
                if not r.ok:
                    status = 1
    if args.json:
        options.write_json({"rows": [row.to_dict() for row in rows]}, args.json)
    return status


def _object_coverage(args: argparse.Namespace) -> int:
    """Scan code objects (every kernel, its device functions) before anything runs."""
    from pathlib import Path

    from hqval import safeio
    from hqval.cli import UsageError
    from hqval.emu import EmuError
    from hqval.emu.coverage import scan_object
    from hqval.toolchain import MAX_INPUT_BYTES

    scans = []
    for name in args.objects:
        path = Path(name)
        if not path.exists():
            raise UsageError(f"{name}: no such code object file")
        # bounded, regular files only: a FIFO or device is refused unopened, a huge
        # (sparse) file unread (a SafeIOError is one line, exit 2)
        data = safeio.read_bytes(path, limit=MAX_INPUT_BYTES, what="code object")
        try:
            scans.append((name, scan_object(data)))
        except EmuError as exc:
            raise UsageError(f"{name}: {exc} (give an AMDGPU code object: clang "
                             f"--cuda-device-only --no-gpu-bundle-output)") from None
    status = 0
    rows: list[dict[str, Any]] = []
    for name, scan in scans:
        for k in scan.kernels:
            rows.append({"object": name, "kernel": k.kernel, "arch": scan.arch,
                         "unsupported": k.mnemonics})
            print(f"{name} {k.kernel} {scan.arch} "
                  + ("runs" if not k.mnemonics else "unsupported: " + ", ".join(k.mnemonics)))
            if k.mnemonics:
                status = 1
    if args.json:
        options.write_json({"coverage": rows}, args.json)
    return status


def _isa_coverage(args: argparse.Namespace) -> int:
    from hqval.cli import UsageError
    from hqval.emu.coverage import isa_coverage

    if not args.arch:
        raise UsageError("--isa-coverage needs --arch (e.g. --arch all)")
    rows = []
    for arch in _emulated(args.arch):
        cov = isa_coverage(arch.name)
        rows.append({"arch": arch.name, "implemented": len(cov.implemented),
                     "opcodes": cov.total, "missing": list(cov.missing)})
        print(f"{arch.name:8s} {len(cov.implemented):4d} / {cov.total:4d} opcodes "
              f"({100 * len(cov.implemented) / cov.total:.0f}%)")
    if args.json:
        options.write_json({"isa_coverage": rows}, args.json)
    return 0


def _coverage(args: argparse.Namespace, manifest: Any) -> int:
    from hqval.cli import UsageError
    from hqval.emu import Machine
    from hqval.toolchain import compile_kernel

    if not args.arch:
        raise UsageError("--coverage needs --arch (e.g. --arch all)")
    status = 0
    rows: list[dict[str, Any]] = []
    for arch in _emulated(args.arch):
        for spec in manifest.kernels:
            if (args.kernel and spec.name not in args.kernel) or not spec.applies_to(arch):
                continue
            res = compile_kernel(spec, arch.name, args.cache_dir)
            if not res.ok or res.code_object is None:
                print(f"{spec.name:32s} {arch.name:8s} does not compile: {res.message}")
                status = 1
                continue
            missing = Machine(arch.name).load(res.code_object.read_bytes()).unsupported(
                spec.symbol)
            names = sorted({m for m, _, _ in missing})
            rows.append({"kernel": spec.name, "arch": arch.name, "unsupported": names})
            print(f"{spec.name:32s} {arch.name:8s} "
                  + ("runs" if not names else "unsupported: " + ", ".join(names)))
            if names:
                status = 1
    if args.json:
        options.write_json({"coverage": rows}, args.json)
    return status


def _emulated(names: list[str]) -> list[Any]:
    from hqval.cli import UsageError
    from hqval.emu.machine import ARCH_GEN
    from hqval.matrix import gfx_arches

    try:
        arches = gfx_arches(names, "the emulator")
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    bad = [a.name for a in arches if a.name not in ARCH_GEN]
    if bad:
        raise UsageError(f"--arch {', '.join(bad)}: the interpreter models RDNA targets only "
                         f"({', '.join(sorted(ARCH_GEN))})")
    return arches


def _tracer(limit: int) -> Any:
    if limit <= 0:
        return None
    seen = [0]

    def trace(addr: int, text: str, waves: int) -> None:
        if seen[0] < limit:
            print(f"  {addr:#08x} [{waves:4d} waves] {text}")
        seen[0] += 1
    return trace
