#!/usr/bin/env bash
# This lease's three device calls, from the project root on the GPU machine with .whl/ and
# .lease/ carried (../shared/gpu/LEASE.md). Call 3 reads the study's params.yaml, so its runs
# have mt10-b1280's sizes (widths 104-163, PTSL rank 16, batch 1,280).
case "$1" in
1) bash .lease/lease.sh setup && bash .lease/lease.sh tests ;;                  # timeout 240
2) SECONDS_RUN=330 bash .lease/lease.sh node ;;                                  # timeout 420
3) [ -f /tmp/site/.done ] || bash .lease/lease.sh setup >/dev/null 2>&1          # timeout 230
   cd studies/mt10-b1280 && export PYTHONPATH=/tmp/site:$PWD/../../src PTSL_TRACKING=off \
     PTSL_DEVICE=cuda PTSL_THREADS=1 OMP_NUM_THREADS=1
   for e in mt10_mtsac mt10_care mt10_care_w104 mt10_care_ptsl; do
     timeout 170 python3 ../../.lease/lease_run.py $e --steps 100000 --out $OUT/b1280 > $OUT/$e.log 2>&1 &
   done; wait; tail -n 4 $OUT/*.log ;;
esac
