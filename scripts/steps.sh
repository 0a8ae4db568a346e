#!/usr/bin/env bash
# Runs make targets one after another, stopping at the first that fails, and prints how long
# each took (as it ends, and as a table at the end), so a slow step shows in CI's log.
#   scripts/steps.sh ui unit ui-test ...
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
names=() secs=() start=$(date +%s) rc=0
for target in "$@"; do
  t0=$(date +%s)
  make --no-print-directory "$target"; rc=$?
  names+=("$target") secs+=($(( $(date +%s) - t0 )))
  echo "steps: $target $([[ $rc == 0 ]] && echo passed || echo FAILED) in ${secs[-1]} s"
  [[ $rc == 0 ]] || break
done
echo "steps: ------------------------------"
for i in "${!names[@]}"; do printf 'steps: %-14s %5d s\n' "${names[$i]}" "${secs[$i]}"; done
printf 'steps: %-14s %5d s\n' total $(( $(date +%s) - start ))
exit $rc
