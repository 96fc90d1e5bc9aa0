#!/usr/bin/env bash
# Record finished runs of study mt10-b1280 in this checkout: in the study's fixed checkout
# (continue.sh), restore the named stages from the run cache (their dvc.lock entries, made by the
# study's code), push their outputs to the study's remote, and bring dvc.lock and remote/ here.
#   studies/mt10-b1280/harvest.sh train@mt10_mtsac-1 evaluate@mt10_mtsac-1 ...
set -euo pipefail
[ $# -gt 0 ] || { echo "error: stages: name the finished stages (train@... evaluate@...)" >&2; exit 2; }
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
wt=${STUDY_CHECKOUT:-$root/../study-run}
study=studies/mt10-b1280
[ -d "$wt/$study" ] || { echo "error: $wt: no checkout of the study (run continue.sh first)" >&2; exit 2; }
cd "$wt/$study"
export PYTHONPATH="$wt/src" PATH="$root/.venv/bin:$PATH" DVC_NO_ANALYTICS=1
dvc repro --single-item "$@"
dvc push -r mt10-b1280 "$@"
cp dvc.lock "$root/$study/dvc.lock"
mkdir -p "$root/$study/remote" && cp -r remote/. "$root/$study/remote/"
echo "recorded: $*; commit $study/dvc.lock and $study/remote in $root"
