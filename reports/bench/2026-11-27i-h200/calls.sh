#!/usr/bin/env bash
# This lease's calls, from the project root on the GPU machine with .whl/ and .lease/ carried:
#   tests            setup, then the CUDA tests
#   node VEC N G S   the benchmark's node section: the MT10 table's five rows x N seeds as
#                    separate processes, then as groups of G seeds (PTSL_VECTOR=VEC), S s each
set -uo pipefail
L=/tmp/lease; OUT=${OUT:-/tmp/lease/out}; mkdir -p "$L" "$OUT"
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 PTSL_TRACKING=off PTSL_DEVICE=cuda
bash .lease/lease.sh setup > "$L/setup.out" 2>&1 || { cat "$L/setup.out"; exit 1; }
tail -3 "$L/setup.log"
case "$1" in
tests)
  timeout ${T:-240} python3 -m pytest -o addopts="" -p no:cacheprovider -q -rA -m cuda \
    tests/unit/test_cuda.py 2>&1 | tee "$L/test_cuda.log" | tail -15 ; name=tests ;;
node)
  name=node-$2-$3x$4
  PTSL_VECTOR=$2 timeout ${T:-400} python3 -c "import sys; sys.argv = ['bench', '--only', 'node', '--node-seeds', '$3', '--node-group-size', '$4', '--node-seconds', '${5:-50}', '--out', '$L/$name']; from ptsl.tools.bench.__main__ import main; main()" \
    2>&1 | tee "$L/$name.log" | grep -v -i warn | tail -30 ;;
esac
tar -czf "$OUT/lease-$name.tgz" -C "$L" --exclude=out --exclude=site . ; ls -la "$OUT"
