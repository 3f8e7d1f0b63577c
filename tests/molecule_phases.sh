#!/usr/bin/env bash
# Pass a molecule scenario's output through unchanged, and write to PHASES how long each of its actions took
# ("create 14 converge 61 verify 9 destroy 3"): molecule prints when an action ends ("INFO  <scenario> ➜ converge:
# Executed: ..."), not how long it ran. `make molecule` adds the line to make test's table of durations.
set -euo pipefail
shopt -s extglob
phases=${1:?usage: molecule test ... | bash tests/molecule_phases.sh PHASES}
last=$(date +%s) took=()
while IFS= read -r line; do
  printf '%s\n' "$line"
  plain=${line//$'\e['*([0-9;])m/}
  if [[ $plain =~ ^INFO\ +[^\ ]+\ ➜\ ([a-z_]+):\ Executed ]]; then
    now=$(date +%s)
    took+=("${BASH_REMATCH[1]} $((now - last))")
    last=$now
  fi
done
echo "${took[*]}" > "$phases"
