"""``hqval doctor``: what this machine can run.  Lists each outside piece (LLVM 19
toolchain, ROCm and hip-python, the CUDA driver and NVRTC, Chromium, the code object cache)
as found or missing, and what a missing one disables.

Exit 0 when everything compiling needs is there (the hardware backends are optional: the
emulator runs every gfx arch without them); 1 when the toolchain is incomplete.
"""

from __future__ import annotations

import argparse

from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for opt in (options.CACHE_DIR, options.JSON_PRINT):
        opt.add_to(parser)


def run(args: argparse.Namespace) -> int:
    from hqval.doctor import diagnose

    findings = diagnose(args.cache_dir)
    if args.json:
        options.write_json([f.to_dict() for f in findings], args.json)
    else:
        width = max(len(f.piece) for f in findings)
        for f in findings:
            print(f"{'found' if f.found else 'MISSING':7}  {f.piece:{width}}  {f.detail}")
            if not f.found:
                print(f"{'':7}  {'':{width}}  disables: {f.disables}")
    broken = [f.piece for f in findings if f.required and not f.found]
    if broken and not args.json:
        print(f"hqval doctor: cannot compile: {', '.join(broken)} missing")
    return 1 if broken else 0
