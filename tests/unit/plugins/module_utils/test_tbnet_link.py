# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The direct link after a driver reload (_tbnet_driver's tail): ``ip -j addr`` output recorded from a real veth, the
trained speed and lanes from a sysfs fixture tree, and the tail itself on a real veth pair between two throwaway
network namespaces, deleted and brought back bare as a reload does (root only; 169.254.252.0/30)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _tbnet_driver as driver
from ansible_collections.inferlab.distributed.tests.unit.ledger_host import install_ledger
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, sysfs_tree

IP_ADDR = FIXTURES / 'ip-addr'
LINK = {'addressing': 'static', 'address': '169.254.250.1/30', 'peer': '169.254.250.2', 'timeout_s': 5,
        'min_speed_gbps': 20.0, 'min_lanes': 1}
TRAINED = {'speed_gbps': 20.0, 'lanes': 1}


@pytest.mark.parametrize('name, exists, up, carrier, addresses', [
    ('up.json', True, True, True, ['169.254.250.1/30']),
    ('nocarrier.json', True, True, False, ['169.254.250.1/30']),
    ('down-noaddr.json', True, False, False, []),
])
def test_parse_link_reads_what_ip_printed(name, exists, up, carrier, addresses):
    state = driver.parse_link((IP_ADDR / name).read_text(), 'thunderbolt0')
    assert state == {'exists': exists, 'up': up, 'carrier': carrier, 'addresses': addresses}


def test_parse_link_reads_no_output_and_another_interface_as_absent():
    assert driver.parse_link('', 'thunderbolt0')['exists'] is False
    assert driver.parse_link((IP_ADDR / 'up.json').read_text(), 'thunderbolt1')['exists'] is False


@pytest.mark.parametrize('name, message', [
    ('not-json.txt', 'not JSON'),
    ('not-a-list.json', 'not a list of interfaces'),
    ('no-flags.json', 'no list of flags'),
])
def test_parse_link_refuses_malformed_output(name, message):
    with pytest.raises(driver.DriverError, match=message):
        driver.parse_link((IP_ADDR / name).read_text(), 'thunderbolt0')


def test_trained_link_follows_the_interface_to_its_xdomain(tmp_path):
    root = sysfs_tree('tb_peer', tmp_path / 'sys')
    assert driver.trained_link(str(root), 'thunderbolt0') == {'speed_gbps': 20.0, 'lanes': 1}
    assert driver.trained_link(str(root), 'thunderbolt9') == {'speed_gbps': None, 'lanes': None}
    xdomain = Path(os.path.realpath(root / 'class/net/thunderbolt0')).parents[2]
    (xdomain / 'tx_speed').write_text('fast\n')
    (xdomain / 'rx_lanes').write_text('\n')
    assert driver.trained_link(str(root), 'thunderbolt0') == {'speed_gbps': None, 'lanes': None}


@pytest.mark.parametrize('fixture, trained, expected', [
    ('up.json', TRAINED, []),
    ('nocarrier.json', TRAINED, ['thunderbolt0 has no carrier']),
    ('down-noaddr.json', TRAINED, ['thunderbolt0 is down', 'thunderbolt0 does not have 169.254.250.1/30 (has no '
                                   'IPv4 address)', 'thunderbolt0 has no carrier']),
    ('up.json', {'speed_gbps': 10.0, 'lanes': 0}, [
        'the link trained at 10.0 Gb/s per lane, expected at least 20 (inferlab_link_min_speed_gbps)',
        'the link has 0 lane(s), expected at least 1 (inferlab_link_min_lanes)']),
])
def test_link_problems_say_what_is_missing(fixture, trained, expected):
    state = driver.parse_link((IP_ADDR / fixture).read_text(), 'thunderbolt0')
    assert driver.link_problems(state, trained, LINK, 'thunderbolt0') == expected


def test_own_end_only_leaves_out_what_needs_the_peer():
    state = driver.parse_link((IP_ADDR / 'nocarrier.json').read_text(), 'thunderbolt0')
    assert driver.link_problems(state, {'speed_gbps': None, 'lanes': None}, LINK, 'thunderbolt0', True) == []


def test_an_absent_interface_is_the_only_problem():
    assert driver.link_problems(driver.parse_link('', 'tb0'), TRAINED, LINK, 'tb0') == ['tb0 does not exist']


@pytest.mark.parametrize('change, message', [
    ({'addressing': 'dhcp'}, 'link.addressing'),
    ({'address': '169.254.250.1'}, 'prefix length'),
    ({'peer': ''}, 'link.peer'),
    ({'timeout_s': 0}, 'link.timeout_s'),
    ({'min_lanes': True}, 'link.min_lanes'),
    ({'extra': 1}, 'must be a mapping of'),
])
def test_check_link_refuses_malformed_params(change, message):
    with pytest.raises(driver.DriverError, match=message):
        driver.check_link({**LINK, **change})


def test_last_json_line_finds_the_verdict_after_the_offset(tmp_path):
    log = tmp_path / 'watchdog.log'
    log.write_text('{"link": false}\n')
    offset = log.stat().st_size
    with log.open('a') as handle:
        handle.write('2026-12-02 starting\n{"link": true, "seconds": 1.5}\n{broken\n')
    assert driver.last_json_line(str(log), offset) == {'link': True, 'seconds': 1.5}
    assert driver.last_json_line(str(log), log.stat().st_size) is None
    assert driver.last_json_line(str(tmp_path / 'missing.log')) is None


# ---------------------------------------------------------------------------------------------------------------
# the tail on a real veth pair

SBIN = os.pathsep.join([os.environ.get('PATH', ''), '/usr/sbin', '/sbin'])
IP, PING = shutil.which('ip', path=SBIN), shutil.which('ping', path=SBIN)
needs_netns = pytest.mark.skipif(os.geteuid() != 0 or not IP or not PING,
                                 reason='needs root, ip (iproute2) and ping (iputils-ping) for two namespaces')
# The tail as the link watchdog runs it on a host: the driver installed by the ledger role beside the ledger's
# modules, in a Python run alone (-I: no PYTHONPATH, so no collection), its folder the one place for its siblings.
TAIL = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import inferlab_tbnet_driver as driver
try:
    print(json.dumps(driver.bring_back_link('tbl0', json.loads(sys.argv[2]), sys.argv[3], poll_s=0.1,
                                            own_end_only=sys.argv[4] == 'own')))
except driver.DriverError as exc:
    print(json.dumps({'error': str(exc)}))
'''


def sh(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=30)


@pytest.fixture
def two_hosts():
    """Two namespaces joined by a veth pair named tbl0 on both ends, up and addressed; the namespaces (and the pair
    with them) are deleted afterwards."""
    tag = f'{os.getpid() % 10000}{os.urandom(1).hex()}'
    names = (f'itl{tag}a', f'itl{tag}b')
    for ns in names:
        sh(IP, 'netns', 'add', ns)
    try:
        yield names
    finally:
        for ns in names:
            sh(IP, 'netns', 'del', ns, check=False)


def make_pair(a, b):
    sh(IP, '-n', a, 'link', 'add', 'tbl0', 'type', 'veth', 'peer', 'name', 'tbl0', 'netns', b)


@pytest.fixture
def host_bin(tmp_path):
    """The folder the ledger role installs the ledger's modules in, the driver among them."""
    return install_ledger(tmp_path / 'bin').parent


def run_tail(ns, link, host_bin, sysfs_root, end='whole'):
    return subprocess.Popen([IP, 'netns', 'exec', ns, sys.executable, '-I', '-c', TAIL, str(host_bin),
                             json.dumps(link), sysfs_root, end], stdout=subprocess.PIPE, text=True)


@needs_netns
def test_both_tails_bring_a_reloaded_link_back(two_hosts, host_bin, tmp_path):
    """The pair is gone (an unload) and comes back bare 0.8 s later (the lab's login delay); each host's tail
    re-adds its own address and waits for carrier and the other's answer, as both hosts do after a reload."""
    a, b = two_hosts
    links = {a: {**LINK, 'min_speed_gbps': 0, 'min_lanes': 0, 'timeout_s': 15},
             b: {**LINK, 'address': '169.254.250.2/30', 'peer': '169.254.250.1', 'min_speed_gbps': 0,
                 'min_lanes': 0, 'timeout_s': 15}}
    tails = {ns: run_tail(ns, links[ns], host_bin, str(tmp_path)) for ns in (a, b)}
    creator = threading.Timer(0.8, make_pair, (a, b))
    creator.start()
    results = {ns: json.loads(tail.communicate(timeout=30)[0]) for ns, tail in tails.items()}
    creator.join()
    for ns, result in results.items():
        assert 'error' not in result, result
        # each tail waited for the interface (its clock starts once its process runs: less than the 0.8 s)
        assert result['interface_s'] > 0 and result['carrier_s'] >= result['interface_s']
        assert any(action.startswith(f're-added {links[ns]["address"]}') for action in result['actions']), result
    state = json.loads(sh(IP, '-n', a, '-j', 'addr', 'show', 'dev', 'tbl0').stdout)
    assert 'LOWER_UP' in state[0]['flags']


@needs_netns
def test_a_manager_that_never_readds_the_address_fails_at_the_bound(two_hosts, host_bin, tmp_path):
    a, b = two_hosts
    make_pair(a, b)
    link = {**LINK, 'addressing': 'networkd', 'min_speed_gbps': 0, 'min_lanes': 0, 'timeout_s': 1.5}
    started = time.monotonic()
    result = json.loads(run_tail(a, link, host_bin, str(tmp_path)).communicate(timeout=30)[0])
    assert 1.2 < time.monotonic() - started < 10
    assert result['error'].startswith('the direct link did not come back within 1.5s of the reload: tbl0 is down; '
                                      'tbl0 does not have 169.254.250.1/30 (has no IPv4 address)')
    assert 'set inferlab_link_addressing to static' in result['error']
    # nothing was touched: the manager's interface is still down and bare
    state = json.loads(sh(IP, '-n', a, '-j', 'addr', 'show', 'dev', 'tbl0').stdout)[0]
    assert 'UP' not in state['flags'] and not [i for i in state['addr_info'] if i['family'] == 'inet']


@needs_netns
def test_an_undo_brings_back_its_own_end_without_waiting_for_the_peer(two_hosts, host_bin, tmp_path):
    """The undo's part (``own_end_only``): this end up with its address; the peer's end is still down, so there is
    no carrier yet, and that is the peer's tail's business."""
    a, b = two_hosts
    make_pair(a, b)
    link = {**LINK, 'min_speed_gbps': 20.0, 'min_lanes': 1, 'timeout_s': 5}
    result = json.loads(run_tail(a, link, host_bin, str(tmp_path), end='own').communicate(timeout=30)[0])
    assert 'error' not in result and result['carrier_s'] is None, result
    assert [action.split(' at ')[0] for action in result['actions']] == ['set tbl0 up', 're-added 169.254.250.1/30']
