# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_tbnet_driver against a fixture sysfs root, with stand-ins for insmod, rmmod, modprobe, modinfo and ip that change
that root the way the kernel changes /sys (a stock insmod that ignores tx_e2e included)."""

from __future__ import annotations

import os
import stat
import struct
import time

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _tbnet_driver as driver
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import sysfs_tree

STOCK = '6C0E2A5F1B8D94E7A3C1F02'
CANDIDATE = 'A1B2C3D4E5F60718293A4B5'

# Each stand-in acts on $SYSFS (its module/thunderbolt_net and class/net/thunderbolt0/flags) and logs its argv.
FAKES = {
    'insmod': r'''
ko="$1"; shift
src=$(cat "$ko")
mkdir -p "$SYSFS/module/thunderbolt_net/parameters"
echo "$src" > "$SYSFS/module/thunderbolt_net/srcversion"
echo Y > "$SYSFS/module/thunderbolt_net/parameters/e2e"
if [ "$src" = "{candidate}" ] && [ -z "$STOCK_IGNORES_TX_E2E" ]; then
  if [ "$1" = tx_e2e=1 ]; then v=Y; else v=N; fi
  echo $v > "$SYSFS/module/thunderbolt_net/parameters/tx_e2e"
  chmod 0444 "$SYSFS/module/thunderbolt_net/parameters/tx_e2e"
fi
echo OE > "$SYSFS/module/thunderbolt_net/taint"
''',
    'rmmod': 'rm -rf "$SYSFS/module/thunderbolt_net"\n',
    'modprobe': r'''
mkdir -p "$SYSFS/module/thunderbolt_net/parameters"
echo {stock} > "$SYSFS/module/thunderbolt_net/srcversion"
echo Y > "$SYSFS/module/thunderbolt_net/parameters/e2e"
: > "$SYSFS/module/thunderbolt_net/taint"
''',
    'modinfo': 'if [ -f "$3" ]; then cat "$3"; else echo {stock}; fi\n',
    'ip': r'''
if [ "$5" = up ]; then echo 0x1003 > "$SYSFS/class/net/$4/flags"; else echo 0x1002 > "$SYSFS/class/net/$4/flags"; fi
''',
}


@pytest.fixture
def host(tmp_path, monkeypatch):
    root = sysfs_tree('tb_peer', tmp_path / 'sys')
    (root / 'module/thunderbolt_net/srcversion').write_text(STOCK + '\n')
    (root / 'module/thunderbolt_net/taint').write_text('\n')
    flags = root / 'class/net/thunderbolt0/flags'
    if not flags.exists():
        flags.write_text('0x1003\n')
    log = tmp_path / 'calls.log'
    commands = {}
    for name, body in FAKES.items():
        script = tmp_path / 'bin' / name
        script.parent.mkdir(exist_ok=True)
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n' + body.format(candidate=CANDIDATE, stock=STOCK))
        script.chmod(0o755)
        commands[name] = [str(script)]
    monkeypatch.setenv('SYSFS', str(root))
    ko = tmp_path / 'build' / 'thunderbolt-net.ko'
    ko.parent.mkdir()
    ko.write_text(CANDIDATE + '\n')
    return root, commands, ko, log


def params(root, ko, **changes):
    base = {'module_path': str(ko), 'candidate_srcversion': CANDIDATE, 'stock_srcversion': STOCK,
            'stock_loaded': True, 'stock_parameters': {'e2e': 'Y'}, 'stock_taint': '', 'tx_e2e': True,
            'interface': 'thunderbolt0', 'interface_was_up': True, 'emulated': False, 'sysfs_root': str(root)}
    base.update(changes)
    return driver.check_change_params(base)


def test_candidate_then_stock_for_real(host):
    root, commands, ko, log = host
    said = driver.load_candidate(params(root, ko), commands)
    state = driver.module_state(str(root))
    assert (state['srcversion'], state['parameters']['tx_e2e'], state['modes']['tx_e2e']) == (CANDIDATE, 'Y', 0o444)
    assert 'insmod' in said and driver.interface_up(str(root), 'thunderbolt0') is True
    calls = log.read_text().splitlines()
    assert calls[:3] == ['ip link set dev thunderbolt0 down', 'rmmod thunderbolt_net', f'insmod {ko} tx_e2e=1']
    driver.load_stock(params(root, ko), commands)
    state = driver.module_state(str(root))
    assert state['srcversion'] == STOCK and 'tx_e2e' not in state['parameters']
    assert driver.load_stock(params(root, ko), commands).endswith(
        f"already the distribution's driver (srcversion {STOCK})")


def test_without_tx_e2e_the_candidate_reads_n(host):
    root, commands, ko, _log = host
    driver.load_candidate(params(root, ko, tx_e2e=False), commands)
    assert driver.module_state(str(root))['parameters']['tx_e2e'] == 'N'


def test_a_module_that_ignores_tx_e2e_is_refused_and_the_stock_driver_comes_back(host, monkeypatch):
    """The stock module accepts tx_e2e=1 with a warning and exit 0: only sysfs tells."""
    root, commands, ko, _log = host
    monkeypatch.setenv('STOCK_IGNORES_TX_E2E', '1')
    with pytest.raises(driver.DriverError, match='parameters/tx_e2e is absent: the loaded module is not the candidate'):
        driver.load_candidate(params(root, ko), commands)
    state = driver.module_state(str(root))
    assert state['srcversion'] == STOCK and 'tx_e2e' not in state['parameters']


def test_a_stuck_insmod_fails_within_its_timeout_and_the_undo_brings_the_stock_driver_back(host, tmp_path):
    """An insmod that never returns (its module init waits forever) is killed at the load's timeout; the entry's
    undo then finds no thunderbolt_net loaded and loads the stock one."""
    root, commands, ko, log = host
    stuck = tmp_path / 'bin' / 'insmod-stuck'
    stuck.write_text(f'#!/bin/sh\necho "insmod $*" >> {log}\nexec sleep 600\n')
    stuck.chmod(0o755)
    commands['insmod'] = [str(stuck)]
    started = time.monotonic()
    with pytest.raises(driver.DriverError, match=r'insmod-stuck .* did not return within 1s, so it was killed'):
        driver.load_candidate(params(root, ko), commands, timeout_s=1)
    assert time.monotonic() - started < 1 + driver.KILL_WAIT_S
    assert not driver.module_state(str(root))['loaded']  # unloaded before the insmod, as a real stuck load leaves it
    assert 'modprobe thunderbolt_net' in driver.undo_change(params(root, ko), commands)
    state = driver.module_state(str(root))
    assert state['srcversion'] == STOCK and 'tx_e2e' not in state['parameters']


def test_a_command_runs_in_the_c_locale_with_no_stdin_and_one_that_cannot_run_says_so(tmp_path):
    """run is _ledger_proc.run_bounded, its failures worded as the driver's."""
    assert driver.run(['sh', '-c', 'echo "$LC_ALL"; cat; echo said >&2; exit 3']) == (3, 'C\n', 'said\n')
    with pytest.raises(driver.DriverError, match=f'^{tmp_path}/absent could not run: '):
        driver.run([str(tmp_path / 'absent')])


def test_a_module_under_lib_modules_is_refused(host, tmp_path):
    root, commands, _ko, log = host
    with pytest.raises(driver.DriverError, match='never from under (/usr)?/lib/modules'):
        system = '/lib/modules/6.1.0-57-amd64/kernel/drivers/net/thunderbolt/thunderbolt-net.ko'
        driver.load_candidate(params(root, system), commands)
    assert not log.exists()


def test_emulated_on_the_fixture_root(host):
    root, _commands, ko, log = host
    p = params(root, ko, emulated=True)
    driver.load_candidate(p)
    state = driver.module_state(str(root))
    assert (state['srcversion'], state['parameters']['tx_e2e'], state['taint']) == (CANDIDATE, 'Y', 'OE')
    assert stat.S_IMODE(os.stat(root / 'module/thunderbolt_net/parameters/tx_e2e').st_mode) == 0o444
    driver.load_stock(p)
    state = driver.module_state(str(root))
    assert (state['srcversion'], state['taint'], state['parameters']) == (STOCK, '', {'e2e': 'Y'})
    assert not log.exists()  # no command ran


@pytest.mark.parametrize(('e2e', 'peer', 'opt_in', 'override', 'reason'), [
    ('Y', True, False, False, "without the operator's opt-in"),
    ('N', True, True, False, 'needs RX E2E in effect, but thunderbolt_net e2e reads N'),
    ('Y', False, True, False, 'needs a peer that advertises TBNET_E2E'),
    ('Y', False, True, True, None),
    ('Y', True, True, False, None),
])
def test_tx_e2e_gate(e2e, peer, opt_in, override, reason):
    state = {'loaded': True, 'parameters': {'e2e': e2e}}
    refusal = driver.tx_e2e_refusal(state, peer, True, opt_in, override)
    assert (refusal is None) if reason is None else (reason in refusal)
    assert driver.tx_e2e_refusal(state, peer, False, opt_in, override) is None


@pytest.mark.parametrize(('change', 'message'), [
    ({'candidate_srcversion': 'nope'}, 'must be a module srcversion'),
    ({'sysfs_root': 'sys'}, '"sysfs_root" must be an absolute path'),
    ({'tx_e2e': 'yes'}, '"tx_e2e" must be true or false'),
    ({'colour': 'red'}, 'unknown params for a kernel_module entry: colour'),
])
def test_malformed_ledger_params(host, change, message):
    root, _commands, ko, _log = host
    with pytest.raises(driver.DriverError, match=message):
        params(root, ko, **change)


def test_interface_flags_that_are_not_hex(host):
    root, _commands, _ko, _log = host
    (root / 'class/net/thunderbolt0/flags').write_text('up\n')
    with pytest.raises(driver.DriverError, match="flags reads 'up', not a hex number"):
        driver.interface_up(str(root), 'thunderbolt0')


def build_id_note(build_id: bytes) -> bytes:
    """An ELF note section as /sys/module/NAME/notes/.note.gnu.build-id shows it (NT_GNU_BUILD_ID = 3)."""
    return struct.pack('<III', 4, len(build_id), 3) + b'GNU\0' + build_id


def test_the_build_id_tells_the_distribution_driver_apart_without_a_srcversion(host):
    """Debian builds without CONFIG_MODULE_SRCVERSION_ALL: its thunderbolt_net has a build id but no srcversion."""
    root, _commands, _ko, _log = host
    notes = root / 'module/thunderbolt_net/notes'
    notes.mkdir()
    (notes / '.note.gnu.build-id').write_bytes(build_id_note(bytes.fromhex('3ac447976f054caab70538acd9b30fd4b43db28d')))
    (root / 'module/thunderbolt_net/srcversion').unlink()
    state = driver.module_state(str(root))
    assert (state['srcversion'], state['build_id']) == (None, '3ac447976f054caab70538acd9b30fd4b43db28d')
    assert driver.describe(state) == 'build id 3ac447976f054caab70538acd9b30fd4b43db28d'
    assert driver.verify_stock(state, None, True, '3ac447976f054caab70538acd9b30fd4b43db28d') == []
    assert driver.verify_stock(state, None, True, '00' * 20) == [
        "build id is 3ac447976f054caab70538acd9b30fd4b43db28d, expected the distribution's " + '00' * 20]


@pytest.mark.parametrize('data', [b'', b'\x04\x00', struct.pack('<III', 4, 20, 1) + b'GNU\0' + b'x' * 20])
def test_a_note_without_a_gnu_build_id_reads_none(tmp_path, data):
    path = tmp_path / 'note'
    path.write_bytes(data)
    assert driver.read_build_id(str(path)) is None
    assert driver.read_build_id(str(tmp_path / 'missing')) is None


def fake_ping(tmp_path, answer_from_try):
    """A ping stand-in that answers from its Nth call on (0: never); it sends nothing anywhere."""
    count = tmp_path / 'ping.count'
    script = tmp_path / 'ping'
    script.write_text(f'#!/bin/sh\nn=$(($(cat {count} 2>/dev/null || echo 0) + 1)); echo $n > {count}\n'
                      f'[ {answer_from_try} -gt 0 ] && [ $n -ge {answer_from_try} ]\n')
    script.chmod(0o755)
    return [str(script)]


def test_watch_link_returns_once_the_peer_answers(tmp_path):
    ok, seconds, tries = driver.watch_link('thunderbolt0', '169.254.177.2', 5, fake_ping(tmp_path, 2), poll_s=0.05)
    assert (ok, tries) == (True, 2) and seconds < 5


def test_watch_link_gives_up_at_the_deadline(tmp_path):
    """Counted, not timed (a busy machine slows each try): it tries again until the next try would start past the
    deadline, so never more often than the deadline holds polls."""
    ok, seconds, tries = driver.watch_link('thunderbolt0', '169.254.177.2', 1.0, fake_ping(tmp_path, 0), poll_s=0.05)
    assert ok is False and 2 <= tries <= 1.0 / 0.05 + 1 and seconds > 0
