"""The commands the lab's helpers run on this machine (``ip -j``, tool lookup), injectable for tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

SBIN_PATHS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, LC_ALL="C")
    return subprocess.run(argv, capture_output=True, text=True, check=check, env=env)


def ip_json(args: list[str]) -> list:
    """``ip -j ARGS`` parsed; ``ip`` prints nothing (not ``[]``) for some empty lists."""
    out = run(["ip", "-j", *args]).stdout.strip()
    return json.loads(out) if out else []


def read_routes() -> list[dict]:
    return ip_json(["-4", "route", "show", "table", "all"])


def which(tool: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN_PATHS])
    return shutil.which(tool, path=path)
