#!/usr/bin/env bash
# Print why a gate failed, from its log: the last failed task (from its "fatal:" or "failed:" line on: the earlier
# ones were rescued or ignored, the play stops at the last), without colours and cut to LINES lines of at most 400
# characters, or the log's last lines when no task failed. `make test` prints it after its table of durations, so
# that the end of its output (what a CI page shows) says why a scenario failed, not only which.
set -euo pipefail
log=${1:?usage: bash tests/failure_excerpt.sh LOG [LINES]}
lines=${2:-25}
[ -r "$log" ] || { echo "(no log at $log)"; exit 0; }
plain=$(sed -E 's/\x1b\[[0-9;]*[A-Za-z]//g' "$log" | cut -c1-400)
start=$(grep -n -E '(fatal|failed): \[|FAILED!' <<< "$plain" | tail -n 1 | cut -d: -f1 || true)
echo "why $(basename "$log" .log) failed (the last failed task; the whole log: $log):"
excerpt=${start:+$(tail -n +"$start" <<< "$plain" | head -n "$lines")}
if [ -n "$excerpt" ]; then echo "$excerpt"; else tail -n "$lines" <<< "$plain"; fi
