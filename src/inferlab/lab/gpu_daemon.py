"""The lab's GPUs as hardware: each ring host's NVML snapshot kept up to date with the processes that hold its card.

The lab inference servers claim and release their memory themselves (src/inferlab/lab/server/gpu.py) and render the
snapshot as they do; this daemon, run by the lab on the controller, renders every host's snapshot each poll, so that
the memory of a server that was killed (SIGKILL: no release) comes back within a poll, as a real driver frees it.

    python -m inferlab.lab.gpu_daemon --config FILE --pidfile FILE

The config (JSON, re-read every poll; the daemon's shape is src/inferlab/lab/daemon.py's):
``{"gpu_dirs": ["<lab>/hosts/<id>/gpu", ...], "poll_s"}``. Each change it writes goes to stdout as one line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from inferlab.lab import daemon as lab_daemon
from inferlab.lab.daemon import log
from inferlab.lab.server import gpu


class GpuConfigError(lab_daemon.DaemonConfigError):
    """A config the daemon cannot act on; the message says what was expected."""


def read_config(path: Path) -> dict:
    try:
        config = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise GpuConfigError(f"cannot read {path}: {exc}") from None
    dirs = config.get("gpu_dirs") if isinstance(config, dict) else None
    if not isinstance(dirs, list) or not dirs or not all(isinstance(d, str) and d for d in dirs):
        raise GpuConfigError(f"{path}: gpu_dirs must be a non-empty list of directories, found {dirs!r}")
    missing = [d for d in dirs if not (Path(d) / "device.json").is_file() or not (Path(d) / "claims").is_dir()]
    if missing:
        raise GpuConfigError(f"{path}: no device.json and claims/ in {', '.join(missing)}")
    if not isinstance(config.get("poll_s"), (int, float)) or config["poll_s"] <= 0:
        raise GpuConfigError(f"{path}: poll_s must be a positive number, found {config.get('poll_s')!r}")
    return config


def describe(gpu_dir: str) -> str:
    document = json.loads((Path(gpu_dir) / gpu.SNAPSHOT).read_text())
    cards = []
    for card in document["gpus"]:
        holders = ", ".join(f"{p['pid']} {p['name']}" for p in card["compute_processes"]) or "no process"
        cards.append(f"GPU {card['index']} {card['memory_used_bytes'] // gpu.MIB} MiB used by {holders}")
    return "; ".join(cards)


def serve(config_path: Path) -> None:
    while True:
        config = read_config(config_path)
        for gpu_dir in config["gpu_dirs"]:
            if gpu.refresh(gpu_dir):
                log(f"{gpu_dir}: {describe(gpu_dir)}")
        time.sleep(config["poll_s"])


def main(argv: list[str] | None = None) -> int:
    return lab_daemon.main("inferlab.lab.gpu_daemon", __doc__.split("\n\n", maxsplit=1)[0], read_config, serve,
                           "rendering the GPUs of", argv)


if __name__ == "__main__":
    sys.exit(main())
