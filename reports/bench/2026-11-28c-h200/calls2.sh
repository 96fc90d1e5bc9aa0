#!/usr/bin/env bash
# The lease's second device call: call 1's side-by-side failed on 10818ed's side (its tree lacked
# data/task_embeddings, which CARE's rows read), so .lease/old now holds it too. The 348 s of
# device time left allow three alternating loop sections (old, new, old), each record copied to
# $OUT as soon as it is written, so that a cut-off call still returns the pairs before it.
set -u
export PTSL_TRACKING=off PTSL_DEVICE=cuda PYTHONUNBUFFERED=1
bash .lease/lease.sh setup > /dev/null 2>&1
top=$PWD
loop() {  # loop TREE NAME: the loop section of that tree's benchmark, one round
  (cd "$1" && PYTHONPATH=/tmp/site:$PWD/src timeout 100 python3 -m ptsl.tools.bench --only loop \
     --rounds 1 --loop-steps 300 --out /tmp/r/$2 > /tmp/r/$2.log 2>&1
   echo "$2 rc=$? $SECONDS s" >> $OUT/order.log
   cp /tmp/r/$2/cuda.json $OUT/$2.json; tail -3 /tmp/r/$2.log >> $OUT/order.log)
}
mkdir -p /tmp/r
loop .lease/old old-4; loop "$top" new-4; loop .lease/old old-5
