#!/usr/bin/env bash
# End a study once every run is recorded here (continue.sh, harvest.sh): show that this
# checkout's code writes the bytes the study's code wrote (each row 2,000 vector steps, seed 1,
# with the fixed checkout's src/ as the code before), record the study's stages against this code
# (their outputs' hashes kept), then restore its runs, evaluate and aggregate with this code as
# `make study-<study>` does. Nothing is recorded when a run is missing or a byte differs.
#   tools/study/finish.sh <study>
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ -d "$wt/src" ] || { echo "error: $wt: no checkout of the study's code (continue.sh makes it)" >&2; exit 2; }
cd "$root"
# Every training stage of the study and its evaluation have their dvc.lock entries (recorded runs).
python - "$study" <<'PY'
import sys
from pathlib import Path
from ptsl.ops.grid import evaluation_of, pipeline_stages, training_stages
from ptsl.ops.workspace import lock_stages
folder = Path(sys.argv[1])
names = pipeline_stages(folder)
runs = [s for t in training_stages(names) for s in (t, *evaluation_of(t, names))]
recorded = lock_stages(folder)
missing = [s for s in runs if s not in recorded]
if missing:
    print(f"error: {folder}/dvc.lock: {len(missing)} stage(s) not recorded yet (first: "
          f"{missing[0]}); allowed: a study whose every run is recorded (harvest.sh)", file=sys.stderr)
    sys.exit(2)
PY
python -m ptsl.tools.same_bytes --params "$study/params.yaml" --steps 2000 --before "$wt" \
  --out "$study/same_bytes.json"
python -m ptsl.ops.relock --study "$name" --all
make "study-$name"
echo "finished: commit $study/dvc.lock, $study/same_bytes.json, $study/reports and README.md"
