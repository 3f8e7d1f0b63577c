# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Tests of module_utils/_net_counters.py, the parser (named apart from modules/test_net_counters.py, the module's
tests: pytest needs unique basenames)."""

from __future__ import annotations

import os
import shutil

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _net_counters
from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import MalformedValueError, SysfsReader
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, sysfs_tree

PROC = FIXTURES / 'proc'


def test_parse_real_snmp_shape():
    text = (PROC / 'net' / 'snmp').read_text()
    tables = _net_counters.parse_proc_pairs(text, '/proc/net/snmp')
    assert list(tables) == ['Ip', 'Icmp', 'IcmpMsg', 'Tcp', 'Udp', 'UdpLite']
    tcp = tables['Tcp']
    assert tcp['MaxConn'] == -1
    for name in ('RetransSegs', 'OutSegs', 'InSegs', 'InErrs', 'ActiveOpens', 'InCsumErrors'):
        assert isinstance(tcp[name], int)


def test_parse_real_netstat_shape():
    text = (PROC / 'net' / 'netstat').read_text()
    tables = _net_counters.parse_proc_pairs(text, '/proc/net/netstat')
    assert list(tables) == ['TcpExt', 'IpExt', 'MPTcpExt']
    assert {'TCPLostRetransmit', 'TCPTimeouts', 'TCPSynRetrans', 'TCPFastRetrans'} <= set(tables['TcpExt'])


@pytest.mark.parametrize('text, message', [
    ('Tcp: A B\nTcp: 1\n', 'malformed /p: Tcp has 2 names but 1 values'),
    ('Tcp: A B\nTcp: 1 2 3\n', 'malformed /p: Tcp has 2 names but 3 values'),
    ('Tcp: A B\n', 'malformed /p: odd number of lines (1); expected header/value pairs'),
    ('Tcp: A B\nUdp: 1 2\n', "malformed /p: line 1 'Tcp: A B' and line 2 'Udp: 1 2' are not a header/value pair"),
    ('A B\nA 1\n', "malformed /p: line 1 'A B' and line 2 'A 1' are not a header/value pair"),
])
def test_parse_proc_pairs_malformed(text, message):
    with pytest.raises(_net_counters.CounterError) as exc:
        _net_counters.parse_proc_pairs(text, '/p')
    assert str(exc.value).startswith(message)


def test_parse_proc_pairs_non_integer():
    with pytest.raises(MalformedValueError) as exc:
        _net_counters.parse_proc_pairs('Tcp: InSegs OutSegs\nTcp: 12 lots\n', '/p')
    assert str(exc.value) == "malformed Tcp.OutSegs in /p: 'lots' (expected an integer)"


def test_parse_proc_pairs_empty_and_blank_lines():
    assert _net_counters.parse_proc_pairs('', '/p') == {}
    assert _net_counters.parse_proc_pairs('\nTcp: A\n\nTcp: 5\n\n', '/p') == {'Tcp': {'A': 5}}


@pytest.fixture
def proc(tmp_path):
    dest = tmp_path / 'proc'
    shutil.copytree(PROC, dest)
    return dest


def test_read_tcp(proc):
    tcp, tcp_ext = _net_counters.read_tcp(SysfsReader(str(proc)))
    assert list(tcp)[:4] == ['RtoAlgorithm', 'RtoMin', 'RtoMax', 'MaxConn']
    assert 'TCPSynRetrans' in tcp_ext and 'InOctets' not in tcp_ext


@pytest.mark.parametrize('filename, content, message', [
    ('snmp', None, 'ROOT/net/snmp not found: is procfs_root (ROOT) a procfs?'),
    ('netstat', None, 'ROOT/net/netstat not found: is procfs_root (ROOT) a procfs?'),
    ('snmp', 'Ip: Forwarding\nIp: 1\n', 'malformed ROOT/net/snmp: no Tcp: section (found: Ip)'),
    ('snmp', 'Tcp: InSegs OutSegs\nTcp: 1 2\n', 'malformed ROOT/net/snmp: Tcp: lacks RetransSegs, InErrs'),
    ('netstat', '', 'malformed ROOT/net/netstat: no TcpExt: section (found: none)'),
    ('netstat', 'TcpExt: TCPTimeouts\nTcpExt: 3\n',
     'malformed ROOT/net/netstat: TcpExt: lacks TCPLostRetransmit, TCPSynRetrans'),
    ('netstat', 'TcpExt: TCPTimeouts TCPLostRetransmit\nTcpExt: 3\n',
     'malformed ROOT/net/netstat: TcpExt has 2 names but 1 values'),
])
def test_read_tcp_missing_or_malformed(proc, filename, content, message):
    path = proc / 'net' / filename
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    with pytest.raises(_net_counters.CounterError) as exc:
        _net_counters.read_tcp(SysfsReader(str(proc)))
    assert str(exc.value) == message.replace('ROOT', str(proc))


@pytest.fixture
def sysfs(tmp_path):
    return sysfs_tree('tb_peer', tmp_path / 'sys')


def test_read_interface(sysfs):
    iface = _net_counters.read_interface(SysfsReader(str(sysfs)), 'thunderbolt0')
    assert iface['operstate'] == 'up' and iface['mtu'] == 1500
    stats = iface['statistics']
    assert len(stats) == 24
    assert (stats['rx_crc_errors'], stats['rx_missed_errors'], stats['rx_length_errors'], stats['rx_over_errors'],
            stats['rx_errors']) == (3, 1, 0, 2, 6)
    assert all(isinstance(value, int) for value in stats.values())


def test_read_interface_malformed_statistic(sysfs):
    path = sysfs / 'class/net/thunderbolt0/statistics/rx_crc_errors'
    path.write_text('n/a\n')
    with pytest.raises(MalformedValueError) as exc:
        _net_counters.read_interface(SysfsReader(str(sysfs)), 'thunderbolt0')
    assert str(exc.value) == f"malformed rx_crc_errors in {path}: 'n/a' (expected a decimal integer)"


def test_read_interface_malformed_mtu(sysfs):
    (sysfs / 'class/net/lo/mtu').write_text('big\n')
    with pytest.raises(MalformedValueError, match=r"malformed mtu in .*/class/net/lo/mtu: 'big'"):
        _net_counters.read_interface(SysfsReader(str(sysfs)), 'lo')


def test_read_interface_without_statistics(sysfs):
    shutil.rmtree(sysfs / 'devices/virtual/net/lo/statistics')
    with pytest.raises(_net_counters.CounterError, match='class/net/lo/statistics is missing or empty'):
        _net_counters.read_interface(SysfsReader(str(sysfs)), 'lo')


def test_collect(sysfs, proc):
    counters, missing = _net_counters.collect(['thunderbolt0', 'lo'], str(sysfs), str(proc), clock=lambda: (5.5, 1e9))
    assert missing == []
    assert list(counters) == ['time', 'interfaces', 'tcp', 'tcp_ext']
    assert counters['time'] == {'monotonic': 5.5, 'wall': 1e9}
    assert list(counters['interfaces']) == ['thunderbolt0', 'lo']
    assert counters['interfaces']['lo']['operstate'] == 'unknown'


def test_collect_real_clock(sysfs, proc):
    counters, _missing = _net_counters.collect(['lo'], str(sysfs), str(proc))
    assert counters['time']['monotonic'] > 0 and counters['time']['wall'] > 1.7e9


def test_collect_missing_interface_fails(sysfs, proc):
    with pytest.raises(_net_counters.MissingInterfaceError) as exc:
        _net_counters.collect(['thunderbolt1', 'lo', 'eth9'], str(sysfs), str(proc))
    assert str(exc.value) == (f"interface(s) thunderbolt1, eth9 not found under {sysfs}/class/net; "
                              "present: lo, thunderbolt0")
    assert exc.value.missing == ['thunderbolt1', 'eth9'] and exc.value.present == ['lo', 'thunderbolt0']


def test_collect_missing_interface_tolerated(sysfs, proc):
    counters, missing = _net_counters.collect(['thunderbolt1', 'lo'], str(sysfs), str(proc), fail_on_missing=False)
    assert missing == ['thunderbolt1'] and list(counters['interfaces']) == ['lo']


def test_collect_no_class_net(tmp_path, proc):
    os.makedirs(tmp_path / 'empty')
    with pytest.raises(_net_counters.MissingInterfaceError, match='present: none'):
        _net_counters.collect(['lo'], str(tmp_path / 'empty'), str(proc))


@pytest.mark.skipif(not os.path.isdir('/sys/class/net'), reason='needs Linux sysfs')
def test_collect_from_this_machine():
    """The real /sys and /proc of the machine running the tests: every interface has statistics."""
    present = sorted(name for name in os.listdir('/sys/class/net') if os.path.isdir(f'/sys/class/net/{name}'))
    counters, missing = _net_counters.collect(present)
    assert missing == [] and set(counters['interfaces']) == set(present)
    assert {'RetransSegs', 'OutSegs', 'InSegs', 'InErrs'} <= set(counters['tcp'])
