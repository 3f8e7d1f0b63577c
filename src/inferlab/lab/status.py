"""What ``inferlab lab status`` reports: each host's namespaces, link, daemons and GPUs, the router and the
gateway, checked live (SystemProbe) against ``lab.json``, and the restarts that would heal it."""

from __future__ import annotations

import json
import os
import re
import socket
import urllib.error
import urllib.request
from pathlib import Path

from inferlab.lab import layout
from inferlab.lab.commands import ip_json, run, which
from inferlab.lab.layout import (
    HARDWARE_DAEMONS,
    LAB_JSON_FORMAT,
    ROUTER_TITLE,
    STATUS_FORMAT,
    LabError,
    gateway_daemons,
)
from inferlab.lab.processes import list_netns, netns_inode, proc_cmdline, proc_netns_inode, proc_running, read_pidfile
from inferlab.lab.tc_module import REBUILD, TcModuleError, load_tc


class SystemProbe:
    """Live checks against this machine; tests pass a fake with the same methods."""

    def netns_exists(self, netns: str) -> bool:
        return (layout.NETNS_DIR / netns).exists()

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

    def link_profile(self, netns: str, ifname: str, tc) -> dict | None:
        """The link profile ``tc`` shows on ``netns``'s ``ifname`` now (``{profile, parameters, reason}``), as the
        lab's tc module ``tc`` reads it, or None when it cannot be read."""
        if not self.netns_exists(netns):
            return None
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
        return name, layout.LAB_ROOT / name
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


def lab_tc(record: dict, lab_json: str):
    """The tc module the lab recorded (``tc_module``, its copy of the collection's _tc.py); TcModuleError when a
    lab built before it had one, or its file is gone."""
    if not record.get("tc_module"):
        raise TcModuleError(f"{lab_json} names no tc_module to read the link profiles with (a lab built by an older "
                            f"inferlab): {REBUILD}")
    return load_tc(record["tc_module"])


def _link_profile_problem(netns: str, ifname: str, current: dict, expected: str, tc) -> str | None:
    wanted = tc.wanted_parameters(expected)
    if current["profile"] == expected and tc.same_parameters(current["parameters"], wanted):
        return None
    found = " ".join(str(part) for part in (current["profile"], current["parameters"]) if part)
    return (f"{netns}:{ifname} has the link profile {found} ({current['reason']}), not the lab's "
            f"{' '.join(str(part) for part in (expected, wanted) if part)}: a run changed it and nothing put it "
            "back (`inferlab lab up` rebuilds the lab)")


def host_status(host: dict, probe, driver_profiles: dict | None = None, tc=None) -> dict:
    """One host's checks; its link profile is read live only with the lab's tc module ``tc``."""
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
    # what tc shows now replaces it (no tc module, a probe without link_profile, or a failed read: the recorded one)
    readable = tc is not None and hasattr(probe, "link_profile")
    current = probe.link_profile(netns, link["interface"], tc) if readable else None
    if current is not None:
        out["link_profile"] = current["profile"]
        out["link_profile_parameters"] = current["parameters"]
        expected = expected_link_profile(host, driver_profiles)
        if expected is not None and checks["link_up"]:
            out["link_profile_expected"] = expected
            problem = _link_profile_problem(netns, link["interface"], current, expected, tc)
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
    tc, tc_problems = None, []
    if any(not h["link"].get("fabric") for h in record["hosts"]):  # a fabric's ports carry no link profile
        try:
            tc = lab_tc(record, result["lab_json"])
        except TcModuleError as exc:  # a problem, not an error: `lab up` and `lab down` read status first
            tc_problems.append(str(exc))
    result["hosts"] = [host_status(h, probe, driver_profiles, tc) for h in record["hosts"]]
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
    result["problems"].extend(tc_problems)
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
