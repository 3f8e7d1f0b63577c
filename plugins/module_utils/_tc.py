# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Link profiles: the ``tc`` qdiscs that emulate the driver layer on one interface's egress, and their recognition.

Over 600 lines on purpose: installed alone on hosts as ``inferlab_tc.py`` (the ledger role's files); its profiles
and whole-tree record and rebuild share one reading of tc's output and units.

Standard library only, free of any ``ansible`` import, and compiles on Python 3.8: the ``link_profile`` module and
the ledger's undo import it, and the ``lab`` role installs it into the lab's tree (``<lab dir>/lib/inferlab_tc.py``,
lab.json's ``tc_module``), from where the lab's link daemon applies each host's profile and ``inferlab lab status``
reports it.

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


# ---------------------------------------------------------------------------------------------------------------
# the interface's whole egress qdisc tree: recorded before a change, put back exactly by the undo, compared by the
# restore's proof
#
# A tree is the list ``tree(parse_qdiscs(...))`` gives, root first: ``{kind, handle, parent, options}`` per egress
# qdisc, ``parent`` None for the root (ingress-side qdiscs are never touched, so never recorded). A root with handle
# ``0:`` is the kernel's default (noqueue, pfifo_fast, mq, a default fq_codel ...): deleting whatever root is there
# brings it back. Any other qdisc is made again with ``tc qdisc add`` and the options ``tc -j`` showed, turned back
# into tc's arguments (``qdisc_argv``) for the kinds below; a tree with anything else (another kind, an option tc's
# JSON shows but that cannot be set back, an htb with classes) cannot be put back exactly (``rebuild_problem``).

DEFAULT_HANDLE = '0:'


class TreeError(TcError):
    """A qdisc tree that cannot be recorded or made again exactly."""


def _count(value, key):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TreeError(f'{key} {value!r} is not a count')
    return str(value)


def _size(value, key):
    return f'{round(size_bytes(value))}b'


def _time(value, key):
    return f'{round(time_us(value))}us'


def _codel_time(value, key):
    """A codel time: the kernel keeps it in units of 1024 ns and shows it rounded down to whole microseconds, so one
    microsecond more falls in the same unit again."""
    return f'{round(time_us(value)) + 1}us'


def _time_ns(value, key):
    return f'{_count(value, key)}ns'


def _rate(value, key):
    return f'{round(rate_bytes(value))}bps'


def _hex(value, key):
    if not isinstance(value, str) or not re.match(r'^(0x)?[0-9a-fA-F]+$', value):
        raise TreeError(f'{key} {value!r} is not a hexadecimal class number')
    return value[2:] if value.startswith('0x') else value


def _numbers(value, key):
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TreeError(f'{key} {value!r} is not a list of numbers')
    return [str(v) for v in value]


# kind -> {key of tc -j's options: (tc's word, how the value becomes its argument)}; only these kinds are made again
OPTIONS = {
    'noqueue': {},
    'mq': {},
    'pfifo_fast': {},  # its bands and priomap are fixed (shown, never set)
    'pfifo': {'limit': ('limit', _count)},
    'bfifo': {'limit': ('limit', _size)},
    'tbf': {'rate': ('rate', _rate), 'burst': ('burst', _size), 'lat': ('latency', _time)},
    'fq': {'limit': ('limit', _count), 'flow_limit': ('flow_limit', _count), 'buckets': ('buckets', _count),
           'orphan_mask': ('orphan_mask', _count), 'quantum': ('quantum', _size),
           'initial_quantum': ('initial_quantum', _size), 'maxrate': ('maxrate', _rate),
           'defrate': ('defrate', _rate), 'low_rate_threshold': ('low_rate_threshold', _rate),
           'refill_delay': ('refill_delay', _time), 'ce_threshold': ('ce_threshold', _time),
           'timer_slack': ('timer_slack', _time_ns), 'horizon': ('horizon', _time),
           'offload_horizon': ('offload_horizon', _time), 'priomap': ('priomap', _numbers),
           'weights': ('weights', _numbers)},
    'fq_codel': {'limit': ('limit', _count), 'flows': ('flows', _count), 'quantum': ('quantum', _count),
                 'target': ('target', _codel_time), 'interval': ('interval', _codel_time),
                 'ce_threshold': ('ce_threshold', _codel_time), 'memory_limit': ('memory_limit', _size),
                 'drop_batch': ('drop_batch', _count)},
    'htb': {'r2q': ('r2q', _count), 'default': ('default', _hex), 'direct_qlen': ('direct_qlen', _count)},
    'netem': {'limit': ('limit', _count)},  # the rest in _netem_argv
}
# keys tc -j shows that describe the qdisc but are no argument: counters, fixed values, flags handled apart
SHOWN_ONLY = {
    'pfifo_fast': ('bands', 'priomap', 'multiqueue'),
    'fq': ('bands', 'pacing', 'horizon_drop', 'horizon_cap'),
    'fq_codel': ('ecn',),
    'htb': ('direct_packets_stat', 'version'),
    'netem': ('delay', 'loss-random', 'duplicate', 'reorder', 'corrupt', 'rate', 'ecn', 'gap'),
}
COMPARED_APART = {'htb': ('direct_packets_stat',)}  # counters: never a difference


def tree(qdiscs):
    """The egress qdiscs of ``qdiscs`` (from ``parse_qdiscs``) as the ledger records them, root first."""
    egress = [{'kind': q['kind'], 'handle': q['handle'], 'parent': q['parent'], 'options': q['options']}
              for q in qdiscs if q['kind'] not in INGRESS_KINDS]
    return sorted(egress, key=lambda q: q['parent'] is not None)


def check_tree(value):
    """``value`` as a recorded tree (a list of ``{kind, handle, parent, options}`` with one root at most, first);
    raises TreeError saying what is wrong."""
    if not isinstance(value, list):
        raise TreeError(f'a qdisc tree is a list of qdiscs, got {type(value).__name__}')
    for index, qdisc in enumerate(value):
        if (not isinstance(qdisc, dict) or set(qdisc) != {'kind', 'handle', 'parent', 'options'}
                or not isinstance(qdisc['kind'], str) or not _is_handle(qdisc['handle'])
                or not isinstance(qdisc['options'], dict)
                or not (qdisc['parent'] is None or isinstance(qdisc['parent'], str))):
            raise TreeError(f'qdisc {index} of the tree is not {{kind, handle, parent, options}} with a handle '
                            f'such as "1:": {str(qdisc)[:160]!r}')
        if (qdisc['parent'] is None) != (index == 0):
            raise TreeError(f'the root of a qdisc tree comes first and alone, found {describe_tree(value)!r}')
    return value


def _is_handle(value):
    return isinstance(value, str) and re.match(r'^[0-9a-f]{1,4}:$', value) is not None


def describe_tree(qdiscs):
    """A tree in a few words, options included: ``fq 1: root (limit 10000, quantum 3028)``."""
    if not qdiscs:
        return 'no qdisc'
    words = []
    for q in qdiscs:
        where = ' root' if q['parent'] is None else f' parent {q["parent"]}'
        options = ', '.join(f'{k} {v}' for k, v in sorted(q['options'].items()))
        words.append(f'{q["kind"]} {q["handle"]}{where}' + (f' ({options})' if options else ''))
    return ', '.join(words)


def _netem_argv(options):
    """netem's options as tc shows them in JSON (iproute2 5.x and later), back to its arguments."""
    argv = []
    delay = options.get('delay')
    if delay:
        if delay.get('jitter') or delay.get('correlation'):
            raise TreeError('netem with jitter: tc -j does not show its distribution')
        argv += ['delay', f'{round(_number(delay.get("delay"), "delay") * 1e6)}us']
    for key, word in (('loss-random', 'loss'), ('duplicate', 'duplicate'), ('reorder', 'reorder'),
                      ('corrupt', 'corrupt')):
        part = options.get(key)
        if part:
            argv += [word, f'{_number(part.get(word), word) * 100:.6g}%']
            if part.get('correlation'):
                argv.append(f'{_number(part["correlation"], "correlation") * 100:.6g}%')
    rate = options.get('rate')
    if rate:
        if set(rate) - {'rate', 'cellsize'} or rate.get('cellsize'):
            raise TreeError(f'netem rate with overheads or cells: {rate!r}')
        argv += ['rate', _rate(rate.get('rate'), 'rate')]
    if options.get('ecn'):
        argv.append('ecn')
    if options.get('gap'):
        argv += ['gap', _count(options['gap'], 'gap')]
    return argv


def _flags(kind, options):
    if kind == 'fq':
        return (['nopacing'] if options.get('pacing') is False else []) + [
            flag for flag in ('horizon_drop', 'horizon_cap') if flag in options]
    if kind == 'fq_codel':  # tc shows ecn only when on, and it is on by default
        return ['ecn'] if options.get('ecn') else ['noecn']
    if kind == 'netem':
        return _netem_argv(options)
    return []


def qdisc_argv(qdisc):
    """``KIND OPTION VALUE ...``: the arguments of ``tc qdisc add`` that make ``qdisc`` (a tree's entry) again;
    raises TreeError when its kind or one of its options cannot be set back."""
    kind, options = qdisc['kind'], qdisc['options']
    if kind not in OPTIONS:
        raise TreeError(f'{kind} is not a qdisc kind inferlab can make again (it knows '
                        f'{", ".join(sorted(OPTIONS))})')
    known, shown = OPTIONS[kind], SHOWN_ONLY.get(kind, ())
    unknown = sorted(set(options) - set(known) - set(shown))
    if unknown:
        raise TreeError(f'{kind} {qdisc["handle"]} has {", ".join(unknown)}, which inferlab cannot set back')
    if kind == 'tbf' and set(known) - set(options):
        raise TreeError(f'tbf {qdisc["handle"]} lacks {", ".join(sorted(set(known) - set(options)))}')
    argv = [kind]
    for key, (word, convert) in known.items():
        if key in options:
            value = convert(options[key], f'{kind} {key}')
            argv += [word] + (value if isinstance(value, list) else [value])
    return argv + _flags(kind, options)


def rebuild_problem(qdiscs, htb_classes=0):
    """Why ``qdiscs`` (a tree) cannot be made again exactly, in one sentence; None when it can. ``htb_classes``:
    how many classes ``tc class show`` lists for an htb (they and their filters are not recorded)."""
    try:
        check_tree(qdiscs)
        for qdisc in qdiscs:
            if qdisc['handle'] == DEFAULT_HANDLE:
                continue
            qdisc_argv(qdisc)
            if qdisc['kind'] == 'htb' and htb_classes:
                raise TreeError(f'htb {qdisc["handle"]} has {htb_classes} classes, which are not recorded')
        _creation_order(qdiscs)
    except TcError as exc:
        return str(exc)
    return None


def class_show_argv(interface, tc='tc'):
    """Plain text: ``tc -j class show`` prints text, not JSON, for htb classes on iproute2 6.1."""
    return [tc, 'class', 'show', 'dev', interface]


def count_classes(text, kind):
    """How many classes of ``kind`` ``tc class show`` printed (one ``class KIND HANDLE ...`` line each)."""
    return sum(1 for line in (text or '').splitlines() if line.split()[:2] == ['class', kind])


def _major(handle_or_parent):
    return handle_or_parent.split(':')[0].lstrip('0') + ':' if handle_or_parent else None


def _creation_order(qdiscs):
    """The children of ``qdiscs`` (a tree) whose handle is not 0:, each after the qdisc it hangs from."""
    root = qdiscs[0] if qdiscs else None
    made = {_major(root['handle'])} if root else set()
    waiting = [q for q in qdiscs[1:] if q['handle'] != DEFAULT_HANDLE]
    order = []
    while waiting:
        ready = [q for q in waiting if _major(q['parent']) in made or q['parent'].startswith(':')]
        if not ready:
            raise TreeError(f'{describe_tree(waiting)} hang from no qdisc of the tree')
        order += ready
        made |= {_major(q['handle']) for q in ready}
        waiting = [q for q in waiting if q not in ready]
    return order


def rebuild_commands(interface, recorded, current, tc='tc'):
    """The tc commands (argv lists) that put ``recorded`` (a tree) back on ``interface``, whose qdiscs are now
    ``current`` (from ``parse_qdiscs``); ``[]`` when they are the same already. Raises TreeError when ``recorded``
    cannot be made again. Our root is deleted first (the kernel then attaches its default root), then the recorded
    root is added with its handle and options unless it is that default, then its children, parents first."""
    check_tree(recorded)
    if not tree_differences(recorded, tree(current)):
        return []
    problem = rebuild_problem(recorded)
    if problem:
        raise TreeError(problem)
    commands = []
    if any(q['root'] and q['handle'] != DEFAULT_HANDLE for q in current if q['kind'] not in INGRESS_KINDS):
        commands.append(delete_root_argv(interface, tc))
    root = recorded[0] if recorded else None
    if root and root['handle'] != DEFAULT_HANDLE:
        commands.append([tc, 'qdisc', 'add', 'dev', interface, 'root', 'handle', root['handle']] + qdisc_argv(root))
    for child in _creation_order(recorded):  # replace: the kernel hangs a default qdisc under each new class
        commands.append([tc, 'qdisc', 'replace', 'dev', interface, 'parent', child['parent'], 'handle',
                         child['handle']] + qdisc_argv(child))
    return commands


def _same_value(kind, key, before, after, before_options):
    """Whether one option of a qdisc came back: the kernel keeps a tbf's burst as whole microseconds (or ticks) at
    its rate and derives its latency, so a rebuilt tbf reads back up to 2 us of the rate (plus 64 bytes) off in
    burst and a few microseconds off in latency; netem's fractions are printed with 6 digits."""
    if before == after:
        return True
    try:
        if kind == 'tbf' and key == 'burst':
            slack = 2 * rate_bytes(before_options['rate']) / 1e6 + 64
            return abs(size_bytes(before) - size_bytes(after)) <= slack
        if kind == 'tbf' and key == 'lat':
            return abs(time_us(before) - time_us(after)) <= 5
    except (TcError, KeyError):
        return False
    if isinstance(before, float) or isinstance(after, float):
        return isinstance(before, (int, float)) and isinstance(after, (int, float)) and abs(
            before - after) <= 1e-5 * max(abs(before), abs(after), 1e-9)
    if isinstance(before, dict) and isinstance(after, dict) and set(before) == set(after):
        return all(_same_value(kind, k, before[k], after[k], before) for k in before)
    return False


def tree_differences(before, after):
    """How ``after`` differs from ``before`` (both trees): one sentence per qdisc that is gone, new or changed
    (kind, parent, options that are not counters); empty when they are the same."""
    def where(q):
        return 'root' if q['parent'] is None else f'parent {q["parent"]}'

    def key(q):  # a default qdisc is known by where it hangs, any other by its handle
        return ('root',) if q['parent'] is None else (q['parent'], q['handle'])

    old, new = {key(q): q for q in before}, {key(q): q for q in after}
    differences = []
    for place in sorted(set(old) | set(new), key=lambda k: (k != ('root',), k)):  # the root first
        was, now = old.get(place), new.get(place)
        if was is None or now is None:
            q = was or now
            differences.append(f'{q["kind"]} {q["handle"]} {where(q)} ' + ('is gone' if now is None else 'is new'))
            continue
        if (was['kind'], was['handle']) != (now['kind'], now['handle']):
            differences.append(f'{where(was)}: {describe_tree([was])}, now {describe_tree([now])}')
            continue
        skipped = COMPARED_APART.get(was['kind'], ())
        changed = sorted(k for k in set(was['options']) | set(now['options']) if k not in skipped
                         and not _same_value(was['kind'], k, was['options'].get(k), now['options'].get(k),
                                             was['options']))
        if changed:
            differences.append(f'{was["kind"]} {was["handle"]} {where(was)}: ' + ', '.join(
                f'{k} {was["options"].get(k)!r}, now {now["options"].get(k)!r}' for k in changed))
    return differences
