# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.inferlab.distributed.plugins.modules import tbnet_info
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import (
    FIXTURES,
    AnsibleExitJson,
    patch_exits,
    run_module,
    set_module_args,
    sysfs_tree,
)

PROC = str(FIXTURES / 'proc')


@pytest.mark.parametrize('check_mode', [False, True])
def test_peer_fixture(tmp_path, check_mode):
    root = str(sysfs_tree('tb_peer', tmp_path / 'sys'))
    failed, result = run_module(tbnet_info.main, {'sysfs_root': root, 'procfs_root': PROC,
                                                  '_ansible_check_mode': check_mode})
    assert not failed and result['changed'] is False
    tbnet = result['tbnet']
    assert list(tbnet) == [
        'kernel_release', 'domains', 'peers', 'services', 'interfaces', 'module', 'loading', 'notes']
    assert tbnet['peers'][0]['rx_link_gbps'] == 20.0
    assert tbnet['services'][0]['flags'] == {'e2e': True, 'match_frags_id': True, '64k_frames': True}
    assert tbnet['interfaces'] == {'thunderbolt0': {'service': '0-1.0', 'peer': '0-1'}}
    assert tbnet['module']['parameters'] == {'e2e': 'Y'}
    assert tbnet['notes'] == []


def test_no_thunderbolt_is_facts_not_failure(tmp_path):
    root = str(sysfs_tree('no_thunderbolt', tmp_path / 'sys'))
    failed, result = run_module(tbnet_info.main, {'sysfs_root': root, 'procfs_root': PROC})
    assert not failed
    assert result['tbnet']['module']['loaded'] is False
    assert any(note.startswith('thunderbolt_net module not loaded') for note in result['tbnet']['notes'])
    assert any(note.startswith('no thunderbolt bus at') for note in result['tbnet']['notes'])


@pytest.mark.parametrize('rel, text, message', [
    ('bus/thunderbolt/devices/0-1/rx_speed', 'fast',
     "malformed rx_speed in {root}/bus/thunderbolt/devices/0-1/rx_speed: 'fast' (expected like '20.0 Gb/s')"),
    ('bus/thunderbolt/devices/0-1/rx_lanes', 'x',
     "malformed rx_lanes in {root}/bus/thunderbolt/devices/0-1/rx_lanes: 'x' (expected a decimal integer)"),
    ('bus/thunderbolt/devices/0-1.0/prtcstns', 'f',
     "malformed prtcstns in {root}/bus/thunderbolt/devices/0-1.0/prtcstns: 'f' "
     "(expected a hex bitmask like '0x0000000f')"),
])
def test_malformed_fails_with_path_and_value(tmp_path, rel, text, message):
    root = sysfs_tree('tb_peer', tmp_path / 'sys')
    (root / rel).write_text(text + '\n')
    failed, result = run_module(tbnet_info.main, {'sysfs_root': str(root), 'procfs_root': PROC})
    assert failed
    assert result['msg'] == message.format(root=root)
    assert 'tbnet' not in result


def test_defaults_read_this_machine():
    """With no options the module reads /sys and /proc; this machine may have no Thunderbolt at all."""
    with set_module_args({}), patch_exits(), pytest.raises(AnsibleExitJson) as exc:
        tbnet_info.main()
    result = exc.value.args[0]
    assert result['changed'] is False
    assert result['tbnet']['kernel_release']


def test_argument_spec_matches_documentation():
    import yaml

    options = yaml.safe_load(tbnet_info.DOCUMENTATION)['options']
    with set_module_args({}):
        spec = tbnet_info.build_module().argument_spec
    assert {name: (opt['type'], opt.get('default')) for name, opt in options.items()} == \
        {name: (opt['type'], opt.get('default')) for name, opt in spec.items()}
