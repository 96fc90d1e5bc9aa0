#!/usr/bin/env bash
# This lease's device call, from the project root on the GPU machine with .whl/ and .lease/
# carried (../shared/gpu/LEASE.md); the project at ec2c711, and in .lease/old the library and
# params.yaml of 10818ed (`git archive 10818ed src params.yaml`), the commit of the loop's first
# measurement on an H200. It asks two things:
#   1. one run's training loop alone, 10818ed against ec2c711 side by side: three alternating
#      rounds of the benchmark's loop section each, so that host and code are told apart (the
#      last lease read 0.80-0.98x the first measurement, two days apart);
#   2. the study section, mended after the last lease, on this machine: it must run its loop on
#      one CPU thread and say so.
# Everything lands in one tarball (at most 8 files come back).
set -u
export PTSL_TRACKING=off PTSL_DEVICE=cuda PYTHONUNBUFFERED=1
R=/tmp/r; mkdir -p $R
bash .lease/lease.sh setup > /dev/null 2>&1; cp /tmp/lease/setup.log $R/
top=$PWD
loop() {  # loop TREE NAME: the loop section of that tree's benchmark, one round
  (cd "$1" && PYTHONPATH=/tmp/site:$PWD/src timeout 90 python3 -m ptsl.tools.bench --only loop \
     --rounds 1 --loop-steps 300 --out $R/$2 > $R/$2.log 2>&1; echo "$2 rc=$? $SECONDS s" >> $R/order.log)
}
for i in 1 2 3; do
  if [ $((i % 2)) = 1 ]; then loop .lease/old old-$i; loop "$top" new-$i
  else loop "$top" new-$i; loop .lease/old old-$i; fi
done
PYTHONPATH=/tmp/site:$top/src timeout 200 python3 -m ptsl.tools.bench --only study \
  --study studies/mt10-b1280 --rounds 1 --out $R/study > $R/study.log 2>&1
echo "study rc=$? $SECONDS s" >> $R/order.log
tar -czf $OUT/call1.tgz -C $R .
