#!/usr/bin/env bash
# Rerunnable H200 timing run (device machine of the `run` tool, or any CUDA host with
# cuda-bindings, NVRTC, numpy, pyyaml and torch).  Usage:
#   reports/checkpoints/h200_bench.sh OUTDIR [bench args...]
# Writes OUTDIR/smi.txt, OUTDIR/bench.json, OUTDIR/run/ (envelope + rows) and logs.
set -uo pipefail
out=${1:?usage: h200_bench.sh OUTDIR [bench args...]}; shift
mkdir -p "$out"
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu --format=csv | tee "$out/smi.txt"
python3 - "$@" <<'PY' 2>&1 | tee "$out/bench.log"
import argparse, sys
from hqval.commands import bench
p = argparse.ArgumentParser(prog="hqval bench")
bench.add_arguments(p)
sys.exit(bench.run(p.parse_args(sys.argv[1:])))
PY
