#!/usr/bin/env bash
# old (before the segment spins) vs new harness, interleaved: A/A and cells at hot
# 4096x17408 and 17408x5120, no torch, 2 rounds; then the device chain test.
set -u
root=$PWD; out=${OUT:-/tmp/out}
export PYTHONUNBUFFERED=1
for round in 1 2 3; do
  for tree in old tree; do
    echo "== $tree round $round $(date -u +%T)"
    (cd $root/out/fleet/$tree && PYTHONPATH=$PWD:$root/out/fleet/site timeout 200 python3 -m hqval bench \
      --backend cuda --arch sm_90 --rows 1 --no-torch --no-copy --mode hot --shape 4096x17408 \
      --shape 17408x5120 --json $out/aa-$tree-$round.json > $out/aa-$tree-$round.log 2>&1; echo "rc $?")
    python3 - "$out/aa-$tree-$round.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    if r["check"].startswith(("timing_aa", "timing_hot")):
        print(f'{r["check"]:16s} {r["kernel"]:32s} {r["status"]:6s} {r["message"][:90]}')
PY
  done
done
