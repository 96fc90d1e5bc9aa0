#!/usr/bin/env bash
# The fourth lease of 2026-11-26 (15 min): CARE+PTSL alone to 100k (seed 1, captured), the CUDA tests beside it.
#   bash .lease/one.sh start SECONDS   |   bash .lease/one.sh wait SECONDS
set -uo pipefail
L=/tmp/lease; mkdir -p $L/runs
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 PTSL_TRACKING=off PTSL_DEVICE=cuda
pk() { tar -czf "$OUT/lease-$1.tgz" -C "$L" . 2>/dev/null; }
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
show() { for f in $L/runs/*.log; do echo "== $f"; tr '\r' '\n' < $f | grep -v '^$' | tail -n 3; done; ls $L/runs; }
if [ "$1" = start ]; then
  el setup
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  { nvidia-smi; nproc; python3 -c "import torch, pydantic, metaworld, mujoco, ptsl; from ptsl.core import loop; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())"; } > $L/setup.log 2>&1
  tail -2 $L/setup.log
  el "start run"
  PTSL_VECTOR=async PTSL_THREADS=1 OMP_NUM_THREADS=1 setsid nohup python3 .lease/lease_run.py mt10_care_ptsl \
    --steps 100000 --out $L/runs > $L/runs/mt10_care_ptsl-1.log 2>&1 < /dev/null &
  el tests
  timeout 200 python3 -m pytest -o addopts="" -p no:cacheprovider -q -rA -m cuda tests/unit/test_cuda.py > $L/test_cuda.log 2>&1
  echo "tests rc=$?"; tail -4 $L/test_cuda.log; pk a
fi
end=$(( t0 + $2 ))
while [ $(date +%s) -lt $end ] && ! ls $L/runs/*.done.json >/dev/null 2>&1; do sleep 5; done
el "stop waiting"; show; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv; pk b
