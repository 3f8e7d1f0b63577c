# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A temporary gateway config change through the gateway host's change ledger (kind ``gateway_config``): the entry
recorded as ``pending`` before anything is written, the backups of the config and the front's upstream file, the new
config in place, ``applied``; and the undo of a config's open entries, which is the ledger's own undo
(plugins/module_utils/_gateway_swap.py ``undo_change``), the code a standalone restore runs too.

The modules that change a gateway's config for a run (gateway_fallback, gateway_roles) build on these; applying the
new config is their rolling restart (``_gateway_swap.rolling_restart``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.inferlab.distributed.plugins.module_utils import _gateway_swap as swap
from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_undo

KIND = 'gateway_config'


def check_inputs(instances, front, admin_key_file):
    """The instances and the front, normalised, and the admin key, before anything changes: ``(instances, front,
    key)``. Raises GatewayError when one is malformed, the key cannot be read, the front cannot drain an instance,
    or several instances have no front to drain them."""
    instances = [swap.check_instance(i) for i in instances]
    front = swap.check_front(front) if front else {}
    key = swap.read_key(admin_key_file)
    if front:
        swap.drain_plan(instances, front)
    if len(instances) > 1 and not front:
        raise swap.GatewayError('%d gateway instances but no front: a rolling restart needs the front that drains '
                                'them (inferlab_gateway_front)' % len(instances))
    return instances, front, key


def config_entries(ledger_dir, host, config_path):
    """The ``gateway_config`` entries of ``config_path`` in ``host``'s ledger (their last lines), oldest first."""
    lines, _problems = _ledger_core.read_ledger(ledger_dir, host)
    return [e for e in _ledger_core.current_entries(lines).values()
            if e['kind'] == KIND and e['params'].get('config_path') == config_path]


def entry_params(ledger_dir, config_path, instances, front, admin_key_file, public_model, original_fallbacks,
                 original_models, ready_timeout_s, drain_timeout_s, kind='litellm'):
    """The params of a new ``gateway_config`` entry: the original's sha256 (and the front's), where the backups go
    (``<ledger_dir>/../backup/``, one stamp for both), and what the undo checks an instance against (the public
    role's fallbacks; the roles, when ``original_models`` is given). Raises OSError when the config is unreadable."""
    backup_dir = os.path.join(os.path.dirname(os.path.abspath(ledger_dir)), 'backup')
    stamp = '%s-%s' % (_ledger_core.utc_now().replace(':', ''), os.urandom(2).hex())
    params = {'kind': kind, 'config_path': config_path, 'original_sha256': _ledger_core.sha256_file(config_path),
              'backup_path': os.path.join(backup_dir, '%s.%s' % (os.path.basename(config_path), stamp)),
              'instances': instances, 'front': front, 'admin_key_file': admin_key_file,
              'public_model': public_model, 'original_fallbacks': original_fallbacks,
              'ready_timeout_s': ready_timeout_s, 'drain_timeout_s': drain_timeout_s}
    if original_models is not None:
        params['original_models'] = original_models
    if front:
        params['front_backup_path'] = os.path.join(
            backup_dir, '%s.%s' % (os.path.basename(front['upstream_file']), stamp))
        params['front_original_sha256'] = _ledger_core.sha256_file(front['upstream_file'])
    return params


def apply(ledger_dir, host, run_id, params, content):
    """Record ``params`` as ``pending``, write the backups (mode 0600), write ``content`` (bytes) in place of the
    config (same mode), mark the entry ``applied``; returns the entry. Raises LedgerError, OSError or GatewayError;
    once the entry is recorded, the undo puts back whatever was written."""
    entry = _ledger_core.record(ledger_dir, host, KIND, params, run_id=run_id)
    pairs = [(params['config_path'], params['backup_path'])]
    if params.get('front_backup_path'):
        pairs.append((params['front']['upstream_file'], params['front_backup_path']))
    for source, backup in pairs:
        os.makedirs(os.path.dirname(backup), mode=0o700, exist_ok=True)
        with open(source, 'rb') as handle:
            swap.write_atomic(backup, handle.read(), mode=0o600)
    swap.write_atomic(params['config_path'], content)
    _ledger_core.mark(ledger_dir, host, entry['id'], 'applied', run_id=run_id)
    return entry


def undo_open(ledger_dir, host, config_path, procfs_root='/proc', check_mode=False):
    """Undo the open ``gateway_config`` entries of ``config_path``: ``(undone ids, message)``. Raises LedgerError
    when the ledger cannot be read or an undo fails (the message says which and why)."""
    open_ids = [e['id'] for e in config_entries(ledger_dir, host, config_path) if e['state'] != 'undone']
    if not open_ids:
        return [], 'no open gateway_config entry for %s: nothing to undo' % config_path
    outcome = _ledger_undo.undo(ledger_dir, host, ids=open_ids, ctx=_ledger_undo.UndoContext(procfs_root=procfs_root),
                                check_mode=check_mode)
    if outcome['failed']:
        raise _ledger_core.LedgerError(outcome['message'])
    return outcome['undone'], ('; '.join(d['message'] for d in outcome['details'] if d.get('message'))
                               or outcome['message'])
