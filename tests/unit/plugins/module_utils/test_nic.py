# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_nic on fixture sysfs trees (a 10 GbE X550 up and down, the lab's veth) and ethtool outputs (captured from a veth,
a hand-made ixgbe, malformed): what an Ethernet link is, read, never guessed."""

from __future__ import annotations

import subprocess

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _nic
from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import MalformedValueError
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, sysfs_tree

ETHTOOL = FIXTURES / 'ethtool'
NIC_NET = 'devices/pci0000_00/0000_00_01.0/0000_01_00.0/net/enp1s0f0'


def ethtool_answers(driver, fail=None):
    """A fake ``run`` answering ``ethtool -i``/``-k`` from the fixture files of ``driver``; ``fail``: the option
    that exits 94 instead."""
    def run(argv, **_kwargs):
        option = argv[1]
        if option == fail:
            return subprocess.CompletedProcess(argv, 94, '', 'Cannot get driver information: No such device\n')
        name = {'-i': 'info', '-k': 'features'}[option]
        return subprocess.CompletedProcess(argv, 0, (ETHTOOL / f'{driver}-{name}.txt').read_text(), '')
    return run


def test_a_10gbe_nic_trained_full_duplex(tmp_path):
    root = sysfs_tree('eth_x550', tmp_path / 'sys')
    nic = _nic.read_nic('enp1s0f0', str(root), run=ethtool_answers('ixgbe'), which=lambda: '/usr/sbin/ethtool')
    assert nic['missing'] == [] and nic['notes'] == []
    assert (nic['speed_mbps'], nic['duplex'], nic['carrier'], nic['carrier_changes'], nic['mtu'], nic['operstate']) \
        == (10000, 'full', True, 4, 9000, 'up')
    assert nic['pci'] == {'vendor': '0x8086', 'device': '0x1563', 'subsystem_vendor': '0x8086',
                          'subsystem_device': '0x0001', 'slot': '0000_01_00.0', 'driver': 'ixgbe', 'id': '8086:1563'}
    assert (nic['driver'], nic['driver_version'], nic['firmware_version'], nic['bus_info']) \
        == ('ixgbe', '6.1.0-28-amd64', '0x800003df, 1.1767.0', '0000:01:00.0')
    assert nic['offloads']['generic-receive-offload'] == {'on': True, 'fixed': False}
    assert nic['offloads']['highdma'] == {'on': True, 'fixed': True}
    assert nic['offloads']['tx-checksum-ipv4'] == {'on': False, 'fixed': True}  # an indented sub-feature


def test_a_down_link_has_no_speed_and_says_so(tmp_path):
    root = sysfs_tree('eth_down', tmp_path / 'sys')
    nic = _nic.read_nic('enp1s0f0', str(root), run=ethtool_answers('ixgbe'), which=lambda: '/usr/sbin/ethtool')
    assert (nic['speed_mbps'], nic['duplex'], nic['carrier'], nic['operstate']) == (None, 'unknown', False, 'down')
    assert nic['carrier_changes'] == 7


def test_the_labs_veth_is_virtual_its_driver_from_ethtool(tmp_path):
    root = sysfs_tree('eth_veth', tmp_path / 'sys')
    nic = _nic.read_nic('eth1', str(root), run=ethtool_answers('veth'), which=lambda: '/usr/sbin/ethtool')
    assert nic['pci'] is None and nic['driver'] == 'veth' and nic['firmware_version'] is None
    assert (nic['speed_mbps'], nic['duplex']) == (10000, 'full')
    assert nic['offloads']['generic-receive-offload'] == {'on': False, 'fixed': False}


def test_without_ethtool_the_sysfs_facts_stay_and_the_package_is_named(tmp_path):
    root = sysfs_tree('eth_x550', tmp_path / 'sys')
    nic = _nic.read_nic('enp1s0f0', str(root), run=ethtool_answers('ixgbe'), which=lambda: None)
    assert nic['driver'] == 'ixgbe'  # from the PCI function's driver link
    assert nic['offloads'] is None and nic['firmware_version'] is None
    assert nic['notes'] == ['ethtool is not installed (Debian and Ubuntu: the ethtool package)'] * 2


def test_an_ethtool_that_fails_is_a_note_not_a_guess(tmp_path):
    root = sysfs_tree('eth_x550', tmp_path / 'sys')
    nic = _nic.read_nic('enp1s0f0', str(root), run=ethtool_answers('ixgbe', fail='-k'),
                        which=lambda: '/usr/sbin/ethtool')
    assert nic['offloads'] is None and nic['driver_version'] == '6.1.0-28-amd64'
    assert nic['notes'] == ['ethtool -k enp1s0f0 exited 94: Cannot get driver information: No such device']


def test_a_missing_interface_is_not_present(tmp_path):
    root = sysfs_tree('eth_x550', tmp_path / 'sys')
    nic = _nic.read_nic('enp9s0', str(root), run=ethtool_answers('ixgbe'), which=lambda: None)
    assert nic['present'] is False and nic['missing'] == [str(root / 'class/net/enp9s0')]


def test_a_malformed_attribute_names_its_file(tmp_path):
    root = sysfs_tree('eth_x550', tmp_path / 'sys')
    (root / NIC_NET / 'duplex').write_text('fullish\n')
    with pytest.raises(MalformedValueError, match='duplex'):
        _nic.read_nic('enp1s0f0', str(root), run=ethtool_answers('ixgbe'), which=lambda: None)
    (root / NIC_NET / 'duplex').write_text('full\n')
    (root / NIC_NET / 'speed').write_text('ten gig\n')
    with pytest.raises(MalformedValueError, match='speed'):
        _nic.read_nic('enp1s0f0', str(root), run=ethtool_answers('ixgbe'), which=lambda: None)


def test_the_parsers_refuse_what_ethtool_does_not_print():
    with pytest.raises(_nic.EthtoolParseError, match='driver'):
        _nic.parse_ethtool_info((ETHTOOL / 'no-driver-info.txt').read_text())
    with pytest.raises(_nic.EthtoolParseError, match='maybe'):
        _nic.parse_ethtool_features((ETHTOOL / 'malformed-features.txt').read_text())
    with pytest.raises(_nic.EthtoolParseError, match='Features for'):
        _nic.parse_ethtool_features('')
    root_features = _nic.parse_ethtool_features((ETHTOOL / 'veth-features.txt').read_text())
    assert len(root_features) > 60 and all(set(v) == {'on', 'fixed'} for v in root_features.values())


def test_a_malformed_ethtool_output_is_a_note(tmp_path):
    root = sysfs_tree('eth_veth', tmp_path / 'sys')

    def run(argv, **_kwargs):
        return subprocess.CompletedProcess(argv, 0, 'garbage\n', '')
    nic = _nic.read_nic('eth1', str(root), run=run, which=lambda: '/usr/sbin/ethtool')
    assert nic['driver'] is None and nic['offloads'] is None
    assert [n.split(' in ')[0] for n in nic['notes']] == ['no "driver:" line', 'no "Features for" header']
