# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Link profiles: the ``tc`` qdiscs that emulate the driver layer on one interface's egress, and their recognition.

Standard library only, free of any ``ansible`` import, and compiles on Python 3.8: the ``link_profile`` module and
the ledger's undo import it, and ``inferlab.lab.control`` loads it by file path to report each lab host's profile.

Profiles (``tc`` on this kind of machine has tbf, htb and pfifo, no netem, fq or fq_codel):

- ``clean``: no root qdisc of ours; the interface has its kernel default (``noqueue`` on a veth, ``pfifo_fast``,
  ``mq``, a default ``fq_codel`` ...). Every qdisc the kernel attaches by itself has handle ``0:``.
- ``tx_cliff``: a root ``tbf`` rate cap (``handle 1ab:``): the link falls to a fraction of its speed but the sender's
  own TCP backs off, so nothing is dropped.
- ``lossy``: the same ``tbf`` with a small child ``pfifo`` (``handle 1ac:``, ``limit`` packets): bursts overflow it,
  so there are real drops and real TCP retransmissions.

Our qdiscs are recognised by their handles, ``1ab:`` (root tbf) and ``1ac:`` (its pfifo child). Anything else at the
root (someone's htb, a tbf that tc numbered ``8001:``, our tbf with another child) is ``foreign``: the module refuses
to replace it unless forced, and the ledger's undo (``_ledger_undo``, which the ``ledger`` role installs on hosts with
this module beside it as ``inferlab_tc.py``) refuses to delete it.

Units follow tc's: ``mbit`` = 10^6 bit/s, ``kb`` = 1024 bytes, ``ms``. ``tc -j`` reports the tbf ``rate`` in
bytes/s, ``burst`` in bytes and ``lat`` in microseconds (iproute2 >= 5.x; older versions print strings such as
``300Mbit``, ``64Kb``, ``50.0ms``, which are parsed too). The kernel stores the burst as a time at the rate, so it
comes back a little lower than asked: comparisons allow for it (``same_parameters``).
"""

from __future__ import annotations

import json
import re

PROFILES = ('clean', 'tx_cliff', 'lossy')
CLASSES = PROFILES + ('foreign',)
ROOT_HANDLE = '1ab:'
CHILD_HANDLE = '1ac:'
CHILD_PARENT = '1ab:1'

# Chosen in the lab (see the module's documentation): 300 Mbit/s is a cliff well below the 20 Gb/s link; 1000 Mbit/s
# with a 10-packet pfifo drops a large share of a bulk TCP stream's packets, so retransmissions are certain.
DEFAULTS = {
    'tx_cliff': {'rate_mbit': 300, 'burst_kb': 64, 'latency_ms': 50},
    'lossy': {'rate_mbit': 1000, 'burst_kb': 64, 'latency_ms': 50, 'pfifo_limit': 10},
}
# qdiscs on the ingress side, never part of a profile
INGRESS_KINDS = ('ingress', 'clsact')


class TcError(Exception):
    """Output of tc that cannot be read, or parameters that cannot be used."""


class ForeignQdiscError(TcError):
    """The root qdisc is not ours: replacing or deleting it needs ``force``."""


# ---------------------------------------------------------------------------------------------------------------
# parameters


def wanted_parameters(profile, rate_mbit=None, burst_kb=None, latency_ms=None, pfifo_limit=None):
    """The parameters of ``profile`` with its defaults filled in: ``{}`` for ``clean``; ``rate_mbit``, ``burst_kb``,
    ``latency_ms`` (and ``pfifo_limit`` for ``lossy``) otherwise. Raises TcError on a bad value."""
    if profile not in PROFILES:
        raise TcError(f'unknown link profile {profile!r}: expected one of {", ".join(PROFILES)}')
    if profile == 'clean':
        return {}
    given = {'rate_mbit': rate_mbit, 'burst_kb': burst_kb, 'latency_ms': latency_ms, 'pfifo_limit': pfifo_limit}
    wanted = {}
    for name, default in DEFAULTS[profile].items():
        value = default if given[name] is None else given[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TcError(f'{name} must be a positive integer, got {value!r}')
        wanted[name] = value
    return wanted


def _number(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TcError(f'{name} {value!r} is not a number')
    return value


_RATE_UNITS = {'bit': 1, 'kbit': 1e3, 'mbit': 1e6, 'gbit': 1e9, 'tbit': 1e12,
               'kibit': 1024, 'mibit': 1024 ** 2, 'gibit': 1024 ** 3, 'tibit': 1024 ** 4, 'bps': 8}
_SIZE_UNITS = {'b': 1, 'k': 1024, 'kb': 1024, 'm': 1024 ** 2, 'mb': 1024 ** 2, 'g': 1024 ** 3, 'gb': 1024 ** 3}
_TIME_UNITS = {'s': 1e6, 'sec': 1e6, 'ms': 1e3, 'msec': 1e3, 'us': 1, 'usec': 1}
_QUANTITY_RE = re.compile(r'^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$')


def _quantity(value, units, name, default_unit):
    """A tc quantity: a number as ``tc -j`` prints it, or a string with a unit as older iproute2 printed it."""
    if not isinstance(value, str):
        return _number(value, name)
    match = _QUANTITY_RE.match(value)
    unit = (match.group(2) if match else '').lower() or default_unit
    if not match or unit not in units:
        raise TcError(f'{name} {value!r} is not a quantity tc prints')
    return float(match.group(1)) * units[unit]


def rate_bytes(value):
    """The tbf ``rate`` of ``tc -j`` in bytes/s (a number, or a string such as ``300Mbit``)."""
    if isinstance(value, str):
        return _quantity(value, _RATE_UNITS, 'rate', 'bit') / 8.0
    return _number(value, 'rate')


def size_bytes(value):
    """The tbf ``burst`` in bytes (a number, or a string such as ``64Kb`` or ``65512b``)."""
    return _quantity(value, _SIZE_UNITS, 'burst', 'b')


def time_us(value):
    """The tbf ``lat`` in microseconds (a number, or a string such as ``50.0ms`` or ``800us``)."""
    return _quantity(value, _TIME_UNITS, 'lat', 'us')


def _tidy(number, digits):
    number = round(float(number), digits)
    return int(number) if number == int(number) else number


# ---------------------------------------------------------------------------------------------------------------
# reading tc


def show_argv(interface, tc='tc'):
    """The command whose output ``parse_qdiscs`` reads."""
    return [tc, '-j', 'qdisc', 'show', 'dev', interface]


def parse_qdiscs(text):
    """Parse ``tc -j qdisc show dev IF``: a list of ``{kind, handle, parent, root, options}`` (``parent`` is None for
    the root, ``root`` a bool). Raises TcError when the output is not that JSON."""
    text = (text or '').strip()
    if not text:
        return []  # tc prints nothing, not [], for a device without qdiscs on some versions
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TcError(f'tc -j qdisc show printed something that is not JSON ({exc}): {text[:120]!r}') from None
    if not isinstance(data, list):
        raise TcError(f'tc -j qdisc show printed {type(data).__name__}, expected a list of qdiscs: {text[:120]!r}')
    qdiscs = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get('kind'), str) or not isinstance(
                item.get('handle'), str):
            raise TcError(f'tc -j qdisc show printed a qdisc without "kind" and "handle": {str(item)[:120]!r}')
        options = item.get('options')
        qdiscs.append({
            'kind': item['kind'],
            'handle': item['handle'],
            'parent': item.get('parent') if not item.get('root') else None,
            'root': bool(item.get('root')),
            'options': options if isinstance(options, dict) else {},
        })
    return qdiscs


def _tbf_parameters(options):
    missing = [key for key in ('rate', 'burst', 'lat') if key not in options]
    if missing:
        raise TcError(f'the tbf qdisc has no {", ".join(missing)} in tc\'s output: {options!r}')
    rate = rate_bytes(options['rate'])
    burst = size_bytes(options['burst'])
    lat = time_us(options['lat'])
    return {'rate_mbit': _tidy(rate * 8 / 1e6, 3), 'burst_kb': _tidy(burst / 1024.0, 2),
            'latency_ms': _tidy(lat / 1e3, 3)}


def classify(qdiscs):
    """Which profile ``qdiscs`` (from ``parse_qdiscs``) are: ``{profile, parameters, reason}``.

    ``profile`` is ``clean``, ``tx_cliff``, ``lossy`` or ``foreign``; ``parameters`` holds ``rate_mbit``,
    ``burst_kb``, ``latency_ms`` (and ``pfifo_limit``) for our profiles, ``{}`` otherwise; ``reason`` is one sentence
    for people (what was found). Ingress-side qdiscs (``ingress``, ``clsact``) are ignored.
    """
    egress = [q for q in qdiscs if q['kind'] not in INGRESS_KINDS]
    roots = [q for q in egress if q['root']]
    if not roots:
        return {'profile': 'clean', 'parameters': {}, 'reason': 'no root qdisc'}
    root = roots[0]
    if root['handle'] == '0:':
        return {'profile': 'clean', 'parameters': {},
                'reason': f'the kernel default root qdisc ({root["kind"]} 0:)'}
    children = [q for q in egress if not q['root']]
    described = describe(qdiscs)
    if root['kind'] != 'tbf' or root['handle'] != ROOT_HANDLE:
        return {'profile': 'foreign', 'parameters': {},
                'reason': f'a root qdisc inferlab did not make: {described}'}
    try:
        parameters = _tbf_parameters(root['options'])
    except TcError as exc:
        return {'profile': 'foreign', 'parameters': {}, 'reason': f'{described}: {exc}'}
    if not children:
        return {'profile': 'tx_cliff', 'parameters': parameters, 'reason': f'tbf {ROOT_HANDLE} alone'}
    child = children[0]
    if (len(children) == 1 and child['kind'] == 'pfifo' and child['handle'] == CHILD_HANDLE
            and child['parent'] == CHILD_PARENT and isinstance(child['options'].get('limit'), int)):
        parameters['pfifo_limit'] = child['options']['limit']
        return {'profile': 'lossy', 'parameters': parameters,
                'reason': f'tbf {ROOT_HANDLE} with pfifo {CHILD_HANDLE} limit {child["options"]["limit"]}'}
    return {'profile': 'foreign', 'parameters': {},
            'reason': f'the tbf {ROOT_HANDLE} of inferlab with children it did not make: {described}'}


def describe(qdiscs):
    """The egress qdiscs of ``qdiscs`` (from ``parse_qdiscs``) in a few words: ``tbf 1ab: root, pfifo 1ac: parent
    1ab:1``."""
    return ', '.join(f'{q["kind"]} {q["handle"]}' + (f' parent {q["parent"]}' if q['parent'] else ' root')
                     for q in qdiscs if q['kind'] not in INGRESS_KINDS)


def classify_output(text):
    """``classify(parse_qdiscs(text))``, for callers holding raw ``tc -j qdisc show`` output."""
    return classify(parse_qdiscs(text))


def same_parameters(current, wanted):
    """Whether the parameters tc reports (``current``) are the ones asked for (``wanted``).

    Rate, latency (to half a millisecond) and pfifo limit must be equal. The burst comes back lower than asked: the
    kernel keeps it as a time at the rate, in whole ticks, and tc converts it back (64 kb at 300 Mbit/s reads 65512
    bytes, at 20 Gbit/s 64 kb reads 2 kB less). So a burst up to what 2 microseconds carry at the rate, plus 64
    bytes, below the wanted one counts as equal.
    """
    if set(current) != set(wanted):
        return False
    if not wanted:
        return True
    if abs(current['rate_mbit'] - wanted['rate_mbit']) > 1e-3:
        return False
    if current.get('pfifo_limit') != wanted.get('pfifo_limit'):
        return False
    if abs(current['latency_ms'] - wanted['latency_ms']) >= 0.5:
        return False
    rate_bytes_per_us = wanted['rate_mbit'] / 8.0
    shortfall = (wanted['burst_kb'] - current['burst_kb']) * 1024
    return -8 <= shortfall <= 2 * rate_bytes_per_us + 64


# ---------------------------------------------------------------------------------------------------------------
# changing tc


def delete_root_argv(interface, tc='tc'):
    return [tc, 'qdisc', 'del', 'dev', interface, 'root']


def tbf_argv(interface, parameters, tc='tc'):
    return [tc, 'qdisc', 'replace', 'dev', interface, 'root', 'handle', ROOT_HANDLE, 'tbf',
            'rate', f'{parameters["rate_mbit"]}mbit', 'burst', f'{parameters["burst_kb"]}kb',
            'latency', f'{parameters["latency_ms"]}ms']


def pfifo_argv(interface, parameters, tc='tc'):
    return [tc, 'qdisc', 'replace', 'dev', interface, 'parent', CHILD_PARENT, 'handle', CHILD_HANDLE, 'pfifo',
            'limit', str(parameters['pfifo_limit'])]


def plan(interface, current, profile, wanted, force=False, tc='tc'):
    """The tc commands (argv lists) that take ``interface`` from ``current`` (a ``classify`` result) to ``profile``
    with ``wanted`` parameters (from ``wanted_parameters``); ``[]`` when it is there already.

    A foreign root qdisc raises ForeignQdiscError unless ``force`` (then it is deleted first). Moving from ``lossy``
    to ``tx_cliff`` deletes our root first: tbf cannot drop a child qdisc in place (deleting the child leaves tbf
    with a qdisc that drops everything). Replacing the tbf of ``lossy`` resets its child's limit (tbf applies its
    own byte limit to a fifo child), so the pfifo is set again after it.
    """
    have = current['profile']
    if have == 'foreign' and not force:
        raise ForeignQdiscError(
            f'{interface}: {current["reason"]}; refusing to {"remove" if profile == "clean" else "replace"} it. '
            f'Remove it yourself (tc qdisc del dev {interface} root) or set force: true to let this module delete '
            'it; nothing can put it back afterwards')
    if have == profile and same_parameters(current['parameters'], wanted):
        return []
    commands = []
    if have == 'foreign' or (have == 'lossy' and profile == 'tx_cliff') or (have != 'clean' and profile == 'clean'):
        commands.append(delete_root_argv(interface, tc))
    if profile == 'clean':
        return commands
    # our tbf stays when it is there, is not deleted above and has the wanted rate, burst and latency
    keep_tbf = not commands and have in ('tx_cliff', 'lossy') and same_parameters(
        _tbf_only(current['parameters']), _tbf_only(wanted))
    if not keep_tbf:
        commands.append(tbf_argv(interface, wanted, tc))
    if profile == 'lossy':
        commands.append(pfifo_argv(interface, wanted, tc))
    return commands


def _tbf_only(parameters):
    return {k: v for k, v in parameters.items() if k != 'pfifo_limit'}
