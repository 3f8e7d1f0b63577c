# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nic_layer through main(), on a real veth in a throwaway network namespace with the real ethtool: an offload set
after its entry is recorded, read back, undone exactly (the offload it turned off as a side effect back too),
idempotent, check mode; and the refusals that change nothing (a veth has no coalescing or rings, a fixed offload,
an unknown name).

Needs root, `ip` and `ethtool`; skipped otherwise. The namespace (prefix inl) is deleted in the fixture's finally,
its veth pair with it."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ethtool, _ledger_core
from ansible_collections.inferlab.distributed.plugins.modules import nic_layer
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module

SBIN = os.pathsep.join([os.environ.get('PATH', ''), '/usr/sbin', '/sbin'])
IP, ETHTOOL = shutil.which('ip', path=SBIN), shutil.which('ethtool', path=SBIN)
GSO, TSO = 'generic-segmentation-offload', 'tx-tcp-segmentation'

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='needs root to create a network namespace and veth pair'),
    pytest.mark.skipif(not IP or not ETHTOOL, reason='needs `ip` (iproute2) and `ethtool`'),
]


def sh(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, check=check, env=dict(os.environ, LC_ALL='C'),
                          timeout=30)


@pytest.fixture
def veth(monkeypatch):
    """``(namespace, interface)``: a veth pair in a namespace of its own; ethtool (for the module and the ledger's
    undo) runs inside it."""
    tag = f'{os.getpid() % 100000}{os.urandom(1).hex()}'
    ns, a = f'inl{tag}', f'inl{tag}a'
    sh(IP, 'netns', 'add', ns)
    try:
        sh(IP, '-n', ns, 'link', 'add', a, 'type', 'veth', 'peer', 'name', f'inl{tag}b')
        prefix = [IP, 'netns', 'exec', ns, ETHTOOL]
        monkeypatch.setattr(_ethtool, 'ethtool_argv', lambda command=None: list(command or prefix))
        yield ns, a
    finally:
        sh(IP, 'netns', 'del', ns, check=False)


def features(ns, dev):
    return {name: item['value'] for name, item in
            _ethtool.parse_features(sh(IP, 'netns', 'exec', ns, ETHTOOL, '-k', dev).stdout).items()}


def args(tmp_path, **extra):
    return {'ledger_dir': str(tmp_path / 'ledger'), 'ledger_host': 'lab-a', 'run_id': 'run-1', **extra}


def ledger(tmp_path):
    return _ledger_core.entries(str(tmp_path / 'ledger'), 'lab-a')


def test_an_offload_recorded_set_and_undone_exactly(veth, tmp_path):
    ns, dev = veth
    before = features(ns, dev)
    assert before[GSO] == before[TSO] == 'on'
    failed, result = run_module(nic_layer.main, args(tmp_path, interface=dev, features={GSO: False, TSO: 'off'}))
    assert not failed, result
    item = result['groups']['features']
    assert (item['previous'], item['value'], item['changed']) == ({GSO: 'on', TSO: 'on'}, {GSO: 'off', TSO: 'off'},
                                                                  True)
    [entry] = ledger(tmp_path)
    assert (entry['kind'], entry['state'], entry['id']) == ('nic_setting', 'applied', item['entry_id'])
    assert entry['params'] == {'interface': dev, 'group': 'features', 'previous': item['previous'],
                               'value': item['value']}
    during = features(ns, dev)
    assert (during[GSO], during[TSO]) == ('off', 'off')

    failed, again = run_module(nic_layer.main, args(tmp_path, interface=dev, features={GSO: 'off'}))
    assert not failed and again['changed'] is False and len(ledger(tmp_path)) == 1

    failed, result = run_module(nic_layer.main, args(tmp_path, state='undone'))
    assert not failed, result
    assert [d['result'] for d in result['undone']] == ['undone']
    # every offload as it was, those the kernel turned off with TSO (its mangleid variant) included
    assert features(ns, dev) == before
    assert [e['state'] for e in ledger(tmp_path)] == ['undone']


def test_check_mode_reads_and_changes_nothing(veth, tmp_path):
    ns, dev = veth
    before = features(ns, dev)
    failed, result = run_module(nic_layer.main, args(tmp_path, interface=dev, features={GSO: False},
                                                     _ansible_check_mode=True))
    assert not failed and result['changed'] is True and result['groups']['features']['entry_id'] is None
    assert features(ns, dev) == before and ledger(tmp_path) == []


@pytest.mark.parametrize('extra, message', [
    ({'coalesce': {'rx-usecs': 0}}, 'cannot read the interrupt coalescing of {dev}: '),
    ({'rings': {'rx': 256}}, 'cannot read the ring sizes of {dev}: '),
    ({'features': {'large-receive-offload': True}}, 'large-receive-offload of {dev} is fixed at off'),
    ({'features': {'tcp-offload-please': True}}, 'tcp-offload-please is not one of the offloads of {dev}'),
    ({'features': {GSO: 3}}, f'{GSO} of {{dev}} is on now: expected on or off, got 3'),
])
def test_refusals_change_nothing(veth, tmp_path, extra, message):
    ns, dev = veth
    before = features(ns, dev)
    failed, result = run_module(nic_layer.main, args(tmp_path, interface=dev, **extra))
    assert failed and message.format(dev=dev) in result['msg'] and 'Nothing was changed' in result['msg']
    assert features(ns, dev) == before and ledger(tmp_path) == []


def test_an_offload_toggled_by_someone_else_and_back_is_still_undone(veth, tmp_path):
    """An offload is on or off: one at the value set is ours to set back, however it got there (a value at neither,
    left alone, is the coalescing test's in test_ethtool.py)."""
    ns, dev = veth
    assert not run_module(nic_layer.main, args(tmp_path, interface=dev, features={GSO: False}))[0]
    sh(IP, 'netns', 'exec', ns, ETHTOOL, '-K', dev, 'gso', 'on')
    sh(IP, 'netns', 'exec', ns, ETHTOOL, '-K', dev, 'gso', 'off')
    failed, result = run_module(nic_layer.main, args(tmp_path, state='undone', interface=dev))
    assert not failed and [d['result'] for d in result['undone']] == ['undone']
    assert features(ns, dev)[GSO] == 'on'
    failed, result = run_module(nic_layer.main, args(tmp_path, state='undone'))
    assert not failed and result['changed'] is False and result['undone'] == []
