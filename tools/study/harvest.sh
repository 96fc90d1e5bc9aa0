#!/usr/bin/env bash
# Record finished runs of a study in this checkout: in the study's fixed checkout (continue.sh),
# restore the named stages from the run cache (their dvc.lock entries, made by the study's code),
# push their outputs to the study's remote, and bring dvc.lock and remote/ here to be committed.
#   tools/study/harvest.sh <study> train@mt10_mtsac-1 evaluate@mt10_mtsac-1 ...
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ $# -gt 0 ] || { echo "error: stages: name the finished stages (train@... evaluate@...)" >&2; exit 2; }
[ -d "$wt/$study" ] || { echo "error: $wt: no checkout of the study (run continue.sh first)" >&2; exit 2; }
cd "$wt/$study"
export PYTHONPATH="$wt/src"
dvc repro --single-item "$@"
dvc push -r "$name" "$@"
cp dvc.lock "$root/$study/dvc.lock"
mkdir -p "$root/$study/remote" && cp -r remote/. "$root/$study/remote/"
echo "recorded: $*; commit $study/dvc.lock and $study/remote in $root"
