#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gateway_roles
short_description: Add model roles to a gateway's config for the length of a run, and take them away again
version_added: 0.1.0
description:
  - V(added) runs on the gateway host. It records a C(gateway_config) entry in the host's change ledger as
    V(pending) BEFORE any change, with the original config's sha256, its backup, and the roles and general fallbacks
    every instance serves now. Then it writes the backups (mode C(0600)), writes O(content) in place of the config
    (same mode) and applies it by a rolling restart with an explicit drain behind the front
    (plugins/module_utils/_gateway_swap.py), so clients lose no request. Every instance must then list the roles it
    listed before plus O(roles) (C(GET /v1/models)), and still carry the public role's fallbacks.
  - The quarantine topology (playbooks/topology.yml) adds its solo replicas this way, one role per solo host.
  - V(removed) runs on the gateway host and is the undo of the config's open C(gateway_config) entries, the code a
    standalone restore runs too. The original bytes come back from the backup; every instance that still lists
    another role, or other fallbacks, is restarted the same way; the config's sha256 is compared with the
    original's (RV(byte_identical)).
  - The only gateway kind today is V(litellm) (a LiteLLM proxy configured from a file).
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: V(added) and V(removed) read the config, the ledger and the instances' roles, and change nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  state:
    description:
      - V(added) adds the roles; V(removed) undoes the open C(gateway_config) entries of O(config_path).
    type: str
    required: true
    choices: [added, removed]
  kind:
    description:
      - The gateway kind.
    type: str
    choices: [litellm]
    default: litellm
  config_path:
    description:
      - The gateway's config file on the gateway host.
    type: path
    required: true
  content:
    description:
      - The config with the roles (filter C(inferlab.distributed.gateway_config_with_roles)). Required for
        V(added). It is never logged, since a config may carry backend keys.
    type: str
  roles:
    description:
      - The roles O(content) adds. Required for V(added); none of them may be served already.
    type: list
    elements: str
    default: []
  public_model:
    description:
      - The role clients use; each restarted instance answers a warm-up request for it. Required for V(added).
    type: str
  instances:
    description:
      - The gateway's instances, as for M(inferlab.distributed.gateway_fallback) (inventory
        C(inferlab_gateway_instances)). Required for V(added).
    type: list
    elements: dict
  front:
    description:
      - The front, C({kind, upstream_file, pidfile}) (nginx), or C({}) for a single instance without one, whose
        restart is a brief outage.
    type: dict
    default: {}
  admin_key_file:
    description:
      - The key the gateway host uses for the warm-up requests, C(GET /v1/models) and C(GET /fallback/<role>), on
        the first line of this file. Required for V(added); recorded (the path only) in the ledger entry.
    type: path
  ready_timeout_s:
    description:
      - Seconds a restarted instance gets to answer C(/health/readiness).
    type: float
    default: 90
  drain_timeout_s:
    description:
      - Seconds the front's old workers get to finish their requests after a reload.
    type: float
    default: 30
  ledger_dir:
    description:
      - The gateway host's ledger directory, C(<inferlab_state_dir>/ledger).
    type: path
    required: true
  ledger_host:
    description:
      - Whose ledger (the gateway host's inventory name).
    type: str
    required: true
  run_id:
    description:
      - The run, stamped into the ledger lines; V(added) fails when another run holds the ledger's lock.
    type: str
  procfs_root:
    description:
      - Where procfs is mounted (the front's workers and the instances' pids are read below it).
    type: path
    default: /proc
notes:
  - The backups live in C(<ledger_dir>/../backup/), mode C(0600), and stay after the undo, as evidence.
seealso:
  - module: inferlab.distributed.gateway_fallback
  - module: inferlab.distributed.change_ledger
"""

EXAMPLES = r"""
- name: Add a solo role for lab-b on the gateway host
  inferlab.distributed.gateway_roles:
    state: added
    config_path: /etc/litellm/config.yaml
    content: >-
      {{ config_text | inferlab.distributed.gateway_config_with_roles(
           [{'name': 'solo-lab-b', 'model': 'lab-qwen-small', 'api_base': 'http://169.254.77.6:30100/v1'}]) }}
    roles: [solo-lab-b]
    public_model: small
    instances: "{{ inferlab_gateway_instances }}"
    front: "{{ inferlab_gateway_front }}"
    admin_key_file: /etc/litellm/master.key
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ inferlab_run_dir | basename }}"

- name: Take them away (the original bytes back)
  inferlab.distributed.gateway_roles:
    state: removed
    config_path: /etc/litellm/config.yaml
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
"""

RETURN = r"""
entry_id:
  description: The C(gateway_config) ledger entry of the added roles.
  returned: state is added
  type: str
original_sha256:
  description: sha256 of the original config.
  returned: state is added or removed
  type: str
config_sha256:
  description: sha256 of the config file now.
  returned: state is added or removed
  type: str
backup_path:
  description: The backup of the original config.
  returned: state is added
  type: str
steps:
  description: The rolling restart, one dict per instance (C(instance), C(drained), C(ready_s), C(warmup_status),
    C(fallbacks), C(seconds)).
  returned: state is added and changed
  type: list
seconds:
  description: How long the rolling restart took.
  returned: state is added and changed
  type: float
models:
  description: "C({instance: [role, ...]}), the roles each instance lists now."
  returned: always
  type: dict
undone:
  description: The ledger entries undone.
  returned: state is removed
  type: list
byte_identical:
  description: Whether the config's sha256 equals the original's.
  returned: state is removed
  type: bool
message:
  description: What was done.
  returned: always
  type: str
"""

import hashlib

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferlab.distributed.plugins.module_utils import _gateway_change as change
from ansible_collections.inferlab.distributed.plugins.module_utils import _gateway_swap as swap
from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core


class GatewayRoles:
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
        try:
            return change.config_entries(self.params['ledger_dir'], self.params['ledger_host'],
                                         self.params['config_path'])
        except _ledger_core.LedgerError as exc:
            self.fail(str(exc))

    def served(self, instances, key):
        """``{instance: [role, ...]}`` and ``{instance: [fallback, ...]}`` of the public role, as each lists now."""
        models, fallbacks = {}, {}
        for instance in instances:
            try:
                models[instance['name']] = swap.listed_models(instance['url'], key)
                fallbacks[instance['name']] = swap.fallback_models(instance['url'], self.params['public_model'], key)
            except swap.GatewayError as exc:
                self.fail('Nothing was changed: instance %s does not answer as expected: %s' % (instance['name'], exc))
        return models, fallbacks

    def listing(self, instances, key):
        found = {}
        for instance in instances:
            try:
                found[instance['name']] = swap.listed_models(instance['url'], key)
            except swap.GatewayError as exc:
                found[instance['name']] = 'unknown: %s' % exc
        return found

    # --- added ---------------------------------------------------------------------------------------------------

    def added(self):
        self.require('content', 'roles', 'public_model', 'instances', 'admin_key_file')
        p = self.params
        try:
            instances, front, key = change.check_inputs(p['instances'], p['front'], p['admin_key_file'])
        except swap.GatewayError as exc:
            self.fail('Nothing was changed: %s' % exc)
        open_entries = [e for e in self.entries() if e['state'] != 'undone']
        if open_entries:
            return self.already_added(open_entries[-1], instances, key)
        models, fallbacks = self.served(instances, key)
        if len({tuple(sorted(m)) for m in models.values()}) > 1 or len({tuple(f) for f in fallbacks.values()}) > 1:
            self.fail('Nothing was changed: the instances do not serve the same config (roles %s, fallbacks of %s %s): '
                      'a rolling restart would mix them' % (models, p['public_model'], fallbacks))
        original_models = next(iter(models.values()))
        original_fallbacks = next(iter(fallbacks.values()))
        already = [r for r in p['roles'] if r in original_models]
        if already:
            self.fail('Nothing was changed: the gateway already serves %s (its roles: %s); those roles belong to '
                      'the operator' % (', '.join(already), ', '.join(original_models)))
        try:
            params = change.entry_params(p['ledger_dir'], p['config_path'], instances, front, p['admin_key_file'],
                                         p['public_model'], original_fallbacks, original_models,
                                         p['ready_timeout_s'], p['drain_timeout_s'], p['kind'])
        except OSError as exc:
            self.fail('Nothing was changed: cannot read the gateway config %s: %s'
                      % (p['config_path'], exc.strerror or exc))
        content = p['content'].encode('utf-8')
        if hashlib.sha256(content).hexdigest() == params['original_sha256']:
            self.fail('the new config is the original config: nothing to add')
        if self.module.check_mode:
            self.module.exit_json(changed=True, original_sha256=params['original_sha256'],
                                  config_sha256=params['original_sha256'], models=models,
                                  message='would add the roles %s and restart %d instances'
                                  % (', '.join(p['roles']), len(instances)))
        try:
            entry = change.apply(p['ledger_dir'], p['ledger_host'], p['run_id'], params, content)
        except (_ledger_core.LedgerError, OSError, swap.GatewayError) as exc:
            self.fail('could not add the roles to %s: %s' % (p['config_path'], exc))
        result = dict(changed=True, entry_id=entry['id'], original_sha256=params['original_sha256'],
                      config_sha256=_ledger_core.sha256_file(p['config_path']), backup_path=params['backup_path'])
        restore_hint = 'The restore (playbooks/restore.yml) puts the original back.'
        try:
            steps = swap.rolling_restart(instances, front, key, p['public_model'], original_fallbacks,
                                         ready_timeout_s=p['ready_timeout_s'], drain_timeout_s=p['drain_timeout_s'],
                                         procfs_root=p['procfs_root'])
        except swap.GatewayError as exc:
            self.fail('the config with the roles is written (ledger entry %s), but applying it failed: %s. %s'
                      % (entry['id'], exc, restore_hint), **result)
        now = self.listing(instances, key)
        expected = sorted(original_models + p['roles'])
        wrong = {name: listed for name, listed in now.items()
                 if not isinstance(listed, list) or sorted(listed) != expected}
        result.update(steps=steps, seconds=round(sum(s['seconds'] for s in steps), 3), models=now)
        if wrong:
            self.fail('the config with the roles is applied (ledger entry %s), but instances list %s, expected %s. %s'
                      % (entry['id'], wrong, ', '.join(expected), restore_hint), **result)
        result['message'] = ('added the roles %s and restarted %d instances one at a time'
                             % (', '.join(p['roles']), len(steps)))
        self.module.exit_json(**result)

    def already_added(self, entry, instances, key):
        p = self.params
        now = self.listing(instances, key)
        if entry['state'] in ('pending', 'applied') and all(
                isinstance(listed, list) and set(p['roles']) <= set(listed) for listed in now.values()):
            self.module.exit_json(changed=False, entry_id=entry['id'],
                                  original_sha256=entry['params']['original_sha256'],
                                  config_sha256=_ledger_core.sha256_file(p['config_path']),
                                  backup_path=entry['params']['backup_path'], models=now,
                                  message='the roles are already added (ledger entry %s)' % entry['id'])
        self.fail('ledger entry %s (run %s) holds a %s change of %s, but the instances list %s, not the roles %s: '
                  'run playbooks/restore.yml first' % (entry['id'], entry.get('run_id'), entry['state'],
                                                       p['config_path'], now, ', '.join(p['roles'])))

    # --- removed -------------------------------------------------------------------------------------------------

    def removed(self):
        p = self.params
        entries = self.entries()
        if not entries:
            self.fail('the ledger of %s in %s has no gateway_config entry for %s: nothing to remove'
                      % (p['ledger_host'], p['ledger_dir'], p['config_path']))
        try:
            undone, message = change.undo_open(p['ledger_dir'], p['ledger_host'], p['config_path'],
                                               p['procfs_root'], self.module.check_mode)
        except _ledger_core.LedgerError as exc:
            self.fail('could not undo the gateway config change: %s' % exc)
        last = entries[-1]['params']
        try:
            current = _ledger_core.sha256_file(p['config_path'])
        except OSError as exc:
            self.fail('after the undo, cannot read the gateway config %s: %s' % (p['config_path'], exc.strerror or exc))
        try:
            models = self.listing(last['instances'], swap.read_key(last['admin_key_file']))
        except swap.GatewayError as exc:
            models = {'unknown': str(exc)}
        self.module.exit_json(changed=bool(undone), undone=undone, original_sha256=last['original_sha256'],
                              config_sha256=current, byte_identical=current == last['original_sha256'],
                              models=models, message=message)

    def run(self):
        getattr(self, self.params['state'])()


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', required=True, choices=['added', 'removed']),
            kind=dict(type='str', choices=['litellm'], default='litellm'),
            config_path=dict(type='path', required=True),
            content=dict(type='str', no_log=True),
            roles=dict(type='list', elements='str', default=[]),
            public_model=dict(type='str'),
            instances=dict(type='list', elements='dict'),
            front=dict(type='dict', default={}),
            admin_key_file=dict(type='path', no_log=False),
            ready_timeout_s=dict(type='float', default=90.0),
            drain_timeout_s=dict(type='float', default=30.0),
            ledger_dir=dict(type='path', required=True),
            ledger_host=dict(type='str', required=True),
            run_id=dict(type='str'),
            procfs_root=dict(type='path', default='/proc'),
        ),
        supports_check_mode=True,
    )


def main():
    GatewayRoles(build_module()).run()


if __name__ == '__main__':
    main()
