# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Counter filters: counter_delta, link_events and prometheus_textfile.

Several filters live in this file, so each one's DOCUMENTATION, EXAMPLES and RETURN are in a sidecar file named
after the filter beside it (counter_delta.yml, link_events.yml, prometheus_textfile.yml), where ansible-doc finds them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.module_utils._counters import CARRIER_COUNTERS

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


# --- link_events (documented in link_events.yml beside this file)


def _sample(item, index):
    if isinstance(item, str):
        try:
            item = json.loads(item)
        except ValueError as exc:
            raise AnsibleFilterError(f"link_events: sample {index} is not JSON ({exc}): {item[:80]!r}") from None
    if not isinstance(item, Mapping) or not isinstance(item.get('interfaces'), Mapping):
        raise AnsibleFilterError(f"link_events: sample {index} must be an object with an 'interfaces' object "
                                 "(a line of the counter sampler's output)")
    wall = item.get('t_wall')
    if isinstance(wall, bool) or not isinstance(wall, (int, float)):
        raise AnsibleFilterError(f"link_events: sample {index} t_wall must be a number, got {wall!r}")
    return item


def _iso(wall):
    return datetime.fromtimestamp(wall, tz=timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def link_events(samples, interface, strict=True):
    """The direct link's events between consecutive samples of a counter window (see DOCUMENTATION)."""
    if isinstance(samples, (str, Mapping)) or not isinstance(samples, Sequence):
        raise AnsibleFilterError(f"link_events: samples must be a list, got {type(samples).__name__}")
    events, previous = [], None
    for index, item in enumerate(samples):
        try:
            sample = _sample(item, index)
            if interface not in sample['interfaces']:
                raise AnsibleFilterError(f"link_events: sample {index} does not name interface {interface}")
            now = sample['interfaces'][interface]
            if now is not None and not isinstance(now, Mapping):
                raise AnsibleFilterError(f"link_events: sample {index} interfaces.{interface} must be an object or "
                                         "null")
        except AnsibleFilterError as exc:
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


# --- prometheus_textfile (documented in prometheus_textfile.yml beside this file)

_METRICS = (
    ('info', 'The counter window: its run id (value always 1).'),
    ('elapsed_seconds', 'Seconds between the opening and the closing snapshot, on the monotonic clock.'),
    ('skew_seconds', "Largest difference between the ring hosts' snapshot wall-clock times, at opening or closing."),
    ('closed_timestamp_seconds', 'When the window was closed (controller time, seconds since the epoch).'),
    ('counter_delta', 'Growth of an interface or TCP counter over the window (NaN: it went backwards).'),
    ('counter_resets', 'Number of counters that went backwards during the window.'),
    ('link_speed_gbps', 'Per-lane speed of the Thunderbolt link at the opening (before) and closing (after).'),
    ('link_lanes', 'Lanes of the Thunderbolt link at the opening (before) and closing (after).'),
    ('link_retrained', '1 when the link speed or lanes changed during the window.'),
    ('samples', 'Samples the background sampler wrote during the window.'),
)


def _label_value(value):
    return str(value).replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


def _number_text(value):
    if value is None:
        return 'NaN'
    if isinstance(value, bool):
        return '1' if value else '0'
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return 'NaN'
        if value in (float('inf'), float('-inf')):
            return '+Inf' if value > 0 else '-Inf'
        return repr(value)
    raise AnsibleFilterError(f'prometheus_textfile: expected a number, got {value!r}')


def _epoch(text):
    if not isinstance(text, str):
        return None
    for fmt in ('%Y-%m-%dT%H:%M:%S.%fZ', '%Y-%m-%dT%H:%M:%SZ'):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    return None


def prometheus_textfile(window_result, tcp_ext=None):
    """The closed window as node_exporter textfile-collector text (see prometheus_textfile.yml)."""
    if not isinstance(window_result, Mapping):
        raise AnsibleFilterError('prometheus_textfile: expected the counters role\'s window result (a dict), got '
                                 f'{type(window_result).__name__}')
    for key in ('window', 'host'):
        if not isinstance(window_result.get(key), str) or not window_result.get(key):
            raise AnsibleFilterError(f'prometheus_textfile: the window result has no "{key}" (expected the '
                                     'counters_window_result fact set by the counters role\'s close)')
    if tcp_ext is not None and (isinstance(tcp_ext, (str, bytes)) or not isinstance(tcp_ext, Sequence)):
        raise AnsibleFilterError(f'prometheus_textfile: tcp_ext must be a list of TcpExt counter names or None (all), '
                                 f'got {tcp_ext!r}')
    host, window = window_result['host'], window_result['window']
    samples = {name: [] for name, _text in _METRICS}

    def add(metric, value, interface=None, **extra):
        labels = {'host': host}
        if interface is not None:
            labels['interface'] = interface
        labels['window'] = window
        labels.update(extra)
        text = ','.join(f'{key}="{_label_value(val)}"' for key, val in labels.items())
        samples[metric].append(f'inferlab_window_{metric}{{{text}}} {_number_text(value)}')

    add('info', 1, run_id=window_result.get('run_id') or '')
    add('elapsed_seconds', window_result.get('elapsed_s'))
    for phase in ('open', 'close'):
        if window_result.get(f'skew_{phase}_s') is not None:
            add('skew_seconds', window_result[f'skew_{phase}_s'], phase=phase)
    closed = _epoch(window_result.get('closed_at'))
    if closed is not None:
        add('closed_timestamp_seconds', closed)

    interfaces = window_result.get('interfaces') or {}
    for ifname in sorted(interfaces):
        for counter, value in sorted((interfaces[ifname] or {}).items()):
            add('counter_delta', value, interface=ifname, counter=counter)
    wanted_ext = None if tcp_ext is None else set(tcp_ext)
    for section in ('tcp', 'tcp_ext'):
        for counter, value in sorted((window_result.get(section) or {}).items()):
            if section == 'tcp_ext' and wanted_ext is not None and counter not in wanted_ext:
                continue
            add('counter_delta', value, interface='', counter=counter)
    add('counter_resets', len(window_result.get('resets') or []))

    before, after = window_result.get('link_before') or {}, window_result.get('link_after') or {}
    link_if = before.get('interface') or after.get('interface') or ''
    for phase, link in (('before', before), ('after', after)):
        for direction in ('rx', 'tx'):
            for metric, key in (('link_speed_gbps', f'{direction}_speed_gbps'), ('link_lanes', f'{direction}_lanes')):
                if link.get(key) is not None:
                    add(metric, link[key], interface=link_if, direction=direction, phase=phase)
    if 'link_retrained' in window_result:
        add('link_retrained', bool(window_result['link_retrained']), interface=link_if)
    count = (window_result.get('samples') or {}).get('count')
    if count is not None:
        add('samples', count)

    lines = []
    for name, help_text in _METRICS:
        if samples[name]:
            lines.append(f'# HELP inferlab_window_{name} {help_text}')
            lines.append(f'# TYPE inferlab_window_{name} gauge')
            lines.extend(samples[name])
    return '\n'.join(lines) + '\n'


class FilterModule:
    """inferlab counter filters."""

    def filters(self):
        return {'counter_delta': counter_delta, 'link_events': link_events, 'prometheus_textfile': prometheus_textfile}
