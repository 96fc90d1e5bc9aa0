# Sourced by the study scripts beside it: the project root, the study's folder, the commit its
# runs train on and the fixed checkout of it (docs/studies.md#how-a-long-study-runs).
#   STUDY_COMMIT    the code the runs train on (default: the commit that added the study's
#                   PREREGISTRATION.md, the registration commit)
#   STUDY_CHECKOUT  where the checkout of that commit goes (default: ../study-<name>)
[ $# -gt 0 ] || { echo "error: study: name a study (a folder under studies/)" >&2; exit 2; }
name=$1; shift
root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
study=studies/$name
[ -f "$root/$study/params.yaml" ] || {
  echo "error: study: no $study/params.yaml; allowed: $(cd "$root/studies" && ls -d */ | tr -d / | tr '\n' ' ')" >&2; exit 2; }
commit=${STUDY_COMMIT:-$(git -C "$root" log --diff-filter=A --format=%h --abbrev=7 -- "$study/PREREGISTRATION.md" | tail -1)}
[ -n "$commit" ] || { echo "error: $study/PREREGISTRATION.md: not committed; allowed: a registered study (commit it first)" >&2; exit 2; }
wt=${STUDY_CHECKOUT:-$root/../study-$name}
export PATH="$root/.venv/bin:$PATH" DVC_NO_ANALYTICS=1
