#!/usr/bin/env bash
# Continue a study with the code its runs train on (the registration commit): a checkout fixed
# at it beside this one, given this checkout's record of the finished runs (dvc.lock, remote/),
# then the grid, which restores what is finished and trains the rest, seed-major.
#   tools/study/continue.sh <study> [grid flags]
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ -d "$wt" ] || git -C "$root" worktree add --detach "$wt" "$commit"
wt=$(cd "$wt" && pwd -P)
[ "$(git -C "$wt" rev-parse --short=7 HEAD)" = "$commit" ] || {
  echo "error: $wt is not at $commit; allowed: a checkout of the study's commit" >&2; exit 2; }
[ -f "$root/$study/dvc.lock" ] && cp "$root/$study/dvc.lock" "$wt/$study/dvc.lock"
mkdir -p "$wt/$study/remote"
[ -d "$root/$study/remote" ] && cp -r "$root/$study/remote/." "$wt/$study/remote/"
# The task branches along training, read from the runs' resume checkpoints by this checkout's
# code (docs/studies.md); it only reads, so no run changes. One watcher a study, and only for a
# study with a PTSL row.
mkdir -p "$wt/$study/.scratch/resume"
if python -c "import sys, yaml; sys.exit(not (yaml.safe_load(open(sys.argv[1])).get('runs') or {}).get('ptsl'))" \
     "$root/$study/params.yaml" &&
   ! pgrep -f "ptsl.tools.branches_along --resume-dir $wt/" > /dev/null; then
  (cd "$root" && exec python -m ptsl.tools.branches_along \
     --resume-dir "$wt/$study/.scratch/resume" --out "$root/$study/along" \
     >> "$wt/$study/.scratch/along.log" 2>&1 < /dev/null &)
fi
cd "$wt"
export PYTHONPATH="$wt/src"
exec python -m ptsl.ops.grid --study "$name" "$@"
