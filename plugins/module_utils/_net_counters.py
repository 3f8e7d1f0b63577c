# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Interface and TCP counters from ``/sys/class/net`` and ``/proc/net/{snmp,netstat}``.

``/proc/net/snmp`` and ``/proc/net/netstat`` come in pairs of lines, a header and its values, both starting with the
same ``Prefix:``::

    Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens ... RetransSegs InErrs OutRsts InCsumErrors
    Tcp: 1 200 120000 -1 21 ... 0 0 20 0

Both files are per network namespace, as is ``/sys/class/net``: read inside the namespace, they are the host's own.
"""

from __future__ import annotations

import time

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _sysfs
except ImportError:  # on a host, installed beside the sampler (see _sampler)
    import inferlab_sysfs as _sysfs

# the sysfs reader and its errors, under the names this module's callers know
MalformedValueError = _sysfs.MalformedValueError
SysfsError = _sysfs.SysfsError
SysfsReader = _sysfs.SysfsReader

# The receiver-error family of an interface's statistics: what a bad cable, a lossy driver or an overrun receiver
# shows first. The controller's filters sum and show these (link_test_result, link_ab_metrics).
RX_ERROR_COUNTERS = ('rx_crc_errors', 'rx_over_errors', 'rx_missed_errors', 'rx_length_errors')

# The interface's carrier transitions (files of /sys/class/net/IF/, not of statistics/): carrier_changes (Linux 3.15+)
# counts every carrier up and down, the two others (4.16+) each direction. A cable pulled, a hotplug, a suspend, a
# retrain or a driver that drops the carrier shows here, where the byte counters see nothing. None where the kernel
# has no such file.
CARRIER_COUNTERS = ('carrier_changes', 'carrier_up_count', 'carrier_down_count')

# Fields that later stages compute with; a file without them is truncated or not what we think it is.
REQUIRED_TCP = ('InSegs', 'OutSegs', 'RetransSegs', 'InErrs')
REQUIRED_TCP_EXT = ('TCPLostRetransmit', 'TCPTimeouts', 'TCPSynRetrans')


class CounterError(SysfsError):
    """A counter file is missing, malformed or lacks a required field."""


class MissingInterfaceError(CounterError):
    def __init__(self, missing, present, path):
        self.missing = missing
        self.present = present
        super().__init__(f"interface(s) {', '.join(missing)} not found under {path}; "
                         f"present: {', '.join(present) or 'none'}")


def parse_proc_pairs(text, path):
    """``{prefix: {name: int}}`` from the header/value line pairs of ``/proc/net/snmp`` or ``/proc/net/netstat``."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) % 2:
        raise CounterError(f"malformed {path}: odd number of lines ({len(lines)}); expected header/value pairs")
    result = {}
    for number in range(0, len(lines), 2):
        header, values = lines[number].split(), lines[number + 1].split()
        if not header or not header[0].endswith(':') or header[0] != values[0]:
            raise CounterError(f"malformed {path}: line {number + 1} {lines[number][:40]!r} and line {number + 2} "
                               f"{lines[number + 1][:40]!r} are not a header/value pair with the same prefix")
        prefix = header[0][:-1]
        names, numbers = header[1:], values[1:]
        if len(names) != len(numbers):
            raise CounterError(f"malformed {path}: {prefix} has {len(names)} names but {len(numbers)} values")
        section = {}
        for position, name in enumerate(names):
            value = numbers[position]
            try:
                section[name] = int(value)
            except ValueError:
                raise MalformedValueError(f'{prefix}.{name}', path, value, 'expected an integer') from None
        result[prefix] = section
    return result


def _section(tables, prefix, required, path):
    if prefix not in tables:
        raise CounterError(f"malformed {path}: no {prefix}: section (found: {', '.join(tables) or 'none'})")
    missing = [name for name in required if name not in tables[prefix]]
    if missing:
        raise CounterError(f"malformed {path}: {prefix}: lacks {', '.join(missing)}")
    return tables[prefix]


def read_proc_table(procfs, relpath):
    text = procfs.read(relpath, strip=False)
    if text is None:
        raise CounterError(f"{procfs.path(relpath)} not found: is procfs_root ({procfs.root}) a procfs?")
    return parse_proc_pairs(text, procfs.path(relpath))


def read_tcp(procfs):
    """``(tcp, tcp_ext)``: every ``Tcp:`` field of ``net/snmp`` and every ``TcpExt:`` field of ``net/netstat``."""
    snmp = read_proc_table(procfs, 'net/snmp')
    netstat = read_proc_table(procfs, 'net/netstat')
    return (_section(snmp, 'Tcp', REQUIRED_TCP, procfs.path('net/snmp')),
            _section(netstat, 'TcpExt', REQUIRED_TCP_EXT, procfs.path('net/netstat')))


def read_carrier(sysfs, ifname):
    """``{name: int or None}`` for CARRIER_COUNTERS (None: the kernel has no such file)."""
    return {name: sysfs.read_int('class/net', ifname, name, name=name, minimum=0) for name in CARRIER_COUNTERS}


def read_interface(sysfs, ifname):
    """``{operstate, mtu, statistics: {name: int}, carrier: {name: int or None}}`` for one interface (all files of
    ``statistics/``, and the carrier transition counters)."""
    base = ('class/net', ifname)
    statistics = {name: sysfs.read_int(*base, 'statistics', name) for name in sysfs.listdir(*base, 'statistics')}
    if not statistics:
        raise CounterError(f"{sysfs.path(*base, 'statistics')} is missing or empty")
    return {
        'operstate': sysfs.read(*base, 'operstate'),
        'mtu': sysfs.read_int(*base, 'mtu'),
        'statistics': statistics,
        'carrier': read_carrier(sysfs, ifname),
    }


def collect(interfaces, sysfs_root='/sys', procfs_root='/proc', fail_on_missing=True, clock=None):
    """``(counters, missing)`` as documented in docs/CONVENTIONS.md.

    The clocks are read first, so ``time`` marks the start of the sample; the reads themselves take microseconds.
    ``clock`` (tests only) returns ``(monotonic, wall)``.
    """
    sysfs = SysfsReader(sysfs_root)
    procfs = SysfsReader(procfs_root)
    monotonic, wall = clock() if clock else (time.monotonic(), time.time())

    # class/net also holds files such as bonding_masters: interfaces are the directories
    present = [name for name in sysfs.listdir('class/net') if sysfs.isdir('class/net', name)]
    missing = [name for name in interfaces if name not in present]
    if missing and fail_on_missing:
        raise MissingInterfaceError(missing, present, sysfs.path('class/net'))

    counters = {'time': {'monotonic': monotonic, 'wall': wall}, 'interfaces': {}}
    for ifname in interfaces:
        if ifname not in missing:
            counters['interfaces'][ifname] = read_interface(sysfs, ifname)
    counters['tcp'], counters['tcp_ext'] = read_tcp(procfs)
    return counters, missing
