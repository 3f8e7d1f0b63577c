#!/usr/bin/env bash
# Run gates of `make test` one after the other out of the way of the foreground: each gate's output in
# .cache/gate-NAME.log, its time and result in TIMES (tests/gate.sh). A word `--after PID` waits until process PID has
# exited before the gates that follow it (another chain, which this one cannot `wait` for). Every gate runs, whether
# the one before it passed or not; the caller reads the results from TIMES.
#
#     setsid -w bash tests/background_gates.sh TIMES GATE [GATE | --after PID] ...   # out of every session's way
#     bash tests/background_gates.sh TIMES GATE ...   # out of the caller's session's way only (renice 19)
#
# Out of the way: the lowest CPU priority and the idle I/O class. With the kernel's autogroups
# (/proc/sys/kernel/sched_autogroup_enabled), a nice value ranks a process only against those of its own session:
# every session gets an equal share of the CPUs, so a `renice 19` job in make's session took as much CPU as a lab
# daemon in a session of its own (each one `setsid`). Run this in a session of its own (setsid), whose autogroup then
# gets nice 19: two CPU hogs there got 0.2-0.7 s of CPU in 6 s beside two in a normal session (11.7 s), and all of a
# CPU the normal session left idle.
set -uo pipefail
times=${1:?usage: bash tests/background_gates.sh TIMES GATE [GATE | --after PID] ...}
shift
# only as the leader of a session of its own (setsid): in the caller's session the autogroup is the caller's too
if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && [ -w /proc/self/autogroup ]; then echo 19 > /proc/self/autogroup; fi
renice -n 19 -p $$ > /dev/null
ionice -c 3 -p $$
while [ $# -gt 0 ]; do
  if [ "$1" = --after ]; then
    while kill -0 "${2:?--after needs a PID}" 2> /dev/null; do sleep 5; done
    shift 2
    continue
  fi
  bash "$(dirname "$0")/gate.sh" "$1" "$times" > ".cache/gate-$1.log" 2>&1
  shift
done
