"""The lab's names and addresses: a lab name, its namespaces and veths, its subnets (management and direct
link, clear of cloud metadata and RFC 3927's reserved /24s) and the route-clash check."""

from __future__ import annotations

import re
from collections.abc import Iterable
from ipaddress import IPv4Network, ip_network

from inferlab.lab.layout import LabError

METADATA_NET = ip_network("169.254.169.0/24")
LINK_LOCAL = ip_network("169.254.0.0/16")
OCTET_MIN, OCTET_MAX = 1, 154  # 169.254.0.0/24 and 169.254.255.0/24 are reserved (RFC 3927); link octet = octet + 100
LINK_OCTET_OFFSET = 100
# A lab name becomes netns names (<name>-<id>) and root-side veth names (<name>-<id>-m, at most 15 characters).
# With ids of 1-2 characters that stays within 10 + 1 + 2 + 2.
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,9}$")


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
