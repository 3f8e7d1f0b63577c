# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tbnet_module on fixture sysfs roots in emulated mode (the netns lab's driver layer): the gate, the ledger entry,
idempotence, check mode and the stock undo. The real insmod/rmmod path is tested in test_tbnet_driver.py."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger
from ansible_collections.inferlab.distributed.plugins.modules import tbnet_module
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import (
    FIXTURES,
    run_module,
    set_module_args,
    sysfs_tree,
)

CANDIDATE = 'A1B2C3D4E5F60718293A4B5'
HOST = 'lab-a'


@pytest.fixture
def lab_host(tmp_path):
    def make(tree='tb_peer'):
        root = sysfs_tree(tree, tmp_path / tree)
        return root, tmp_path / 'ledger'
    return make


def args(root, ledger, **extra):
    base = {'state': 'candidate', 'module_path': '/var/lib/inferlab/build/tbnet/thunderbolt-net.ko',
            'candidate_srcversion': CANDIDATE, 'tx_e2e': True, 'allow_tx_e2e': True, 'emulated': True,
            'sysfs_root': str(root), 'procfs_root': str(FIXTURES / 'proc'), 'ledger_dir': str(ledger),
            'ledger_host': HOST, 'run_id': 'run-1'}
    base.update(extra)
    return base


def entries(ledger):
    lines, _problems = _ledger.read_ledger(str(ledger), HOST)
    return list(_ledger.current_entries(lines).values())


def test_candidate_then_stock_on_the_fixture_root(lab_host):
    root, ledger = lab_host()
    stock = (root / 'module/thunderbolt_net/srcversion').read_text().strip()
    failed, result = run_module(tbnet_module.main, args(root, ledger))
    assert not failed and result['changed'], result
    assert result['module']['parameters'] == {'e2e': 'Y', 'tx_e2e': 'Y'}
    assert result['module']['srcversion'] == CANDIDATE and result['module']['taint'] == 'OE'
    assert result['emulated'] is True and result['peer_override'] is False
    [entry] = entries(ledger)
    assert (entry['kind'], entry['state'], entry['params']['stock_srcversion']) == ('kernel_module', 'applied', stock)

    failed, again = run_module(tbnet_module.main, args(root, ledger))
    assert not failed and again['changed'] is False and again['message'] == 'the candidate is already loaded'

    failed, result = run_module(tbnet_module.main, args(root, ledger, state='stock'))
    assert not failed and result['changed'] and result['undone'] == [entry['id']]
    assert result['module']['srcversion'] == stock and 'tx_e2e' not in result['module']['parameters']
    failed, again = run_module(tbnet_module.main, args(root, ledger, state='stock'))
    assert not failed and again['changed'] is False


def test_check_mode_changes_nothing(lab_host):
    root, ledger = lab_host()
    failed, result = run_module(tbnet_module.main, args(root, ledger, _ansible_check_mode=True))
    assert not failed and result['changed'] is True and result['message'] == 'would load the candidate'
    assert 'tx_e2e' not in result['module']['parameters']
    assert not (root / 'module/thunderbolt_net/parameters/tx_e2e').exists() and entries(ledger) == []


@pytest.mark.parametrize(('tree', 'extra', 'message'), [
    ('tb_peer', {'allow_tx_e2e': False}, "Nothing was changed: tx_e2e=1 was asked for without the operator's opt-in"),
    ('tb_no_peer', {}, 'Nothing was changed: tx_e2e=1 needs a peer that advertises TBNET_E2E'),
    ('tb_peer', {'candidate_srcversion': None}, 'emulated=true needs candidate_srcversion'),
])
def test_refusals_change_nothing(lab_host, tree, extra, message):
    root, ledger = lab_host(tree)
    failed, result = run_module(tbnet_module.main, args(root, ledger, **extra))
    assert failed and result['msg'].startswith(message), result['msg']
    assert entries(ledger) == [] and not (root / 'module/thunderbolt_net/parameters/tx_e2e').exists()


def test_the_no_peer_override_is_reported(lab_host):
    root, ledger = lab_host('tb_no_peer')
    failed, result = run_module(tbnet_module.main, args(root, ledger, peer_override=True))
    assert not failed and result['peer_override'] is True
    assert result['module']['parameters']['tx_e2e'] == 'Y'


def test_without_tx_e2e_the_candidate_reads_n(lab_host):
    root, ledger = lab_host()
    failed, result = run_module(tbnet_module.main, args(root, ledger, tx_e2e=False, allow_tx_e2e=False))
    assert not failed and result['module']['parameters']['tx_e2e'] == 'N'


def test_a_real_load_refuses_a_path_under_lib_modules(lab_host):
    root, ledger = lab_host()
    failed, result = run_module(tbnet_module.main, args(
        root, ledger, emulated=False, module_path='/lib/modules/6.1.0-57-amd64/thunderbolt-net.ko'))
    assert failed and 'never from under' in result['msg'] and result['msg'].startswith('Nothing was changed')
    assert entries(ledger) == []


def test_argument_spec_matches_documentation():
    options = yaml.safe_load(tbnet_module.DOCUMENTATION)['options']
    with set_module_args({'state': 'stock', 'ledger_dir': '/x', 'ledger_host': 'h'}):
        spec = tbnet_module.build_module().argument_spec

    def shape(opts):
        return {name: (o['type'], o.get('default'), o.get('required', False), tuple(o.get('choices', ())))
                for name, o in opts.items()}
    assert shape(options) == shape(spec)
    returns = yaml.safe_load(tbnet_module.RETURN)
    assert all('returned' in r for r in returns.values())
    yaml.safe_load(tbnet_module.EXAMPLES)
    json.dumps(returns)


# --- the link watchdog ---------------------------------------------------------------------------------------------

@pytest.fixture
def installed_ledger(tmp_path):
    """The ledger script and its driver companion as the ledger role installs them, <state>/bin beside the ledger."""
    utils = Path(tbnet_module.__file__).resolve().parents[1] / 'module_utils'
    bin_dir = tmp_path / 'state' / 'bin'
    bin_dir.mkdir(parents=True)
    shutil.copy(utils / '_ledger.py', bin_dir / 'inferlab_ledger.py')
    shutil.copy(utils / '_tbnet_driver.py', bin_dir / 'inferlab_tbnet_driver.py')
    return tmp_path / 'state' / 'ledger'


def wait_watchdog(result, timeout=20):
    pid = result['watchdog']['pid']
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f'/proc/{pid}/stat') as handle:
                if handle.read().rsplit(')', 1)[1].split()[0] == 'Z':
                    break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    _ledger.SPAWNED.pop(pid).wait(timeout=5)
    return Path(result['watchdog']['log']).read_text()


def test_the_watchdog_unloads_a_candidate_whose_link_carries_nothing(lab_host, installed_ledger):
    """Loopback-safe: the fixture's thunderbolt0 does not exist on this machine, so no ping leaves it."""
    root, _unused = lab_host()
    stock = (root / 'module/thunderbolt_net/srcversion').read_text().strip()
    failed, result = run_module(tbnet_module.main, args(root, installed_ledger, watchdog_peer='169.254.177.2',
                                                        watchdog_deadline_s=2))
    assert not failed and result['watchdog']['peer'] == '169.254.177.2', result
    log = wait_watchdog(result)
    assert 'no ping to 169.254.177.2 over thunderbolt0 answered within 2s' in log
    assert 'the candidate was unloaded' in log
    assert (root / 'module/thunderbolt_net/srcversion').read_text().strip() == stock
    assert not (root / 'module/thunderbolt_net/parameters/tx_e2e').exists()
    states = {e['kind']: e['state'] for e in entries(installed_ledger)}
    assert states == {'kernel_module': 'undone', 'process': 'applied'}


def test_the_watchdog_leaves_a_candidate_whose_link_answers(lab_host, installed_ledger):
    root, _unused = lab_host()
    failed, result = run_module(tbnet_module.main, args(root, installed_ledger, interface='lo', tx_e2e=False,
                                                        watchdog_peer='127.0.0.1', watchdog_deadline_s=5))
    assert not failed, result
    assert 'the direct link carried traffic' in wait_watchdog(result)
    assert (root / 'module/thunderbolt_net/parameters/tx_e2e').read_text().strip() == 'N'
    failed, stock = run_module(tbnet_module.main, args(root, installed_ledger, state='stock', interface='lo'))
    assert not failed and len(stock['undone']) == 2  # the watchdog's process entry and the candidate


def test_the_watchdog_needs_the_installed_ledger_script(lab_host):
    root, ledger = lab_host()
    failed, result = run_module(tbnet_module.main, args(root, ledger, watchdog_peer='169.254.177.2'))
    assert failed and 'Nothing was changed: the link watchdog needs' in result['msg']
    assert entries(ledger) == []
