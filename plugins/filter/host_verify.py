# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Turn what host_verify observed into checks: each says what was expected, what was found, which variable sets it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: host_verify_state
short_description: Judge a host's observed state against the inventory's expectations
version_added: 0.1.0
author: inferlab developers (@inferlab)
description:
  - Builds the host's verified state (also its known-good snapshot) from the results host_verify collected,
    with one check per expectation.
  - Each check carries C(expected), C(found), the inventory C(variable) that sets the expectation, and a
    kubespray-style "Stop if ..." C(message).
options:
  _input:
    description: What the role observed (the host_observe module's result, with host, time and layers).
    type: dict
    required: true
  expected:
    description: The expectations, keyed like the inferlab_* inventory variables without the prefix.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Judge the observations
  ansible.builtin.set_fact:
    state: "{{ observed | inferlab.distributed.host_verify_state(expected) }}"
"""

RETURN = r"""
_value:
  description: The host state with C(checks) (list of dicts) and C(ok) (all checks passed).
  type: dict
"""

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.module_utils import _tc
from ansible_collections.inferlab.distributed.plugins.module_utils._host_observe import LINK_KINDS
from ansible_collections.inferlab.distributed.plugins.module_utils._ping import PingParseError, parse_ping

MIB = 2 ** 20
# what of an Ethernet NIC the verified state keeps (the restore compares them with the known-good snapshot's)
ETHERNET_LINK_KEYS = ("speed_mbps", "duplex", "carrier_changes", "driver", "driver_version", "firmware_version",
                      "offloads")
COMM_LENGTH = 15  # TASK_COMM_LEN - 1


class _Checks(object):
    def __init__(self, host):
        self.host = host
        self.items = []

    def failed(self, name):
        """The failed check called ``name``; None when it passed or was not made."""
        return next((item for item in self.items if item["name"] == name and not item["ok"]), None)

    def add(self, name, ok, expected, found, variable, what, after=None):
        """``after``: ``(an earlier check's name, why)``. When that check failed, this one could not be measured
        (a missing model path has no free space to read): found says so and why, and the variable is the earlier
        check's, so that a failed dry run names one cause once instead of a "None" per check that follows from it."""
        earlier = self.failed(after[0]) if after and not ok else None
        if earlier:
            found = "nothing, it cannot be measured: %s ('%s' failed)" % (after[1], after[0])
            variable = earlier["variable"]
        message = "" if ok else "Stop if %s on %s: expected %s, found %s; set %s" % (
            what, self.host, expected, found, variable)
        self.items.append({"name": name, "ok": bool(ok), "expected": expected, "found": found,
                           "variable": variable, "message": message})


def gpu_process_matches(name, wanted):
    """Whether NVML's ``name`` for a GPU process is one of ``wanted``: the same, or a name the kernel's ``comm`` cut
    to its 15 characters (what a host without the full title shows of ``sglang::scheduler_TP0``)."""
    return bool(name) and any(name == w or (len(name) == COMM_LENGTH and w.startswith(name)) for w in wanted)


def _link_peer(tbnet, interface):
    """The XDomain peer bound to `interface`, or None."""
    binding = (tbnet.get("interfaces") or {}).get(interface)
    if not binding:
        return None
    for peer in tbnet.get("peers") or []:
        if peer.get("device") == binding.get("peer"):
            return peer
    return None


def _addresses(ip_json):
    try:
        links = json.loads(ip_json or "[]")
    except ValueError:
        return []
    return [a.get("local") for link in links for a in link.get("addr_info", []) if a.get("local")]


def _qdisc_tree(text):
    """The link's egress qdisc tree (``_tc.tree``) from ``tc -j qdisc show``; None when it was not read."""
    if text is None:
        return None
    try:
        return _tc.tree(_tc.parse_qdiscs(text))
    except _tc.TcError:
        return None


def _service_state(result):
    """One answer of host_observe's `services` (its `service` is the entry of inferlab_original_services)."""
    service = result.get("service") or {}
    body = result.get("json") or {}
    choices = body.get("choices") or [{}]
    text = ((choices[0].get("message") or {}).get("content") or "") if isinstance(choices[0], dict) else ""
    usage = body.get("usage") or {}
    tokens = usage.get("completion_tokens")
    status = result.get("status")
    ok = status == 200 and bool(text.strip()) and isinstance(tokens, int) and tokens > 0
    return {
        "name": service.get("name"), "url": service.get("url"), "model": service.get("model"), "ok": ok,
        "status": status if isinstance(status, int) and status > 0 else None,
        "completion_tokens": tokens if isinstance(tokens, int) else None,
        "text_sample": text[:80] or None,
        "error": None if ok else (result.get("msg") or "no text or no usage tokens in the reply"),
        # after a restart: how long it took to serve ({ready_timeout_s, waited_s, attempts}); null before
        "wait": result.get("wait"),
    }


def _service_found(service):
    """What a service answered, and after a restart how long it was waited for."""
    found = "HTTP 200" if service["ok"] else "HTTP %s: %s" % (service["status"], service["error"])
    wait = service.get("wait") or {}
    if wait.get("ready_timeout_s"):
        found += " (after %s s, %d request(s); ready_timeout_s %g)" % (
            wait.get("waited_s"), wait.get("attempts") or 0, wait["ready_timeout_s"])
    return found


def _thunderbolt_checks(checks, expected, tbnet, peer, interface):
    """A Thunderbolt link: its XDomain peer, the speed per lane and the lanes both ways."""
    checks.add("link peer present", peer is not None, "a Thunderbolt XDomain peer bound to %s" % interface,
               "peer %s (%s)" % (peer.get("device_name"), peer.get("device")) if peer else
               "; ".join(tbnet.get("notes") or []) or "no service bound to %s" % interface,
               "inferlab_link_interface (and inferlab_tbnet_sysfs_root)",
               "no Thunderbolt peer answers on the direct link")
    no_peer = ("link peer present", "no Thunderbolt peer on %s" % interface)
    rx, tx = (peer or {}).get("rx_speed_gbps"), (peer or {}).get("tx_speed_gbps")
    min_speed = float(expected["min_speed_gbps"])
    checks.add("link speed", None not in (rx, tx) and rx >= min_speed and tx >= min_speed,
               ">= %s Gb/s per lane both ways" % min_speed, "rx %s Gb/s, tx %s Gb/s" % (rx, tx),
               "inferlab_link_min_speed_gbps", "the direct link trained below the expected per-lane speed",
               after=no_peer)
    rx_lanes, tx_lanes = (peer or {}).get("rx_lanes"), (peer or {}).get("tx_lanes")
    min_lanes = int(expected["min_lanes"])
    checks.add("link lanes", None not in (rx_lanes, tx_lanes) and rx_lanes >= min_lanes and tx_lanes >= min_lanes,
               ">= %d lane(s) both ways" % min_lanes, "rx %s, tx %s" % (rx_lanes, tx_lanes),
               "inferlab_link_min_lanes", "the direct link has fewer lanes than expected",
               after=no_peer)


def _ethernet_checks(checks, expected, nic, interface):
    """An Ethernet link, by what it is: the speed it negotiated and its duplex (the NIC, its driver, firmware and
    offloads are recorded beside them)."""
    no_interface = ("link interface exists", "interface %s is missing" % interface)
    speed = nic.get("speed_mbps")
    min_speed = float(expected["min_speed_gbps"])
    why_none = "; ".join(nic.get("notes") or []) or "operstate %s" % nic.get("operstate")
    found = "%s Mb/s" % speed if speed is not None else "no speed (carrier %s, %s)" % (nic.get("carrier"), why_none)
    checks.add("link speed", speed is not None and speed >= min_speed * 1000, ">= %s Gb/s negotiated" % min_speed,
               found, "inferlab_link_min_speed_gbps",
               "the Ethernet link %s negotiated below the expected speed" % interface,
               after=no_interface)
    duplex = expected.get("link_duplex") or "full"
    checks.add("link duplex", nic.get("duplex") == duplex, duplex, nic.get("duplex"), "inferlab_link_duplex",
               "the Ethernet link %s is not at the expected duplex" % interface,
               after=no_interface)


def _link_identity(kind, peer, nic):
    """What the link is, in the verified state: the Thunderbolt peer's training, or the Ethernet NIC."""
    if kind == "thunderbolt":
        return {"peer_present": peer is not None, "peer_device_name": (peer or {}).get("device_name"),
                "rx_speed_gbps": (peer or {}).get("rx_speed_gbps"), "tx_speed_gbps": (peer or {}).get("tx_speed_gbps"),
                "rx_lanes": (peer or {}).get("rx_lanes"), "tx_lanes": (peer or {}).get("tx_lanes")}
    return {key: nic.get(key) for key in ETHERNET_LINK_KEYS}


def host_verify_state(observed, expected):
    if not isinstance(observed, dict) or not isinstance(expected, dict):
        raise AnsibleFilterError("host_verify_state expects two dicts, got %s and %s"
                                 % (type(observed).__name__, type(expected).__name__))
    host = observed["host"]
    checks = _Checks(host)
    interface = expected["link_interface"]
    tbnet = observed.get("tbnet") or {}
    net = observed.get("net") or {}
    nvml = observed.get("nvml") or {}

    # Direct link: the interface, its address, MTU, the Thunderbolt peer and its speed, and a ping both ways.
    iface = (net.get("interfaces") or {}).get(interface)
    checks.add("link interface exists", iface is not None, "interface %s" % interface,
               "interfaces %s" % sorted((net.get("interfaces") or {}).keys()) if iface is None else interface,
               "inferlab_link_interface", "the direct-link interface is missing")
    operstate = iface.get("operstate") if iface else None
    no_interface = ("link interface exists", "interface %s is missing" % interface)
    checks.add("link interface up", operstate == "up", "up", operstate, "inferlab_link_interface",
               "the direct-link interface %s is not up" % interface, after=no_interface)
    mtu = iface.get("mtu") if iface else None
    checks.add("link MTU", mtu == expected["link_mtu"], expected["link_mtu"], mtu, "inferlab_link_mtu",
               "the MTU of %s differs" % interface, after=no_interface)
    addresses = _addresses(observed.get("addresses"))
    checks.add("link address", expected["link_address"] in addresses, expected["link_address"],
               addresses or "no IPv4 address", "inferlab_link_address",
               "%s does not carry the expected address" % interface, after=no_interface)
    kind = expected.get("link_kind") or "thunderbolt"
    if kind not in LINK_KINDS:
        raise AnsibleFilterError("link_kind must be one of %s, got %r (inferlab_link_kind)"
                                 % (", ".join(LINK_KINDS), kind))
    peer = _link_peer(tbnet, interface) if kind == "thunderbolt" else None
    nic = (observed.get("nic") or {}) if kind == "ethernet" else {}
    if kind == "thunderbolt":
        _thunderbolt_checks(checks, expected, tbnet, peer, interface)
    else:
        _ethernet_checks(checks, expected, nic, interface)
    ping = observed.get("ping") or {}
    try:
        ping_result = parse_ping(ping.get("stdout"))
    except PingParseError:
        ping_result = {"received": 0, "transmitted": None, "loss_pct": 100.0, "rtt_ms": None, "replies_ms": []}
    ping_ok = ping.get("rc") == 0 and ping_result["received"] > 0
    checks.add("link ping to peer", ping_ok, "replies from %s over %s" % (expected["peer_address"], interface),
               "%s%% loss (%s)" % (ping_result["loss_pct"],
                                   (ping.get("stderr") or "").strip() or "rc %s" % ping.get("rc")),
               "inferlab_link_peer_address", "the peer's link address does not answer", after=no_interface)

    # GPUs.
    gpus = nvml.get("gpus") or []
    checks.add("GPU count", len(gpus) == int(expected["gpu_count"]), int(expected["gpu_count"]), len(gpus),
               "inferlab_gpu_count", "the GPU count differs")
    names = sorted(set(g.get("name") for g in gpus))
    no_gpu = ("GPU count", "no GPU was found") if not gpus else None
    checks.add("GPU model", bool(gpus) and names == [expected["gpu_name"]], expected["gpu_name"], names,
               "inferlab_gpu_name", "the GPU model differs", after=no_gpu)
    originals = list(expected.get("original_gpu_processes") or [])
    allowed = list(expected.get("allowed_compute_processes") or [])
    min_free = int(expected["gpu_min_free_mib"])
    # per GPU: (index, MiB free now, MiB the originals' processes hold, which their pause frees)
    memory = [(g.get("index"), int(g.get("memory_free_bytes") or 0) // MIB,
               sum(int(p.get("used_memory_bytes") or 0) for p in g.get("compute_processes") or []
                   if gpu_process_matches(p.get("name"), originals)) // MIB) for g in gpus]
    checks.add("GPU free memory", bool(gpus) and min(free + held for _i, free, held in memory) >= min_free,
               ">= %d MiB free on each GPU once the original services are paused" % min_free,
               "; ".join("GPU %s: %d MiB free + %d MiB held by the original services" % m for m in memory) or "no GPU",
               "inferlab_gpu_min_free_mib", "a GPU would have too little free memory even with the originals paused",
               after=no_gpu)
    unexpected = ["%s (pid %s, GPU %s)" % (p.get("name"), p.get("pid"), g.get("index"))
                  for g in gpus for p in g.get("compute_processes") or []
                  if not gpu_process_matches(p.get("name"), originals + allowed)]
    checks.add("no unexpected GPU processes", not unexpected, "only %s" % ((originals + allowed) or "no process"),
               unexpected or "none",
               "inferlab_allowed_compute_processes (or the service's gpu_processes in inferlab_original_services)",
               "a process the inventory does not know holds a GPU")

    # Storage.
    storage = observed.get("storage") or {}
    checks.add("model path exists", bool(storage.get("exists")), storage.get("model_path"), "missing"
               if not storage.get("exists") else "present", "inferlab_model_path", "the model path is missing")
    free_bytes = storage.get("disk_free_bytes")
    free_gb = round(free_bytes / 1e9, 1) if isinstance(free_bytes, int) else None
    min_gb = float(expected["min_disk_free_gb"])
    checks.add("disk free", free_gb is not None and free_gb >= min_gb, ">= %s GB free" % min_gb,
               "%s GB" % free_gb, "inferlab_min_disk_free_gb", "the model's disk is too full",
               after=("model path exists", "the model path %s is missing" % storage.get("model_path")))

    # Original services: a real completion, not a port check.
    services = [_service_state(r) for r in observed.get("services") or []]
    for service in services:
        checks.add("service %s answers" % service["name"], service["ok"],
                   "HTTP 200 with text and completion tokens > 0 from %s" % service["url"],
                   _service_found(service),
                   "inferlab_original_services", "original service %s does not answer a real request" % service["name"])

    module = tbnet.get("module") or {}
    return {
        "host": host,
        "time": observed["time"],
        "ok": all(c["ok"] for c in checks.items),
        "kernel_release": tbnet.get("kernel_release"),
        "layers": observed["layers"],
        "link": dict({
            "kind": kind, "interface": interface, "address": expected["link_address"],
            "peer_address": expected["peer_address"], "operstate": operstate, "mtu": mtu,
            "ping_to_peer": {k: ping_result.get(k) for k in ("transmitted", "received", "loss_pct", "rtt_ms")},
            # the queueing disciplines: a restore must put them back (null: not read)
            "qdiscs": _qdisc_tree(observed.get("qdiscs")),
        }, **_link_identity(kind, peer, nic)),
        "identity": observed.get("identity"),
        "tbnet_module": {"loaded": bool(module.get("loaded")), "parameters": module.get("parameters") or {},
                         "srcversion": module.get("srcversion"), "taint": module.get("taint")},
        "nvml_source": nvml.get("source"),
        "driver_version": nvml.get("driver_version"),
        "gpus": [dict({k: g.get(k) for k in ("index", "name", "uuid", "memory_total_bytes", "memory_free_bytes")},
                      compute_processes=[{k: p.get(k) for k in ("pid", "name", "used_memory_bytes")}
                                         for p in g.get("compute_processes") or []])
                 for g in gpus],
        "storage": {"model_path": storage.get("model_path"), "model_path_exists": bool(storage.get("exists")),
                    "disk_free_gb": free_gb},
        "services": services,
        "checks": checks.items,
    }


class FilterModule(object):
    def filters(self):
        return {"host_verify_state": host_verify_state}
