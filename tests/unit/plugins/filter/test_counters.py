# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import copy
import shutil

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter.counters import FilterModule, counter_delta
from ansible_collections.inferlab.distributed.plugins.module_utils import _counters
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, sysfs_tree


def sample(monotonic=100.0, rx_bytes=1000, retrans=5, timeouts=1, **extra):
    counters = {
        'time': {'monotonic': monotonic, 'wall': 1796032800.0 + monotonic},
        'interfaces': {'thunderbolt0': {'operstate': 'up', 'mtu': 1500,
                                        'statistics': {'rx_bytes': rx_bytes, 'rx_crc_errors': 0, 'tx_bytes': 50}}},
        'tcp': {'RetransSegs': retrans, 'OutSegs': 10, 'MaxConn': -1},
        'tcp_ext': {'TCPTimeouts': timeouts, 'TCPLostRetransmit': 0},
    }
    counters.update(extra)
    return counters


def test_registered_in_filter_module():
    assert FilterModule().filters()['counter_delta'] is counter_delta


def test_delta():
    result = counter_delta(sample(), sample(monotonic=130.5, rx_bytes=5000, retrans=9, timeouts=1))
    assert result == {
        'elapsed_s': 30.5,
        'interfaces': {'thunderbolt0': {'rx_bytes': 4000, 'rx_crc_errors': 0, 'tx_bytes': 0}},
        'tcp': {'MaxConn': 0, 'OutSegs': 0, 'RetransSegs': 4},
        'tcp_ext': {'TCPLostRetransmit': 0, 'TCPTimeouts': 0},
        'resets': [],
        'missing': [],
    }


def test_backwards_counter_is_none_and_named():
    result = counter_delta(sample(rx_bytes=1000, retrans=7), sample(monotonic=101.0, rx_bytes=10, retrans=2))
    assert result['interfaces']['thunderbolt0']['rx_bytes'] is None
    assert result['tcp']['RetransSegs'] is None
    assert result['resets'] == ['interfaces.thunderbolt0.rx_bytes went backwards: 1000 -> 10',
                                'tcp.RetransSegs went backwards: 7 -> 2']
    flat = [v for section in ('tcp', 'tcp_ext') for v in result[section].values()]
    flat += list(result['interfaces']['thunderbolt0'].values())
    assert all(v is None or v >= 0 for v in flat)


def test_clock_backwards():
    result = counter_delta(sample(monotonic=500.0), sample(monotonic=3.0))
    assert result['elapsed_s'] is None
    assert result['resets'] == ['time.monotonic went backwards: 500.0 -> 3.0 (samples from different boots or hosts?)']


def test_one_sided_counters_are_missing_not_resets():
    before, after = sample(), sample(monotonic=110.0)
    after['tcp_ext']['TCPMigrateReqSuccess'] = 3
    del after['tcp']['OutSegs']
    after['interfaces']['eth0'] = {'operstate': 'up', 'mtu': 1500, 'statistics': {'rx_bytes': 1}}
    del before['interfaces']['thunderbolt0']['statistics']['tx_bytes']
    result = counter_delta(before, after)
    assert result['resets'] == []
    assert result['missing'] == ['interfaces.eth0 only in after', 'interfaces.thunderbolt0.tx_bytes only in after',
                                 'tcp.OutSegs only in before', 'tcp_ext.TCPMigrateReqSuccess only in after']
    assert 'eth0' not in result['interfaces'] and 'OutSegs' not in result['tcp']
    assert 'TCPMigrateReqSuccess' not in result['tcp_ext']


def test_missing_sections_and_time():
    before = {'interfaces': {}, 'tcp': {'InSegs': 1}}
    after = {'interfaces': {}, 'tcp': {'InSegs': 4}, 'tcp_ext': None}
    result = counter_delta(before, after)
    assert result == {'elapsed_s': None, 'interfaces': {}, 'tcp': {'InSegs': 3}, 'tcp_ext': {}, 'resets': [],
                      'missing': ['time.monotonic']}


def test_accepts_registered_results():
    result = counter_delta({'changed': False, 'counters': sample()},
                           {'changed': False, 'counters': sample(monotonic=101.0, rx_bytes=1001)})
    assert result['elapsed_s'] == 1.0 and result['interfaces']['thunderbolt0']['rx_bytes'] == 1


def test_does_not_modify_inputs():
    before, after = sample(), sample(monotonic=101.0)
    frozen = copy.deepcopy((before, after))
    counter_delta(before, after)
    assert (before, after) == frozen


@pytest.mark.parametrize('before, after, message', [
    ('x', sample(), 'the before sample must be a dict'),
    (sample(), None, 'the after sample must be a dict'),
    (sample(), [1], 'the after sample must be a dict'),
    ({'counters': 'x'}, sample(), 'before.counters must be a dict, got str'),
    (sample(tcp=[1, 2]), sample(), 'before tcp must be a dict, got list'),
    (sample(), sample(interfaces='thunderbolt0'), 'after interfaces must be a dict, got str'),
    (sample(), sample(interfaces={'thunderbolt0': 5}), 'after interfaces.thunderbolt0 must be a dict, got int'),
    (sample(), sample(interfaces={'thunderbolt0': {'statistics': [1]}}),
     'after interfaces.thunderbolt0.statistics must be a dict, got list'),
    (sample(tcp={'RetransSegs': '5'}), sample(), "before tcp.RetransSegs must be an integer, got '5'"),
    (sample(), sample(tcp_ext={'TCPTimeouts': None}), 'after tcp_ext.TCPTimeouts must be an integer, got None'),
    (sample(), sample(tcp_ext={'TCPTimeouts': True}), 'after tcp_ext.TCPTimeouts must be an integer, got True'),
    (sample(), sample(tcp_ext={'TCPTimeouts': 1.5}), 'after tcp_ext.TCPTimeouts must be an integer, got 1.5'),
    (sample(time={'monotonic': 'now'}), sample(), "before time.monotonic must be a number, got 'now'"),
    (sample(time=3), sample(), 'before time must be a dict, got int'),
])
def test_wrong_types_raise(before, after, message):
    with pytest.raises(AnsibleFilterError) as exc:
        counter_delta(before, after)
    assert str(exc.value).startswith(f'counter_delta: {message}')


def test_two_real_samples(tmp_path):
    """Two net_counters samples of the fixture tree, the second after traffic."""
    sysfs = sysfs_tree('tb_peer', tmp_path / 'sys')
    proc = tmp_path / 'proc'
    shutil.copytree(FIXTURES / 'proc', proc)
    before, _missing = _counters.collect(['thunderbolt0'], str(sysfs), str(proc), clock=lambda: (10.0, 0.0))
    stats = sysfs / 'class/net/thunderbolt0/statistics'
    (stats / 'rx_bytes').write_text(str(before['interfaces']['thunderbolt0']['statistics']['rx_bytes'] + 2500) + '\n')
    (stats / 'rx_crc_errors').write_text('0\n')  # the driver was reloaded: the counter restarted
    after, _missing = _counters.collect(['thunderbolt0'], str(sysfs), str(proc), clock=lambda: (12.5, 2.5))
    result = counter_delta(before, after)
    assert result['elapsed_s'] == 2.5
    assert result['interfaces']['thunderbolt0']['rx_bytes'] == 2500
    assert result['interfaces']['thunderbolt0']['rx_crc_errors'] is None
    assert result['resets'] == ['interfaces.thunderbolt0.rx_crc_errors went backwards: 3 -> 0']
    assert set(result['tcp']) == set(before['tcp']) and all(v == 0 for v in result['tcp'].values())
