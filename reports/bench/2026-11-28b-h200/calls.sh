#!/usr/bin/env bash
# This lease's three device calls, from the project root on the GPU machine with .whl/ and
# .lease/ carried (../shared/gpu/LEASE.md); the project at 4186ebf. Call 1's two benchmark JSON
# files did not come back (at most 8 files a call), so call 3 measured those sections again.
export PYTHONPATH=/tmp/site:$PWD/src PTSL_TRACKING=off PTSL_DEVICE=cuda
case "$1" in
1) bash .lease/lease.sh setup >/dev/null 2>&1; mkdir -p $OUT/r; cp /tmp/lease/setup.log $OUT/r/   # timeout 580
   timeout 150 python3 -m pytest -o addopts="" -p no:cacheprovider -q -rA -m cuda \
     tests/unit/test_cuda.py > $OUT/r/test_cuda.log 2>&1
   for s in updates:150 loop:100 gpu:130; do n=${s%:*}
     timeout ${s#*:} python3 -m ptsl.tools.bench --only $n --rounds 3 --loop-steps 300 \
       --out $OUT/r/$n > $OUT/r/bench-$n.log 2>&1
   done ;;
2) mkdir -p $OUT/s                                                                                  # timeout 240
   timeout 200 python3 -m ptsl.tools.bench --only study --study studies/mt10-b1280 --rounds 3 \
     --out $OUT/s > $OUT/s/bench-study.log 2>&1 ;;
3) R=/tmp/r3; mkdir -p $R                                                                           # timeout 220
   for s in updates:110 loop:90; do n=${s%:*}
     timeout ${s#*:} python3 -m ptsl.tools.bench --only $n --rounds 3 --loop-steps 300 \
       --out $R/$n > $R/bench-$n.log 2>&1
   done; tar -czf $OUT/r3.tgz -C $R . ;;
esac
