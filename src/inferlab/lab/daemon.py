"""What the lab's hardware daemons share (link_daemon.py, gpu_daemon.py beside this file): the command line
``--config FILE --pidfile FILE``, a config checked before the pidfile is written, SIGTERM removing the pidfile, and
one event per line on stdout with a UTC timestamp. Each daemon re-reads its config at every poll, so the lab can
change a running lab's behaviour; a config it can no longer act on stops it (exit 2, said in its log)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path


class DaemonConfigError(Exception):
    """A config a daemon cannot act on; the message says what was expected."""


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {message}", flush=True)


def main(module: str, summary: str, read_config: Callable[[Path], dict], serve: Callable[[Path], None],
         banner: str, argv: list[str] | None = None) -> int:
    """Run ``serve(config_path)`` as the daemon ``python -m <module>``; ``read_config`` raises DaemonConfigError."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=summary)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--pidfile", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        read_config(args.config)
    except DaemonConfigError as exc:
        print(f"{module}: {exc}", file=sys.stderr)
        return 2
    args.pidfile.write_text(f"{os.getpid()}\n")

    def stop(_signum, _frame):
        args.pidfile.unlink(missing_ok=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    log(f"{banner} {args.config}")
    try:
        serve(args.config)
    except DaemonConfigError as exc:
        log(f"stopped: {exc}")
        args.pidfile.unlink(missing_ok=True)
        return 2
    return 0
