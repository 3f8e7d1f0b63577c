"""The lab's preflight: root, the tools it needs (with the Debian package of each) and the route-clash check."""

from __future__ import annotations

import os
from collections.abc import Callable

from inferlab.lab.addressing import check_name, clash_problem, lab_subnets, route_clashes
from inferlab.lab.commands import read_routes, which
from inferlab.lab.layout import LabError

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
