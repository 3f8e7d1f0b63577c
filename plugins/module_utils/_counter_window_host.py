# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One edge of a counter window on a host: the snapshot, and the sampler started or stopped through the ledger.

The counter_window module's work, here so that it can be tested without Ansible; the controller's half of the edge
is plugin_utils/_counter_window_controller.py (the action plugin's). The sampler is a temporary change: recorded
(pending) before it starts, marked applied with its pid and start time, and stopped only through the ledger (an undo
by PID), exactly as the restore would stop it after a dead run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import subprocess

from ansible_collections.inferlab.distributed.plugins.module_utils import (
    _ledger_core,
    _ledger_undo,
    _net_counters,
    _nvml,
    _tbnet,
)


class WindowError(Exception):
    """An edge of the window that could not be taken; the message says where and why."""


def snapshot(interfaces, fail_on_missing=True, sysfs_root='/sys', tbnet_sysfs_root='/sys', procfs_root='/proc',
             nvml_snapshot=None, import_pynvml=_nvml.import_pynvml):
    """The counters first (what the window measures), then the Thunderbolt link and the GPUs."""
    counters, missing = _net_counters.collect(list(dict.fromkeys(interfaces)), sysfs_root=sysfs_root,
                                              procfs_root=procfs_root, fail_on_missing=fail_on_missing)
    tbnet = _tbnet.collect(sysfs_root=tbnet_sysfs_root, procfs_root=procfs_root)
    nvml = _nvml.read(nvml_snapshot, procfs_root=procfs_root, import_pynvml=import_pynvml)
    return {'counters': counters, 'missing': missing, 'tbnet': tbnet, 'nvml': nvml}


def open_samplers(ledger_dir, host, pidfile):
    """Ids of this window's sampler entries still open (a pidfile names one window of one run)."""
    return [e['id'] for e in _ledger_core.entries(ledger_dir, host)
            if e['kind'] == 'sampler' and e['state'] in _ledger_core.OPEN_STATES
            and e['params'].get('pidfile') == pidfile]


def start_sampler(ledger_dir, host, run_id, argv, pidfile, window, run=subprocess.run):
    """Record the sampler, start it, mark it applied; returns ``{entry_id, pid}``.

    Refuses a window whose sampler is still open. If the start fails after the record, the entry is undone (which
    stops a sampler that did start) before the error is raised, so nothing runs that the ledger does not hold."""
    running = open_samplers(ledger_dir, host, pidfile)
    if running:
        raise WindowError('window %s of run %s is already open on %s: ledger entr%s %s hold%s its sampler (%s). '
                          'Close it first (inferlab.distributed.counters, tasks_from: close), or give this window '
                          'another counters_window name.'
                          % (window, run_id, host, 'y' if len(running) == 1 else 'ies', ', '.join(running),
                             's' if len(running) == 1 else '', pidfile))
    entry = _ledger_undo.change(ledger_dir, host, 'sampler', {'pidfile': pidfile, 'cmdline': list(argv)},
                                run_id=run_id)
    try:
        with entry:
            out = run(list(argv), capture_output=True, text=True, check=False, timeout=60)
            try:
                started = json.loads(out.stdout)
            except ValueError:
                started = {}
            if out.returncode != 0 or not isinstance(started, dict) or 'pid' not in started:
                raise WindowError('the sampler did not start (exit %s): %s' % (
                    out.returncode, (started.get('msg') if isinstance(started, dict) else None)
                    or (out.stderr or out.stdout).strip()[-400:]))
            entry.update(pid=started['pid'], start_time=started['start_time'])
    except BaseException as err:
        if entry.undone is None:  # the undo itself failed
            raise
        raise WindowError('%s (%s)' % (err, _stopped(entry.undone))) from err
    return {'entry_id': entry.id, 'pid': started['pid']}


def stop_sampler(ledger_dir, host, run_id, entry_id, procfs_root='/proc'):
    """Undo one sampler entry (stop it by PID) after a failed opening; returns what happened, for the message."""
    return _stopped(_ledger_undo.undo(ledger_dir, host, ids=[entry_id], run_id=run_id,
                                      ctx=_ledger_undo.UndoContext(procfs_root=procfs_root)))


def _stopped(result):
    if result['failed']:
        return 'stopping its sampler through the ledger FAILED: %s' % result['message']
    return 'its sampler was stopped through the ledger'


def stop_samplers(ledger_dir, host, run_id, pidfile, procfs_root='/proc'):
    """Stop by PID, through the ledger, every open sampler entry of this window; returns ``(ids, undo result)``."""
    ids = open_samplers(ledger_dir, host, pidfile)
    if not ids:
        return ids, None
    return ids, _ledger_undo.undo(ledger_dir, host, ids=ids, run_id=run_id,
                                  ctx=_ledger_undo.UndoContext(procfs_root=procfs_root))
