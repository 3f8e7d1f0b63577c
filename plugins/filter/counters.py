# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: counter_delta
short_description: Subtract two counter samples taken by net_counters
version_added: 0.1.0
author:
  - inferlab developers (@inferlab)
description:
  - Takes the RV(inferlab.distributed.net_counters#module:counters) of two samples and returns, per counter, how much
    it grew in between, with the time elapsed on the monotonic clock.
  - Covers the interface C(statistics), C(tcp) and C(tcp_ext). C(operstate) and C(mtu) are states, not counters,
    and are left out.
  - A counter that went backwards (the interface was re-created, the driver reloaded, or a 32-bit counter wrapped)
    is V(null), never a negative number, and the reason is listed in C(resets), because a window with a reset
    measures nothing on that counter.
  - A counter or interface present in only one of the samples is left out and listed in C(missing).
  - A whole registered result (with a C(counters) key) is accepted as well as the C(counters) dict itself.
positional: after
options:
  _input:
    description: The earlier sample.
    type: dict
    required: true
  after:
    description: The later sample.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Sample, run the workload, sample again
  block:
    - name: Counters before
      inferlab.distributed.net_counters:
        interfaces: [thunderbolt0]
      register: before
    - name: Run the workload
      ansible.builtin.command: /usr/local/bin/workload
      changed_when: true
    - name: Counters after
      inferlab.distributed.net_counters:
        interfaces: [thunderbolt0]
      register: after

- name: Stop if the link counted receive errors during the window
  vars:
    delta: "{{ before.counters | inferlab.distributed.counter_delta(after.counters) }}"
  ansible.builtin.assert:
    that:
      - delta.resets | length == 0
      - delta.interfaces.thunderbolt0.rx_crc_errors == 0
    fail_msg: >-
      expected no CRC errors on thunderbolt0 over {{ delta.elapsed_s }} s, found
      {{ delta.interfaces.thunderbolt0.rx_crc_errors }}; resets: {{ delta.resets }}
"""

RETURN = r"""
_value:
  description:
    - C(elapsed_s) (float seconds, monotonic clock; V(null) when the clock went backwards, that is the samples come
      from different boots or hosts).
    - 'C(interfaces) as C({IFNAME: {NAME: int|null}}); C(tcp) and C(tcp_ext) as C({NAME: int|null}).'
    - 'C(resets), one sentence per counter that went backwards, like
      C(interfaces.thunderbolt0.rx_bytes went backwards: 1000 -> 10).'
    - C(missing), the dotted names present in only one sample, like C(tcp_ext.TCPMigrateReqSuccess only in after).
  type: dict
  sample:
    elapsed_s: 30.012
    interfaces: {thunderbolt0: {rx_bytes: 2500000000, rx_crc_errors: 0, tx_bytes: null}}
    tcp: {RetransSegs: 12, OutSegs: 1800000}
    tcp_ext: {TCPLostRetransmit: 0, TCPTimeouts: 1}
    resets: ['interfaces.thunderbolt0.tx_bytes went backwards: 1000 -> 10']
    missing: []
"""

from collections.abc import Mapping  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402

SECTIONS = ('tcp', 'tcp_ext')


def _unwrap(sample, side):
    if not isinstance(sample, Mapping):
        raise AnsibleFilterError(f"counter_delta: the {side} sample must be a dict (net_counters' counters), "
                                 f"got {type(sample).__name__}")
    if 'counters' in sample and 'time' not in sample:
        sample = sample['counters']
        if not isinstance(sample, Mapping):
            raise AnsibleFilterError(f"counter_delta: {side}.counters must be a dict, got {type(sample).__name__}")
    return sample


def _mapping(sample, key, side, where=None):
    value = sample.get(key, {})
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise AnsibleFilterError(f"counter_delta: {side} {where or key} must be a dict, got {type(value).__name__}")
    return value


def _counter(value, side, name):
    if isinstance(value, bool) or not isinstance(value, int):
        raise AnsibleFilterError(f"counter_delta: {side} {name} must be an integer, got {value!r}")
    return value


def _number(value, side, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AnsibleFilterError(f"counter_delta: {side} {name} must be a number, got {value!r}")
    return value


def _delta_section(before, after, prefix, resets, missing):
    result = {}
    for name in sorted(set(before) | set(after)):
        dotted = f'{prefix}.{name}'
        if name not in after:
            missing.append(f'{dotted} only in before')
            continue
        if name not in before:
            missing.append(f'{dotted} only in after')
            continue
        old, new = _counter(before[name], 'before', dotted), _counter(after[name], 'after', dotted)
        if new < old:
            result[name] = None
            resets.append(f'{dotted} went backwards: {old} -> {new}')
        else:
            result[name] = new - old
    return result


def counter_delta(before, after):
    """Per-counter growth between two net_counters samples (see DOCUMENTATION)."""
    before, after = _unwrap(before, 'before'), _unwrap(after, 'after')
    resets, missing = [], []

    times = [_mapping(sample, 'time', side) for sample, side in ((before, 'before'), (after, 'after'))]
    elapsed = None
    if all('monotonic' in t for t in times):
        start = _number(times[0]['monotonic'], 'before', 'time.monotonic')
        end = _number(times[1]['monotonic'], 'after', 'time.monotonic')
        if end < start:
            resets.append(f'time.monotonic went backwards: {start} -> {end} (samples from different boots or hosts?)')
        else:
            elapsed = end - start
    else:
        missing.append('time.monotonic')

    result = {'elapsed_s': elapsed, 'interfaces': {}}
    old_ifs, new_ifs = _mapping(before, 'interfaces', 'before'), _mapping(after, 'interfaces', 'after')
    for ifname in sorted(set(old_ifs) | set(new_ifs)):
        if ifname not in new_ifs or ifname not in old_ifs:
            missing.append(f"interfaces.{ifname} only in {'before' if ifname in old_ifs else 'after'}")
            continue
        stats = []
        for sample, side in ((old_ifs, 'before'), (new_ifs, 'after')):
            iface = sample[ifname]
            if not isinstance(iface, Mapping):
                raise AnsibleFilterError(f"counter_delta: {side} interfaces.{ifname} must be a dict, "
                                         f"got {type(iface).__name__}")
            stats.append(_mapping(iface, 'statistics', side, f'interfaces.{ifname}.statistics'))
        result['interfaces'][ifname] = _delta_section(stats[0], stats[1], f'interfaces.{ifname}', resets, missing)

    for section in SECTIONS:
        result[section] = _delta_section(_mapping(before, section, 'before'), _mapping(after, section, 'after'),
                                         section, resets, missing)
    result['resets'] = resets
    result['missing'] = missing
    return result


class FilterModule:
    """inferlab counter filters."""

    def filters(self):
        return {'counter_delta': counter_delta}
