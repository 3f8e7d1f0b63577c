# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_ethtool on ethtool's printed outputs (tests/unit/fixtures/ethtool: a veth captured here, an ice and a tg3
published, malformed ones): each group read by the names its set command takes, the wanted values checked against
what the driver has, every problem named at once, and the ledger's nic_setting entry validated."""

from __future__ import annotations

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ethtool, _ledger_core, _ledger_undo
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES

ETHTOOL = FIXTURES / 'ethtool'


def fixture(name):
    return (ETHTOOL / name).read_text()


def test_the_ice_coalescing_by_the_names_ethtool_C_takes():
    found = _ethtool.parse_coalesce(fixture('ice-coalesce.txt'))
    assert (found['adaptive-rx'], found['adaptive-tx']) == ({'value': 'off', 'fixed': False},) * 2
    assert (found['rx-usecs']['value'], found['tx-usecs']['value'], found['rx-usecs-high']['value']) == \
        ('12', '28', '0')
    # n/a is a setting the driver does not have; -c prints "rx-frame-low", -C takes "rx-frames-low"
    assert found['rx-frames']['value'] is None and found['cqe-mode-rx']['value'] is None
    assert 'rx-frames-low' in found and 'rx-frame-low' not in found
    assert found['tx-aggr-max-bytes'] == {'value': None, 'fixed': False}


def test_the_older_tg3_layout_reads_the_same():
    found = _ethtool.parse_coalesce(fixture('tg3-coalesce.txt'))
    assert (found['rx-usecs']['value'], found['rx-frames']['value'], found['tx-frames-high']['value']) == \
        ('20', '5', '0')
    rings = _ethtool.parse_rings(fixture('tg3-rings.txt'))
    assert rings['rx'] == {'value': '200', 'fixed': False, 'maximum': '511'}
    assert rings['rx-jumbo'] == {'value': '100', 'fixed': False, 'maximum': '255'}
    assert set(rings) == {'rx', 'rx-mini', 'rx-jumbo', 'tx'}


def test_the_ice_rings_current_and_maximum():
    rings = _ethtool.parse_rings(fixture('ice-rings.txt'))
    assert rings['rx'] == {'value': '8160', 'fixed': False, 'maximum': '8160'}
    assert rings['tx-push'] == {'value': 'off', 'fixed': False, 'maximum': None}
    assert rings['tx-push-buf-len']['value'] is None and rings['tcp-data-split']['value'] is None


def test_features_keep_fixed_apart():
    found = _ethtool.parse_features(fixture('ice-features.txt'))
    assert found['generic-segmentation-offload'] == {'value': 'on', 'fixed': False}
    assert found['large-receive-offload'] == {'value': 'off', 'fixed': True}
    veth = _ethtool.parse_features(fixture('veth-features.txt'))
    assert veth['generic-receive-offload'] == {'value': 'off', 'fixed': False}


@pytest.mark.parametrize('parse, name, message', [
    (_ethtool.parse_coalesce, 'malformed-coalesce.txt', 'unexpected line in ethtool -c output'),
    (_ethtool.parse_rings, 'malformed-rings.txt', 'unexpected line in ethtool -g output'),
    (_ethtool.parse_features, 'malformed-features.txt', 'unexpected line in ethtool -k output'),
    (_ethtool.parse_rings, 'ice-coalesce.txt', 'no "Ring parameters for" header'),
    (_ethtool.parse_coalesce, 'veth-info.txt', 'no "Coalesce parameters for" header'),
])
def test_what_is_not_ethtool_output_is_refused(parse, name, message):
    with pytest.raises(_ethtool.EthtoolError, match=message):
        parse(fixture(name))


def test_rings_without_current_settings_are_refused():
    with pytest.raises(_ethtool.EthtoolError, match='no "Current hardware settings:"'):
        _ethtool.parse_rings('Ring parameters for eth0:\nPre-set maximums:\nRX: 511\n')


@pytest.mark.parametrize('value, text', [(True, 'on'), (False, 'off'), ('ON', 'on'), (0, '0'), ('0064', '64'),
                                         (4096, '4096')])
def test_wanted_values_as_text(value, text):
    assert _ethtool.setting_text(value) == text


@pytest.mark.parametrize('value', [-1, 'fast', 1.5, None, ''])
def test_wanted_values_that_are_no_setting(value):
    with pytest.raises(_ethtool.EthtoolError, match='expected on, off or a whole number'):
        _ethtool.setting_text(value)


def test_wanted_values_checked_against_the_driver():
    rings = _ethtool.parse_rings(fixture('ice-rings.txt'))
    assert _ethtool.check_wanted('rings', 'em1', rings, {'rx': 4096, 'tx': '2048'}) == {'rx': '4096', 'tx': '2048'}
    coalesce = _ethtool.parse_coalesce(fixture('ice-coalesce.txt'))
    assert _ethtool.check_wanted('coalesce', 'em1', coalesce, {'adaptive-rx': True, 'rx-usecs': 0}) == \
        {'adaptive-rx': 'on', 'rx-usecs': '0'}


def test_every_problem_is_named_at_once():
    rings = _ethtool.parse_rings(fixture('ice-rings.txt'))
    with pytest.raises(_ethtool.EthtoolError) as raised:
        _ethtool.check_wanted('rings', 'em1', rings, {'rx': 9000, 'rx-jumbo': 10, 'tx-push': 5, 'nope': 1})
    message = str(raised.value)
    assert 'rx of em1 may be at most 8160 (its pre-set maximum), got 9000' in message
    assert 'rx-jumbo of em1 is n/a: its driver does not have it' in message
    assert 'tx-push of em1 is off now: expected on or off, got 5' in message
    assert 'nope is not one of the ring sizes of em1 (ethtool -g em1 lists ' in message
    features = _ethtool.parse_features(fixture('ice-features.txt'))
    with pytest.raises(_ethtool.EthtoolError, match='large-receive-offload of em1 is fixed at off'):
        _ethtool.check_wanted('features', 'em1', features, {'large-receive-offload': True})


def test_set_argv_and_differences():
    assert _ethtool.set_argv(['ethtool'], 'coalesce', 'em1', {'rx-usecs': '0', 'adaptive-rx': 'off'}) == \
        ['ethtool', '-C', 'em1', 'adaptive-rx', 'off', 'rx-usecs', '0']
    found = _ethtool.parse_coalesce(fixture('ice-coalesce.txt'))
    assert _ethtool.differences(found, {'rx-usecs': '12', 'tx-usecs': '0', 'missing': '1'}) == \
        {'tx-usecs': '28', 'missing': None}


def test_read_group_says_why_not():
    def unsupported(argv, timeout=60):
        return 1, '', 'netlink error: Operation not supported\n'
    with pytest.raises(_ethtool.EthtoolError, match='ethtool -c v0 exited 1: netlink error: Operation not supported'):
        _ethtool.read_group(['ethtool'], 'coalesce', 'v0', runner=unsupported)


def test_run_answers_127_for_an_ethtool_that_cannot_run_or_does_not_return(tmp_path):
    """run is _ledger_proc.run_bounded (the C locale, stdin from /dev/null), its failures as rc 127."""
    assert _ethtool.run(['sh', '-c', 'echo "$LC_ALL"; cat; exit 2']) == (2, 'C\n', '')
    rc, out, err = _ethtool.run([str(tmp_path / 'absent')])
    assert (rc, out) == (127, '') and 'No such file or directory' in err
    assert _ethtool.run(['sleep', '30'], timeout=0.2) == (127, '', "Command '['sleep', '30']' timed out after 0.2 "
                                                                   "seconds")


def test_the_ledger_validates_a_nic_setting_entry(tmp_path):
    params = {'interface': 'em1', 'group': 'coalesce', 'previous': {'rx-usecs': 12}, 'value': {'rx-usecs': '0'}}
    line = _ledger_core.record(str(tmp_path), 'lab-a', 'nic_setting', params, run_id='run-1')
    assert line['params']['previous'] == {'rx-usecs': '12'}
    bad = [
        (dict(params, group='pause'), '"group" of a nic_setting entry must be one of features, coalesce, rings'),
        (dict(params, interface='a/b'), '"interface" of a nic_setting entry must be an interface name'),
        (dict(params, previous={}), 'must map the same setting names'),
        (dict(params, value={'rx-usecs': 'fast'}), 'rx-usecs: expected on, off or a whole number'),
        (dict(params, extra=1), 'unknown params for a nic_setting entry: extra'),
    ]
    for wrong, message in bad:
        with pytest.raises(_ledger_core.LedgerError, match=message):
            _ledger_core.record(str(tmp_path), 'lab-a', 'nic_setting', wrong, run_id='run-1')


class CoalescingNic:
    """ethtool -c/-C of the ice port above, for the undo on hardware this machine does not have: ``-c`` prints the
    fixture with the current values, ``-C`` sets them, each command kept."""

    def __init__(self):
        self.values = {'rx-usecs': '12', 'tx-usecs': '28'}
        self.commands = []

    def run(self, argv, timeout):
        self.commands.append(argv)
        if argv[1] == '-C':
            self.values.update(dict(zip(argv[3::2], argv[4::2], strict=True)))
            return 0, '', ''
        text = fixture('ice-coalesce.txt').replace('rx-usecs: 12', 'rx-usecs: ' + self.values['rx-usecs'])
        return 0, text.replace('tx-usecs: 28', 'tx-usecs: ' + self.values['tx-usecs']), ''


def undo_entry(tmp_path, nic):
    params = {'interface': 'em1', 'group': 'coalesce', 'previous': {'rx-usecs': '12', 'tx-usecs': '28'},
              'value': {'rx-usecs': '0', 'tx-usecs': '28'}}
    line = _ledger_core.record(str(tmp_path), 'lab-a', 'nic_setting', params, run_id='run-1')
    ctx = _ledger_undo.UndoContext(ethtool_command=['ethtool'], run_command=nic.run)
    return _ledger_undo.undo(str(tmp_path), 'lab-a', ids=[line['id']], run_id='run-1', ctx=ctx)


def test_the_undo_sets_back_what_is_still_ours(tmp_path):
    nic = CoalescingNic()
    nic.values['rx-usecs'] = '0'
    result = undo_entry(tmp_path, nic)
    assert result['failed'] == [] and nic.values == {'rx-usecs': '12', 'tx-usecs': '28'}
    assert ['ethtool', '-C', 'em1', 'rx-usecs', '12'] in nic.commands
    assert 'the coalesce of em1 back to rx-usecs 12' in result['details'][0]['message']


def test_the_undo_leaves_a_foreign_value_alone(tmp_path):
    nic = CoalescingNic()
    nic.values['rx-usecs'] = '50'  # neither the 12 found nor the 0 set: someone else's
    result = undo_entry(tmp_path, nic)
    assert result['failed'] and nic.values['rx-usecs'] == '50'
    assert not [argv for argv in nic.commands if argv[1] == '-C']
    message = result['details'][0]['message']
    assert "rx-usecs is '50' now, neither the '0' inferlab set nor the '12' it found" in message
    assert 'ethtool -C em1 rx-usecs 12 tx-usecs 28' in message


def test_an_undo_of_a_change_never_made_sets_nothing(tmp_path):
    nic = CoalescingNic()  # killed between the record and the change: everything as found
    result = undo_entry(tmp_path, nic)
    assert result['failed'] == [] and not [argv for argv in nic.commands if argv[1] == '-C']
    assert 'as found before already' in result['details'][0]['message']


def test_an_undo_whose_interface_is_gone_has_nothing_to_set_back(tmp_path):
    class Gone(CoalescingNic):
        def run(self, argv, timeout):
            self.commands.append(argv)
            return 1, '', 'netlink error: no device matches name (offset 24)\nnetlink error: No such device\n'
    result = undo_entry(tmp_path, Gone())
    assert result['failed'] == [] and 'em1 no longer exists' in result['details'][0]['message']
