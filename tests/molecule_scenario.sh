#!/usr/bin/env bash
# Run one molecule scenario, timed: its output to the terminal and to .cache/molecule-SCENARIO.log, the line
# "molecule SCENARIO<TAB>seconds<TAB>passed|FAILED<TAB>each action's seconds" appended to TIMES and, when it fails,
# the log's path appended to FAILED (make test prints the failed task from it at its end). Exit 0 when it passed.
set -euo pipefail
scenario=${1:?usage: bash tests/molecule_scenario.sh SCENARIO TIMES FAILED}
times=${2:?usage: bash tests/molecule_scenario.sh SCENARIO TIMES FAILED}
failed=${3:?usage: bash tests/molecule_scenario.sh SCENARIO TIMES FAILED}
bin=$(dirname "$0")/../.venv/bin
log=.cache/molecule-$scenario.log phases=.cache/molecule-$scenario.phases
mkdir -p .cache
rm -f "$phases"
start=$(date +%s) result=passed
"$bin/molecule" test -s "$scenario" 2>&1 | bash "$(dirname "$0")/molecule_phases.sh" "$phases" | tee "$log" || result=FAILED
printf 'molecule %s\t%s\t%s\t%s\n' "$scenario" "$(( $(date +%s) - start ))" "$result" \
  "$(cat "$phases" 2> /dev/null || true)" | tee -a "$times"
[ "$result" = passed ] || { echo "$log" >> "$failed"; exit 1; }
