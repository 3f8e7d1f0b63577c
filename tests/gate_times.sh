#!/usr/bin/env bash
# Print the durations `make test` wrote to TIMES (lines "gate<TAB>seconds<TAB>result"; the molecule gate's own
# lines are its scenarios; kernel-cache runs in the background beside the gates after bootstrap) and the whole
# run's wall time: what each gate and scenario costs, so that the next change sees what it adds.
set -euo pipefail
times=${1:?usage: bash tests/gate_times.sh TIMES [WALL_SECONDS]}
wall=${2:-}
[ -s "$times" ] || { echo "no gate ran (nothing in $times)"; exit 0; }
echo
echo "make test: duration of each gate and scenario"
awk -F'\t' '{
  note = ($1 == "kernel-cache") ? "(in the background)" : ""
  printf "  %-28s %6d s  %5.1f min  %s %s\n", $1, $2, $2 / 60, $3, note
}' "$times"
if [ -n "$wall" ]; then
  printf "  %-28s %6d s  %5.1f min\n" "make test, wall time" "$wall" "$(awk -v w="$wall" 'BEGIN { print w / 60 }')"
fi
