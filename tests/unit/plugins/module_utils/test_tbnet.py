# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os
import shutil

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _tbnet
from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import MalformedValueError, SysfsReader
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, sysfs_tree

PROC = str(FIXTURES / 'proc')
DEVICES = 'bus/thunderbolt/devices'


def tree(tmp_path, name='tb_peer'):
    return str(sysfs_tree(name, tmp_path / 'sys'))


@pytest.mark.parametrize('text, expected', [
    ('0x00000007', {'e2e': True, 'match_frags_id': True, '64k_frames': True}),
    ('0x00000006', {'e2e': False, 'match_frags_id': True, '64k_frames': True}),
    ('0x00000001', {'e2e': True, 'match_frags_id': False, '64k_frames': False}),
    ('0x0000000f', {'e2e': True, 'match_frags_id': True, '64k_frames': True}),
    ('0x00000000', {'e2e': False, 'match_frags_id': False, '64k_frames': False}),
    ('0xFFFFFFF8', {'e2e': False, 'match_frags_id': False, '64k_frames': False}),
])
def test_parse_prtcstns(text, expected):
    assert _tbnet.parse_prtcstns(text + '\n', '/x/prtcstns') == (text, expected)


@pytest.mark.parametrize('text', ['7', '0xzz', 'zz', '', '0x', None])
def test_parse_prtcstns_malformed(text):
    with pytest.raises(MalformedValueError) as exc:
        _tbnet.parse_prtcstns(text, '/x/prtcstns')
    assert str(exc.value).startswith(f'malformed prtcstns in /x/prtcstns: {text!r}')


def test_parse_uevent():
    assert _tbnet.parse_uevent('DEVTYPE=thunderbolt_service\nMODALIAS=tbsvc:knetwork\n\nnoequals') == {
        'DEVTYPE': 'thunderbolt_service', 'MODALIAS': 'tbsvc:knetwork'}
    assert _tbnet.parse_uevent(None) == {}


@pytest.mark.parametrize('name, files, expected', [
    ('domain0', {}, 'domain'),
    ('0-0', {'generation': '4'}, 'router'),
    ('0-0', {}, 'router'),                 # route 0 is the host router
    ('0-1', {'generation': '3'}, 'router'),  # a device router (dock)
    ('0-1', {'unique_id': 'x'}, 'xdomain'),
    ('1-301', {'unique_id': 'x'}, 'xdomain'),
    ('0-1.0', {'key': 'network'}, 'service'),
    ('0-1.0', {}, None),
    ('0-0:1.1', {}, None),                 # retimer
    ('0-1', {'uevent': 'DEVTYPE=thunderbolt_xdomain', 'generation': '4'}, 'xdomain'),
    ('weird', {'uevent': 'DEVTYPE=thunderbolt_service'}, 'service'),
    ('0-0:1.1', {'uevent': 'DEVTYPE=thunderbolt_retimer'}, None),
])
def test_classify(tmp_path, name, files, expected):
    device = tmp_path / DEVICES / name
    device.mkdir(parents=True)
    for filename, text in files.items():
        (device / filename).write_text(text + '\n')
    assert _tbnet.classify(SysfsReader(str(tmp_path)), name) == expected


def test_collect_peer_fixture(tmp_path):
    root = tree(tmp_path)
    facts = _tbnet.collect(root, PROC)
    assert facts == {
        'kernel_release': '6.1.0-27-amd64',
        'domains': [{
            'device': 'domain0',
            'unique_id': 'd1000000-0072-8718-a3c6-12f4b0e0ab01',
            'security': 'user',
            'iommu_dma_protection': True,
            'host_router': {'device': '0-0', 'vendor_name': 'ASMedia', 'device_name': 'ASM4242', 'generation': 4},
        }],
        'peers': [{
            'device': '0-1', 'device_name': 'lab-b', 'vendor_name': 'Intel Corp.',
            'unique_id': '9a0bd1e8-8f2c-4b1e-a8c3-2fe0c1a2b3c4',
            'rx_speed_gbps': 20.0, 'tx_speed_gbps': 20.0, 'rx_lanes': 1, 'tx_lanes': 1,
            'rx_link_gbps': 20.0, 'tx_link_gbps': 20.0,
        }],
        'services': [{
            'device': '0-1.0', 'peer': '0-1', 'key': 'network', 'prtcid': 1, 'prtcvers': 1, 'prtcrevs': 1,
            'prtcstns': '0x00000007', 'flags': {'e2e': True, 'match_frags_id': True, '64k_frames': True},
            'interface': 'thunderbolt0',
        }],
        'interfaces': {'thunderbolt0': {'service': '0-1.0', 'peer': '0-1'}},
        'module': {'loaded': True, 'parameters': {'e2e': 'Y'}, 'srcversion': '5C0D4B2B8E3A7F1D9C6E4A2', 'taint': ''},
        'loading': {'kernel_version': '#1 SMP PREEMPT_DYNAMIC Debian 6.1.115-1 (2024-11-01)',
                    'version_signature': None, 'lockdown': None, 'sig_enforce': None, 'unsigned_refused': False},
        'notes': [],
    }


def test_collect_candidate_module(tmp_path):
    facts = _tbnet.collect(tree(tmp_path, 'tb_candidate'), PROC)
    assert facts['module'] == {'loaded': True, 'parameters': {'e2e': 'Y', 'tx_e2e': 'Y'},
                               'srcversion': 'A1F3E9C07B5D2E8F4A6C913', 'taint': 'OE'}


def test_collect_no_peer(tmp_path):
    facts = _tbnet.collect(tree(tmp_path, 'tb_no_peer'), PROC)
    assert [d['device'] for d in facts['domains']] == ['domain0']
    assert facts['peers'] == [] and facts['services'] == [] and facts['interfaces'] == {}
    assert facts['notes'] == ['no XDomain peer: no other host is connected over Thunderbolt/USB4']


def test_collect_no_thunderbolt(tmp_path):
    root = tree(tmp_path, 'no_thunderbolt')
    facts = _tbnet.collect(root, str(tmp_path / 'noproc'))
    assert facts['kernel_release'] is None
    assert facts['domains'] == [] and facts['peers'] == []
    assert facts['module'] == {'loaded': False, 'parameters': {}, 'srcversion': None, 'taint': None}
    assert facts['notes'] == [
        f"kernel release unknown: {tmp_path / 'noproc' / 'sys/kernel/osrelease'} missing",
        f"no thunderbolt bus at {root}/{DEVICES}: the thunderbolt driver is not loaded or this machine has no "
        "Thunderbolt/USB4 controller",
        f"thunderbolt_net module not loaded ({root}/module/thunderbolt_net missing)",
    ]


def _write(root, rel, text):
    path = os.path.join(root, rel)
    with open(path, 'w') as handle:
        handle.write(text)


def _remove(root, rel):
    path = os.path.join(root, rel)
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    else:
        shutil.rmtree(path)


# (mutation of the tb_peer tree, expected error message after the tree's root)
MALFORMED = [
    (('write', f'{DEVICES}/0-1/rx_speed', 'fast\n'),
     f"malformed rx_speed in ROOT/{DEVICES}/0-1/rx_speed: 'fast' (expected like '20.0 Gb/s')"),
    (('write', f'{DEVICES}/0-1/tx_speed', '20.0 GT/s\n'),
     f"malformed tx_speed in ROOT/{DEVICES}/0-1/tx_speed: '20.0 GT/s' (expected like '20.0 Gb/s')"),
    (('write', f'{DEVICES}/0-1/rx_lanes', 'x\n'),
     f"malformed rx_lanes in ROOT/{DEVICES}/0-1/rx_lanes: 'x' (expected a decimal integer)"),
    (('write', f'{DEVICES}/0-1/tx_lanes', '-1\n'),
     f"malformed tx_lanes in ROOT/{DEVICES}/0-1/tx_lanes: '-1' (expected a decimal integer >= 0)"),
    (('write', f'{DEVICES}/0-1.0/prtcstns', 'fifteen\n'),
     f"malformed prtcstns in ROOT/{DEVICES}/0-1.0/prtcstns: 'fifteen' (expected a hex bitmask like '0x0000000f')"),
    (('write', f'{DEVICES}/0-1.0/prtcid', 'one\n'),
     f"malformed prtcid in ROOT/{DEVICES}/0-1.0/prtcid: 'one' (expected a decimal integer)"),
    (('write', f'{DEVICES}/0-0/generation', 'USB4\n'),
     f"malformed generation in ROOT/{DEVICES}/0-0/generation: 'USB4' (expected a decimal integer)"),
    (('write', f'{DEVICES}/domain0/iommu_dma_protection', 'yes\n'),
     f"malformed iommu_dma_protection in ROOT/{DEVICES}/domain0/iommu_dma_protection: 'yes' (expected '0' or '1')"),
]


@pytest.mark.parametrize('mutation, message', MALFORMED, ids=[m[0][1].rsplit('/', 1)[-1] for m in MALFORMED])
def test_collect_malformed_fails_naming_file_and_value(tmp_path, mutation, message):
    root = tree(tmp_path)
    _write(root, mutation[1], mutation[2])
    with pytest.raises(MalformedValueError) as exc:
        _tbnet.collect(root, PROC)
    assert str(exc.value) == message.replace('ROOT', root)


# (mutation, field checks, expected note)
MISSING = [
    (('remove', f'{DEVICES}/0-1/rx_speed'),
     {'rx_speed_gbps': None, 'rx_link_gbps': None, 'tx_link_gbps': 20.0},
     f'peer 0-1: rx_speed missing (ROOT/{DEVICES}/0-1/rx_speed): kernel too old to report link speed'),
    (('remove', f'{DEVICES}/0-1/tx_lanes'),
     {'tx_lanes': None, 'tx_link_gbps': None, 'rx_link_gbps': 20.0},
     f'peer 0-1: tx_lanes missing (ROOT/{DEVICES}/0-1/tx_lanes): kernel too old to report link speed'),
    (('remove', 'class/net/thunderbolt0'), {},
     'ThunderboltIP service 0-1.0 has no network interface bound (no ROOT/class/net/*/device points at it)'),
    (('remove', f'{DEVICES}/0-1.0'), {},
     "peer 0-1 advertises no ThunderboltIP service (key 'network'): is thunderbolt_net loaded on the peer?"),
    (('remove', 'module/thunderbolt_net'), {},
     'thunderbolt_net module not loaded (ROOT/module/thunderbolt_net missing)'),
]


@pytest.mark.parametrize('mutation, checks, note', MISSING, ids=[m[0][1].rsplit('/', 1)[-1] for m in MISSING])
def test_collect_missing_pieces_are_notes(tmp_path, mutation, checks, note):
    root = tree(tmp_path)
    _remove(root, mutation[1])
    facts = _tbnet.collect(root, PROC)
    assert facts['notes'] == [note.replace('ROOT', root)]
    for key, value in checks.items():
        assert facts['peers'][0][key] == value


def test_link_total_is_per_lane_times_lanes(tmp_path):
    root = tree(tmp_path)
    _write(root, f'{DEVICES}/0-1/rx_lanes', '2\n')
    _write(root, f'{DEVICES}/0-1/tx_speed', '40.0 Gb/s\n')
    peer = _tbnet.collect(root, PROC)['peers'][0]
    assert (peer['rx_speed_gbps'], peer['rx_lanes'], peer['rx_link_gbps']) == (20.0, 2, 40.0)
    assert (peer['tx_speed_gbps'], peer['tx_lanes'], peer['tx_link_gbps']) == (40.0, 1, 40.0)


def test_non_network_service_has_no_flags(tmp_path):
    root = tree(tmp_path)
    _write(root, f'{DEVICES}/0-1.0/key', 'dma_test\n')
    facts = _tbnet.collect(root, PROC)
    service = facts['services'][0]
    assert service['key'] == 'dma_test' and service['flags'] is None and service['prtcstns'] == '0x00000007'
    assert service['interface'] == 'thunderbolt0'
    assert "peer 0-1 advertises no ThunderboltIP service (key 'network'): is thunderbolt_net loaded on the peer?" \
        in facts['notes']


def test_interface_matching_ignores_other_devices(tmp_path):
    root = tree(tmp_path)
    # an interface whose device is somewhere else entirely, and one with a broken device link
    os.makedirs(os.path.join(root, 'devices/pci0000_00/0000_00_1f.6/net/eth0'))
    os.symlink('../../devices/pci0000_00/0000_00_1f.6/net/eth0', os.path.join(root, 'class/net/eth0'))
    os.symlink('../..', os.path.join(root, 'devices/pci0000_00/0000_00_1f.6/net/eth0/device'))
    os.makedirs(os.path.join(root, 'class/net/dummy0'))
    os.symlink('../../nowhere', os.path.join(root, 'class/net/dummy0/device'))
    facts = _tbnet.collect(root, PROC)
    assert facts['interfaces'] == {'thunderbolt0': {'service': '0-1.0', 'peer': '0-1'}}


def test_module_built_in_has_no_srcversion(tmp_path):
    root = tree(tmp_path)
    _remove(root, 'module/thunderbolt_net/srcversion')
    _remove(root, 'module/thunderbolt_net/taint')
    module = _tbnet.collect(root, PROC)['module']
    assert module == {'loaded': True, 'parameters': {'e2e': 'Y'}, 'srcversion': None, 'taint': None}


@pytest.mark.parametrize('lockdown, sig_enforce, expected', [
    (None, None, {'lockdown': None, 'sig_enforce': None, 'unsigned_refused': False}),
    ('[none] integrity confidentiality', 'N', {'lockdown': 'none', 'sig_enforce': False, 'unsigned_refused': False}),
    ('none [integrity] confidentiality', 'N', {'lockdown': 'integrity', 'sig_enforce': False,
                                               'unsigned_refused': True}),
    ('[none] integrity confidentiality', 'Y', {'lockdown': 'none', 'sig_enforce': True, 'unsigned_refused': True}),
])
def test_loading_policy(tmp_path, lockdown, sig_enforce, expected):
    root = tree(tmp_path)
    if lockdown is not None:
        os.makedirs(os.path.join(root, 'kernel', 'security'))
        with open(os.path.join(root, 'kernel', 'security', 'lockdown'), 'w') as handle:
            handle.write(lockdown + '\n')
    if sig_enforce is not None:
        os.makedirs(os.path.join(root, 'module', 'module', 'parameters'))
        with open(os.path.join(root, 'module', 'module', 'parameters', 'sig_enforce'), 'w') as handle:
            handle.write(sig_enforce + '\n')
    loading = _tbnet.collect(root, PROC)['loading']
    assert {k: loading[k] for k in expected} == expected


@pytest.mark.parametrize('relative, text, message', [
    ('kernel/security/lockdown', 'integrity\n', "malformed lockdown in .*: 'integrity' .expected the active mode"),
    ('module/module/parameters/sig_enforce', '1\n', "malformed sig_enforce in .*: '1' .expected Y or N"),
])
def test_loading_policy_malformed(tmp_path, relative, text, message):
    root = tree(tmp_path)
    os.makedirs(os.path.dirname(os.path.join(root, relative)), exist_ok=True)
    with open(os.path.join(root, relative), 'w') as handle:
        handle.write(text)
    with pytest.raises(MalformedValueError, match=message):
        _tbnet.collect(root, PROC)


def test_loading_reads_ubuntus_version_signature(tmp_path):
    loading = _tbnet.collect(tree(tmp_path), str(FIXTURES / 'proc-ubuntu'))['loading']
    assert loading['kernel_version'] == '#86-Ubuntu SMP Mon Jul 10 16:07:21 UTC 2023'
    assert loading['version_signature'] == 'Ubuntu 5.15.0-79.86-generic 5.15.111'
