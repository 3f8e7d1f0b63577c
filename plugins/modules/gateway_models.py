#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gateway_models
short_description: Add models to a gateway's config for the length of a run, and take them away again
version_added: 0.1.0
description:
  - V(added) runs on the gateway host. It records a C(gateway_config) entry in the host's change ledger as
    V(pending) BEFORE any change, with the original config's sha256, its backup, and the models and general
    fallbacks every instance serves now. Then it writes the backups (mode C(0600)), writes O(content) in place of the
    config (same mode) and applies it by a rolling restart with an explicit drain behind the front
    (plugins/module_utils/_gateway_swap.py), so clients lose no request. Every instance must then list the models it
    listed before plus O(models) (C(GET /v1/models)), and still carry the public role's fallbacks.
  - The quarantine topology (playbooks/topology.yml) adds its solo replicas this way, one model per solo host.
  - V(removed) runs on the gateway host and is the undo of the config's open C(gateway_config) entries, the code a
    standalone restore runs too. The original bytes come back from the backup; every instance that still lists
    another model, or other fallbacks, is restarted the same way; the config's sha256 is compared with the
    original's (RV(byte_identical)).
  - The only gateway kind today is V(litellm) (a LiteLLM proxy configured from a file).
  - A gateway model is what clients name in a request (LiteLLM's C(model_name)), which this collection's docs call a
    role (the public role, a solo role); it has nothing to do with Ansible roles.
  - This module was called C(inferlab.distributed.gateway_roles) before 0.3.0; that name still works (it redirects
    here) and is deprecated, to be removed in 1.0.0.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferlab.distributed.ledger
  - inferlab.distributed.gateway_change
attributes:
  check_mode:
    support: full
    details: V(added) and V(removed) read the config, the ledger and the instances' models, and change nothing.
  platform:
    support: full
    platforms: posix
options:
  state:
    description:
      - V(added) adds the models; V(removed) undoes the open C(gateway_config) entries of O(config_path).
    type: str
    required: true
    choices: [added, removed]
  config_path:
    description:
      - The gateway's config file on the gateway host.
    type: path
    required: true
  content:
    description:
      - The config with the models (filter C(inferlab.distributed.gateway_config_with_roles)). Required for
        V(added). It is never logged, since a config may carry backend keys.
    type: str
  models:
    description:
      - The models O(content) adds, each a C(model_name). Required for V(added); none of them may be served
        already.
    aliases: [roles]
    type: list
    elements: str
    default: []
  public_model:
    description:
      - The role clients use; each restarted instance answers a warm-up request for it. Required for V(added).
    type: str
seealso:
  - module: inferlab.distributed.gateway_fallback
  - module: inferlab.distributed.change_ledger
"""

EXAMPLES = r"""
- name: Add a solo role for lab-b on the gateway host
  inferlab.distributed.gateway_models:
    state: added
    config_path: /etc/litellm/config.yaml
    content: >-
      {{ config_text | inferlab.distributed.gateway_config_with_roles(
           [{'name': 'solo-lab-b', 'model': 'lab-qwen-small', 'api_base': 'http://169.254.77.6:30100/v1'}]) }}
    models: [solo-lab-b]
    public_model: small
    instances: "{{ inferlab_gateway_instances }}"
    front: "{{ inferlab_gateway_front }}"
    admin_key_file: /etc/litellm/master.key
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ inferlab_run_dir | basename }}"

- name: Take them away (the original bytes back)
  inferlab.distributed.gateway_models:
    state: removed
    config_path: /etc/litellm/config.yaml
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
"""

RETURN = r"""
entry_id:
  description: The C(gateway_config) ledger entry of the added models.
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
  description: "C({instance: [model, ...]}), the models each instance lists now."
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

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferlab.distributed.plugins.module_utils import _gateway_change as change
from ansible_collections.inferlab.distributed.plugins.module_utils import _gateway_swap as swap


class GatewayModels(change.ConfigChangeModule):
    noun = 'the roles'
    verb_is = 'are'
    state_key = 'models'
    added_needs = ('content', 'models', 'public_model', 'instances', 'admin_key_file')

    def named(self):
        return 'the roles %s' % ', '.join(self.params['models'])

    def instance_state(self, instances, key, public_model):
        return change.instances_report(instances, lambda i: swap.listed_models(i['url'], key))

    def originals(self, instances, key):
        """The models and the public role's fallbacks the instances serve now, the same on every instance, none of
        the models to add among them."""
        p = self.params
        models, fallbacks = {}, {}
        for instance in instances:
            try:
                models[instance['name']] = swap.listed_models(instance['url'], key)
                fallbacks[instance['name']] = swap.fallback_models(instance['url'], p['public_model'], key)
            except swap.GatewayError as exc:
                self.fail('Nothing was changed: instance %s does not answer as expected: %s' % (instance['name'], exc))
        if len({tuple(sorted(m)) for m in models.values()}) > 1 or len({tuple(f) for f in fallbacks.values()}) > 1:
            self.fail('Nothing was changed: the instances do not serve the same config (roles %s, fallbacks of %s %s): '
                      'a rolling restart would mix them' % (models, p['public_model'], fallbacks))
        original_models = next(iter(models.values()))
        already = [m for m in p['models'] if m in original_models]
        if already:
            self.fail('Nothing was changed: the gateway already serves %s (its roles: %s); those roles belong to '
                      'the operator' % (', '.join(already), ', '.join(original_models)))
        self.original_models = original_models
        return next(iter(fallbacks.values())), original_models, {'models': models}

    def applied_fallbacks(self, original_fallbacks):
        return original_fallbacks

    def in_place(self, state):
        return all(isinstance(listed, list) and set(self.params['models']) <= set(listed) for listed in state.values())

    def not_in_place(self, entry, state):
        p = self.params
        return ('ledger entry %s (run %s) holds a %s change of %s, but the instances list %s, not the roles %s: '
                'run playbooks/restore.yml first' % (entry['id'], entry.get('run_id'), entry['state'],
                                                     p['config_path'], state, ', '.join(p['models'])))

    def finish(self, instances, key, entry, steps, result):
        now = self.instance_state(instances, key, self.params['public_model'])
        expected = sorted(self.original_models + self.params['models'])
        wrong = {name: listed for name, listed in now.items()
                 if not isinstance(listed, list) or sorted(listed) != expected}
        result['models'] = now
        if wrong:
            self.fail('the config with the roles is applied (ledger entry %s), but instances list %s, expected %s. %s'
                      % (entry['id'], wrong, ', '.join(expected), change.RESTORE_HINT), **result)
        result['message'] = ('added the roles %s and restarted %d instances one at a time'
                             % (', '.join(self.params['models']), len(steps)))


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            change.change_argument_spec(required_in_every_state=True),
            state=dict(type='str', required=True, choices=['added', 'removed']),
            models=dict(type='list', elements='str', default=[], aliases=['roles']),
            public_model=dict(type='str'),
        ),
        supports_check_mode=True,
    )


def main():
    GatewayModels(build_module()).run()


if __name__ == '__main__':
    main()
