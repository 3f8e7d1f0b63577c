#!/usr/bin/env bash
# Print why a gate failed, from its log: the last failed task's "fatal:" or "failed:" line (the earlier ones were
# rescued or ignored, the play stops at the last) and its message, without colours and cut to LINES lines of at most
# 400 characters, or the log's last lines when no task failed. `make test` prints it after its table of durations, so
# that the end of its output (what a CI page shows) says why a scenario failed, not only which.
set -euo pipefail
log=${1:?usage: bash tests/failure_excerpt.sh LOG [LINES]}
lines=${2:-25}
[ -r "$log" ] || { echo "(no log at $log)"; exit 0; }
plain=$(sed -E 's/\x1b\[[0-9;]*[A-Za-z]//g' "$log" | cut -c1-400)
start=$(grep -n -E '(fatal|failed): \[|FAILED!' <<< "$plain" | tail -n 1 | cut -d: -f1 || true)
if grep -q 'Verifier tests failed' <<< "$plain"; then
  # the tasks passed and a testinfra verifier failed: its failures' headers and assertion lines say which and why
  echo "why $(basename "$log" .log) failed (the verifier's failed tests and their assertions; the whole log: $log):"
  grep -E '^[ │]*(_{3,} .* _{3,}|E  |FAILED |[^ ]*\.py:[0-9]+: )' <<< "$plain" | head -n "$((lines * 2))" || true
  exit 0
fi
echo "why $(basename "$log" .log) failed (the last failed task; the whole log: $log):"
excerpt=''
if [ -n "$start" ]; then
  # the failed task's line, then its message (a result can hold pages before its msg)
  msg=$(sed -n "$start,\$p" <<< "$plain" | grep -n -E '^[ │]*"?msg"?:' | head -n 1 | cut -d: -f1 || true)
  from=$((start + ${msg:-2} - 1))
  excerpt=$(sed -n -e "${start}p" -e "${from},$((from + lines - 1))p" <<< "$plain")
fi
if [ -n "$excerpt" ]; then echo "$excerpt"; else tail -n "$lines" <<< "$plain"; fi
