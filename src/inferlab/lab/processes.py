"""The lab's processes: pidfiles checked against ``/proc/PID/cmdline`` before a signal, the lab's network
namespaces and what still runs in them, and the lab's scripts."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

from inferlab.lab import layout
from inferlab.lab.addressing import netns_re
from inferlab.lab.commands import run
from inferlab.lab.layout import HARDWARE_DAEMONS, ROUTER_TITLE, LabError


def read_pidfile(path: Path) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def proc_cmdline(pid: int, procfs: Path = Path("/proc")) -> str | None:
    try:
        raw = (procfs / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def proc_running(pid: int, procfs: Path = Path("/proc")) -> bool:
    """True while ``pid`` exists and is not a zombie (a killed daemon may wait for a reaper that never comes)."""
    try:
        stat = (procfs / str(pid) / "stat").read_text()
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()
    return bool(state) and state[0] not in ("Z", "X")


def proc_netns_inode(pid: int, procfs: Path = Path("/proc")) -> int | None:
    try:
        return os.stat(procfs / str(pid) / "ns" / "net").st_ino
    except OSError:
        return None


def netns_inode(netns: str) -> int | None:
    try:
        return os.stat(layout.NETNS_DIR / netns).st_ino
    except OSError:
        return None


def wait_gone(pids: Iterable[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    left = [p for p in pids if proc_running(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if proc_running(p)]
    return left


def signal_pids(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def stop_pid(pidfile: Path, expect: str, timeout: float = 5.0) -> dict:
    """Stop the process named in ``pidfile`` if its command line contains ``expect`` (SIGTERM, then SIGKILL), and
    remove the pidfile, so that a later start never mistakes a stale PID for a fresh one.

    ``state``: ``stopped``/``killed`` (it ran and is gone now), ``not_running`` (stale pidfile), ``mismatch`` (the
    PID now belongs to something else: left alone), ``invalid`` (no PID in the file).
    """
    pid = read_pidfile(pidfile)
    result = {"pidfile": str(pidfile), "pid": pid, "state": "invalid", "changed": False}
    cmdline = proc_cmdline(pid) if pid is not None else None
    if pid is None:
        pass
    elif cmdline is None or not proc_running(pid):
        result["state"] = "not_running"
    elif expect not in cmdline:
        result.update(state="mismatch", cmdline=cmdline)
    else:
        result.update(state="stopped", cmdline=cmdline)
        signal_pids([pid], signal.SIGTERM)
        if wait_gone([pid], timeout):
            signal_pids([pid], signal.SIGKILL)
            result["state"] = "killed"
            if wait_gone([pid], 2.0):
                raise LabError(f"PID {pid} from {pidfile} survived SIGKILL")
    try:
        Path(pidfile).unlink()
        result["changed"] = True
    except FileNotFoundError:  # daemons remove their own pidfile on SIGTERM
        result["changed"] = result["state"] in ("stopped", "killed")
    return result


def stop_pidfiles(lab_dir: Path, timeout: float = 5.0) -> dict:
    """Stop every daemon with a pidfile under ``<lab_dir>/hosts/<id>/run/``, the router and the hardware daemons
    (``<lab_dir>/run/``), the gateway's daemons (``<lab_dir>/gateway/run/``) and what runs for the lab on the controller
    (``<lab_dir>/controller/state/run/``).

    The check before a signal: a host daemon's command line mentions that host's directory (sshd's ``-f <host
    dir>/sshd_config``, the lab server's ``--lab-pidfile``); the router's is its process title."""
    results = []
    for pidfile in sorted(Path(lab_dir).glob("hosts/*/run/*.pid")):
        host_dir = pidfile.parent.parent
        results.append(stop_pid(pidfile, f"{host_dir}/", timeout))
    router_pidfile = Path(lab_dir) / "run" / "router.pid"
    if router_pidfile.exists():
        results.append(stop_pid(router_pidfile, ROUTER_TITLE, timeout))
    for key, (mark, _what, _without) in HARDWARE_DAEMONS.items():
        pidfile = Path(lab_dir) / "run" / f"{key}.pid"
        if pidfile.exists():
            results.append(stop_pid(pidfile, mark, timeout))
    # the gateway's daemons (nginx, LiteLLM instances, the large-model server) all name the gateway directory in
    # their command line (-p, --config, --lab-pidfile)
    gateway_dir = Path(lab_dir) / "gateway"
    for pidfile in sorted(gateway_dir.glob("run/*.pid")):
        results.append(stop_pid(pidfile, f"{gateway_dir}/", timeout))
    # what a killed run left on the controller side of this lab (a continuity prober: its command line names the
    # lab's key file); a restore stops it through the controller's ledger, lab down through its pidfile
    for pidfile in sorted(Path(lab_dir).glob("controller/state/run/*.pid")):
        results.append(stop_pid(pidfile, f"{lab_dir}/", timeout))
    return {"changed": any(r["changed"] for r in results), "results": results}


def list_netns(name: str) -> list[str]:
    pattern = netns_re(name)
    try:
        entries = os.listdir(layout.NETNS_DIR)
    except OSError:
        return []
    return sorted(e for e in entries if pattern.match(e))


def netns_pids(netns: str) -> list[int]:
    out = run(["ip", "netns", "pids", netns], check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def terminate(pids: list[int], timeout: float, where: str) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; LabError naming ``where`` when one survives even that."""
    signal_pids(pids, signal.SIGTERM)
    left = wait_gone(pids, timeout)
    if left:
        signal_pids(left, signal.SIGKILL)
        left = wait_gone(left, 2.0)
    if left:
        raise LabError(f"processes {left} {where} survived SIGKILL")


def kill_netns_pids(name: str, timeout: float = 3.0) -> dict:
    """SIGTERM, then SIGKILL, every process left in lab ``name``'s namespaces (``ip netns pids``)."""
    killed: dict[str, list[int]] = {}
    for netns in list_netns(name):
        pids = netns_pids(netns)
        if pids:
            killed[netns] = pids
            terminate(pids, timeout, f"in netns {netns}")
    return {"changed": bool(killed), "killed": killed}


def lab_script_pids(lab_dir: Path, procfs: Path = Path("/proc")) -> list[int]:
    """Processes that run a script installed under the lab (``<lab dir>/.../bin/<script>`` as their program or its
    first argument): a killed run's dead man's switch or sampler on the controller, where no namespace holds it."""
    prefix = f"{Path(lab_dir)}/"
    found = []
    for entry in procfs.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(arg.startswith(prefix) and "/bin/" in arg[len(prefix):] for arg in argv[:2]):
            found.append(int(entry.name))
    return sorted(found)


def kill_lab_scripts(lab_dir: Path, timeout: float = 3.0) -> dict:
    """SIGTERM, then SIGKILL, every process ``lab_script_pids`` finds."""
    pids = lab_script_pids(lab_dir)
    terminate(pids, timeout, "running the lab's scripts")
    return {"changed": bool(pids), "killed": pids}
