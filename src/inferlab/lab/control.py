"""The embedded lab, controller side: preflight checks, status, and the small helpers the `lab` role calls.

The role `inferlab.distributed.lab` builds and removes the lab; this module holds the logic that deserves unit tests
and is called from the role as ``python -m inferlab.lab.control SUBCOMMAND`` (JSON on stdout, exit 0 unless the helper
itself broke):

- ``preflight --name N --octet O``: root, required tools, and the route-clash check against ``ip -j -4 route``;
- ``check-routes --name N --octet O [--routes FILE]``: the route-clash check alone (exit 1 on a clash, for people);
- ``status (--lab-dir DIR | -i INVENTORY) [--json]``: what ``inferlab lab status`` prints;
- ``write-tree --root DIR``: converge a file tree (the per-host hardware fixture) from a JSON spec on stdin;
- ``write-record --lab-dir DIR``: write ``lab.json`` (the role's spec plus the daemons' PIDs);
- ``stop-pidfiles --lab-dir DIR``: stop the lab's daemons by pidfile, after checking ``/proc/PID/cmdline``;
- ``kill-netns-pids --name N``: kill whatever still runs in the lab's network namespaces.

Addressing (see inventory/lab/group_vars): the management subnet is ``169.254.<octet>.0/24`` (one /30 per host,
controller side ``.4i+1``, host side ``.4i+2``); the direct link lives in ``169.254.<octet+100>.0/24``. Both must stay
clear of ``169.254.169.0/24`` (cloud metadata) and of RFC 3927's reserved first and last /24.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from ipaddress import IPv4Network, ip_network
from pathlib import Path

from inferlab.lab.collection_tc import load_tc

LAB_ROOT = Path("/var/lib/inferlab-lab")
LAB_JSON_FORMAT = "inferlab.lab/1"
STATUS_FORMAT = "inferlab.lab_status/1"
# sglang-router sets its process title (setproctitle), so its /proc/PID/cmdline reads this and nothing else.
ROUTER_TITLE = "sglang::router"
# The lab's hardware daemons on the controller (link_daemon.py, gpu_daemon.py beside this file), by their key in
# lab.json: (their command line's mark: their module, what it is, what goes wrong without it). Their pidfiles are
# <lab_dir>/run/<key>.pid.
HARDWARE_DAEMONS = {
    "link": ("inferlab.lab.link_daemon", "the direct link's daemon", "a driver reload would leave the link down"),
    "gpu": ("inferlab.lab.gpu_daemon", "the GPU daemon", "a killed server's GPU memory would stay held"),
}
NETNS_DIR = Path("/run/netns")

METADATA_NET = ip_network("169.254.169.0/24")
LINK_LOCAL = ip_network("169.254.0.0/16")
OCTET_MIN, OCTET_MAX = 1, 154  # 169.254.0.0/24 and 169.254.255.0/24 are reserved (RFC 3927); link octet = octet + 100
LINK_OCTET_OFFSET = 100

# A lab name becomes netns names (<name>-<id>) and root-side veth names (<name>-<id>-m, at most 15 characters).
# With ids of 1-2 characters that stays within 10 + 1 + 2 + 2.
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,9}$")

# tool -> Debian package that provides it
REQUIRED_TOOLS = {
    "ip": "iproute2",
    "sshd": "openssh-server",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "iperf3": "iperf3",
    "ping": "iputils-ping",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "setsid": "util-linux",
    "nginx": "nginx-light",
}
SBIN_PATHS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


class LabError(Exception):
    """A lab precondition or input that is wrong; the message says what to change."""


# --------------------------------------------------------------------------------------------------------------------
# names and addresses


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise LabError(
            f"inferlab_lab_name {name!r} is not usable: expected 1-10 characters, a lowercase letter then lowercase "
            "letters or digits (it becomes namespace and interface names; '-' and '_' are not allowed)"
        )
    return name


def netns_re(name: str) -> re.Pattern:
    """Namespaces of lab ``name``: ``<name>-<id>`` (ids never contain '-', so labs never match each other)."""
    return re.compile(rf"^{re.escape(name)}-[a-z0-9]+$")


def veth_re(name: str) -> re.Pattern:
    """Root-side management veths of lab ``name``: ``<name>-<id>-m``."""
    return re.compile(rf"^{re.escape(name)}-[a-z0-9]+-m$")


def lab_subnets(octet) -> dict[str, IPv4Network]:
    """The lab's management /24 and the /24 its direct links are cut from; refuses unusable octets."""
    try:
        octet = int(octet)
    except (TypeError, ValueError):
        raise LabError(f"inferlab_lab_octet {octet!r} is not an integer") from None
    if not OCTET_MIN <= octet <= OCTET_MAX:
        raise LabError(
            f"inferlab_lab_octet {octet} is out of range: expected {OCTET_MIN}-{OCTET_MAX} (the lab uses "
            f"169.254.<octet>.0/24 for management and 169.254.<octet+{LINK_OCTET_OFFSET}>.0/24 for its links)"
        )
    subnets = {
        "management": ip_network(f"169.254.{octet}.0/24"),
        "link": ip_network(f"169.254.{octet + LINK_OCTET_OFFSET}.0/24"),
    }
    for role, net in subnets.items():
        if net.overlaps(METADATA_NET):
            raise LabError(
                f"inferlab_lab_octet {octet} puts the lab's {role} subnet {net} on {METADATA_NET}, which clouds use "
                "for their metadata service: choose another inferlab_lab_octet"
            )
    return subnets


def _route_network(dst) -> IPv4Network | None:
    if not isinstance(dst, str) or dst == "default":
        return None
    try:
        net = ip_network(dst if "/" in dst else f"{dst}/32", strict=False)
    except ValueError:
        return None
    return net if net.version == 4 else None


def route_clashes(routes: Iterable[dict], name: str, octet) -> list[dict]:
    """Routes (``ip -j -4 route show table all`` entries) that clash with lab ``name``'s management subnet.

    A route clashes when it overlaps the lab's management /24 and is as specific or more (prefix >= 24), unless it
    goes through one of this lab's own root-side veths. Broader routes (``default``, a link-local ``169.254.0.0/16``)
    are fine: the lab's /30s are more specific and win.
    """
    mgmt = lab_subnets(octet)["management"]
    own = veth_re(name)
    clashes = []
    for route in routes:
        net = _route_network(route.get("dst"))
        if net is None or not net.overlaps(mgmt) or net.prefixlen < mgmt.prefixlen:
            continue
        if own.match(route.get("dev") or ""):
            continue
        clashes.append({
            "dst": str(net),
            "dev": route.get("dev"),
            "table": route.get("table", "main"),
            "type": route.get("type", "unicast"),
            "protocol": route.get("protocol"),
        })
    return clashes


def describe_clash(clash: dict) -> str:
    where = f" dev {clash['dev']}" if clash.get("dev") else ""
    return f"{clash['type']} {clash['dst']}{where} (table {clash['table']})"


def clash_problem(clashes: list[dict], mgmt: IPv4Network) -> str:
    """One operator-facing sentence for all clashes: what clashed and which variable to change."""
    return (
        f"existing routes overlap the lab's management subnet {mgmt} and are as specific or more: "
        f"{'; '.join(describe_clash(c) for c in clashes)}. Set inferlab_lab_octet (all.vars in the lab's hosts "
        f"file) to an octet no route uses ({OCTET_MIN}-{OCTET_MAX}, not 69)"
    )


# --------------------------------------------------------------------------------------------------------------------
# commands (injectable for tests)


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


def preflight(name: str, octet, routes: list[dict] | None = None, which_fn: Callable = which,
              euid: int | None = None) -> dict:
    """Everything ``lab up`` checks before changing anything; ``problems`` says what to do about each failure."""
    euid = os.geteuid() if euid is None else euid
    problems: list[str] = []
    result = {"name": name, "octet": octet, "euid": euid, "is_root": euid == 0, "missing_tools": [],
              "subnets": {}, "clashes": [], "problems": problems, "ok": False}
    if euid != 0:
        problems.append(f"the lab needs root (network namespaces, veths, sshd): running as uid {euid}; run as root")
    missing = [{"tool": tool, "package": pkg} for tool, pkg in REQUIRED_TOOLS.items() if not which_fn(tool)]
    result["missing_tools"] = missing
    if missing:
        packages = sorted({m["package"] for m in missing})
        problems.append(
            f"missing tools: {', '.join(m['tool'] for m in missing)}; install the Debian packages "
            f"{' '.join(packages)} (apt-get install {' '.join(packages)}; `make deb` does it)"
        )
    try:
        check_name(name)
        subnets = lab_subnets(octet)
    except LabError as exc:
        problems.append(str(exc))
        return result
    result["subnets"] = {role: str(net) for role, net in subnets.items()}
    if routes is None:
        routes = read_routes() if which_fn("ip") else []
    clashes = route_clashes(routes, name, octet)
    result["clashes"] = clashes
    if clashes:
        problems.append(clash_problem(clashes, subnets["management"]))
    result["ok"] = not problems
    return result


# --------------------------------------------------------------------------------------------------------------------
# processes


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
        return os.stat(NETNS_DIR / netns).st_ino
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
        entries = os.listdir(NETNS_DIR)
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


# --------------------------------------------------------------------------------------------------------------------
# file trees (the per-host hardware fixture)


def write_tree(root: Path, spec: dict, check: bool = False) -> dict:
    """Converge ``root`` to ``spec`` and say what changed (``changes``: ``"file REL"``, ``"dir REL"`` ...).

    ``spec``: ``{"mode": ROOT_MODE, "dirs": {REL: MODE}, "files": {REL: CONTENT | {"content": C, "mode": M}},
    "links": {REL: TARGET}}``; modes are octal strings, files default to ``0644``. Files are rewritten only when
    their content differs, links only when their target differs. Nothing else under ``root`` is touched: later roles
    may add files there.
    """
    root = Path(root)
    changes: list[str] = []

    def rel(path: str) -> Path:
        parts = Path(path).parts
        if not parts or Path(path).is_absolute() or ".." in parts:
            raise LabError(f"write-tree: {path!r} is not a plain relative path under {root}")
        return root / path

    def ensure_dir(target: Path, mode: int, label: str) -> None:
        if not target.is_dir():
            changes.append(f"dir {label}")
            if not check:
                target.mkdir(parents=True, exist_ok=True)
                target.chmod(mode)
        elif (target.stat().st_mode & 0o7777) != mode:
            changes.append(f"mode {label}")
            if not check:
                target.chmod(mode)

    ensure_dir(root, int(str(spec.get("mode", "0755")), 8), ".")
    for path, mode in sorted(spec.get("dirs", {}).items()):
        ensure_dir(rel(path), int(str(mode), 8), path)
    for path, value in sorted(spec.get("files", {}).items()):
        target = rel(path)
        content, mode = (value["content"], value.get("mode", "0644")) if isinstance(value, dict) else (value, "0644")
        data, mode = content.encode(), int(str(mode), 8)
        try:
            same = not target.is_symlink() and target.read_bytes() == data
        except OSError:
            same = False
        if not same:
            changes.append(f"file {path}")
            if not check:
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.is_symlink():
                    target.unlink()
                tmp = target.with_name(f".{target.name}.tmp")
                tmp.write_bytes(data)
                tmp.chmod(mode)
                tmp.replace(target)
        elif (target.stat().st_mode & 0o7777) != mode:
            changes.append(f"mode {path}")
            if not check:
                target.chmod(mode)
    for path, link_target in sorted(spec.get("links", {}).items()):
        target = rel(path)
        if target.is_symlink() and os.readlink(target) == link_target:
            continue
        changes.append(f"link {path}")
        if not check:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.is_file():
                target.unlink()
            elif target.is_dir():
                shutil.rmtree(target)
            target.symlink_to(link_target)
    return {"changed": bool(changes), "changes": changes}


# --------------------------------------------------------------------------------------------------------------------
# lab.json


def build_record(spec: dict, spec_digest: str, built_at: str) -> dict:
    """``lab.json``: the role's spec (what the inventory asked for) plus what was built (PIDs from the pidfiles)."""
    record = {"format": LAB_JSON_FORMAT, "status": "up", "built_at": built_at, "spec_digest": spec_digest, **spec}
    hosts = []
    for host in spec["hosts"]:
        host = json.loads(json.dumps(host))
        host["ssh"]["pid"] = read_pidfile(host["ssh"]["pidfile"])
        for svc in host.get("services", []):
            svc["pid"] = read_pidfile(svc["pidfile"])
        hosts.append(host)
    record["hosts"] = hosts
    if record.get("router"):
        record["router"] = {**record["router"], "pid": read_pidfile(record["router"]["pidfile"])}
    for key in HARDWARE_DAEMONS:
        if record.get(key):
            record[key] = {**record[key], "pid": read_pidfile(record[key]["pidfile"])}
    if record.get("gateway"):
        gateway = json.loads(json.dumps(record["gateway"]))
        for _key, _what, daemon, _url in gateway_daemons(gateway):
            daemon["pid"] = read_pidfile(daemon["pidfile"])
        record["gateway"] = gateway
    return record


def write_record(lab_dir: Path, payload: dict, check: bool = False) -> dict:
    """Write ``<lab_dir>/lab.json`` from ``{"spec", "spec_digest", "built_at"}`` when its content differs."""
    record = build_record(payload["spec"], payload["spec_digest"], payload["built_at"])
    missing = [h["name"] for h in record["hosts"] if not h["ssh"]["pid"]]
    missing += [s["name"] for h in record["hosts"] for s in h.get("services", []) if not s["pid"]]
    missing += ["the router"] if record.get("router") and not record["router"]["pid"] else []
    missing += [what for key, (_mark, what, _without) in HARDWARE_DAEMONS.items()
                if record.get(key) and not record[key]["pid"]]
    if record.get("gateway"):
        missing += [f"the gateway's {what}" for _key, what, daemon, _url in gateway_daemons(record["gateway"])
                    if not daemon["pid"]]
    if missing:
        raise LabError(f"no PID recorded for {', '.join(missing)}: the lab is not fully up")
    path = Path(lab_dir) / "lab.json"
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    try:
        same = path.read_text() == text
    except OSError:
        same = False
    if not same and not check:
        tmp = path.with_name(".lab.json.tmp")
        tmp.write_text(text)
        tmp.chmod(0o644)
        tmp.replace(path)
    return {"changed": not same, "path": str(path)}


# --------------------------------------------------------------------------------------------------------------------
# status

class SystemProbe:
    """Live checks against this machine; tests pass a fake with the same methods."""

    def netns_exists(self, netns: str) -> bool:
        return (NETNS_DIR / netns).exists()

    def root_link(self, ifname: str) -> dict | None:
        links = ip_json(["addr", "show", "dev", ifname]) if Path("/sys/class/net", ifname).exists() else []
        return links[0] if links else None

    def netns_link(self, netns: str, ifname: str) -> dict | None:
        if not self.netns_exists(netns):
            return None
        result = run(["ip", "-j", "-n", netns, "addr", "show", "dev", ifname], check=False)
        if result.returncode != 0 or not result.stdout.strip():
            return None
        links = json.loads(result.stdout)
        return links[0] if links else None

    def process(self, pid: int | None, expect: str, netns: str | None) -> bool:
        """``pid`` runs, its command line mentions ``expect`` and it lives in ``netns`` (None: the controller's own
        namespace, this process's; PID 1's may not be readable in a container)."""
        if not pid or not proc_running(pid):
            return False
        cmdline = proc_cmdline(pid) or ""
        inode = netns_inode(netns) if netns is not None else proc_netns_inode(os.getpid())
        return expect in cmdline and inode is not None and proc_netns_inode(pid) == inode

    def link_profile(self, netns: str, ifname: str) -> dict | None:
        """The link profile ``tc`` shows on ``netns``'s ``ifname`` now (``{profile, parameters, reason}``), or
        None when it cannot be read."""
        if not self.netns_exists(netns):
            return None
        tc = load_tc()
        result = run(["ip", "netns", "exec", netns, *tc.show_argv(ifname, which("tc") or "tc")], check=False)
        if result.returncode != 0:
            return None
        try:
            return tc.classify_output(result.stdout)
        except tc.TcError as exc:
            return {"profile": "unknown", "parameters": {}, "reason": str(exc)}

    def ssh_banner(self, address: str, port: int, timeout: float = 2.0) -> bool:
        try:
            with socket.create_connection((address, port), timeout=timeout) as sock:
                sock.settimeout(timeout)
                return sock.recv(64).startswith(b"SSH-2.0-")
        except OSError:
            return False

    def http_ok(self, url: str, timeout: float = 2.0) -> bool:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
        try:
            with opener.open(url, timeout=timeout) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False


def _has_address(link: dict | None, address: str, prefix: int) -> bool:
    return bool(link) and any(
        a.get("family") == "inet" and a.get("local") == address and a.get("prefixlen") == prefix
        for a in link.get("addr_info", [])
    )


def _link_up(link: dict | None) -> bool:
    # a veth reports UP once both ends are up; LOWER_UP means the peer end is up
    return bool(link) and link.get("operstate") == "UP" and "LOWER_UP" in link.get("flags", [])


def read_lab_json(lab_dir: Path) -> dict | None:
    path = Path(lab_dir) / "lab.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LabError(f"{path} is unreadable: {exc}") from exc


def lab_dir_from_inventory(inventory: Path) -> tuple[str, Path]:
    """``(lab name, lab dir)`` from a lab inventory: its hosts file's ``all.vars.inferlab_lab_name`` and the
    ``inferlab_lab_dir`` of ``group_vars/all.yml`` beside it (only ``{{ inferlab_lab_name }}`` is expanded)."""
    import yaml  # PyYAML comes with ansible-core

    inventory = Path(inventory)
    hosts = inventory_hosts_file(inventory) if inventory.is_dir() else inventory
    if hosts is None:
        raise LabError(f"{inventory} holds no hosts.yml (or hosts): is it a lab inventory?")
    data = yaml.safe_load(hosts.read_text()) or {}
    all_vars = (data.get("all") or {}).get("vars") or {}
    name = all_vars.get("inferlab_lab_name")
    if not isinstance(name, str):
        raise LabError(f"{hosts} sets no all.vars.inferlab_lab_name: is it a lab inventory?")
    lab_dir = all_vars.get("inferlab_lab_dir")
    group_vars = hosts.parent / "group_vars" / "all.yml"
    if lab_dir is None and group_vars.is_file():
        lab_dir = (yaml.safe_load(group_vars.read_text()) or {}).get("inferlab_lab_dir")
    if lab_dir is None:
        return name, LAB_ROOT / name
    lab_dir = re.sub(r"\{\{\s*inferlab_lab_name\s*\}\}", name, str(lab_dir))
    if "{{" in lab_dir or "{%" in lab_dir:
        raise LabError(f"inferlab_lab_dir {lab_dir!r} uses a template this helper cannot expand; "
                       "use /var/lib/inferlab-lab/{{ inferlab_lab_name }} or a literal path")
    return name, Path(lab_dir)


def inventory_hosts_file(inventory_dir: Path) -> Path | None:
    """The hosts file of an inventory directory: ``hosts.yml``, or ``hosts`` (molecule links the lab's hosts file
    into its ephemeral inventory under that name)."""
    for name in ("hosts.yml", "hosts"):
        if (inventory_dir / name).is_file():
            return inventory_dir / name
    return None


def resolve_lab(where) -> tuple[str | None, Path]:
    """A lab dir (holds ``lab.json``), an inventory file or an inventory directory -> ``(name, lab_dir)``."""
    where = Path(where)
    if where.is_dir() and (where / "lab.json").exists():
        return None, where
    if where.is_file() or (where.is_dir() and inventory_hosts_file(where) is not None):
        return lab_dir_from_inventory(where)
    return None, where


def current_pid(daemon: dict) -> int | None:
    """The daemon's pid now: its pidfile's, else the one lab.json recorded at build time. A service that inferlab
    paused and resumed, or a gateway instance restarted with another config, runs under a new pid."""
    pidfile = daemon.get("pidfile")
    return (read_pidfile(Path(pidfile)) if pidfile else None) or daemon.get("pid")


def expected_link_profile(host: dict, driver_profiles: dict | None) -> str | None:
    """The link profile the lab's spec sets on ``host``'s end: its loaded driver's (``driver_profiles``, the link
    daemon's config), else the stock one lab.json recorded; None when it sets none or no driver is loaded."""
    if driver_profiles:
        from inferlab.lab.link_daemon import driver_state  # noqa: PLC0415 (the daemon's own reading of the fixture)

        return driver_profiles.get(driver_state(host["sysfs_root"]))
    return host["link"].get("profile")


def _link_profile_problem(netns: str, ifname: str, current: dict, expected: str) -> str | None:
    tc = load_tc()
    wanted = tc.wanted_parameters(expected)
    if current["profile"] == expected and tc.same_parameters(current["parameters"], wanted):
        return None
    found = " ".join(str(part) for part in (current["profile"], current["parameters"]) if part)
    return (f"{netns}:{ifname} has the link profile {found} ({current['reason']}), not the lab's "
            f"{' '.join(str(part) for part in (expected, wanted) if part)}: a run changed it and nothing put it "
            "back (`inferlab lab up` rebuilds the lab)")


def host_status(host: dict, probe, driver_profiles: dict | None = None) -> dict:
    netns = host["netns"]
    mgmt, link, ssh = host["management"], host["link"], host["ssh"]
    problems: list[str] = []
    checks = {}
    checks["netns"] = probe.netns_exists(netns)
    if not checks["netns"]:
        problems.append(f"network namespace {netns} is missing")
    root_link = probe.root_link(mgmt["controller_interface"])
    host_mgmt = probe.netns_link(netns, mgmt["interface"])
    checks["management_link"] = (
        _link_up(root_link) and _has_address(root_link, mgmt["controller_address"], mgmt["prefix"])
        and _has_address(host_mgmt, mgmt["address"], mgmt["prefix"])
    )
    if not checks["management_link"]:
        problems.append(f"management link {mgmt['controller_interface']} <-> {netns}:{mgmt['interface']} is "
                        f"missing, down or misaddressed")
    tb = probe.netns_link(netns, link["interface"])
    checks["link_up"] = _link_up(tb)
    checks["link_address"] = _has_address(tb, link["address"], link["prefix"]) and (tb or {}).get("mtu") == link["mtu"]
    if not checks["link_up"]:
        problems.append(f"{netns}:{link['interface']} is missing or down")
    elif not checks["link_address"]:
        problems.append(f"{netns}:{link['interface']} lacks {link['address']}/{link['prefix']} or MTU {link['mtu']}")
    host_dir = f"{host['dir']}/"
    checks["sshd"] = probe.process(ssh.get("pid"), host_dir, netns)
    if not checks["sshd"]:
        problems.append(f"sshd (pid {ssh.get('pid')}) is not running in {netns}")
    checks["ssh_banner"] = checks["sshd"] and probe.ssh_banner(ssh["address"], ssh["port"])
    if checks["sshd"] and not checks["ssh_banner"]:
        problems.append(f"no SSH-2.0 banner from {ssh['address']}:{ssh['port']}")
    services = []
    for svc in host.get("services", []):
        pid = current_pid(svc)
        alive = probe.process(pid, host_dir, netns)
        healthy = alive and probe.http_ok(svc["health_url"])
        if not alive:
            problems.append(f"service {svc['name']} (pid {pid}) is not running in {netns}")
        elif not healthy:
            problems.append(f"service {svc['name']}: {svc['health_url']} does not answer 200")
        services.append({"name": svc["name"], "url": svc["url"], "model": svc["model"], "port": svc["port"],
                         "pid": pid, "log": svc.get("log"), "alive": alive, "healthy": healthy})
    checks["services"] = all(s["healthy"] for s in services)
    out = {
        "name": host["name"],
        "id": host["id"],
        "netns": netns,
        "management_address": mgmt["address"],
        "controller_interface": mgmt["controller_interface"],
        "controller_address": mgmt["controller_address"],
        "link_interface": link["interface"],
        "link_address": link["address"],
        "link_prefix": link["prefix"],
        "link_peer_address": link["peer_address"],
        "link_mtu": link["mtu"],
        "ssh_address": ssh["address"],
        "ssh_port": ssh["port"],
        "ssh_user": ssh["user"],
        "ssh_key": ssh["private_key"],
        "sshd_pid": ssh.get("pid"),
        "state_dir": host["state_dir"],
        "sysfs_root": host["sysfs_root"],
        "nvml_snapshot": host["nvml_snapshot"],
        "gpus": gpu_holders(host["nvml_snapshot"]),
        "model_path": host["model_path"],
        "services": services,
        "checks": checks,
        "problems": problems,
        "healthy": not problems,
    }
    if link.get("fabric"):  # a cluster host's port: the fabric's htb shaping, not a driver's link profile
        fabric = link["fabric"]
        out["link_fabric"] = fabric
        out["link_profile"] = (f"fabric {fabric['port_mbit']:g} Mbit/s" + (
            f", suspect: {fabric['flow_mbit']:g} Mbit/s a flow" if fabric.get("flow_mbit") else ""))
        return out
    if "profile" in link:
        out["link_profile"] = link["profile"]  # what lab.json recorded at build time
    # what tc shows now replaces it (a probe without link_profile, or a failed read, keeps the recorded one)
    current = probe.link_profile(netns, link["interface"]) if hasattr(probe, "link_profile") else None
    if current is not None:
        out["link_profile"] = current["profile"]
        out["link_profile_parameters"] = current["parameters"]
        expected = expected_link_profile(host, driver_profiles)
        if expected is not None and checks["link_up"]:
            out["link_profile_expected"] = expected
            problem = _link_profile_problem(netns, link["interface"], current, expected)
            checks["link_profile"] = problem is None
            if problem:
                problems.append(problem)
                out["healthy"] = False
    return out


def router_status(router: dict, probe) -> dict:
    """The lab's router: its process (in the root namespace, recognised by its process title) and its
    ``/readiness`` (its ``/health`` answers 200 even with no worker)."""
    alive = probe.process(router.get("pid"), ROUTER_TITLE, None)
    ready = alive and probe.http_ok(router["readiness_url"])
    problems = []
    if not alive:
        problems.append(f"router (pid {router.get('pid')}) is not running")
    elif not ready:
        problems.append(f"router: {router['readiness_url']} does not answer 200")
    return {"url": router["url"], "pid": router.get("pid"), "workers": router["workers"], "log": router["log"],
            "alive": alive, "healthy": ready, "problems": problems}


def gateway_daemons(gateway: dict) -> list[tuple[str, str, dict, str]]:
    """The gateway's daemons as ``(key, what, spec, health URL)``: the large-model server, each LiteLLM instance,
    nginx (whose health URL is the public route's ``/health/readiness``)."""
    return ([("large", "large-model server", gateway["large"], gateway["large"]["health_url"])]
            + [(i["name"], f"instance {i['name']}", i, f"{i['url']}/health/readiness") for i in gateway["instances"]]
            + [("front", "nginx", gateway["front"], gateway["front"]["readiness_url"])])


def gateway_status(gateway: dict, probe) -> dict:
    """The lab's gateway: each daemon runs (its command line names the gateway directory) and answers 200 on its
    health URL."""
    expect = f"{gateway['dir']}/"
    problems, results = [], {}
    for key, what, daemon, url in gateway_daemons(gateway):
        pid = current_pid(daemon)
        alive = probe.process(pid, expect, None)
        healthy = alive and probe.http_ok(url)
        results[key] = {"pid": pid, "url": url, "alive": alive, "healthy": healthy}
        if not alive:
            problems.append(f"gateway: {what} (pid {pid}) is not running")
        elif not healthy:
            problems.append(f"gateway: {what}: {url} does not answer 200")
    return {"public_url": gateway["front"]["url"], "key_file": gateway["key_file"], "config": gateway["config"],
            "daemons": results, "healthy": not problems, "problems": problems}


def status(where, probe=None) -> dict:
    """The lab's state: ``where`` is a lab dir, or a lab inventory (file or directory) naming one.

    ``state`` is ``up`` (built and every check passes), ``degraded`` (built, something failed, or leftovers without
    a ``lab.json``) or ``down`` (nothing there).
    """
    probe = probe or SystemProbe()
    name, lab_dir = resolve_lab(where)
    record = read_lab_json(lab_dir)
    if record is not None:
        name = record.get("name", name)
    leftovers = list_netns(name) if name else []
    result = {
        "format": STATUS_FORMAT,
        "lab": name,
        "lab_dir": str(lab_dir),
        "lab_json": str(Path(lab_dir) / "lab.json"),
        "built": record is not None,
        "built_at": None,
        "spec_digest": None,
        "healthy": False,
        "state": "down",
        "ssh_key": None,
        "known_hosts": None,
        "hosts": [],
        "stray_netns": [],
        "problems": [],
        "restart": None,
    }
    if record is None:
        result["stray_netns"] = leftovers
        if leftovers:
            result["state"] = "degraded"
            result["problems"].append(f"namespaces {', '.join(leftovers)} exist but {result['lab_json']} does not: "
                                      "a half-built lab; `inferlab lab down` removes it")
        return result
    if record.get("format") != LAB_JSON_FORMAT:
        raise LabError(f"{result['lab_json']}: format {record.get('format')!r}, expected {LAB_JSON_FORMAT!r}")
    result["built_at"] = record.get("built_at")
    result["spec_digest"] = record.get("spec_digest")
    result["ssh_key"] = record["ssh"]["private_key"]
    result["known_hosts"] = record["ssh"]["known_hosts"]
    driver_profiles = (record.get("link") or {}).get("driver_profiles")
    result["hosts"] = [host_status(h, probe, driver_profiles) for h in record["hosts"]]
    known = {h["netns"] for h in record["hosts"]}
    switch = record.get("switch") or {}
    if switch:  # a cluster's switch: the bridge's namespace
        known.add(switch["netns"])
        result["switch"] = {"netns": switch["netns"], "present": probe.netns_exists(switch["netns"])}
        if not result["switch"]["present"]:
            result["problems"].append(f"the switch's namespace {switch['netns']} is missing: no host reaches another")
    result["stray_netns"] = [n for n in leftovers if n not in known]
    for host in result["hosts"]:
        result["problems"].extend(f"{host['name']}: {p}" for p in host["problems"])
    if record.get("router"):
        result["router"] = router_status(record["router"], probe)
        result["problems"].extend(result["router"]["problems"])
    for key, (mark, what, without) in HARDWARE_DAEMONS.items():
        if not record.get(key):
            continue
        pid = current_pid(record[key])
        alive = probe.process(pid, mark, None)
        result[key] = {"pid": pid, "alive": alive, "log": record[key]["log"]}
        if not alive:
            result["problems"].append(f"{what} (pid {pid}) is not running: {without} (see {record[key]['log']})")
    if record.get("gateway"):
        result["gateway"] = gateway_status(record["gateway"], probe)
        result["problems"].extend(result["gateway"]["problems"])
    if result["stray_netns"]:
        result["problems"].append(f"stray namespaces not in lab.json: {', '.join(result['stray_netns'])}")
    result["healthy"] = not result["problems"]
    result["state"] = "up" if result["healthy"] else "degraded"
    result["restart"] = restart_plan(result)
    return result


def restart_plan(result: dict) -> list[dict] | None:
    """What ``lab up`` may start again alone instead of rebuilding the lab: ``[]`` for a healthy lab, the daemons
    to start (``{"kind": "service", "host", "name"}``, ``{"kind": "router"}``) when every problem is one of those
    daemons no longer running, ``None`` when anything else is wrong (a rebuild). A service is started again only
    inside a host whose namespaces, links and sshd all pass their checks (it runs in sshd's namespaces); an
    unhealthy daemon that still runs, a gateway daemon or a hardware daemon always means a rebuild."""
    restart: list[dict] = []
    for host in result["hosts"]:
        dead = [s for s in host["services"] if not s["alive"]]
        if dead and not all(v for k, v in host["checks"].items() if k != "services"):
            return None
        restart.extend({"kind": "service", "host": host["name"], "name": s["name"]} for s in dead)
    router = result.get("router")
    if router and not router["alive"]:
        restart.append({"kind": "router"})
    return restart if len(restart) == len(result["problems"]) else None


def gpu_holders(snapshot: str) -> list[dict]:
    """What holds each GPU of a lab host now, from its rendered NVML snapshot; [] when it cannot be read."""
    try:
        document = json.loads(Path(snapshot).read_text())
        return [{"index": g["index"], "used_mib": g["memory_used_bytes"] // 2**20,
                 "total_mib": g["memory_total_bytes"] // 2**20,
                 "processes": [{"pid": p["pid"], "name": p["name"], "used_mib": (p["used_memory_bytes"] or 0) // 2**20}
                               for p in g.get("compute_processes") or []]}
                for g in document["gpus"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def render_status_text(st: dict) -> str:
    lines = [f"lab {st['lab'] or '?'}: {st['state']}  ({st['lab_dir']})"]
    if not st["built"]:
        lines.append("  not built: `inferlab lab up` builds it")
    else:
        lines.append(f"  built at {st['built_at']}; ssh key {st['ssh_key']}; known_hosts {st['known_hosts']}")
        header = ("HOST", "NETNS", "SSH", "LINK", "SERVICES", "STATE")
        rows = []
        for h in st["hosts"]:
            link = f"{h['link_interface']} {h['link_address']}/{h['link_prefix']} -> {h['link_peer_address']}"
            link += " up" if h["checks"]["link_up"] else " DOWN"
            if "link_profile" in h:
                link += f" ({h['link_profile']})"
            ssh = f"root@{h['ssh_address']}:{h['ssh_port']}"
            svcs = ", ".join(f"{s['name']} {s['url']} {'ok' if s['healthy'] else 'FAIL'}" for s in h["services"])
            rows.append((h["name"], h["netns"], ssh, link, svcs or "-", "ok" if h["healthy"] else "FAIL"))
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            lines.append("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        for h in st["hosts"]:
            lines.append(f"  {h['name']}: state {h['state_dir']}; sysfs {h['sysfs_root']}; nvml {h['nvml_snapshot']}")
            for gpu in h.get("gpus") or []:
                held = ", ".join(f"{p['name']} pid {p['pid']} {p['used_mib']} MiB" for p in gpu["processes"])
                lines.append(f"    GPU {gpu['index']}: {gpu['used_mib']} of {gpu['total_mib']} MiB used"
                             f"{' by ' + held if held else ''}")
        if st.get("router"):
            router = st["router"]
            lines.append(f"  router {router['url']} over {', '.join(router['workers'])}: "
                         f"{'ok' if router['healthy'] else 'FAIL'} (pid {router['pid']}, log {router['log']})")
        elif st.get("gateway"):
            lines.append("  router: none (the gateway balances over the original replicas)")
        if st.get("gateway"):
            gateway = st["gateway"]
            daemons = ", ".join(f"{name} {'ok' if d['healthy'] else 'FAIL'}" for name, d in gateway["daemons"].items())
            lines.append(f"  gateway {gateway['public_url']} (key file {gateway['key_file']}): {daemons}")
    for problem in st["problems"]:
        lines.append(f"  problem: {problem}")
    if st["problems"] and st["built"]:
        restart = st.get("restart")
        lines.append("  `inferlab lab up` would " + (
            "start again: " + ", ".join(r.get("name", r["kind"]) for r in restart) if restart
            else "remove the lab and build it again"))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------------------
# command line


def _print(obj) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inferlab.lab.control",
                                     description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("preflight", help="root, tools and route clashes, as JSON")
    p.add_argument("--name", required=True)
    p.add_argument("--octet", required=True)
    p = sub.add_parser("check-routes", help="the route-clash check alone (exit 1 on a clash)")
    p.add_argument("--name", required=True)
    p.add_argument("--octet", required=True)
    p.add_argument("--routes", help="a saved `ip -j -4 route show table all` (default: read this machine's)")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("status", help="the lab's state")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--lab-dir")
    group.add_argument("-i", "--inventory")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("write-tree", help="converge a file tree from a JSON spec on stdin")
    p.add_argument("--root", required=True)
    p.add_argument("--check", action="store_true")
    p = sub.add_parser("write-record", help="write lab.json from {spec, spec_digest, built_at} on stdin")
    p.add_argument("--lab-dir", required=True)
    p.add_argument("--check", action="store_true")
    p = sub.add_parser("stop-pidfiles", help="stop the lab's daemons by pidfile")
    p.add_argument("--lab-dir", required=True)
    p = sub.add_parser("kill-netns-pids", help="kill what still runs in the lab's namespaces")
    p.add_argument("--name", required=True)
    p = sub.add_parser("kill-lab-scripts", help="kill what runs a script installed under the lab (controller side)")
    p.add_argument("--lab-dir", required=True)
    args = parser.parse_args(argv)

    try:
        if args.command == "preflight":
            _print(preflight(args.name, args.octet))
        elif args.command == "check-routes":
            routes = json.loads(Path(args.routes).read_text()) if args.routes else read_routes()
            subnets = lab_subnets(args.octet)
            check_name(args.name)
            clashes = route_clashes(routes, args.name, args.octet)
            if args.json:
                _print({"subnets": {k: str(v) for k, v in subnets.items()}, "clashes": clashes})
            if clashes:
                print(clash_problem(clashes, subnets["management"]), file=sys.stderr)
            return 1 if clashes else 0
        elif args.command == "status":
            st = status(args.lab_dir or args.inventory)
            print(json.dumps(st, indent=2) if args.json else render_status_text(st))
        elif args.command == "write-tree":
            _print(write_tree(Path(args.root), json.load(sys.stdin), check=args.check))
        elif args.command == "write-record":
            _print(write_record(Path(args.lab_dir), json.load(sys.stdin), check=args.check))
        elif args.command == "stop-pidfiles":
            _print(stop_pidfiles(Path(args.lab_dir)))
        elif args.command == "kill-netns-pids":
            check_name(args.name)
            _print(kill_netns_pids(args.name))
        elif args.command == "kill-lab-scripts":
            _print(kill_lab_scripts(Path(args.lab_dir)))
    except LabError as exc:
        print(f"inferlab.lab.control: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
