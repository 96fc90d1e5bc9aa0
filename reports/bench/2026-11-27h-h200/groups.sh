#!/usr/bin/env bash
# This lease's calls: `tests` (setup + the CUDA tests) and `node` (the benchmark's node section:
# the MT10 table's five rows x 3 seeds as 15 processes, then as 5 seed groups).
set -uo pipefail
L=/tmp/lease; OUT=${OUT:-/tmp/lease/out}; mkdir -p "$L" "$OUT"
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 PTSL_TRACKING=off PTSL_DEVICE=cuda
bash .lease/lease.sh setup > "$L/setup.out" 2>&1 || { cat "$L/setup.out"; exit 1; }
case "$1" in
tests)
  timeout ${T:-300} python3 -m pytest -o addopts="" -p no:cacheprovider -q -rA -m cuda \
    tests/unit/test_cuda.py 2>&1 | tee "$L/test_cuda.log" | tail -40 ;;
node)
  timeout ${T:-540} python3 -c "import sys; sys.argv = ['bench', '--only', 'node', '--node-seconds', '${S:-60}', '--node-seeds', '${N:-3}', '--out', '$L/bench']; from ptsl.tools.bench.__main__ import main; main()" \
    2>&1 | tee "$L/node.log" | tail -40 ;;
esac
tar -czf "$OUT/lease-$1.tgz" -C "$L" --exclude=out . ; ls -la "$OUT"
