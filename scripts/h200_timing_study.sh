#!/usr/bin/env bash
# Device run of the timing study (docs/timing.md), each part's output under OUT:
#   placement  hot mode unprimed vs primed over 8 allocation sets, 5 shapes, + cold
#              (OUT/placement.json, .log; the table on stdout)
#   spacer     the same at other addresses (a spacer allocation under each set), hot,
#              8192x5120 and 17408x5120 (OUT/spacer.json, .log)
#   study      the stability study in STUDY: calibration ladder + 20 clean re-runs in one
#              process (OUT/study.tgz, OUT/measure.log)
#   procs      20 clean re-runs, one process each, in STUDY-procs (OUT/procs.tgz, .log)
#   mprocs     with timing mutants: the calibration ladder in one process, then up to 20
#              re-runs one process each (mutants included), stopping before MPROCS_S
#              seconds (default 300); modes MPROCS_MODES (default "hot"; "hot cold" for
#              both), shapes MPROCS_SHAPES (default: the script's, 17408x5120 and
#              27648x5120) (OUT/mprocs.tgz, OUT/mprocs.log)
# Usage (CUDA host with cuda-bindings, NVRTC, numpy, pyyaml):
#   scripts/h200_timing_study.sh OUT STUDY part... [BUDGET_S=400 in the environment]
set -uo pipefail
out=${1:?OUT}; study=${2:?STUDY_DIR}; shift 2
budget=${BUDGET_S:-400}
LADDER=chain2,chain4,chain6,chain8,chain12,chain16,chain24,chain32,chain48,chain64,chain96,chain128,extra6,extra8,slow8,slow16
mkdir -p "$out"
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}. PYTHONUNBUFFERED=1
q=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu
nvidia-smi --query-gpu=$q --format=csv > "$out/smi.txt"
py=scripts/timing_stability.py
for part in "$@"; do
  echo "== $part $(date -u +%H:%M:%S)"
  case $part in
    placement) python3 $py placement --out "$out/pl" --allocations 8 2> "$out/placement.log"
               mv "$out/pl/placement.json" "$out/placement.json"; rmdir "$out/pl" ;;
    spacer) python3 $py placement --out "$out/sp" --allocations 8 --spacer-mb 37 --mode hot \
              --shape 8192x5120 --shape 17408x5120 2> "$out/spacer.log"
            mv "$out/sp/placement.json" "$out/spacer.json"; rmdir "$out/sp" ;;
    study) python3 $py measure --out "$study" --budget-s "$budget" --ladder "$LADDER" \
             2> "$out/measure.log"; echo "measure rc $?"
           tar czf "$out/study.tgz" "$study" ;;
    procs) for i in $(seq 1 20); do
             python3 $py measure --out "$study-procs" --no-mutants --reruns "$i"
           done 2> "$out/procs.log"; tar czf "$out/procs.tgz" "$study-procs" ;;
    mprocs) t0=$(date +%s); limit=${MPROCS_S:-300}; modes=()
            for m in ${MPROCS_MODES:-hot}; do modes+=(--mode "$m"); done
            for sh in ${MPROCS_SHAPES:-}; do modes+=(--shape "$sh"); done
            for i in $(seq 1 20); do
              [ $(( $(date +%s) - t0 )) -lt "$limit" ] || { echo "mprocs: time, $((i-1)) re-runs"; break; }
              python3 $py measure --out "$study-mprocs" "${modes[@]}" --ladder "$LADDER" --reruns "$i"
            done 2> "$out/mprocs.log"; tar czf "$out/mprocs.tgz" "$study-mprocs" ;;
    *) echo "unknown part $part (placement, spacer, study, procs, mprocs)"; exit 2 ;;
  esac
done
echo "== done $(date -u +%H:%M:%S)"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$out/smi.txt"
