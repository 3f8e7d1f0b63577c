# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Compare a host's state after the restore with its known-good snapshot (restore_differences), and gather every
host's differences into the restore's problems (restore_problems, documented in restore_problems.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: restore_differences
short_description: List how a host's re-verified state differs from its known-good snapshot
version_added: 0.1.0
author: inferlab developers (@inferlab)
description:
  - Compares the fields a restore must bring back (link state, speed and lanes, an Ethernet NIC's speed, duplex,
    driver, firmware and each offload, the link's queueing disciplines (kind, handle, parent and options of each),
    the thunderbolt_net module's parameters and srcversion, GPUs, each original service answering) and every failing
    check.
  - Returns an empty list when the host is back to its known-good state.
options:
  _input:
    description: The host_verify state measured after the restore.
    type: dict
    required: true
  known_good:
    description: The host_verify state recorded before any change, or null when none was recorded.
    type: dict
"""

EXAMPLES = r"""
- name: Compare
  ansible.builtin.set_fact:
    differences: "{{ host_verify_state | inferlab.distributed.restore_differences(known_good) }}"
"""

RETURN = r"""
_value:
  description: Human-readable differences, one string each; empty when restored.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.module_utils import _tc

# (label, path) pairs compared between the known-good snapshot and the state after the restore.
COMPARED = [
    ("link operstate", ("link", "operstate")),
    ("link MTU", ("link", "mtu")),
    ("link peer present", ("link", "peer_present")),
    ("link rx speed (Gb/s per lane)", ("link", "rx_speed_gbps")),
    ("link tx speed (Gb/s per lane)", ("link", "tx_speed_gbps")),
    ("link rx lanes", ("link", "rx_lanes")),
    ("link tx lanes", ("link", "tx_lanes")),
    ("link speed (Mb/s)", ("link", "speed_mbps")),
    ("link duplex", ("link", "duplex")),
    ("link NIC driver", ("link", "driver")),
    ("link NIC driver version", ("link", "driver_version")),
    ("link NIC firmware", ("link", "firmware_version")),
    ("thunderbolt_net loaded", ("tbnet_module", "loaded")),
    ("thunderbolt_net parameters", ("tbnet_module", "parameters")),
    ("thunderbolt_net srcversion", ("tbnet_module", "srcversion")),
    ("kernel release", ("kernel_release",)),
]


def _get(state, path):
    for key in path:
        state = (state or {}).get(key)
    return state


def _gpu_processes(state):
    """``{GPU index: sorted process names}`` of a verification state (a known-good snapshot from before a GPU
    process list was recorded has none: nothing to compare)."""
    return {g.get("index"): sorted(str(p.get("name")) for p in g.get("compute_processes") or [])
            for g in state.get("gpus") or [] if "compute_processes" in g}


def _offload_differences(before, after):
    """An Ethernet NIC's offloads that differ from the known-good snapshot's, one line each (none were read
    before: nothing to compare)."""
    if before is None:
        return []
    if after is None:
        return ["link offloads: not read now (known-good: %d read)" % len(before)]
    changed = sorted(name for name in set(before) | set(after)
                     if (before.get(name) or {}).get("on") != (after.get(name) or {}).get("on"))
    return ["link offload %s: known-good %s, now %s" % (
        name, _on_off(before.get(name)), _on_off(after.get(name))) for name in changed]


def _on_off(feature):
    return "absent" if feature is None else "on" if feature.get("on") else "off"


def restore_differences(current, known_good=None):
    if not isinstance(current, dict) or not (known_good is None or isinstance(known_good, dict)):
        raise AnsibleFilterError("restore_differences expects a dict and a dict or null")
    differences = ["check failed: %s" % (c.get("message") or c.get("name"))
                   for c in current.get("checks") or [] if not c.get("ok")]
    if not known_good:
        return differences
    for label, path in COMPARED:
        before, after = _get(known_good, path), _get(current, path)
        if before != after:
            differences.append("%s: known-good %r, now %r" % (label, before, after))
    differences.extend(_offload_differences(_get(known_good, ("link", "offloads")),
                                            _get(current, ("link", "offloads"))))
    # the link's queueing disciplines (a snapshot from before they were read, or a failed read, has none)
    qdiscs_before, qdiscs_after = _get(known_good, ("link", "qdiscs")), _get(current, ("link", "qdiscs"))
    if qdiscs_before is not None:
        changed = _tc.tree_differences(qdiscs_before, qdiscs_after) if qdiscs_after is not None else ["not read"]
        differences.extend("link qdiscs: %s (known-good: %s)" % (d, _tc.describe_tree(qdiscs_before))
                           for d in changed)
    gpus_before = [(g.get("uuid"), g.get("name")) for g in known_good.get("gpus") or []]
    gpus_after = [(g.get("uuid"), g.get("name")) for g in current.get("gpus") or []]
    if gpus_before != gpus_after:
        differences.append("GPUs: known-good %r, now %r" % (gpus_before, gpus_after))
    # the production processes back on their GPUs: their names (a restarted server has a new PID), per GPU
    held_before, held_after = _gpu_processes(known_good), _gpu_processes(current)
    if held_before and held_before != held_after:
        differences.append("GPU processes: known-good %r, now %r" % (held_before, held_after))
    answering_after = set(s.get("name") for s in current.get("services") or [] if s.get("ok"))
    for service in known_good.get("services") or []:
        if service.get("ok") and service.get("name") not in answering_after:
            differences.append("service %s answered before the change and does not now" % service.get("name"))
    return differences


def restore_problems(hostvars, hosts, controller_problems=None):
    """Every problem the restore left, each prefixed with where it was found: each host's ``__restore_differences``
    (a host without them: the restore did not run there), then the controller's."""
    if isinstance(hosts, str) or not all(isinstance(host, str) for host in hosts or []):
        raise AnsibleFilterError("restore_problems expects a list of host names, found %r" % (hosts,))
    problems = []
    for host in hosts or []:
        differences = hostvars[host].get("__restore_differences") if host in hostvars else None
        for difference in ["the restore did not run"] if differences is None else differences:
            problems.append("%s: %s" % (host, difference))
    return problems + ["controller: %s" % problem for problem in controller_problems or []]


class FilterModule(object):
    def filters(self):
        return {"restore_differences": restore_differences, "restore_problems": restore_problems}
