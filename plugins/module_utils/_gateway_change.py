# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A temporary gateway config change through the gateway host's change ledger (kind ``gateway_config``): the entry
recorded as ``pending`` before anything is written, the backups of the config and the front's upstream file, the new
config in place, ``applied``; and the undo of a config's open entries, which is the ledger's own undo
(plugins/module_utils/_gateway_swap.py ``undo_change``), the code a standalone restore runs too.

The modules that change a gateway's config for a run (gateway_fallback, gateway_models) build on these; applying the
new config is their rolling restart (``_gateway_swap.rolling_restart``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import re

from ansible_collections.inferlab.distributed.plugins.module_utils import _gateway_swap as swap
from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_base, _ledger_core, _ledger_undo

KIND = 'gateway_config'


def change_argument_spec(required_in_every_state):
    """The options of the gateway_change doc fragment, ``content``, ``config_path`` and the ledger's, as
    gateway_fallback and gateway_models take them (each adds its own). ``required_in_every_state``: whether
    ``config_path``, ``ledger_dir`` and ``ledger_host`` are required options (gateway_models), or only checked in
    ``added`` and ``removed`` (gateway_fallback, whose ``checked`` needs none of them)."""
    return dict(
        kind=dict(type='str', choices=['litellm'], default='litellm'),
        content=dict(type='str', no_log=True),
        instances=dict(type='list', elements='dict'),
        front=dict(type='dict', default={}),
        admin_key_file=dict(type='path', no_log=False),
        ready_timeout_s=dict(type='float', default=90.0),
        drain_timeout_s=dict(type='float', default=30.0),
        procfs_root=dict(type='path', default='/proc'),
        config_path=dict(type='path', required=required_in_every_state),
        ledger_dir=dict(type='path', required=required_in_every_state),
        ledger_host=dict(type='str', required=required_in_every_state),
        run_id=dict(type='str'),
    )


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
    with _ledger_undo.change(ledger_dir, host, KIND, params, run_id=run_id, undo_on_error=False) as entry:
        pairs = [(params['config_path'], params['backup_path'])]
        if params.get('front_backup_path'):
            pairs.append((params['front']['upstream_file'], params['front_backup_path']))
        for source, backup in pairs:
            os.makedirs(os.path.dirname(backup), mode=0o700, exist_ok=True)
            with open(source, 'rb') as handle:
                _ledger_base.write_atomic(backup, handle.read(), mode=0o600)
        _ledger_base.write_atomic(params['config_path'], content)
    return entry.line


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


class ConfigChangeModule:
    """What the modules that change a gateway's config for a run share: ``added`` (checks, the ledger entry, the
    new config, the rolling restart), the idempotent second ``added``, and ``removed`` (the ledger's undo, then what
    the instances report). A subclass says what its change is:

    - ``noun`` (``'the fallback'``) and ``named()`` (the same with its particulars, for messages);
    - ``state_key`` and ``instance_state(instances, key, public_model)``: what each instance reports of the change
      (``{instance: ...}``, an instance that cannot answer as ``'unknown: ...'``), returned under that key;
    - ``originals(instances, key)``: ``(original_fallbacks, original_models, seen)``, read and checked before
      anything changes (``seen`` goes into a check mode result), and ``applied_fallbacks(original_fallbacks)``,
      what the instances must report once the new config runs;
    - ``in_place(state)`` and ``not_in_place(entry, state)``: whether an open entry's change runs, and the refusal
      when it does not;
    - ``finish(instances, key, entry, steps, result)``: the checks after the restart and the last message.
    """

    noun = 'the change'
    state_key = 'state'
    added_needs = ('content', 'instances', 'public_model', 'admin_key_file')

    def __init__(self, module):
        self.module = module
        self.params = module.params

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, **extra)

    def require(self, *names):
        missing = [n for n in names if self.params[n] in (None, '', [])]
        if missing:
            self.fail('state=%s needs %s' % (self.params['state'], ', '.join(missing)))

    def entries(self):
        """This config's gateway_config entries (their last lines), oldest first."""
        try:
            return config_entries(self.params['ledger_dir'], self.params['ledger_host'], self.params['config_path'])
        except _ledger_core.LedgerError as exc:
            self.fail(str(exc))

    def config_sha256(self, what):
        try:
            return _ledger_core.sha256_file(self.params['config_path'])
        except OSError as exc:
            self.fail('%s the gateway config %s: %s' % (what, self.params['config_path'], exc.strerror or exc))

    def diff(self, before, after):
        """``{'diff': ...}`` in diff mode, with every secret-looking value masked (masked_config); else ``{}``.
        ``before`` and ``after`` are callables giving the texts: nothing is read outside diff mode."""
        if not self.module._diff:
            return {}
        path = self.params['config_path']
        return {'diff': {'before': masked_config(before()), 'after': masked_config(after()), 'before_header': path,
                         'after_header': path}}

    def run(self):
        getattr(self, self.params['state'])()

    # --- added ---------------------------------------------------------------------------------------------------

    def added(self):
        self.require('config_path', 'ledger_dir', 'ledger_host', *self.added_needs)
        p = self.params
        try:
            instances, front, key = check_inputs(p['instances'], p['front'], p['admin_key_file'])
        except swap.GatewayError as exc:
            self.fail('Nothing was changed: %s' % exc)
        open_entries = [e for e in self.entries() if e['state'] != 'undone']
        if open_entries:
            return self.already_added(open_entries[-1], instances, key)
        original_fallbacks, original_models, seen = self.originals(instances, key)
        try:
            params = entry_params(p['ledger_dir'], p['config_path'], instances, front, p['admin_key_file'],
                                  p['public_model'], original_fallbacks, original_models, p['ready_timeout_s'],
                                  p['drain_timeout_s'], p['kind'])
        except OSError as exc:
            self.fail('Nothing was changed: cannot read the gateway config %s: %s'
                      % (p['config_path'], exc.strerror or exc))
        content = p['content'].encode('utf-8')
        if hashlib.sha256(content).hexdigest() == params['original_sha256']:
            self.fail('the new config is the original config: nothing to add')
        diff = self.diff(lambda: text_or_empty(p['config_path']), lambda: p['content'])
        if self.module.check_mode:
            self.module.exit_json(changed=True, original_sha256=params['original_sha256'],
                                  config_sha256=params['original_sha256'],
                                  message='would add %s and restart %d instances' % (self.named(), len(instances)),
                                  **dict(seen, **diff))
        try:
            entry = apply(p['ledger_dir'], p['ledger_host'], p['run_id'], params, content)
        except (_ledger_core.LedgerError, OSError, swap.GatewayError) as exc:
            self.fail('could not add %s to %s: %s' % (self.noun, p['config_path'], exc))
        result = dict(changed=True, entry_id=entry['id'], original_sha256=params['original_sha256'],
                      config_sha256=_ledger_core.sha256_file(p['config_path']), backup_path=params['backup_path'],
                      **diff)
        try:
            steps = swap.rolling_restart(instances, front, key, p['public_model'],
                                         self.applied_fallbacks(original_fallbacks),
                                         ready_timeout_s=p['ready_timeout_s'], drain_timeout_s=p['drain_timeout_s'],
                                         procfs_root=p['procfs_root'])
        except swap.GatewayError as exc:
            self.fail('the config with %s is written (ledger entry %s), but applying it failed: %s. %s'
                      % (self.noun, entry['id'], exc, RESTORE_HINT), **result)
        result.update(steps=steps, seconds=round(sum(s['seconds'] for s in steps), 3))
        self.finish(instances, key, entry, steps, result)
        self.module.exit_json(**result)

    def already_added(self, entry, instances, key):
        state = self.instance_state(instances, key, self.params['public_model'])
        if entry['state'] in ('pending', 'applied') and self.in_place(state):
            self.module.exit_json(changed=False, entry_id=entry['id'],
                                  original_sha256=entry['params']['original_sha256'],
                                  config_sha256=self.config_sha256('cannot read'),
                                  backup_path=entry['params']['backup_path'], message='%s %s already added (ledger '
                                  'entry %s)' % (self.noun, self.verb_is, entry['id']), **{self.state_key: state})
        self.fail(self.not_in_place(entry, state))

    # --- removed -------------------------------------------------------------------------------------------------

    def removed(self):
        self.require('config_path', 'ledger_dir', 'ledger_host')
        p = self.params
        entries = self.entries()
        if not entries:
            self.fail('the ledger of %s in %s has no gateway_config entry for %s: nothing to remove'
                      % (p['ledger_host'], p['ledger_dir'], p['config_path']))
        before = text_or_empty(p['config_path']) if self.module._diff else ''
        try:
            undone, message = undo_open(p['ledger_dir'], p['ledger_host'], p['config_path'], p['procfs_root'],
                                        self.module.check_mode)
        except _ledger_core.LedgerError as exc:
            self.fail('could not undo the gateway config change: %s' % exc)
        last = entries[-1]['params']
        current = self.config_sha256('after the undo, cannot read')
        try:
            state = self.instance_state(last['instances'], swap.read_key(last['admin_key_file']),
                                        last['public_model'])
        except swap.GatewayError as exc:
            state = {'unknown': str(exc)}
        # in check mode nothing was put back: what the undo would write is the backup
        after = last.get('backup_path') if self.module.check_mode else p['config_path']
        diff = self.diff(lambda: before, lambda: text_or_empty(after)) if undone else {}
        self.module.exit_json(changed=bool(undone), undone=undone, original_sha256=last['original_sha256'],
                              config_sha256=current, byte_identical=current == last['original_sha256'],
                              message=message, **dict(diff, **{self.state_key: state}))


RESTORE_HINT = 'The restore (playbooks/restore.yml) puts the original back.'
# A YAML key whose value may be a secret (a provider's api_key, the master_key, a token, a password). A value that
# names where the secret is (os.environ/NAME) is shown.
SECRET_KEY_RE = re.compile(r'^(?P<lead>\s*(?:-\s+)?[\w.-]*(?:key|token|secret|passw)[\w.-]*\s*:\s*)(?P<value>\S.*)$',
                           re.IGNORECASE)
MASK = '<redacted>'
# The password of a URL's credentials (a database_url, a redis URL): scheme://user:PASSWORD@host.
URL_PASSWORD_RE = re.compile(r'(?P<lead>[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]+@', re.IGNORECASE)


def masked_config(text):
    """``text`` (a gateway config) with the value of every secret-looking key replaced by ``<redacted>``, for a diff
    that a log or a job event may keep."""
    lines = []
    for line in text.splitlines():
        match = SECRET_KEY_RE.match(line)
        if match and not match.group('value').strip('\'"').startswith('os.environ/'):
            line = match.group('lead') + MASK
        lines.append(URL_PASSWORD_RE.sub(lambda m: m.group('lead') + MASK + '@', line))
    return '\n'.join(lines) + ('\n' if text.endswith('\n') else '')


def text_or_empty(path):
    """A file's text for a diff, or '' when it cannot be read (a diff never fails a change or an undo)."""
    try:
        with open(path, 'rb') as handle:
            return handle.read().decode('utf-8', 'replace')
    except (OSError, TypeError):
        return ''


def instances_report(instances, read):
    """``{instance: read(instance)}``, an instance that cannot answer as ``'unknown: <why>'``."""
    found = {}
    for instance in instances:
        try:
            found[instance['name']] = read(instance)
        except swap.GatewayError as exc:
            found[instance['name']] = 'unknown: %s' % exc
    return found
