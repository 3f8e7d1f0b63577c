# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which ring hosts stay in the tensor-parallel ring and which serve solo (the quarantine topology)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: topology_plan
short_description: Split the ring hosts into the TP ring and the hosts that serve solo
version_added: 0.1.0
author: inferlab developers (@inferlab)
description:
  - Reads each ring host's C(inferlab_topology) (V(ring), the default, or V(solo)) and says who serves how.
  - A host set to V(solo) is quarantined, pulled out of the ring on purpose while a suspicion about its transmit
    path is tested.
  - A ring needs two hosts; a single host left in the ring serves solo too (a ring of one).
  - Fails naming the host and the variable when a value is neither V(ring) nor V(solo).
options:
  _input:
    description: The ring hosts in inventory order (C(groups['ring'])); the first is rank 0.
    type: list
    elements: str
    required: true
  topologies:
    description: "C({host: topology}) for the ring hosts; a host left out is V(ring)."
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the topology
  ansible.builtin.set_fact:
    plan: >-
      {{ groups['ring'] | inferlab.distributed.topology_plan(
           dict(groups['ring'] | zip(groups['ring'] | map('extract', hostvars, 'inferlab_topology')
                                     | map('default', 'ring')))) }}
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    ring:
      description: The hosts that stay in the TP ring, in order; empty when fewer than two would stay.
      type: list
      elements: str
    solo:
      description: The hosts that serve solo, in inventory order (the quarantined ones and a ring of one).
      type: list
      elements: str
    quarantined:
      description: The hosts set to V(solo) by their C(inferlab_topology).
      type: list
      elements: str
    ring_of_one:
      description: The host left alone in the ring, which serves solo; V(null) when none.
      type: str
    changed:
      description: Whether the topology differs from the whole ring (some host serves solo).
      type: bool
  sample:
    ring: []
    solo: [lab-a, lab-b]
    quarantined: [lab-b]
    ring_of_one: lab-a
    changed: true
"""

from ansible.errors import AnsibleFilterError

TOPOLOGIES = ("ring", "solo")


def topology_plan(ring_hosts, topologies):
    """See DOCUMENTATION."""
    if not isinstance(ring_hosts, (list, tuple)) or not ring_hosts:
        raise AnsibleFilterError("topology_plan: expected the ring hosts (groups['ring']) as a non-empty list, "
                                 "found %r; put the TP hosts in the inventory group ring" % (ring_hosts,))
    if not isinstance(topologies, dict):
        raise AnsibleFilterError("topology_plan: expected topologies as {host: ring|solo}, found %r" % (topologies,))
    for host in ring_hosts:
        value = topologies.get(host, "ring")
        if value is None:
            value = "ring"
        if value not in TOPOLOGIES:
            raise AnsibleFilterError("topology_plan: %s has inferlab_topology %r; expected one of %s (set "
                                     "inferlab_topology on that host)" % (host, value, ", ".join(TOPOLOGIES)))
    quarantined = [h for h in ring_hosts if topologies.get(h) == "solo"]
    staying = [h for h in ring_hosts if h not in quarantined]
    ring = staying if len(staying) >= 2 else []
    ring_of_one = staying[0] if len(staying) == 1 else None
    return {
        "ring": ring,
        "solo": [h for h in ring_hosts if h not in ring],
        "quarantined": quarantined,
        "ring_of_one": ring_of_one,
        "changed": bool(quarantined),
    }


class FilterModule(object):
    """inferlab topology filter."""

    def filters(self):
        return {"topology_plan": topology_plan}
