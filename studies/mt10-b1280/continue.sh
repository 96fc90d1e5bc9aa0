#!/usr/bin/env bash
# Continue study mt10-b1280 with the code its runs are trained by (the pre-registration commit):
# a checkout fixed at it beside this one, given this checkout's record of the finished runs
# (dvc.lock, remote/), then the grid, which restores what is finished and trains the rest.
#   studies/mt10-b1280/continue.sh [grid flags]      (STUDY_CHECKOUT: where the checkout goes)
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
commit=5341168
wt=${STUDY_CHECKOUT:-$root/../study-run}
study=studies/mt10-b1280
[ -d "$wt" ] || git -C "$root" worktree add --detach "$wt" "$commit"
wt=$(cd "$wt" && pwd -P)
[ "$(git -C "$wt" rev-parse --short=7 HEAD)" = "$commit" ] || {
  echo "error: $wt is not at $commit; allowed: a checkout of the study's commit" >&2; exit 2; }
[ -f "$root/$study/dvc.lock" ] && cp "$root/$study/dvc.lock" "$wt/$study/dvc.lock"
mkdir -p "$wt/$study/remote"
[ -d "$root/$study/remote" ] && cp -r "$root/$study/remote/." "$wt/$study/remote/"
# The task branches along training, read from the runs' resume checkpoints by this checkout's
# code (docs/studies.md); it only reads, so no run changes. One watcher at a time.
mkdir -p "$wt/$study/.scratch/resume"
pgrep -f "ptsl.tools.branches_along --resume-dir $wt/" > /dev/null ||
  (cd "$root" && exec "$root/.venv/bin/python" -m ptsl.tools.branches_along \
     --resume-dir "$wt/$study/.scratch/resume" --out "$root/$study/along" \
     >> "$wt/$study/.scratch/along.log" 2>&1 < /dev/null &)
cd "$wt"
export PYTHONPATH="$wt/src" PATH="$root/.venv/bin:$PATH" DVC_NO_ANALYTICS=1
exec python -m ptsl.ops.grid --study mt10-b1280 "$@"
