# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import copy
import json
import re
import shutil

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter.counters import (
    FilterModule,
    counter_delta,
    link_events,
    prometheus_textfile,
)
from ansible_collections.inferlab.distributed.plugins.module_utils import _net_counters
from ansible_collections.inferlab.distributed.plugins.plugin_utils import _counter_deltas
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
    before, _missing = _net_counters.collect(['thunderbolt0'], str(sysfs), str(proc), clock=lambda: (10.0, 0.0))
    stats = sysfs / 'class/net/thunderbolt0/statistics'
    (stats / 'rx_bytes').write_text(str(before['interfaces']['thunderbolt0']['statistics']['rx_bytes'] + 2500) + '\n')
    (stats / 'rx_crc_errors').write_text('0\n')  # the driver was reloaded: the counter restarted
    after, _missing = _net_counters.collect(['thunderbolt0'], str(sysfs), str(proc), clock=lambda: (12.5, 2.5))
    result = counter_delta(before, after)
    assert result['elapsed_s'] == 2.5
    assert result['interfaces']['thunderbolt0']['rx_bytes'] == 2500
    assert result['interfaces']['thunderbolt0']['rx_crc_errors'] is None
    assert result['resets'] == ['interfaces.thunderbolt0.rx_crc_errors went backwards: 3 -> 0']
    assert set(result['tcp']) == set(before['tcp']) and all(v == 0 for v in result['tcp'].values())


def test_a_flap_between_two_real_samples_counts_as_carrier_changes(tmp_path):
    """The fixture's link has flapped twice before (carrier_changes 4); a flap in the window adds 2, up and down."""
    sysfs = sysfs_tree('tb_peer', tmp_path / 'sys')
    proc = tmp_path / 'proc'
    shutil.copytree(FIXTURES / 'proc', proc)
    before, _missing = _net_counters.collect(['thunderbolt0', 'lo'], str(sysfs), str(proc), clock=lambda: (10.0, 0.0))
    assert before['interfaces']['thunderbolt0']['carrier'] == {'carrier_changes': 4, 'carrier_up_count': 2,
                                                               'carrier_down_count': 2}
    # the fixture's lo has no such files (a kernel older than 3.15 for carrier_changes): None, never an error
    assert before['interfaces']['lo']['carrier'] == dict.fromkeys(_net_counters.CARRIER_COUNTERS)
    link = sysfs / 'class/net/thunderbolt0'
    for name, value in (('carrier_changes', 6), ('carrier_up_count', 3), ('carrier_down_count', 3)):
        (link / name).write_text(f'{value}\n')
    after, _missing = _net_counters.collect(['thunderbolt0', 'lo'], str(sysfs), str(proc), clock=lambda: (12.0, 2.0))
    result = counter_delta(before, after)
    assert {k: result['interfaces']['thunderbolt0'][k] for k in _net_counters.CARRIER_COUNTERS} == {
        'carrier_changes': 2, 'carrier_up_count': 1, 'carrier_down_count': 1}
    assert 'carrier_changes' not in result['interfaces']['lo'] and result['missing'] == []


def test_a_malformed_carrier_counter_names_its_file(tmp_path):
    sysfs = sysfs_tree('tb_peer', tmp_path / 'sys')
    (sysfs / 'class/net/thunderbolt0/carrier_changes').write_text('lots\n')
    with pytest.raises(_net_counters.SysfsError) as exc:
        _net_counters.read_interface(_net_counters.SysfsReader(str(sysfs)), 'thunderbolt0')
    assert 'carrier_changes' in str(exc.value) and "'lots'" in str(exc.value)


# --- link_events

def sampler_line(t_wall, changes=4, up=2, down=2, gone=False):
    """A line of the counter sampler's output, the direct link's carrier counters in it."""
    link = None if gone else {'rx_bytes': 100, 'carrier_changes': changes, 'carrier_up_count': up,
                              'carrier_down_count': down}
    return json.dumps({'t_wall': t_wall, 't_mono': t_wall - 1796032800.0, 'interfaces': {'thunderbolt0': link},
                       'tcp': {}, 'tcp_ext': {}})


def test_link_events_registered_in_filter_module():
    assert FilterModule().filters()['link_events'] is link_events


def test_a_flap_a_disappearance_and_a_re_creation_each_with_its_time():
    t = 1796032800.0
    lines = [sampler_line(t), sampler_line(t + 1), sampler_line(t + 2, changes=6, up=3, down=3),
             sampler_line(t + 3, gone=True), sampler_line(t + 4.5, changes=1, up=1, down=0)]
    events = link_events(lines, 'thunderbolt0')
    assert [(e['kind'], e['t_wall'], e['since_s']) for e in events] == [
        ('carrier', t + 2, 1.0), ('gone', t + 3, 1.0), ('back', t + 4.5, 1.5)]
    assert events[0] == {'kind': 'carrier', 'interface': 'thunderbolt0', 'at': '2026-11-30T10:00:02.000000Z',
                         't_wall': t + 2, 'since_s': 1.0, 'changes': 2, 'up': 1, 'down': 1}
    # the interface re-created between two samples (a reload faster than the sampler): its counters restarted
    assert [e['kind'] for e in link_events([sampler_line(t), sampler_line(t + 1, changes=1)], 'thunderbolt0')] == [
        'counters_reset']
    assert link_events([json.loads(line) for line in lines[:2]], 'thunderbolt0') == []
    assert link_events([], 'thunderbolt0') == []


def test_a_kernel_without_the_up_and_down_counts_still_shows_the_flap():
    t = 1796032800.0
    lines = [sampler_line(t, up=None, down=None), sampler_line(t + 1, changes=5, up=None, down=None)]
    (event,) = link_events(lines, 'thunderbolt0')
    assert (event['changes'], event['up'], event['down']) == (1, None, None)


@pytest.mark.parametrize(('samples', 'message'), [
    ('{"t_wall": 1}', 'link_events: samples must be a list, got str'),
    (['{"t_wall": 1, "interfaces": {"thunderbolt0": null}}', '{"t_wall": 2, "interf'],
     'link_events: sample 1 is not JSON (Unterminated string'),
    ([{'t_wall': 'now', 'interfaces': {}}], 'link_events: sample 0 t_wall must be a number, got'),
    ([[1, 2]], "link_events: sample 0 must be an object with an 'interfaces' object"),
    ([{'t_wall': 1, 'interfaces': {'eth0': None}}], 'link_events: sample 0 does not name interface thunderbolt0'),
    ([{'t_wall': 1, 'interfaces': {'thunderbolt0': 7}}], 'link_events: sample 0 interfaces.thunderbolt0 must be'),
])
def test_link_events_rejects_malformed_samples(samples, message):
    with pytest.raises(AnsibleFilterError) as exc:
        link_events(samples, 'thunderbolt0')
    assert str(exc.value).startswith(message)


def test_the_logic_raises_a_value_error_that_the_filters_give_as_a_filter_error():
    """plugin_utils/_counter_deltas.py holds the logic (the counter window's controller half calls it without Ansible's
    errors); the filters say the same thing as AnsibleFilterError."""
    for logic, wrapper, args in ((_counter_deltas.counter_delta, counter_delta, (sample(), 3)),
                                 (_counter_deltas.link_events, link_events, (['{'], 'thunderbolt0'))):
        with pytest.raises(_counter_deltas.CounterDataError) as plain_error:
            logic(*args)
        assert isinstance(plain_error.value, ValueError)
        with pytest.raises(AnsibleFilterError) as filter_error:
            wrapper(*args)
        assert str(filter_error.value) == str(plain_error.value)


def test_not_strict_a_cut_short_sample_is_an_event_and_the_others_still_compare():
    """What the counter window's closing uses: a last line cut short by a full disk must not lose the window."""
    t = 1796032800.0
    lines = [sampler_line(t), sampler_line(t + 1, changes=6, up=3, down=3), '{"t_wall": 17960328']
    events = link_events(lines, 'thunderbolt0', strict=False)
    assert [e['kind'] for e in events] == ['carrier', 'unreadable_sample']
    assert events[1]['index'] == 2 and events[1]['message'].startswith('link_events: sample 2 is not JSON')


# --- prometheus_textfile

def window_result(**overrides):
    """A window result as the counters role's close sets it (counters_window_result)."""
    result = {
        'window': 'asymmetry', 'host': 'lab-a', 'run_id': '20261130T101500Z-link_test',
        'opened_at': '2026-11-30T10:15:01.250000Z', 'closed_at': '2026-11-30T10:15:31.500000Z',
        'elapsed_s': 30.25, 'skew_open_s': 0.012, 'skew_close_s': 0.0, 'skew_hosts': ['lab-a', 'lab-b'],
        'interfaces': {'thunderbolt0': {'rx_crc_errors': 0, 'rx_bytes': 2500000000, 'tx_bytes': None},
                       'mgmt0': {'rx_bytes': 1200}},
        'tcp': {'RetransSegs': 12, 'OutSegs': 1800000},
        'tcp_ext': {'TCPTimeouts': 1, 'TCPLostRetransmit': 0, 'TCPOFOQueue': 7},
        'resets': ['interfaces.thunderbolt0.tx_bytes went backwards: 1000 -> 10'], 'missing': [],
        'link_before': {'interface': 'thunderbolt0', 'peer': '0-1', 'rx_speed_gbps': 20.0, 'tx_speed_gbps': 20.0,
                        'rx_lanes': 1, 'tx_lanes': 1},
        'link_after': {'interface': 'thunderbolt0', 'peer': '0-1', 'rx_speed_gbps': 10.0, 'tx_speed_gbps': 20.0,
                       'rx_lanes': 1, 'tx_lanes': 1},
        'link_retrained': True,
        'samples': {'path': '/runs/x/windows/asymmetry/samples/lab-a.jsonl', 'count': 31, 'interval_s': 1.0},
    }
    result.update(overrides)
    return result


# one sample line of the text exposition format: name{label="value",...} value
SAMPLE_LINE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*\} '
                         r'(NaN|[+-]Inf|-?[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?)$')


def test_prometheus_registered_in_filter_module():
    assert FilterModule().filters()['prometheus_textfile'] is prometheus_textfile


def test_prometheus_textfile():
    text = prometheus_textfile(window_result(), tcp_ext=['TCPTimeouts', 'TCPLostRetransmit'])
    assert text.endswith('\n')
    lines = text.splitlines()
    for line in lines:
        assert line.startswith('# HELP inferlab_window_') or line.startswith('# TYPE inferlab_window_') \
            or SAMPLE_LINE.match(line), line
    samples = [line for line in lines if not line.startswith('#')]
    assert samples == [
        'inferlab_window_info{host="lab-a",window="asymmetry",run_id="20261130T101500Z-link_test"} 1',
        'inferlab_window_elapsed_seconds{host="lab-a",window="asymmetry"} 30.25',
        'inferlab_window_skew_seconds{host="lab-a",window="asymmetry",phase="open"} 0.012',
        'inferlab_window_skew_seconds{host="lab-a",window="asymmetry",phase="close"} 0.0',
        'inferlab_window_closed_timestamp_seconds{host="lab-a",window="asymmetry"} 1796033731.5',
        'inferlab_window_counter_delta{host="lab-a",interface="mgmt0",window="asymmetry",counter="rx_bytes"} 1200',
        'inferlab_window_counter_delta{host="lab-a",interface="thunderbolt0",window="asymmetry",counter="rx_bytes"} '
        '2500000000',
        'inferlab_window_counter_delta{host="lab-a",interface="thunderbolt0",window="asymmetry",'
        'counter="rx_crc_errors"} 0',
        'inferlab_window_counter_delta{host="lab-a",interface="thunderbolt0",window="asymmetry",counter="tx_bytes"} '
        'NaN',
        'inferlab_window_counter_delta{host="lab-a",interface="",window="asymmetry",counter="OutSegs"} 1800000',
        'inferlab_window_counter_delta{host="lab-a",interface="",window="asymmetry",counter="RetransSegs"} 12',
        'inferlab_window_counter_delta{host="lab-a",interface="",window="asymmetry",counter="TCPLostRetransmit"} 0',
        'inferlab_window_counter_delta{host="lab-a",interface="",window="asymmetry",counter="TCPTimeouts"} 1',
        'inferlab_window_counter_resets{host="lab-a",window="asymmetry"} 1',
        'inferlab_window_link_speed_gbps{host="lab-a",interface="thunderbolt0",window="asymmetry",direction="rx",'
        'phase="before"} 20.0',
        'inferlab_window_link_speed_gbps{host="lab-a",interface="thunderbolt0",window="asymmetry",direction="tx",'
        'phase="before"} 20.0',
        'inferlab_window_link_speed_gbps{host="lab-a",interface="thunderbolt0",window="asymmetry",direction="rx",'
        'phase="after"} 10.0',
        'inferlab_window_link_speed_gbps{host="lab-a",interface="thunderbolt0",window="asymmetry",direction="tx",'
        'phase="after"} 20.0',
        'inferlab_window_link_lanes{host="lab-a",interface="thunderbolt0",window="asymmetry",direction="rx",'
        'phase="before"} 1',
        'inferlab_window_link_lanes{host="lab-a",interface="thunderbolt0",window="asymmetry",direction="tx",'
        'phase="before"} 1',
        'inferlab_window_link_lanes{host="lab-a",interface="thunderbolt0",window="asymmetry",direction="rx",'
        'phase="after"} 1',
        'inferlab_window_link_lanes{host="lab-a",interface="thunderbolt0",window="asymmetry",direction="tx",'
        'phase="after"} 1',
        'inferlab_window_link_retrained{host="lab-a",interface="thunderbolt0",window="asymmetry"} 1',
        'inferlab_window_samples{host="lab-a",window="asymmetry"} 31',
    ]


def test_prometheus_metrics_are_grouped_with_one_help_and_type_each():
    lines = prometheus_textfile(window_result()).splitlines()
    names = [line.split('{')[0] for line in lines if not line.startswith('#')]
    # every metric's samples are contiguous, right after its own HELP and TYPE
    for name in set(names):
        first = lines.index(next(line for line in lines if line.startswith(name + '{')))
        assert lines[first - 2] == next(line for line in lines if line.startswith(f'# HELP {name} '))
        assert lines[first - 1] == f'# TYPE {name} gauge'
    assert [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n] == list(dict.fromkeys(names))
    # all TcpExt counters without a list
    assert 'counter="TCPOFOQueue"' in prometheus_textfile(window_result())


def test_prometheus_unknown_link_values_are_left_out_and_labels_escaped():
    text = prometheus_textfile(window_result(
        window='a"b\\c', link_before={'interface': 'eth1', 'rx_speed_gbps': None, 'tx_speed_gbps': None,
                                      'rx_lanes': None, 'tx_lanes': None},
        link_after={}, link_retrained=False, elapsed_s=None, skew_close_s=None, closed_at='not a time',
        samples={'path': None, 'count': 0, 'interval_s': 1.0}, run_id='x\ny'))
    assert 'inferlab_window_link_speed_gbps' not in text and 'inferlab_window_link_lanes' not in text
    assert 'inferlab_window_link_retrained{host="lab-a",interface="eth1",window="a\\"b\\\\c"} 0' in text
    assert 'inferlab_window_elapsed_seconds{host="lab-a",window="a\\"b\\\\c"} NaN' in text
    assert 'phase="close"' not in text and 'closed_timestamp' not in text
    assert 'run_id="x\\ny"' in text
    assert 'inferlab_window_samples{host="lab-a",window="a\\"b\\\\c"} 0' in text
    for line in text.splitlines():
        assert line.startswith('#') or SAMPLE_LINE.match(line), line


@pytest.mark.parametrize('value, kwargs, message', [
    ('text', {}, "prometheus_textfile: expected the counters role's window result (a dict), got str"),
    ({'host': 'lab-a'}, {}, 'prometheus_textfile: the window result has no "window"'),
    ({'window': 'w', 'host': ''}, {}, 'prometheus_textfile: the window result has no "host"'),
    (window_result(), {'tcp_ext': 'TCPTimeouts'}, 'prometheus_textfile: tcp_ext must be a list of TcpExt counter'),
    (window_result(tcp={'RetransSegs': 'many'}), {}, "prometheus_textfile: expected a number, got 'many'"),
])
def test_prometheus_rejects(value, kwargs, message):
    with pytest.raises(AnsibleFilterError) as exc:
        prometheus_textfile(value, **kwargs)
    assert str(exc.value).startswith(message)
