# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_identity on fixture sysfs trees: an ASMedia ASM4242 host with a peer, one without DMI, one without Thunderbolt,
and malformed or unreadable attributes."""

from __future__ import annotations

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _identity
from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import MalformedValueError
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, sysfs_tree

PROC = str(FIXTURES / 'proc')
NHI = 'devices/pci0000_00/0000_00_1c.4/0000_72_00.0'
ROUTER = f'{NHI}/domain0/0-0'


def test_a_host_with_a_peer_and_dmi(tmp_path):
    root = sysfs_tree('tb_peer', tmp_path / 'sys')
    identity = _identity.read_identity(str(root), PROC)
    assert identity['missing'] == []
    assert identity['host_router'] == {
        'domain': 'domain0', 'pci_slot': '0000_72_00.0', 'pci_vendor': '0x1b21', 'pci_device': '0x2425',
        'pci_id': '1b21:2425', 'generation': 4, 'nvm_version': '3.1', 'vendor_name': 'ASMedia',
        'device_name': 'ASM4242'}
    assert identity['peer'] == {
        'device': '0-1', 'vendor_id': '0x8086', 'device_id': '0x1', 'id': '8086:0001', 'vendor_name': 'Intel Corp.',
        'device_name': 'lab-b', 'rx_speed_gbps': 20.0, 'rx_lanes': 1, 'tx_speed_gbps': 20.0, 'tx_lanes': 1}
    assert identity['kernel_release'] == '6.1.0-27-amd64'
    assert identity['driver']['loaded'] and identity['driver']['parameters'] == {'e2e': 'Y'}
    assert identity['firmware'] == {
        'bios_vendor': 'American Megatrends International, LLC.', 'bios_version': '1.A0',
        'board_vendor': 'Micro-Star International Co., Ltd.', 'board_name': 'MAG X870 TOMAHAWK WIFI (MS-7E51)',
        'product_name': 'MS-7E51'}


def test_what_is_absent_is_null_and_named_never_guessed(tmp_path):
    root = sysfs_tree('tb_candidate', tmp_path / 'sys')  # no DMI directory
    identity = _identity.read_identity(str(root), PROC)
    assert identity['firmware'] == dict.fromkeys(_identity.DMI_FIELDS)
    assert identity['missing'] == [str(root / 'class/dmi/id' / field) for field in _identity.DMI_FIELDS]


def test_a_host_without_thunderbolt(tmp_path):
    root = sysfs_tree('no_thunderbolt', tmp_path / 'sys')
    identity = _identity.read_identity(str(root), str(tmp_path / 'no-proc'))
    assert identity['host_router'] is None and identity['peer'] is None and identity['kernel_release'] is None
    assert not identity['driver']['loaded']
    missing = identity['missing']
    assert str(tmp_path / 'no-proc/sys/kernel/osrelease') in missing
    assert str(root / 'bus/thunderbolt/devices/domain*') in missing
    assert str(root / 'bus/thunderbolt/devices/<xdomain>') in missing


def test_an_nvm_version_that_cannot_be_read_is_missing(tmp_path):
    """The kernel answers ENODATA while the router is in safe mode; here a directory in its place fails the read."""
    root = sysfs_tree('tb_peer', tmp_path / 'sys')
    (root / ROUTER / 'nvm_version').unlink()
    (root / ROUTER / 'nvm_version').mkdir()
    identity = _identity.read_identity(str(root), PROC)
    assert identity['host_router']['nvm_version'] is None
    assert identity['missing'] == [str(root / 'bus/thunderbolt/devices/0-0/nvm_version')]


def test_a_domain_that_is_not_under_a_pci_function_has_no_pci_ids(tmp_path):
    root = sysfs_tree('tb_peer', tmp_path / 'sys')
    (root / NHI / 'vendor').unlink()
    identity = _identity.read_identity(str(root), PROC)
    assert identity['host_router']['pci_vendor'] is None and identity['host_router']['pci_id'] is None
    assert identity['missing'] == [str(root / NHI / 'vendor')]


@pytest.mark.parametrize('path, value, message', [
    (f'{NHI}/vendor', 'ASMedia', "expected a hex id like '0x8086'"),
    (f'{ROUTER}/0-1/device', '0x12345', "expected a hex id like '0x8086'"),
    (f'{ROUTER}/nvm_version', 'v3', "expected major.minor in hex like '36.0'"),
    (f'{ROUTER}/0-1/rx_lanes', 'two', None),
])
def test_malformed_attributes_raise_naming_the_file(tmp_path, path, value, message):
    root = sysfs_tree('tb_peer', tmp_path / 'sys')
    (root / path).write_text(value + '\n')
    with pytest.raises(MalformedValueError) as raised:
        _identity.read_identity(str(root), PROC)
    assert raised.value.path.endswith(path.rsplit('/', 1)[-1]) and value in str(raised.value)
    if message:
        assert message in str(raised.value)
