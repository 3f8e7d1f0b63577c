"""Send a process a signal (KILL: it dies; STOP: it hangs, alive), by the PID in its pidfile, once llama-server is
busy with a request: its /slots shows a slot processing. Started in the background before the ladder, so that the
signal lands in the middle of it, whatever the machine's speed. Loopback and lab addresses only; gives up (exit 2)
after the timeout.

    signal_when_busy.py HEAD_URL PIDFILE TIMEOUT_S [KILL|STOP]
"""

import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request


def busy(url):
    try:
        with urllib.request.urlopen(url + "/slots", timeout=2) as response:  # noqa: S310 (the lab's head)
            return any(slot.get("is_processing") for slot in json.loads(response.read()))
    except (OSError, urllib.error.URLError, ValueError):
        return False


def main(url, pidfile, timeout_s, name="KILL"):
    number = {"KILL": signal.SIGKILL, "STOP": signal.SIGSTOP}[name]
    deadline = time.monotonic() + float(timeout_s)
    while time.monotonic() < deadline:
        if os.path.exists(pidfile) and busy(url):
            with open(pidfile) as handle:
                pid = int(handle.read().split()[0])
            os.kill(pid, number)
            print(f"sent SIG{name} to {pid} while the head was busy")
            return 0
        time.sleep(0.05)  # polling interval of the condition above, not a wait for it
    print(f"the head was never busy within {timeout_s} s")
    return 2


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
