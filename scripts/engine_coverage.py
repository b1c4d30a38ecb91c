#!/usr/bin/env python3
"""Build an engine's kernel sources for every arch and list what the emulator cannot run.

    python3 scripts/engine_coverage.py ENGINE/kernels/src --out DIR [--match REGEX]

Each ``name.hip`` is built for every arch in matrices/arches.yaml with hqval's own
compiler flags and include path (the HIP compatibility headers when ROCm's are not in
use), ``name.gfxN.hip`` / ``name.gfxNN.hip`` variants only for the arches they name, and
wave64 sources are skipped (hqval's kernels are wave32).  Then ``hqval emu --coverage``
scans every object built.  Prints how many sources built per arch, the compiler's first
error per failing build (grouped), and every kernel with an opcode the emulator lacks.
Exit 1 if any kernel has one.  Nothing of the engine is copied into this repository.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hqval.matrix import load_arches
from hqval.toolchain import find_compiler


def variant_of(src: Path) -> str | None:
    """``gemv.gfx1030.hip`` -> ``gfx1030``; ``gemv.gfx12.hip`` -> ``gfx12``; else None."""
    parts = src.name.split(".")
    return parts[1] if len(parts) > 2 and parts[1].startswith("gfx") else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, help="the engine's kernel source directory")
    ap.add_argument("--out", type=Path, required=True, help="where the code objects go")
    ap.add_argument("--match", default=r"^(gemv|gemm|fused_qkv|fused_gate_up)",
                    help="regex on the file name (default: the GEMV/GEMM family)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    compiler = find_compiler()
    arches = list(load_arches())
    args.out.mkdir(parents=True, exist_ok=True)
    sources = sorted(p for p in args.src.glob("*.hip")
                     if re.search(args.match, p.name) and "wave64" not in p.name)
    jobs = [(src, arch) for src in sources for arch in arches
            if variant_of(src) is None or arch.startswith(variant_of(src) or "")]

    def build(job: tuple[Path, str]) -> tuple[Path, str, Path | None, str]:
        src, arch = job
        out = args.out / f"{src.stem}.{arch}.co"
        cmd = [compiler.path, *compiler.flags(arch),
               *(a for d in compiler.compat_includes for a in ("-isystem", str(d))),
               f"-I{args.src}", str(src), "-o", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), "")
        return src, arch, out if proc.returncode == 0 else None, first

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(build, jobs))
    built = [co for _, _, co, _ in results if co is not None]
    per_arch = collections.Counter(arch for _, arch, co, _ in results if co is not None)
    errors = collections.Counter(re.sub(r"^.*?error: ", "error: ", first)
                                 for _, _, co, first in results if co is None)
    print(f"{len(sources)} sources, {len(jobs)} builds, {len(built)} built")
    for arch in arches:
        print(f"  {arch}: {per_arch[arch]} built")
    for msg, n in errors.most_common():
        print(f"  {n:4d} x {msg[:140]}")
    if not built:
        return 1
    proc = subprocess.run([sys.executable, "-m", "hqval", "emu", "--coverage",
                           *map(str, built)], capture_output=True, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    missing = [ln for ln in lines if not ln.endswith(" runs")]
    print(f"coverage: {len(lines) - len(missing)} kernels run, {len(missing)} with an "
          "opcode the emulator lacks")
    for ln in missing:
        print("  " + ln)
    if proc.returncode not in (0, 1):
        print(proc.stderr.strip(), file=sys.stderr)
        return 2
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
