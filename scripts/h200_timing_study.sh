#!/usr/bin/env bash
# Device run of the timing study (issue 13): the hot-mode placement experiment, then the
# stability study (calibration + clean re-runs), each part's output under OUT.
# Usage (CUDA host with cuda-bindings, NVRTC, numpy, pyyaml):
#   scripts/h200_timing_study.sh OUT STUDY_DIR [placement|study|both] [budget_s]
set -uo pipefail
out=${1:?OUT}; study=${2:?STUDY_DIR}; what=${3:-both}; budget=${4:-400}
mkdir -p "$out"
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}. PYTHONUNBUFFERED=1
q=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu
nvidia-smi --query-gpu=$q --format=csv > "$out/smi.txt"
if [ "$what" != study ]; then
  python3 scripts/timing_stability.py placement --out "$out" --allocations 8 \
    2> "$out/placement.log" | tee "$out/placement.md"
fi
if [ "$what" != placement ]; then
  python3 scripts/timing_stability.py measure --out "$study" --budget-s "$budget" \
    --ladder chain4,chain8,chain16,chain24,chain32,chain48,chain64,chain96,chain128,chain192,chain256,extra6,extra8,slow8,slow16 \
    2> "$out/measure.log"; echo "measure rc $?"
  tar czf "$out/study.tgz" "$study"
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/smi_after.txt"
