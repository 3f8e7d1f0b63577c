# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import shutil

import pytest
import yaml

from ansible_collections.inferlab.distributed.plugins.modules import net_counters
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import (
    FIXTURES,
    run_module,
    set_module_args,
    sysfs_tree,
)


@pytest.fixture
def roots(tmp_path):
    sysfs = sysfs_tree('tb_peer', tmp_path / 'sys')
    proc = tmp_path / 'proc'
    shutil.copytree(FIXTURES / 'proc', proc)
    return sysfs, proc


@pytest.mark.parametrize('check_mode', [False, True])
def test_sample(roots, check_mode):
    sysfs, proc = roots
    failed, result = run_module(net_counters.main, {'interfaces': ['thunderbolt0'], 'sysfs_root': str(sysfs),
                                                    'procfs_root': str(proc), '_ansible_check_mode': check_mode})
    assert not failed and result['changed'] is False and result['missing'] == []
    counters = result['counters']
    assert list(counters) == ['time', 'interfaces', 'tcp', 'tcp_ext']
    assert set(counters['time']) == {'monotonic', 'wall'}
    iface = counters['interfaces']['thunderbolt0']
    assert (iface['operstate'], iface['mtu']) == ('up', 1500)
    for name in ('rx_crc_errors', 'rx_missed_errors', 'rx_length_errors', 'rx_over_errors', 'rx_bytes', 'tx_bytes'):
        assert isinstance(iface['statistics'][name], int)
    for name in ('RetransSegs', 'OutSegs', 'InSegs', 'InErrs'):
        assert isinstance(counters['tcp'][name], int)
    for name in ('TCPLostRetransmit', 'TCPTimeouts', 'TCPSynRetrans'):
        assert isinstance(counters['tcp_ext'][name], int)


def test_duplicate_interfaces_sampled_once(roots):
    sysfs, proc = roots
    failed, result = run_module(net_counters.main, {'interfaces': ['lo', 'thunderbolt0', 'lo'],
                                                    'sysfs_root': str(sysfs), 'procfs_root': str(proc)})
    assert not failed and list(result['counters']['interfaces']) == ['lo', 'thunderbolt0']


def test_missing_interface_fails_listing_present(roots):
    sysfs, proc = roots
    failed, result = run_module(net_counters.main, {'interfaces': ['thunderbolt1'], 'sysfs_root': str(sysfs),
                                                    'procfs_root': str(proc)})
    assert failed
    assert result['msg'] == f'interface(s) thunderbolt1 not found under {sysfs}/class/net; present: lo, thunderbolt0'
    assert result['missing'] == ['thunderbolt1'] and result['present'] == ['lo', 'thunderbolt0']


def test_missing_interface_tolerated(roots):
    sysfs, proc = roots
    failed, result = run_module(net_counters.main, {'interfaces': ['thunderbolt1', 'lo'], 'fail_on_missing': False,
                                                    'sysfs_root': str(sysfs), 'procfs_root': str(proc)})
    assert not failed
    assert result['missing'] == ['thunderbolt1'] and list(result['counters']['interfaces']) == ['lo']


@pytest.mark.parametrize('filename, text, message', [
    ('snmp', 'Tcp: InSegs OutSegs RetransSegs InErrs\nTcp: 1 2 3\n',
     'malformed {proc}/net/snmp: Tcp has 4 names but 3 values'),
    ('snmp', 'Tcp: InSegs OutSegs RetransSegs InErrs\nTcp: 1 2 3 x\n',
     "malformed Tcp.InErrs in {proc}/net/snmp: 'x' (expected an integer)"),
    ('netstat', 'TcpExt: TCPTimeouts\n', 'malformed {proc}/net/netstat: odd number of lines (1)'),
])
def test_malformed_proc_fails_naming_file(roots, filename, text, message):
    sysfs, proc = roots
    (proc / 'net' / filename).write_text(text)
    failed, result = run_module(net_counters.main, {'interfaces': ['lo'], 'sysfs_root': str(sysfs),
                                                    'procfs_root': str(proc)})
    assert failed
    assert result['msg'].startswith(message.format(proc=proc))


def test_malformed_statistic_fails_naming_file(roots):
    sysfs, proc = roots
    path = sysfs / 'class/net/thunderbolt0/statistics/rx_over_errors'
    path.write_text('-\n')
    failed, result = run_module(net_counters.main, {'interfaces': ['thunderbolt0'], 'sysfs_root': str(sysfs),
                                                    'procfs_root': str(proc)})
    assert failed and result['msg'] == f"malformed rx_over_errors in {path}: '-' (expected a decimal integer)"


def test_interfaces_required():
    failed, result = run_module(net_counters.main, {})
    assert failed and 'missing required arguments: interfaces' in result['msg']


def test_real_loopback():
    failed, result = run_module(net_counters.main, {'interfaces': ['lo']})
    assert not failed and result['counters']['interfaces']['lo']['mtu'] > 0


def test_argument_spec_matches_documentation():
    options = yaml.safe_load(net_counters.DOCUMENTATION)['options']
    with set_module_args({'interfaces': ['lo']}):
        spec = net_counters.build_module().argument_spec

    def shape(opts):
        return {name: (o['type'], o.get('default'), o.get('required', False), o.get('elements'))
                for name, o in opts.items()}

    assert shape(options) == shape(spec)
