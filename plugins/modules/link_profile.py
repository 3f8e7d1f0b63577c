#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: link_profile
short_description: Apply a named tc link profile to one interface's egress
version_added: 0.1.0
description:
  - Puts a named link profile on the egress of O(interface) with C(tc), to emulate the driver layer where the real
    driver cannot be swapped (the embedded lab); the P(inferlab.distributed.link_profile#role) role records it in the
    host's change ledger first.
  - V(clean) is no root qdisc of ours (the kernel default stays or comes back). V(tx_cliff) is a root C(tbf) rate
    cap (handle C(1ab:)); the sender's TCP backs off, so nothing is dropped. V(lossy) is the same C(tbf) with a
    small child C(pfifo) (handle C(1ac:), O(pfifo_limit) packets); bursts overflow it, giving real drops and real
    TCP retransmissions.
  - Idempotent. The current qdiscs are read with C(tc -j qdisc show dev IF) and compared with the wanted profile and
    parameters; C(tc qdisc replace) runs only when they differ. The kernel keeps the burst as a time at the rate,
    so it reads back a little lower than asked; a shortfall up to what 2 microseconds carry at the rate (plus 64
    bytes) counts as equal.
  - Before a change it returns the interface's whole egress qdisc tree (RV(previous_tree)), which the
    P(inferlab.distributed.link_profile#role) role records in the ledger so that the undo puts exactly that tree
    back. A root qdisc that this module did not make (a site's C(fq), a shaper, a C(tbf) with another handle) is
    replaced only when that tree can be made again (kinds C(noqueue), C(mq), C(pfifo_fast), C(pfifo), C(bfifo),
    C(tbf), C(fq), C(fq_codel), C(netem) without jitter, C(htb) without classes, with the options C(tc -j) shows).
    Any other tree is refused before anything changes, unless O(force=true).
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The qdiscs are read, nothing is changed; RV(commands) lists the commands that would run.
  diff_mode:
    support: full
    details: The profile and its parameters before and after.
  platform:
    support: full
    platforms: posix
options:
  interface:
    description:
      - The interface whose egress gets the profile, for example V(thunderbolt0).
    type: str
    required: true
  profile:
    description:
      - V(clean) removes our qdiscs; V(tx_cliff) caps the rate; V(lossy) caps the rate and drops when the small queue
        overflows.
    type: str
    required: true
    choices: [clean, tx_cliff, lossy]
  rate_mbit:
    description:
      - The C(tbf) rate in Mbit/s (10^6 bit/s), for V(tx_cliff) and V(lossy).
      - Default V(300) for V(tx_cliff) (a cliff far below a 20 Gb/s link) and V(1000) for V(lossy).
      - Ignored for V(clean).
    type: int
  burst_kb:
    description:
      - The C(tbf) bucket size in KiB (tc's C(kb)), for V(tx_cliff) and V(lossy). Default V(64), enough for the
        configured rate to be reached.
      - Ignored for V(clean).
    type: int
  latency_ms:
    description:
      - How long a packet may wait in the C(tbf) queue, in milliseconds, for V(tx_cliff) and V(lossy). Default V(50).
      - With V(lossy) the C(pfifo) child bounds the queue instead.
      - Ignored for V(clean).
    type: int
  pfifo_limit:
    description:
      - Packets the child C(pfifo) of V(lossy) holds before it drops.
      - Ignored for other profiles.
    type: int
    default: 10
  force:
    description:
      - Replace (or, for V(clean), delete) qdiscs that could not be put back exactly afterwards (RV(restorable) is
        false), for example an C(htb) with classes.
      - Nothing can put such a tree back.
    type: bool
    default: false
notes:
  - Units are tc's. V(300) Mbit/s is C(rate 300mbit); V(64) KiB is C(burst 64kb).
  - In the lab, the default V(tx_cliff) gave about 290 Mbit/s with no retransmissions. The default V(lossy) gave about
    750 Mbit/s, with roughly 40% of the packets dropped by the C(pfifo) and over 100000 TCP retransmissions in 3
    seconds (iperf3, one stream, over a veth pair).
requirements:
  - C(tc) from iproute2 (4.x or later, for C(-j))
seealso:
  - module: inferlab.distributed.change_ledger
"""

EXAMPLES = r"""
- name: Cap the link at 300 Mbit/s
  inferlab.distributed.link_profile:
    interface: thunderbolt0
    profile: tx_cliff

- name: Emulate the stock driver, dropping packets at 1 Gbit/s
  inferlab.distributed.link_profile:
    interface: thunderbolt0
    profile: lossy
    rate_mbit: 1000
    pfifo_limit: 10

- name: Back to the kernel default
  inferlab.distributed.link_profile:
    interface: thunderbolt0
    profile: clean
"""

RETURN = r"""
profile:
  description:
    - The profile on O(interface) after the module ran, read back from tc. In check mode it is the profile found.
    - V(foreign) means a root qdisc that this module did not make.
  returned: success
  type: str
  sample: tx_cliff
parameters:
  description:
    - The parameters of RV(profile) as tc reports them, rounded by the kernel. Empty for V(clean) and V(foreign).
  returned: success
  type: dict
  sample: {rate_mbit: 300, burst_kb: 63.98, latency_ms: 50}
wanted:
  description: The profile asked for, with its parameters, defaults filled in (empty for V(clean)).
  returned: success
  type: dict
  sample: {profile: lossy, parameters: {rate_mbit: 1000, burst_kb: 64, latency_ms: 50, pfifo_limit: 10}}
previous:
  description: The profile and parameters before the module ran, plus C(reason), which says in words what was found.
  returned: success
  type: dict
  sample: {profile: clean, parameters: {}, reason: "the kernel default root qdisc (noqueue 0:)"}
previous_tree:
  description:
    - The egress qdiscs of O(interface) before the module ran, root first, each C({kind, handle, parent, options})
      as C(tc -j qdisc show) gives them (C(parent) null for the root). The ledger records it, and its undo puts
      it back.
  returned: success
  type: list
  elements: dict
  sample: [{kind: fq, handle: "8001:", parent: null, options: {limit: 10000, flow_limit: 100}}]
restorable:
  description: Whether RV(previous_tree) can be made again exactly after the change.
  returned: success
  type: bool
qdiscs:
  description:
    - The egress and ingress qdiscs of O(interface), each C({kind, handle, parent, root, options}), read after the
      change. In check mode these are the qdiscs found.
  returned: success
  type: list
  elements: dict
  sample: [{kind: tbf, handle: "1ab:", parent: null, root: true,
            options: {rate: 37500000, burst: 65512, lat: 50000}}]
commands:
  description: The tc commands that ran, or would run in check mode, in order, as argv lists. Empty when nothing
    changed.
  returned: always
  type: list
  elements: list
  sample: [[/usr/sbin/tc, qdisc, replace, dev, thunderbolt0, root, handle, "1ab:", tbf, rate, 300mbit, burst, 64kb,
            latency, 50ms]]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402 - after the docs, as in community.general

from ansible_collections.inferlab.distributed.plugins.module_utils import _tc  # noqa: E402


class LinkProfile:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.interface = self.params['interface']
        self.commands = []
        self.tc = module.get_bin_path('tc', required=True, opt_dirs=['/usr/sbin', '/sbin'])

    def _run(self, argv):
        rc, out, err = self.module.run_command(argv, environ_update={'LC_ALL': 'C'})
        if rc != 0:
            self.module.fail_json(msg=f'{" ".join(argv)} failed: {err.strip() or out.strip()}', rc=rc, stdout=out,
                                  stderr=err, cmd=argv, commands=self.commands)
        return out

    def read(self):
        out = self._run(_tc.show_argv(self.interface, self.tc))
        try:
            qdiscs = _tc.parse_qdiscs(out)
        except _tc.TcError as err:
            self.module.fail_json(msg=f'cannot read the qdiscs of {self.interface}: {err}', rc=0, stdout=out,
                                  stderr='')
        return qdiscs, _tc.classify(qdiscs)

    def rebuild_problem(self, tree):
        """Why ``tree`` could not be put back exactly after the change (None: it can)."""
        classes = 0
        if any(q['kind'] == 'htb' for q in tree):
            out = self._run(_tc.class_show_argv(self.interface, self.tc))
            try:
                classes = _tc.count_classes(out, 'htb')
            except _tc.TcError as err:
                return str(err)
        return _tc.rebuild_problem(tree, htb_classes=classes)

    def run(self):
        params = self.params
        profile = params['profile']
        try:
            wanted = _tc.wanted_parameters(profile, rate_mbit=params['rate_mbit'], burst_kb=params['burst_kb'],
                                           latency_ms=params['latency_ms'], pfifo_limit=params['pfifo_limit'])
        except _tc.TcError as err:
            self.module.fail_json(msg=str(err))
        qdiscs, before = self.read()
        previous_tree = _tc.tree(qdiscs)
        problem = self.rebuild_problem(previous_tree)
        # a root qdisc inferlab did not make may go when the ledger can put it back exactly (problem None)
        plan = _tc.plan(self.interface, before, profile, wanted, force=True, tc=self.tc)
        if plan and problem and not params['force']:
            self.module.fail_json(
                msg=f'{self.interface} has {_tc.describe_tree(previous_tree)}, which could not be put back after '
                    f'the {profile} profile: {problem}. Nothing was changed. Remove or simplify it yourself, or '
                    'set force: true (the role: link_profile_force) to replace it anyway; nothing will put it back',
                profile=before['profile'], previous=before, previous_tree=previous_tree, qdiscs=qdiscs, commands=[])
        after = before
        if plan and not self.module.check_mode:
            for argv in plan:
                self.commands.append(argv)
                self._run(argv)
            qdiscs, after = self.read()
            if after['profile'] != profile or not _tc.same_parameters(after['parameters'], wanted):
                self.module.fail_json(
                    msg=f'applied the {profile} profile to {self.interface}, but tc now shows {after["reason"]} '
                        f'({after["profile"]}, {after["parameters"]}), not {wanted}',
                    profile=after['profile'], previous=before, qdiscs=qdiscs, commands=self.commands)
        elif plan:
            self.commands = plan
        result = dict(
            changed=bool(plan),
            profile=after['profile'],
            parameters=after['parameters'],
            wanted=dict(profile=profile, parameters=wanted),
            previous=before,
            previous_tree=previous_tree,
            restorable=problem is None,
            qdiscs=qdiscs,
            commands=self.commands,
        )
        if self.module._diff:
            result['diff'] = dict(
                before={'profile': before['profile'], 'parameters': before['parameters']},
                after={'profile': profile, 'parameters': wanted if plan else before['parameters']},
            )
        self.module.exit_json(**result)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            interface=dict(type='str', required=True),
            profile=dict(type='str', required=True, choices=['clean', 'tx_cliff', 'lossy']),
            rate_mbit=dict(type='int'),
            burst_kb=dict(type='int'),
            latency_ms=dict(type='int'),
            pfifo_limit=dict(type='int', default=10),
            force=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )


def main():
    LinkProfile(build_module()).run()


if __name__ == '__main__':
    main()
