# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tbnet_module on fixture sysfs roots in emulated mode (the netns lab's driver layer): the gate, the ledger entry,
idempotence, check mode and the stock undo. The real insmod/rmmod path is tested in test_tbnet_driver.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time

import pytest
import yaml

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_proc
from ansible_collections.inferlab.distributed.plugins.modules import tbnet_module
from ansible_collections.inferlab.distributed.tests.unit.ledger_host import install_ledger
from ansible_collections.inferlab.distributed.tests.unit.module_docs import documented_options
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
    lines, _problems = _ledger_core.read_ledger(str(ledger), HOST)
    return list(_ledger_core.current_entries(lines).values())


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
    options = documented_options(tbnet_module)  # its ledger options from the ledger doc fragment
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
    """The ledger's files as the ledger role installs them (the driver companion among them), in <state>/bin."""
    install_ledger(tmp_path / 'state' / 'bin')
    return tmp_path / 'state' / 'ledger'


def test_the_watchdog_unloads_a_candidate_whose_link_never_comes_back(lab_host, installed_ledger):
    """Loopback-safe: the fixture's thunderbolt0 does not exist on this machine, so no ping leaves it. The module
    waits for the watchdog's verdict and fails with it, after the watchdog has put the stock driver back."""
    root, _unused = lab_host()
    stock = (root / 'module/thunderbolt_net/srcversion').read_text().strip()
    failed, result = run_module(tbnet_module.main, args(root, installed_ledger, link_peer='169.254.177.2',
                                                        watchdog_deadline_s=1, link_address='169.254.177.1/30',
                                                        link_timeout_s=0.5))
    assert failed, result
    assert result['msg'].startswith('the candidate was loaded, but the direct link did not come back: the direct link '
                                    'did not come back within 1s of the reload: thunderbolt0 does not exist'), result
    assert 'the candidate was unloaded' in result['msg']
    assert (root / 'module/thunderbolt_net/srcversion').read_text().strip() == stock
    assert not (root / 'module/thunderbolt_net/parameters/tx_e2e').exists()


def test_the_emulated_layer_refuses_an_interface_that_is_not_a_veth(lab_host):
    root, ledger = lab_host()
    failed, result = run_module(tbnet_module.main, args(root, ledger, interface='lo'))
    assert failed and result['msg'].startswith('Nothing was changed: the emulated driver layer deletes the direct '
                                               'link as a real unload does, and only ever a veth: lo is'), result
    assert entries(ledger) == []


def test_a_watchdog_peer_needs_the_link_address(lab_host, installed_ledger):
    root, _unused = lab_host()
    failed, result = run_module(tbnet_module.main, args(root, installed_ledger, link_peer='169.254.177.2'))
    assert failed and 'set link_address' in result['msg'] and result['msg'].startswith('Nothing was changed')
    assert entries(installed_ledger) == []


SBIN = os.pathsep.join([os.environ.get('PATH', ''), '/usr/sbin', '/sbin'])
IP, PING = shutil.which('ip', path=SBIN), shutil.which('ping', path=SBIN)


@pytest.fixture
def veth_to_peer():
    """A veth end ``itm<tag>`` here whose other end is in a namespace of its own, the peer (169.254.252.2/30), as
    the lab's direct link; the namespace and the pair are deleted afterwards. Returns ``(interface, recreate)``:
    ``recreate()`` brings the pair back bare and sets the peer's end up with its address, as the lab's link daemon
    and the peer's own tail do after a reload."""
    tag = f'{os.getpid() % 1000}{os.urandom(1).hex()}'
    ns, here = f'itm{tag}p', f'itm{tag}'

    def ip(*argv, check=True):
        return subprocess.run([IP, *argv], capture_output=True, text=True, check=check, timeout=30)

    def recreate():
        ip('link', 'add', here, 'type', 'veth', 'peer', 'name', 'peer0', 'netns', ns)
        ip('-n', ns, 'addr', 'add', '169.254.252.2/30', 'dev', 'peer0')
        ip('-n', ns, 'link', 'set', 'peer0', 'up')

    ip('netns', 'add', ns)
    try:
        recreate()
        yield here, recreate
    finally:
        ip('link', 'del', here, check=False)
        ip('netns', 'del', ns, check=False)


@pytest.mark.skipif(os.geteuid() != 0 or not IP or not PING, reason='needs root, ip and ping for a veth pair')
def test_the_load_is_done_once_the_reloaded_link_is_back(lab_host, installed_ledger, veth_to_peer):
    """The emulated load deletes the veth (both ends, as an unload removes thunderbolt0 on both hosts); it comes back
    bare once it is gone (a thread waits for that: on a busy machine the module may take longer than any fixed
    delay to get there); the watchdog re-adds this end's address, sees carrier and the peer's answer; the module
    returns how long that took. Then the stock load does the same in the undo."""
    root, _unused = lab_host()
    interface, recreate = veth_to_peer
    link_args = {'interface': interface, 'watchdog_peer': '169.254.252.2', 'watchdog_deadline_s': 10,
                 'link_address': '169.254.252.1/30', 'link_timeout_s': 10}
    timer = threading.Thread(target=recreate_once_deleted, args=(interface, recreate))
    timer.start()
    failed, result = run_module(tbnet_module.main, args(root, installed_ledger, tx_e2e=False, **link_args))
    timer.join()
    assert not failed, result.get("msg", result)
    # the tail waited for the interface to come back
    assert result['link']['interface_s'] is not None and result['link']['addressing'] == 'static'
    assert any(a.startswith('re-added 169.254.252.1/30') for a in result['link']['actions']), result['link']
    assert 'deleted with its addresses' in result['message']
    watchdog = _ledger_proc.SPAWNED.pop(result['watchdog']['pid'])
    assert watchdog.poll() is None, 'the watchdog must go on watching the link while the candidate is loaded'
    timer = threading.Thread(target=recreate_once_deleted, args=(interface, recreate))
    timer.start()
    failed, stock = run_module(tbnet_module.main, args(root, installed_ledger, state='stock', **link_args))
    timer.join()
    assert not failed and len(stock['undone']) == 2, stock  # the watchdog's process entry and the candidate
    watchdog.wait(timeout=10)
    [module_undo] = [d for d in stock['details'] if 'kernel_module' in d['id']]
    assert "this host's end of the direct link came back in" in module_undo['message'], stock['details']
    assert stock['link']['carrier_s'] is not None


def recreate_once_deleted(interface, recreate, timeout_s=15):
    """Bring the veth pair back once the emulated unload has deleted it (the lab's link daemon does that)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if subprocess.run([IP, 'link', 'show', interface], capture_output=True, timeout=30, check=False).returncode:
            recreate()
            return
        time.sleep(0.1)


@pytest.mark.skipif(os.geteuid() != 0 or not IP or not PING, reason='needs root, ip and ping for a veth pair')
def test_a_link_that_stalls_after_the_load_brings_the_stock_driver_back(lab_host, installed_ledger, veth_to_peer):
    """The link comes back after the load, then stalls (the peer's end goes down and stays down): the watchdog,
    still watching, puts the stock driver back within its deadline, without the controller."""
    root, _unused = lab_host()
    stock = (root / 'module/thunderbolt_net/srcversion').read_text().strip()
    interface, recreate = veth_to_peer
    timer = threading.Thread(target=recreate_once_deleted, args=(interface, recreate))
    timer.start()
    failed, result = run_module(tbnet_module.main, args(root, installed_ledger, tx_e2e=False, interface=interface,
                                                        watchdog_peer='169.254.252.2', watchdog_deadline_s=2,
                                                        link_address='169.254.252.1/30', link_timeout_s=10))
    timer.join()
    assert not failed, result.get('msg', result)
    watchdog = _ledger_proc.SPAWNED.pop(result['watchdog']['pid'])
    time.sleep(3)  # longer than the deadline: a link that carries traffic is left alone
    assert watchdog.poll() is None and (root / 'module/thunderbolt_net/parameters/tx_e2e').exists()
    subprocess.run([IP, 'link', 'set', interface, 'down'], check=True, timeout=30)
    back = threading.Thread(target=recreate_once_deleted, args=(interface, recreate))  # as the lab's link daemon
    back.start()
    rc = watchdog.wait(timeout=20)
    back.join()
    assert rc == 0, open(result['watchdog']['log']).read()
    verdict = json.loads(open(result['watchdog']['log']).read().splitlines()[-1])
    assert verdict['stalled'] and verdict['message'].startswith('the direct link stalled under the candidate: no ping '
                                                                'to 169.254.252.2'), verdict
    assert (root / 'module/thunderbolt_net/srcversion').read_text().strip() == stock
    assert [e['state'] for e in entries(installed_ledger) if e['kind'] == 'kernel_module'] == ['undone']


def pending_load(root, ledger):
    """A candidate load recorded and never completed (its entry left pending), as a killed or stuck loader leaves it."""
    return _ledger_core.record(str(ledger), HOST, 'kernel_module', {
        'module_path': '/var/lib/inferlab/build/tbnet/thunderbolt-net.ko', 'candidate_srcversion': CANDIDATE,
        'stock_srcversion': (root / 'module/thunderbolt_net/srcversion').read_text().strip(), 'stock_loaded': True,
        'stock_parameters': {}, 'tx_e2e': True, 'interface': 'thunderbolt0', 'interface_was_up': True,
        'emulated': True, 'sysfs_root': str(root), 'link': None})


def start_watch_link(ledger, entry_id, *extra):
    return subprocess.Popen([shutil.which('python3'), str(ledger.parent / 'bin' / 'inferlab_ledger.py'), 'watch-link',
                             '--ledger-dir', str(ledger), '--host', HOST, '--id', entry_id, '--interface',
                             'thunderbolt0', '--peer', '169.254.177.2', '--json', *extra],
                            stdout=subprocess.PIPE, text=True)


def test_the_watchdog_undoes_a_load_whose_loader_died(lab_host, installed_ledger):
    """Armed before the load: a candidate entry left pending by a loader that is gone (killed mid-insmod) is
    undone by the watchdog, which never waits for the link."""
    root, _unused = lab_host()
    loader = subprocess.Popen(['sleep', '30'])
    identity = _ledger_proc.process_identity(loader.pid)
    watch = start_watch_link(installed_ledger, pending_load(root, installed_ledger)['id'], '--loader-pid',
                             str(loader.pid), '--loader-start-time', str(identity['start_time']))
    time.sleep(0.5)
    assert watch.poll() is None  # the loader lives: the load may still complete
    loader.kill()
    loader.wait()
    out, _err = watch.communicate(timeout=15)
    verdict = json.loads(out.splitlines()[-1])
    assert verdict['message'].startswith(f'the loader (pid {loader.pid}) is gone and the candidate load was never '
                                         'completed: the candidate was unloaded'), verdict
    assert [e['state'] for e in entries(installed_ledger)] == ['undone']


def test_the_watchdog_undoes_a_load_still_pending_past_its_bound(lab_host, installed_ledger):
    """A loader that lives but never completes the load (stuck past its own timeouts): undone at the bound."""
    root, _unused = lab_host()
    watch = start_watch_link(installed_ledger, pending_load(root, installed_ledger)['id'], '--load-timeout', '1')
    out, _err = watch.communicate(timeout=15)
    verdict = json.loads(out.splitlines()[-1])
    assert verdict['message'].startswith('the candidate load was not completed within 1s (a stuck insmod?): the '
                                         'candidate was unloaded'), verdict
    assert [e['state'] for e in entries(installed_ledger)] == ['undone']


def test_numbers_that_are_not_finite_seconds_are_refused(lab_host):
    root, ledger = lab_host()
    for option, value in (('load_timeout_s', float('nan')), ('watchdog_deadline_s', float('inf')),
                          ('link_timeout_s', 0), ('load_timeout_s', 3601)):
        failed, result = run_module(tbnet_module.main, args(root, ledger, **{option: value}))
        assert failed and result['msg'].startswith(f'Nothing was changed: {option} must be a finite number of '
                                                   'seconds, more than 0 and at most 3600'), result
    assert entries(ledger) == []


def test_the_watchdog_needs_the_installed_ledger_script(lab_host):
    root, ledger = lab_host()
    failed, result = run_module(tbnet_module.main, args(root, ledger, link_peer='169.254.177.2'))
    assert failed and 'Nothing was changed: the link watchdog needs' in result['msg']
    assert entries(ledger) == []
