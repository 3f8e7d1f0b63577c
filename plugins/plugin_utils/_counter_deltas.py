# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What changed between counter samples: each counter's growth between two net_counters snapshots, and the direct
link's events between the background sampler's consecutive samples.

The filters counter_delta and link_events (plugins/filter/counters.py) and the controller's half of a counter window
edge call these. Bad input raises CounterDataError, whose message names the filter it is for; the filters turn it
into AnsibleFilterError."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from ansible_collections.inferlab.distributed.plugins.module_utils._net_counters import CARRIER_COUNTERS


class CounterDataError(ValueError):
    """Samples that cannot be compared: not the shape net_counters or the sampler writes; the message says where."""


SECTIONS = ('tcp', 'tcp_ext')


def _unwrap(sample, side):
    if not isinstance(sample, Mapping):
        raise CounterDataError(f"counter_delta: the {side} sample must be a dict (net_counters' counters), "
                               f"got {type(sample).__name__}")
    if 'counters' in sample and 'time' not in sample:
        sample = sample['counters']
        if not isinstance(sample, Mapping):
            raise CounterDataError(f"counter_delta: {side}.counters must be a dict, got {type(sample).__name__}")
    return sample


def _mapping(sample, key, side, where=None):
    value = sample.get(key, {})
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise CounterDataError(f"counter_delta: {side} {where or key} must be a dict, got {type(value).__name__}")
    return value


def _counter(value, side, name):
    if isinstance(value, bool) or not isinstance(value, int):
        raise CounterDataError(f"counter_delta: {side} {name} must be an integer, got {value!r}")
    return value


def _number(value, side, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CounterDataError(f"counter_delta: {side} {name} must be a number, got {value!r}")
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
    """Per-counter growth between two net_counters samples (plugins/filter/counter_delta.yml)."""
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
                raise CounterDataError(f"counter_delta: {side} interfaces.{ifname} must be a dict, "
                                       f"got {type(iface).__name__}")
            # the carrier's transition counters count like statistics (None: the kernel has no such file)
            carrier = _mapping(iface, 'carrier', side, f'interfaces.{ifname}.carrier')
            stats.append({**_mapping(iface, 'statistics', side, f'interfaces.{ifname}.statistics'),
                          **{name: value for name, value in carrier.items() if value is not None}})
        result['interfaces'][ifname] = _delta_section(stats[0], stats[1], f'interfaces.{ifname}', resets, missing)

    for section in SECTIONS:
        result[section] = _delta_section(_mapping(before, section, 'before'), _mapping(after, section, 'after'),
                                         section, resets, missing)
    result['resets'] = resets
    result['missing'] = missing
    return result


# --- link_events: the filter is documented in plugins/filter/link_events.yml


def _sample(item, index):
    if isinstance(item, str):
        try:
            item = json.loads(item)
        except ValueError as exc:
            raise CounterDataError(f"link_events: sample {index} is not JSON ({exc}): {item[:80]!r}") from None
    if not isinstance(item, Mapping) or not isinstance(item.get('interfaces'), Mapping):
        raise CounterDataError(f"link_events: sample {index} must be an object with an 'interfaces' object "
                               "(a line of the counter sampler's output)")
    wall = item.get('t_wall')
    if isinstance(wall, bool) or not isinstance(wall, (int, float)):
        raise CounterDataError(f"link_events: sample {index} t_wall must be a number, got {wall!r}")
    return item


def _iso(wall):
    return datetime.fromtimestamp(wall, tz=timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def link_events(samples, interface, strict=True):
    """The direct link's events between consecutive samples of a counter window (plugins/filter/link_events.yml)."""
    if isinstance(samples, (str, Mapping)) or not isinstance(samples, Sequence):
        raise CounterDataError(f"link_events: samples must be a list, got {type(samples).__name__}")
    events, previous = [], None
    for index, item in enumerate(samples):
        try:
            sample = _sample(item, index)
            if interface not in sample['interfaces']:
                raise CounterDataError(f"link_events: sample {index} does not name interface {interface}")
            now = sample['interfaces'][interface]
            if now is not None and not isinstance(now, Mapping):
                raise CounterDataError(f"link_events: sample {index} interfaces.{interface} must be an object or "
                                       "null")
        except CounterDataError as exc:
            if strict:
                raise
            events.append({'kind': 'unreadable_sample', 'interface': interface, 'index': index,
                           'message': str(exc)})
            continue
        if previous is not None:
            before, wall = previous['interfaces'][interface], sample['t_wall']
            event = {'at': _iso(wall), 't_wall': wall, 'since_s': round(wall - previous['t_wall'], 3),
                     'interface': interface}
            if before is not None and now is None:
                events.append({**event, 'kind': 'gone'})
            elif before is None and now is not None:
                events.append({**event, 'kind': 'back'})
            elif before is not None:
                grown = {name: now[name] - before[name] for name in CARRIER_COUNTERS
                         if isinstance(now.get(name), int) and isinstance(before.get(name), int)}
                if any(value < 0 for value in grown.values()):
                    events.append({**event, 'kind': 'counters_reset'})  # re-created between two samples
                elif grown.get('carrier_changes', 0) > 0:
                    events.append({**event, 'kind': 'carrier', 'changes': grown['carrier_changes'],
                                   'up': grown.get('carrier_up_count'), 'down': grown.get('carrier_down_count')})
        previous = sample
    return events
