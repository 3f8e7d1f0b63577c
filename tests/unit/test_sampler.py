# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Tests of plugins/module_utils/_sampler.py, the background sampler of a counter window.

In process against fixture trees, and as the host runs it: installed alone with the rest of the host files (the
ledger role's manifest), run as ``inferlab_ledger.py sampler``, started detached, stopped by SIGTERM or by the
ledger's undo.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import (
    _ledger_core,
    _ledger_proc,
    _ledger_undo,
    _net_counters,
)
from ansible_collections.inferlab.distributed.plugins.module_utils import _sampler as sampler_script
from ansible_collections.inferlab.distributed.tests.unit.ledger_host import install_ledger
from ansible_collections.inferlab.distributed.tests.unit.oldpython import require_python
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, sysfs_tree

SCRIPT = Path(sampler_script.__file__)
HOST = 'lab-a'


@pytest.fixture
def roots(tmp_path):
    """A sysfs tree with thunderbolt0 (tb_peer) and a procfs tree with net/snmp and net/netstat."""
    sysfs = sysfs_tree('tb_peer', tmp_path / 'sys')
    procfs = tmp_path / 'proc'
    shutil.copytree(FIXTURES / 'proc', procfs)
    return sysfs, procfs


@pytest.fixture
def host_bin(tmp_path):
    """The host's bin directory as the counters role installs it: the ledger's host files, the sampler among them."""
    directory = tmp_path / 'state' / 'bin'
    install_ledger(directory)
    for name in ('windows', 'run', 'logs'):
        (tmp_path / 'state' / name).mkdir()
    return directory


@pytest.fixture
def pids():
    """PIDs of samplers a test started (they are not our children once detached); killed at the end if alive."""
    started = []
    yield started
    for pid in started:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
            wait_gone(pid)


def alive(pid):
    info = _ledger_proc.read_proc_stat(pid)
    return info is not None and info['state'] not in ('Z', 'X')


def wait_gone(pid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f'pid {pid} still alive after {timeout} s')
        time.sleep(0.02)


def wait_lines(path, count, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return lines
        if time.monotonic() > deadline:
            raise AssertionError(f'{path} has {len(lines)} lines after {timeout} s, expected {count}')
        time.sleep(0.02)


def sampler_argv(python, host_bin, roots, command='start', interval='0.05', max_seconds='30',
                 interfaces=('thunderbolt0',)):
    state = host_bin.parent
    argv = [python, '-I', str(host_bin / 'inferlab_ledger.py'), 'sampler', command,
            '--output', str(state / 'windows' / 'run1-w.jsonl'), '--pidfile', str(state / 'run' / 'sampler-run1-w.pid'),
            '--log', str(state / 'logs' / 'sampler-run1-w.log'), '--interval', interval, '--max-seconds', max_seconds,
            '--sysfs-root', str(roots[0]), '--procfs-root', str(roots[1])]
    return argv + [f'--interface={name}' for name in interfaces]


def log_events(host_bin):
    path = host_bin.parent / 'logs' / 'sampler-run1-w.log'
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith('{')]


# --- the script itself


def test_imports_ansible_only_where_it_falls_back_to_the_host_name():
    source = SCRIPT.read_text()
    imports = re.findall(r'^\s*(?:from|import)\s+(\S+)', source, re.MULTILINE)
    assert [name for name in imports if name.startswith(('ansible', 'inferlab_'))] == [
        'ansible_collections.inferlab.distributed.plugins.module_utils', 'inferlab_net_counters']
    assert 'load_counters' not in source and 'spec_from_file_location' not in source


def test_parses_as_python_38():
    ast.parse(SCRIPT.read_text(), feature_version=(3, 8))


def test_runs_from_the_host_files_without_ansible(host_bin):
    """The ledger script's copy of the sampler and of its parser, under their host names; no ``ansible``."""
    code = ('import runpy, sys\n'
            f'sys.argv = [{str(host_bin / "inferlab_ledger.py")!r}, "sampler", "--help"]\n'
            'try:\n'
            f'    runpy.run_path({str(host_bin / "inferlab_ledger.py")!r}, run_name="__main__")\n'
            'except SystemExit as exc:\n'
            '    print(exc.code)\n'
            'print(sys.modules["inferlab_sampler"].__file__, sys.modules["inferlab_net_counters"].__file__,\n'
            '      sys.modules["inferlab_sysfs"].__file__)\n'
            'print(sorted(name for name in sys.modules if name.startswith(("ansible.", "ansible_collections."))\n'
            '             or name in ("ansible", "ansible_collections")))\n')
    out = subprocess.run([sys.executable, '-I', '-c', code], capture_output=True, text=True, timeout=60, check=True)
    usage, code, paths, loaded = out.stdout.split('\n')[0], *out.stdout.splitlines()[-3:]
    assert usage.startswith('usage: inferlab_ledger.py sampler ') and code == '0'
    assert paths.split() == [str(host_bin / name) for name in
                             ('inferlab_sampler.py', 'inferlab_net_counters.py', 'inferlab_sysfs.py')]
    assert loaded == '[]'


def test_the_ledger_script_lists_it_and_hands_it_everything_after_sampler(host_bin):
    out = subprocess.run([sys.executable, '-I', str(host_bin / 'inferlab_ledger.py'), '--help'], capture_output=True,
                         text=True, timeout=60, check=True)
    assert 'sampler' in out.stdout and 'the counter sampler of a counter window' in out.stdout
    out = subprocess.run([sys.executable, '-I', str(host_bin / 'inferlab_ledger.py'), 'sampler'], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 2 and out.stderr.startswith('usage: inferlab_ledger.py sampler ')


# --- one sample


def test_sample_shape(roots):
    sampler = sampler_script.Sampler(_net_counters, ['thunderbolt0', 'thunderbolt0'], sysfs_root=str(roots[0]),
                                     procfs_root=str(roots[1]), clock=lambda: (81234.5, 1796032800.25))
    sample = sampler.sample()
    assert list(sample) == ['t_wall', 't_mono', 'interfaces', 'tcp', 'tcp_ext']
    assert (sample['t_wall'], sample['t_mono']) == (1796032800.25, 81234.5)
    stats = sample['interfaces']['thunderbolt0']
    assert list(sample['interfaces']) == ['thunderbolt0']
    assert tuple(stats) == sampler_script.STATISTICS + _net_counters.CARRIER_COUNTERS
    assert (stats['carrier_changes'], stats['carrier_up_count'], stats['carrier_down_count']) == (4, 2, 2)
    assert (stats['rx_crc_errors'], stats['rx_missed_errors'], stats['rx_length_errors'], stats['rx_over_errors'],
            stats['rx_errors']) == (3, 1, 0, 2, 6)
    tcp, tcp_ext = _net_counters.read_tcp(_net_counters.SysfsReader(str(roots[1])))
    assert sample['tcp'] == {name: tcp[name] for name in ('RetransSegs', 'OutSegs', 'InSegs', 'InErrs')}
    assert sample['tcp_ext'] == {name: tcp_ext[name] for name in ('TCPLostRetransmit', 'TCPTimeouts')}
    assert sampler.errors == []


def test_gone_interface_and_unreadable_counters_are_null(roots):
    sysfs, procfs = roots
    (sysfs / 'class' / 'net' / 'thunderbolt0' / 'statistics' / 'rx_crc_errors').write_text('lots\n')
    (sysfs / 'class' / 'net' / 'thunderbolt0' / 'statistics' / 'tx_dropped').unlink()
    (procfs / 'net' / 'snmp').unlink()
    sampler = sampler_script.Sampler(_net_counters, ['thunderbolt0', 'thunderbolt1'], sysfs_root=str(sysfs),
                                     procfs_root=str(procfs))
    sample = sampler.sample()
    assert sample['interfaces']['thunderbolt1'] is None
    assert sample['interfaces']['thunderbolt0']['rx_crc_errors'] is None
    assert sample['interfaces']['thunderbolt0']['tx_dropped'] is None  # a missing file reads as null too
    assert sample['interfaces']['thunderbolt0']['rx_missed_errors'] == 1
    assert sample['tcp'] == dict.fromkeys(sampler_script.TCP)
    assert sample['tcp_ext'] == dict.fromkeys(sampler_script.TCP_EXT)
    assert sampler.errors == [
        f"malformed rx_crc_errors in {sysfs}/class/net/thunderbolt0/statistics/rx_crc_errors: 'lots' "
        '(expected a decimal integer)',
        'interface thunderbolt1 is gone',
        f'{procfs}/net/snmp not found: is procfs_root ({procfs}) a procfs?',
    ]


# --- the loop


class FakeStop:
    def __init__(self, after=None):
        self.after, self.calls, self.waited, self.reason = after, 0, [], None

    def wait(self, seconds):
        self.calls += 1
        self.waited.append(round(seconds, 6))
        if self.after is not None and self.calls >= self.after:
            self.reason = 'SIGTERM'
        return self.reason is not None


class FakeClock:
    def __init__(self, stop, step):
        self.now, self.stop, self.step = 100.0, stop, step

    def __call__(self):
        # each reading after a wait has moved on by what was waited, plus the time a sample takes
        if self.stop.waited and len(self.stop.waited) > getattr(self, 'seen', 0):
            self.seen = len(self.stop.waited)
            self.now += self.stop.waited[-1]
        self.now += self.step
        return self.now


class FakeSampler:
    def __init__(self, errors=()):
        self.count, self.errors, self._errors = 0, [], list(errors)

    def sample(self):
        self.count += 1
        self.errors = list(self._errors)
        return {'n': self.count}


def test_next_deadline_skips_missed_ticks():
    assert sampler_script.next_deadline(10.0, 10.0, 1.0) == 11.0
    assert sampler_script.next_deadline(10.0, 10.4, 1.0) == 11.0
    assert sampler_script.next_deadline(10.0, 13.7, 1.0) == 14.0  # a stall of 3 s: no burst of 3 samples


def test_loop_stops_at_max_seconds(tmp_path, capsys):
    stop = FakeStop()
    handle = (tmp_path / 'out.jsonl').open('w')
    ready = []
    reason, count = sampler_script.sample_loop(FakeSampler(), handle, 1.0, 3.5, stop, ready=lambda: ready.append(1),
                                               monotonic=FakeClock(stop, 0.0))
    handle.close()
    assert (reason, count) == ('max_seconds', 5)  # at 0, 1, 2, 3 and the deadline, 3.5
    assert ready == [1]
    assert stop.waited == [1.0, 1.0, 1.0, 0.5]  # the last wait ends at the deadline
    assert [json.loads(line) for line in (tmp_path / 'out.jsonl').read_text().splitlines()] == [
        {'n': 1}, {'n': 2}, {'n': 3}, {'n': 4}, {'n': 5}]
    assert capsys.readouterr().err == ''


def test_loop_takes_a_last_sample_on_stop_and_reports_errors_once(tmp_path, capsys):
    stop = FakeStop(after=3)
    handle = (tmp_path / 'out.jsonl').open('w')
    reason, count = sampler_script.sample_loop(FakeSampler(errors=['interface thunderbolt0 is gone']), handle, 1.0,
                                               3600, stop, monotonic=FakeClock(stop, 0.1))
    handle.close()
    assert (reason, count) == ('SIGTERM', 4)  # 1 + 2 waits that ended on time + the last one
    errors = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(e['event'], e['message']) for e in errors] == [('error', 'interface thunderbolt0 is gone')]


# --- as the host runs it


def test_start_detaches_and_stops_on_sigterm(host_bin, roots, pids):
    argv = sampler_argv(sys.executable, host_bin, roots)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out
    result = json.loads(out.stdout)
    pid = result['pid']
    pids.append(pid)
    state = host_bin.parent
    assert result['start_time'] == _ledger_proc.read_proc_stat(pid)['start_time']
    assert os.getsid(pid) == pid  # its own session
    assert (state / 'run' / 'sampler-run1-w.pid').read_text() == f'{pid}\n'
    # what the ledger records before the start is exactly what runs
    assert _ledger_proc.read_proc_cmdline(pid) == argv
    for fd in (0, 1):
        assert os.readlink(f'/proc/{pid}/fd/{fd}') == os.devnull
    assert os.readlink(f'/proc/{pid}/fd/2') == str(state / 'logs' / 'sampler-run1-w.log')
    lines = wait_lines(state / 'windows' / 'run1-w.jsonl', 3)
    os.kill(pid, signal.SIGTERM)
    wait_gone(pid)
    lines = (state / 'windows' / 'run1-w.jsonl').read_text().splitlines()
    samples = [json.loads(line) for line in lines]  # every line whole
    assert all(s['interfaces']['thunderbolt0']['rx_crc_errors'] == 3 for s in samples)
    assert [s['t_mono'] for s in samples] == sorted(s['t_mono'] for s in samples)
    events = log_events(host_bin)
    assert [e['event'] for e in events] == ['start', 'stop']
    assert events[1]['reason'] == 'SIGTERM' and events[1]['samples'] == len(samples)
    assert not (state / 'run' / 'sampler-run1-w.pid').exists()


def test_stops_by_itself_after_max_seconds(host_bin, roots, pids):
    argv = sampler_argv(sys.executable, host_bin, roots, interval='0.1', max_seconds='0.45')
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    pid = json.loads(out.stdout)['pid']
    pids.append(pid)
    wait_gone(pid)
    events = log_events(host_bin)
    assert events[-1]['event'] == 'stop' and events[-1]['reason'] == 'max_seconds'
    assert 5 <= events[-1]['samples'] <= 6
    assert not (host_bin.parent / 'run' / 'sampler-run1-w.pid').exists()


def test_the_ledger_stops_it_by_its_pidfile(host_bin, roots, pids, tmp_path):
    """The opening records the sampler before it starts (pidfile and command line); if the run dies before the pid
    is marked, the undo finds it through the pidfile, checks the command line, and stops it."""
    ledger_dir = str(tmp_path / 'ledger')
    argv = sampler_argv(sys.executable, host_bin, roots)
    pidfile = str(host_bin.parent / 'run' / 'sampler-run1-w.pid')
    entry = _ledger_core.record(ledger_dir, HOST, 'sampler', {'pidfile': pidfile, 'cmdline': argv}, run_id='run1')
    pid = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout)['pid']
    pids.append(pid)
    wait_lines(host_bin.parent / 'windows' / 'run1-w.jsonl', 2)
    result = _ledger_undo.undo(ledger_dir, HOST, ids=[entry['id']], run_id='run1')
    assert result['undone'] == [entry['id']], result
    assert f'stopped pid {pid}' in result['details'][0]['message']
    assert not alive(pid)
    assert log_events(host_bin)[-1]['reason'] == 'SIGTERM'


def test_start_refuses_a_second_sampler_for_the_same_pidfile(host_bin, roots):
    pidfile = host_bin.parent / 'run' / 'sampler-run1-w.pid'
    pidfile.write_text(f'{os.getpid()}\n')  # a live process
    out = subprocess.run(sampler_argv(sys.executable, host_bin, roots), capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 3
    assert json.loads(out.stdout) == {
        'failed': True,
        'msg': f'pidfile {pidfile} names pid {os.getpid()}, which is running: a sampler for this window is already '
               'running (close the window first)'}


def test_start_reports_a_sampler_that_died_before_its_first_sample(host_bin, roots, pids):
    output = host_bin.parent / 'windows' / 'run1-w.jsonl'
    output.mkdir()  # cannot be opened for writing
    out = subprocess.run(sampler_argv(sys.executable, host_bin, roots), capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 1
    result = json.loads(out.stdout)
    pids.append(result['pid'])
    assert result['failed'] is True
    assert 'exited before its first sample' in result['msg'] and 'IsADirectoryError' in result['msg']
    wait_gone(result['pid'])
    assert not (host_bin.parent / 'run' / 'sampler-run1-w.pid').exists()


def test_usage_errors(host_bin, roots):
    argv = sampler_argv(sys.executable, host_bin, roots, interval='0')
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2 and "expected a positive number of seconds, got '0'" in out.stderr


@pytest.mark.parametrize('version', ['3.8', '3.9'])
def test_runs_on_old_python(host_bin, roots, version):
    """The host copy runs with whatever Python the host has (3.8 is ansible-core 2.19's oldest target)."""
    python = require_python(version)
    # ten intervals in the window: the loop runs more than once even when a busy machine makes every tick late
    argv = sampler_argv(python, host_bin, roots, command='run', interval='0.05', max_seconds='0.5')
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    lines = (host_bin.parent / 'windows' / 'run1-w.jsonl').read_text().splitlines()
    stop = json.loads(out.stderr.splitlines()[-1])
    assert stop['reason'] == 'max_seconds' and stop['samples'] == len(lines) >= 2
    assert json.loads(lines[0])['interfaces']['thunderbolt0']['rx_crc_errors'] == 3


# --- the textfile for node_exporter


def run_textfile(host_bin, dest, text):
    return subprocess.run([sys.executable, '-I', str(host_bin / 'inferlab_ledger.py'), 'sampler', 'textfile',
                           '--dest', str(dest)], input=text, capture_output=True, text=True, timeout=60, check=False)


def test_textfile_is_written_atomically_and_only_when_it_changes(host_bin, tmp_path):
    directory = tmp_path / 'textfile'
    directory.mkdir()
    dest = directory / 'inferlab_window_w.prom'
    out = run_textfile(host_bin, dest, 'inferlab_window_samples{host="a",window="w"} 3\n')
    assert out.returncode == 0 and json.loads(out.stdout) == {'changed': True, 'msg': f'wrote {dest}',
                                                              'dest': str(dest)}
    assert dest.read_text() == 'inferlab_window_samples{host="a",window="w"} 3\n'
    assert stat.S_IMODE(dest.stat().st_mode) == 0o644
    assert os.listdir(directory) == ['inferlab_window_w.prom']  # no temporary file left
    out = run_textfile(host_bin, dest, 'inferlab_window_samples{host="a",window="w"} 3\n')
    assert json.loads(out.stdout)['changed'] is False


def test_textfile_temporary_name_is_not_read_by_the_collector(host_bin, tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append((os.path.basename(src), os.path.basename(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(sampler_script.os, 'replace', spy)
    assert sampler_script.write_textfile(str(tmp_path / 'x.prom'), 'a 1\n') == (True, f'wrote {tmp_path}/x.prom')
    (tmp_name, final), = seen
    assert final == 'x.prom' and tmp_name.startswith('.') and not tmp_name.endswith('.prom')


def test_textfile_directory_must_exist(host_bin, tmp_path):
    out = run_textfile(host_bin, tmp_path / 'nope' / 'x.prom', 'a 1\n')
    assert out.returncode == 3
    assert json.loads(out.stdout)['msg'] == (
        f"directory {tmp_path}/nope does not exist (set counters_prometheus_textfile_dir to the node_exporter "
        "textfile collector's directory)")
