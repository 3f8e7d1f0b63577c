# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Counter filters: counter_delta, link_events and prometheus_textfile.

Several filters live in this file, so each one's DOCUMENTATION, EXAMPLES and RETURN are in a sidecar file named
after the filter beside it (counter_delta.yml, link_events.yml, prometheus_textfile.yml), where ansible-doc finds them.
counter_delta and link_events are wrappers: their logic is in plugins/plugin_utils/_counter_deltas.py, which the
counter window's controller half uses too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.plugin_utils import _counter_deltas


def counter_delta(before, after):
    """Per-counter growth between two net_counters samples (see counter_delta.yml)."""
    try:
        return _counter_deltas.counter_delta(before, after)
    except _counter_deltas.CounterDataError as exc:
        raise AnsibleFilterError(str(exc)) from None


def link_events(samples, interface, strict=True):
    """The direct link's events between consecutive samples of a counter window (see link_events.yml)."""
    try:
        return _counter_deltas.link_events(samples, interface, strict=strict)
    except _counter_deltas.CounterDataError as exc:
        raise AnsibleFilterError(str(exc)) from None


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
