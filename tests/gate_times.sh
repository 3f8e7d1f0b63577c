#!/usr/bin/env bash
# Print the durations `make test` wrote to TIMES (lines "gate<TAB>seconds<TAB>result[<TAB>phases]"; the molecule
# gates' own lines are their scenarios, with the seconds of each molecule action; the gates named in BACKGROUND ran
# in the background beside the others) and the whole run's wall time: what each gate and scenario costs, so that
# the next change sees what it adds.
set -euo pipefail
times=${1:?usage: bash tests/gate_times.sh TIMES [WALL_SECONDS] [BACKGROUND]}
wall=${2:-}
background=${3:-}
[ -s "$times" ] || { echo "no gate ran (nothing in $times)"; exit 0; }
echo
echo "make test: duration of each gate and scenario"
awk -F'\t' -v background=" $background " '{
  note = index(background, " " $1 " ") ? "(in the background)" : $4
  printf "  %-28s %6d s  %5.1f min  %s %s\n", $1, $2, $2 / 60, $3, note
}' "$times"
if [ -n "$wall" ]; then
  printf "  %-28s %6d s  %5.1f min\n" "make test, wall time" "$wall" "$(awk -v w="$wall" 'BEGIN { print w / 60 }')"
fi
