#!/usr/bin/env bash
# Run one gate of `make test`, timed: `make NAME [MAKE ARGUMENTS]`, then the line "NAME<TAB>seconds<TAB>passed|FAILED"
# appended to TIMES (tests/gate_times.sh prints them). Exit 0 when the gate passed.
set -uo pipefail
name=${1:?usage: bash tests/gate.sh NAME TIMES [MAKE ARGUMENTS]}
times=${2:?usage: bash tests/gate.sh NAME TIMES [MAKE ARGUMENTS]}
shift 2
start=$(date +%s) result=passed
make --no-print-directory "$name" "$@" || result=FAILED
printf '%s\t%s\t%s\n' "$name" "$(( $(date +%s) - start ))" "$result" >> "$times"
[ "$result" = passed ]
