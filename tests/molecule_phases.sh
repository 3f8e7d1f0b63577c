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
  # a failed action ends on an ERROR line ("... ➜ converge: Executed: Failed"): its time is shown with "(failed)"
  if [[ $plain =~ ^(INFO|ERROR)\ +[^\ ]+\ ➜\ ([a-z_]+):\ Executed(:\ Failed)? ]]; then
    now=$(date +%s)
    took+=("${BASH_REMATCH[2]} $((now - last))${BASH_REMATCH[3]:+ (failed)}")
    last=$now
  fi
done
echo "${took[*]}" > "$phases"
