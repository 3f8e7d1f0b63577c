# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A NIC's ethtool settings as groups: its offloads (``-k``/``-K``), interrupt coalescing (``-c``/``-C``) and ring
sizes (``-g``/``-G``), read, compared and set: transport tunables that a link investigation changes one at a time.

Every setting is keyed by the name its set command takes (``generic-segmentation-offload``, ``rx-usecs``,
``adaptive-rx``, ``rx``) and valued as text: ``on``/``off`` or a decimal integer. A setting the driver does not
have reads ``None`` (ethtool's ``n/a``); an offload that cannot change is ``fixed``.

The ``nic_layer`` module sets them; the change ledger's undo of a ``nic_setting`` entry puts the values read before
back. One of the ledger's host-side modules (installed beside it as ``inferlab_ethtool.py``): standard library
only (plus ``_ledger_proc``, which runs its commands), Python 3.8+.
"""

from __future__ import annotations

import os
import re
import shutil

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc
except ImportError:  # on a host, installed beside the ledger's modules (see _ledger_core)
    import inferlab_ledger_proc as _ledger_proc

ETHTOOL_DIRS = ('/usr/sbin', '/sbin', '/usr/local/sbin')
# what each group is read and set with, and what its output starts with
GROUPS = {
    'features': {'show': '-k', 'set': '-K', 'header': 'Features for ', 'what': 'offloads'},
    'coalesce': {'show': '-c', 'set': '-C', 'header': 'Coalesce parameters for ', 'what': 'interrupt coalescing'},
    'rings': {'show': '-g', 'set': '-G', 'header': 'Ring parameters for ', 'what': 'ring sizes'},
}
TOGGLES = ('on', 'off')
_FEATURE_RE = re.compile(r'^\s*([a-z0-9][a-z0-9_-]*): (on|off)( \[(fixed|requested on|requested off)\])?\s*$')
_SETTING_RE = re.compile(r'^\s*([A-Za-z][A-Za-z0-9 _-]*?):\s*(\S+)?\s*$')
# two settings on one line: "Adaptive RX: on  TX: off", "CQE mode RX: n/a  TX: n/a"
_PAIR_RE = re.compile(r'^(Adaptive|CQE mode) RX: (\S+)\s+TX: (\S+)\s*$')
_PAIR_NAMES = {'Adaptive': ('adaptive-rx', 'adaptive-tx'), 'CQE mode': ('cqe-mode-rx', 'cqe-mode-tx')}
# -c prints four names in the singular that -C takes in the plural
_COALESCE_NAMES = {'rx-frame-low': 'rx-frames-low', 'tx-frame-low': 'tx-frames-low',
                   'rx-frame-high': 'rx-frames-high', 'tx-frame-high': 'tx-frames-high'}
# -g's labels and the names -G takes for them
_RING_NAMES = {'RX': 'rx', 'RX Mini': 'rx-mini', 'RX Jumbo': 'rx-jumbo', 'TX': 'tx', 'RX Buf Len': 'rx-buf-len',
               'CQE Size': 'cqe-size', 'TX Push': 'tx-push', 'RX Push': 'rx-push',
               'TX push buff len': 'tx-push-buf-len', 'TCP data split': 'tcp-data-split'}
_RING_SECTIONS = {'Pre-set maximums:': 'maximums', 'Current hardware settings:': 'current'}


class EthtoolError(ValueError):
    """An ethtool output that is not what ethtool prints, or a setting that cannot be taken."""


def _header(group, lines, text):
    if not lines or not lines[0].startswith(GROUPS[group]['header']):
        raise EthtoolError('no "%s" header in ethtool %s output: %r'
                           % (GROUPS[group]['header'].strip(), GROUPS[group]['show'], (text or '')[:200]))


def _value(text):
    """ethtool's printed value as this module keeps it: ``n/a`` is None."""
    return None if text in (None, 'n/a') else text


def parse_features(text):
    """``ethtool -k``'s lines -> ``{name: {'value': 'on'|'off', 'fixed': bool}}``."""
    lines = (text or '').splitlines()
    _header('features', lines, text)
    found = {}
    for line in lines[1:]:
        if not line.strip():
            continue
        match = _FEATURE_RE.match(line)
        if not match:
            raise EthtoolError('unexpected line in ethtool -k output: %r' % line)
        found[match.group(1)] = {'value': match.group(2), 'fixed': match.group(4) == 'fixed'}
    return found


def parse_coalesce(text):
    """``ethtool -c``'s lines -> ``{name: {'value': text or None, 'fixed': False}}``, named as ``-C`` takes them."""
    lines = (text or '').splitlines()
    _header('coalesce', lines, text)
    found = {}
    for line in lines[1:]:
        if not line.strip():
            continue
        pair = _PAIR_RE.match(line.strip())
        if pair:
            rx_name, tx_name = _PAIR_NAMES[pair.group(1)]
            found[rx_name] = {'value': _value(pair.group(2)), 'fixed': False}
            found[tx_name] = {'value': _value(pair.group(3)), 'fixed': False}
            continue
        match = _SETTING_RE.match(line)
        if not match or ' ' in match.group(1):
            raise EthtoolError('unexpected line in ethtool -c output: %r' % line)
        name = _COALESCE_NAMES.get(match.group(1), match.group(1))
        found[name] = {'value': _value(match.group(2)), 'fixed': False}
    return found


def parse_rings(text):
    """``ethtool -g``'s two sections -> ``{name: {'value': text or None, 'fixed': False, 'maximum': text or
    None}}``, named as ``-G`` takes them (a label this module does not know: lower case, spaces as dashes)."""
    lines = (text or '').splitlines()
    _header('rings', lines, text)
    sections = {'maximums': {}, 'current': {}}
    section = None
    for line in lines[1:]:
        if not line.strip():
            continue
        if line.strip() in _RING_SECTIONS:
            section = _RING_SECTIONS[line.strip()]
            continue
        match = _SETTING_RE.match(line)
        if not match or section is None:
            raise EthtoolError('unexpected line in ethtool -g output: %r' % line)
        label = match.group(1).strip()
        name = _RING_NAMES.get(label, label.lower().replace(' ', '-'))
        sections[section][name] = _value(match.group(2))
    if not sections['current']:
        raise EthtoolError('no "Current hardware settings:" in ethtool -g output: %r' % (text or '')[:200])
    return {name: {'value': value, 'fixed': False, 'maximum': sections['maximums'].get(name)}
            for name, value in sections['current'].items()}


PARSERS = {'features': parse_features, 'coalesce': parse_coalesce, 'rings': parse_rings}


def setting_text(value):
    """A wanted value as this module keeps it: a bool or ``on``/``off`` -> ``on``/``off``; an integer (or its
    decimal text) -> its decimal text. EthtoolError otherwise."""
    if isinstance(value, bool):
        return 'on' if value else 'off'
    if isinstance(value, int) and value >= 0:
        return str(value)
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text in TOGGLES or (text is not None and text.isdigit()):
        return str(int(text)) if text.isdigit() else text
    raise EthtoolError('expected on, off or a whole number, got %r' % (value,))


def check_wanted(group, interface, found, wanted):
    """``{name: text}``: ``wanted`` checked against what the NIC has now (``found``, a parser's output); an
    EthtoolError naming every problem otherwise: a name the driver does not have, an offload that is fixed, a
    setting it reports as n/a, a toggle given a number or a number given a toggle, a ring above its maximum."""
    problems, checked = [], {}
    what = GROUPS[group]['what']
    for name in sorted(wanted):
        item = found.get(name)
        try:
            value = setting_text(wanted[name])
        except EthtoolError as exc:
            problems.append('%s: %s' % (name, exc))
            continue
        if item is None:
            problems.append('%s is not one of the %s of %s (ethtool %s %s lists %s)'
                            % (name, what, interface, GROUPS[group]['show'], interface, ', '.join(sorted(found))))
        elif item['fixed']:
            problems.append('%s of %s is fixed at %s: the driver cannot change it' % (name, interface, item['value']))
        elif item['value'] is None:
            problems.append('%s of %s is n/a: its driver does not have it' % (name, interface))
        elif (item['value'] in TOGGLES) != (value in TOGGLES):
            problems.append('%s of %s is %s now: expected %s, got %s'
                            % (name, interface, item['value'], 'on or off' if item['value'] in TOGGLES
                               else 'a whole number', value))
        elif item.get('maximum') is not None and value.isdigit() and int(value) > int(item['maximum']):
            problems.append('%s of %s may be at most %s (its pre-set maximum), got %s'
                            % (name, interface, item['maximum'], value))
        else:
            checked[name] = value
    if problems:
        raise EthtoolError('; '.join(problems))
    return checked


def ethtool_argv(command=None):
    """The argv prefix that runs ethtool: ``command`` (a test's, such as ``ip netns exec NS ethtool``), or ethtool
    from PATH or an sbin directory; None when it is not installed."""
    if command:
        return list(command)
    found = shutil.which('ethtool') or shutil.which('ethtool', path=os.pathsep.join(ETHTOOL_DIRS))
    return [found] if found else None


def run(argv, timeout=60):
    """``(rc, stdout, stderr)`` of one ethtool command (``_ledger_proc.run_bounded``: the C locale, stdin from
    /dev/null, killed at ``timeout``); rc 127 when it cannot run or does not return in time."""
    try:
        return _ledger_proc.run_bounded(argv, timeout)
    except (OSError, _ledger_proc.CommandTimedOut) as exc:
        return 127, '', str(exc)


def read_group(prefix, group, interface, runner=run):
    """The group's settings of ``interface`` now (a parser's output); EthtoolError saying why not (the driver
    does not support the group, the interface is gone, the output is not ethtool's)."""
    argv = list(prefix) + [GROUPS[group]['show'], interface]
    rc, out, err = runner(argv)
    if rc != 0:
        raise EthtoolError('%s exited %d: %s' % (' '.join(argv), rc, (err.strip() or out.strip())[:300]))
    return PARSERS[group](out)


def set_argv(prefix, group, interface, values):
    """The command that sets ``values`` (``{name: text}``) in one call, names sorted."""
    argv = list(prefix) + [GROUPS[group]['set'], interface]
    for name in sorted(values):
        argv += [name, values[name]]
    return argv


def differences(found, values):
    """``{name: found value}`` for each name of ``values`` whose value in ``found`` differs."""
    return {name: (found.get(name) or {}).get('value') for name in values
            if (found.get(name) or {}).get('value') != values[name]}
