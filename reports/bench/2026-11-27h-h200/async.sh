#!/usr/bin/env bash
# The node's 15 runs with async environments: as 5 groups of 3 seeds, then as 15 processes.
set -uo pipefail
L=/tmp/lease; OUT=${OUT:-/tmp/lease/out}; mkdir -p "$L/async" "$OUT"
bash .lease/lease.sh setup > "$L/setup.out" 2>&1 || { cat "$L/setup.out"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 PTSL_TRACKING=off PTSL_DEVICE=cuda
export PTSL_VECTOR=async PTSL_THREADS=1 OMP_NUM_THREADS=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/ptsl-mps-0 CUDA_MPS_LOG_DIRECTORY=$L/mps; mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
EXPS="mt10_mtsac mt10_softmod mt10_care mt10_care_ptsl mt10_sac_ptsl"
for form in groups processes; do
  t0=$(date +%s)
  for e in $EXPS; do
    if [ $form = groups ]; then timeout 200 python3 .lease/group_run.py $e 1,2,3 ${S:-60} > $L/async/$form-$e.log 2>&1 &
    else for s in 1 2 3; do timeout 200 python3 .lease/group_run.py $e $s ${S:-60} > $L/async/$form-$e-$s.log 2>&1 & done; fi
  done
  ( while sleep 10; do echo "$form t=$(( $(date +%s) - t0 )) $(cat /proc/loadavg) gpu=$(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader)"; done ) >> $L/async/poll.log &
  poller=$!
  wait $(jobs -p | grep -v $poller) 2>/dev/null; kill $poller
  echo "== $form ($(( $(date +%s) - t0 )) s)"
  python3 - $L/async $form <<'PY'
import glob, json, sys
tot = 0.0
for f in sorted(glob.glob(f"{sys.argv[1]}/{sys.argv[2]}-*.log")):
    lines = [l for l in open(f) if l.startswith("{")]
    if not lines: print(f, "NO RESULT:", open(f).read()[-300:]); continue
    r = json.loads(lines[-1]); n = len(r["seeds"]); tot += n * r["vector_steps_per_s"]
    print(f"{r['experiment']} seeds {r['seeds']}: {r['vector_steps_per_s']:.1f} each")
print(f"{sys.argv[2]}: all 15 runs together {tot:.1f} vector steps/s")
PY
done
grep -E "t=(40|50|60|70)" $L/async/poll.log
echo quit | nvidia-cuda-mps-control
tar -czf "$OUT/lease-async.tgz" -C "$L" --exclude=out . ; ls -la "$OUT"
