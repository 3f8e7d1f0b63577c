# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab's GPU: the memory each process on the card holds, and the NVML snapshot rendered from it.

A real card's memory is held by the processes that run on it (an SGLang server's scheduler holds its weights and its
KV cache pool, most of the card) and the driver frees it when a process exits, however it exits; NVML lists those
processes with their memory. The lab has no GPU, so each lab inference server on a ring host *claims* its memory in
its host's GPU directory when it starts, refused as PyTorch refuses an allocation when the card has not that much
free, and releases it when it exits. The snapshot (the file ``inferlab_nvml_snapshot`` names, format
``inferlab.nvml_snapshot/1``, read by ``nvml_info`` and the counter windows exactly as a recorded real one) is
rendered from the idle card and the claims of the processes still alive: by the server at each claim and release,
and by the lab's GPU daemon (inferlab.lab.gpu_daemon) every poll, which drops a killed process's claim as the driver
would. Standard library only: the hosts' own Python runs it.

A host's GPU directory: ``device.json`` (the idle card: a snapshot document whose GPUs list no compute process),
``claims/<pid>.json`` (``{"pid", "start_time", "gpu", "used_memory_bytes"}``), ``claims.lock``, ``nvml.json`` (the
rendered snapshot).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from pathlib import Path

MIB = 1024 * 1024
GIB = 1024 * MIB
# What a server holds beyond its static pool (weights and KV cache): the CUDA context, cuBLAS workspaces, graphs.
CONTEXT_BYTES = 512 * MIB
# SGLang sizes its static pool from the card when --mem-fraction-static is not given; the lab's stand-in.
DEFAULT_MEM_FRACTION_STATIC = 0.85
SNAPSHOT = "nvml.json"


class OutOfMemory(RuntimeError):
    """The card has not the memory a server asks for; the message is PyTorch's, as a real server logs it."""


def start_time(pid: int, procfs_root: str = "/proc") -> str | None:
    """Field 22 of ``/proc/<pid>/stat`` (the process's start time, which a reused PID does not share), or None
    when the process is gone or a zombie (a zombie's memory is freed already)."""
    try:
        stat = Path(procfs_root, str(pid), "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # comm, in parentheses, may contain spaces
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def process_name(pid: int, procfs_root: str = "/proc") -> str | None:
    """What NVML's process table shows on a host without the process's full title: its ``comm``."""
    try:
        return Path(procfs_root, str(pid), "comm").read_text().strip()
    except OSError:
        return None


def server_claim_bytes(total_bytes: int, mem_fraction_static: float | None) -> int:
    """What a server holds: its static pool (``--mem-fraction-static`` of the card) and its context."""
    fraction = DEFAULT_MEM_FRACTION_STATIC if mem_fraction_static is None else mem_fraction_static
    return int(total_bytes * fraction) + CONTEXT_BYTES


def read_device(gpu_dir: str | Path) -> dict:
    return json.loads(Path(gpu_dir, "device.json").read_text())


def live_claims(gpu_dir: str | Path, procfs_root: str = "/proc") -> list[dict]:
    """The claims whose process still runs (same PID, same start time); the others are removed, as the driver frees
    a dead process's memory. A claim file that cannot be read is skipped (it is being written)."""
    claims = []
    for path in sorted(Path(gpu_dir, "claims").glob("*.json")):
        try:
            claim = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if start_time(claim["pid"], procfs_root) == claim["start_time"]:
            claims.append(claim)
        else:
            path.unlink(missing_ok=True)
    return claims


def render(gpu_dir: str | Path, procfs_root: str = "/proc") -> dict:
    """The snapshot document: the idle card plus every live claim, each listed as a compute process by name."""
    document = read_device(gpu_dir)
    claims = live_claims(gpu_dir, procfs_root)
    for gpu in document["gpus"]:
        mine = [c for c in claims if c["gpu"] == gpu["index"]]
        used = gpu["memory_used_bytes"] + sum(c["used_memory_bytes"] for c in mine)
        gpu["memory_used_bytes"] = used
        gpu["memory_free_bytes"] = max(gpu["memory_total_bytes"] - used, 0)
        gpu["compute_processes"] = [{"pid": c["pid"], "name": process_name(c["pid"], procfs_root),
                                     "used_memory_bytes": c["used_memory_bytes"]} for c in mine]
    return document


def write_snapshot(gpu_dir: str | Path, document: dict) -> bool:
    """Write the snapshot atomically when its content changed; True when it did."""
    path = Path(gpu_dir, SNAPSHOT)
    text = json.dumps(document, indent=2) + "\n"
    with contextlib.suppress(OSError):
        if path.read_text() == text:
            return False
    fd, tmp = tempfile.mkstemp(prefix=".nvml.", dir=str(gpu_dir))
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return True


@contextlib.contextmanager
def _locked(gpu_dir: str | Path):
    with open(Path(gpu_dir, "claims.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def claim(gpu_dir: str | Path, pid: int, used_bytes: int, gpu: int = 0, procfs_root: str = "/proc") -> dict:
    """Hold ``used_bytes`` of GPU ``gpu`` for ``pid``; raises OutOfMemory, changing nothing, when it is not free.
    Returns the rendered snapshot."""
    with _locked(gpu_dir):
        document = render(gpu_dir, procfs_root)
        card = next((g for g in document["gpus"] if g["index"] == gpu), None)
        if card is None:
            raise OutOfMemory(f"CUDA error: invalid device ordinal (GPU {gpu} is not on this host)")
        if used_bytes > card["memory_free_bytes"]:
            holders = ", ".join(f"process {p['pid']} ({p['name']}) has {p['used_memory_bytes'] / GIB:.2f} GiB"
                                for p in card["compute_processes"]) or "no other process"
            raise OutOfMemory(
                f"CUDA out of memory. Tried to allocate {used_bytes / GIB:.2f} GiB. GPU {gpu} has a total capacity "
                f"of {card['memory_total_bytes'] / GIB:.2f} GiB of which {card['memory_free_bytes'] / GIB:.2f} GiB "
                f"is free. Including non-PyTorch memory, {holders}.")
        record = {"pid": pid, "start_time": start_time(pid, procfs_root), "gpu": gpu, "used_memory_bytes": used_bytes}
        claims = Path(gpu_dir, "claims")
        fd, tmp = tempfile.mkstemp(prefix=".claim.", dir=str(claims))
        with os.fdopen(fd, "w") as handle:
            json.dump(record, handle)
        os.replace(tmp, claims / f"{pid}.json")
        document = render(gpu_dir, procfs_root)
        write_snapshot(gpu_dir, document)
        return document


def release(gpu_dir: str | Path, pid: int, procfs_root: str = "/proc") -> None:
    """Give ``pid``'s memory back (a clean exit; the daemon does it for a killed process)."""
    with _locked(gpu_dir):
        Path(gpu_dir, "claims", f"{pid}.json").unlink(missing_ok=True)
        write_snapshot(gpu_dir, render(gpu_dir, procfs_root))


def refresh(gpu_dir: str | Path, procfs_root: str = "/proc") -> bool:
    """Render and write the snapshot (the daemon's poll); True when it changed."""
    with _locked(gpu_dir):
        return write_snapshot(gpu_dir, render(gpu_dir, procfs_root))
