#!/usr/bin/env bash
# Print the durations `make test` wrote to TIMES (lines "gate<TAB>seconds<TAB>result"; the molecule gate's own
# lines are its scenarios): what each gate and scenario costs, so that the next change sees what it adds.
set -euo pipefail
times=${1:?usage: bash tests/gate_times.sh TIMES}
[ -s "$times" ] || { echo "no gate ran (nothing in $times)"; exit 0; }
echo
echo "make test: duration of each gate and scenario"
awk -F'\t' '{
  printf "  %-28s %6d s  %5.1f min  %s\n", $1, $2, $2 / 60, $3
  if ($1 !~ /^molecule /) total += $2
} END { printf "  %-28s %6d s  %5.1f min\n", "total", total, total / 60 }' "$times"
