#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gateway_fallback
short_description: Check a gateway's public route, add a temporary general fallback to its config, remove it
version_added: 0.1.0
description:
  - V(checked) reads only, from where the clients are. The public route must answer its readiness check, accept
    the clients' key, list the public role and the fallback target, answer a real request for the target from the
    target's backend, and answer a real request for the public role from one of the public role's own backends.
    Each failure has its own message, naming the variable to set.
  - V(added) runs on the gateway host. It records a C(gateway_config) entry in the host's change ledger as
    V(pending) BEFORE any change, with the original config's sha256 and backup. Then it writes the backups (mode
    C(0600)), writes O(content) in place of the config (same mode) and applies it by a rolling restart with an
    explicit drain behind the front (plugins/module_utils/_gateway_swap.py), so clients lose no request. Every
    instance must then report the fallback (C(GET /fallback/<role>)).
  - V(removed) runs on the gateway host and is the undo of those ledger entries, the code a standalone restore runs
    too. The original bytes come back from the backup, the instances that carry the fallback are restarted the
    same way, and the config's sha256 is compared with the original's (RV(byte_identical)).
  - The only gateway kind today is V(litellm) (a LiteLLM proxy configured from a file).
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferlab.distributed.gateway_change
  - inferlab.distributed.ledger
attributes:
  check_mode:
    support: full
    details: V(checked) sends its requests (it reads only). V(added) and V(removed) read the config, the ledger and
      the instances' fallbacks, and change nothing.
  platform:
    support: full
    platforms: posix
options:
  state:
    description:
      - V(checked) checks the public route (reads only); V(added) adds the fallback; V(removed) undoes the open
        C(gateway_config) entries of O(config_path).
    type: str
    required: true
    choices: [checked, added, removed]
  public_url:
    description:
      - The public route's base URL (the front, for example nginx). Required for V(checked).
    type: str
  public_model:
    description:
      - The model role clients use. Required for V(checked) and V(added).
    type: str
  target_model:
    description:
      - The role the public one falls back to. Required for V(checked) and V(added).
    type: str
  api_key_file:
    description:
      - The clients' key, on the first line of this file (on the host that runs the module). Required for
        V(checked). The key is never returned or logged.
    type: path
  public_backends:
    description:
      - The public role's backends, as the config's C(api_base) values. For V(checked) a reply for the public role
        must name one of them in C(x-litellm-model-api-base).
    type: list
    elements: str
    default: []
  target_backends:
    description:
      - The fallback target's backends, as for O(public_backends).
    type: list
    elements: str
    default: []
  request_timeout_s:
    description:
      - Seconds each request of V(checked) may take.
    type: float
    default: 30
  config_path:
    description:
      - The gateway's config file on the gateway host. Required for V(added) and V(removed).
    type: path
  content:
    description:
      - The config with the fallback (filter C(inferlab.distributed.gateway_config_with_fallback)). Required for
        V(added). It is never logged, since a config may carry backend keys.
    type: str
  ledger_dir:
    description:
      - The gateway host's ledger directory, C(<inferlab_state_dir>/ledger). Required for V(added) and V(removed).
    type: path
    required: false
  ledger_host:
    description:
      - Whose ledger (the gateway host's inventory name). Required for V(added) and V(removed).
    type: str
    required: false
seealso:
  - module: inferlab.distributed.change_ledger
  - module: inferlab.distributed.paused_service
"""

EXAMPLES = r"""
- name: Check the public route from the controller
  inferlab.distributed.gateway_fallback:
    state: checked
    public_url: http://169.254.77.1:4000
    public_model: small
    target_model: large
    api_key_file: /etc/inferlab/client.key
    public_backends: [http://169.254.77.1:8100/v1]
    target_backends: [http://169.254.77.1:8200/v1]

- name: Add the fallback on the gateway host
  inferlab.distributed.gateway_fallback:
    state: added
    config_path: /etc/litellm/config.yaml
    content: "{{ config_text | inferlab.distributed.gateway_config_with_fallback('small', 'large') }}"
    instances: "{{ inferlab_gateway_instances }}"
    front: "{{ inferlab_gateway_front }}"
    admin_key_file: /etc/litellm/master.key
    public_model: small
    target_model: large
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ inferlab_run_dir | basename }}"

- name: Remove it (the original bytes back)
  inferlab.distributed.gateway_fallback:
    state: removed
    config_path: /etc/litellm/config.yaml
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
"""

RETURN = r"""
route:
  description: What V(checked) found on the public route.
  returned: state is checked
  type: dict
  contains:
    ready_s:
      description: Seconds the readiness check took.
      type: float
      returned: always
    models:
      description: The roles the gateway lists for the clients' key.
      type: list
      returned: always
    target_reply:
      description: C({status, api_base, model_group, elapsed_s}) of the real request for the target role.
      type: dict
      returned: always
    public_reply:
      description: C({status, api_base, model_group, elapsed_s}) of the real request for the public role.
      type: dict
      returned: always
entry_id:
  description: The C(gateway_config) ledger entry of the added fallback.
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
fallbacks:
  description: "C({instance: [role, ...]}), the general fallbacks of the public role each instance reports now."
  returned: state is added or removed
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


def reply_summary(answer):
    headers = answer['headers']
    return {'status': answer['status'], 'api_base': headers.get('x-litellm-model-api-base'),
            'model_group': headers.get('x-litellm-model-group'), 'elapsed_s': answer['elapsed_s']}


class GatewayFallback(change.ConfigChangeModule):
    noun = 'the fallback'
    verb_is = 'is'
    state_key = 'fallbacks'
    added_needs = ('config_path', 'content', 'instances', 'public_model', 'target_model', 'admin_key_file',
                   'ledger_dir', 'ledger_host')

    # --- checked -------------------------------------------------------------------------------------------------

    def checked(self):
        self.require('public_url', 'public_model', 'target_model', 'api_key_file')
        p = self.params
        url, public, target, timeout = p['public_url'].rstrip('/'), p['public_model'], p['target_model'], \
            p['request_timeout_s']
        try:
            ready_s = swap.wait_ready(url, timeout_s=min(timeout, 10.0))
        except swap.GatewayError as exc:
            self.fail('Nothing was changed: the public route %s does not answer (%s). Expected its '
                      '/health/readiness to answer 200: is the gateway running, and is inferlab_public_url right?'
                      % (url, exc))
        try:
            key = swap.read_key(p['api_key_file'])
            answer = swap.http_request('GET', url + '/v1/models', key=key, timeout=timeout)
        except swap.GatewayError as exc:
            self.fail('Nothing was changed: %s (inferlab_public_api_key_file)' % exc)
        if answer['status'] != 200:
            said = swap.short_body(answer['body'], key)
            self.fail('Nothing was changed: the gateway refused the client key from %s: GET %s/v1/models answered '
                      'HTTP %d: %s. Expected a key the gateway accepts; set inferlab_public_api_key_file to the '
                      "clients' key file." % (p['api_key_file'], url, answer['status'], said))
        try:
            models = swap.model_ids(answer, url + '/v1/models', key)
        except swap.GatewayError as exc:
            self.fail('Nothing was changed: %s' % exc)
        for role, variable in ((public, 'inferlab_public_model'), (target, 'inferlab_fallback_target_model')):
            if role not in models:
                self.fail('Nothing was changed: the gateway at %s lists the roles %s for this key, not %r; set %s.'
                          % (url, ', '.join(models) or 'none', role, variable))
        route = {'ready_s': ready_s, 'models': models}
        for name, role, backends, what in (('target_reply', target, p['target_backends'], 'fallback target'),
                                           ('public_reply', public, p['public_backends'], 'public role')):
            try:
                answer = swap.chat_once(url, role, key, timeout=timeout)
            except swap.GatewayError as exc:
                self.fail('Nothing was changed: a real request for the %s %r through the gateway failed: %s'
                          % (what, role, exc))
            reply = reply_summary(answer)
            route[name] = reply
            if answer['status'] != 200:
                self.fail('Nothing was changed: a real request for the %s %r through the gateway at %s answered '
                          'HTTP %d: %s' % (what, role, url, answer['status'], swap.short_body(answer['body'], key)),
                          route=route)
            if backends and reply['api_base'] not in backends:
                self.fail('Nothing was changed: the request for the %s %r was served by %s, expected one of its own '
                          'backends %s (x-litellm-model-api-base); the route must be healthy before an experiment.'
                          % (what, role, reply['api_base'], ', '.join(backends)), route=route)
        self.module.exit_json(changed=False, route=route, message='the public route %s is ready, accepts the '
                              'key, and serves %s and %s from their own backends' % (url, public, target))

    # --- the change (change.ConfigChangeModule) ---------------------------------------------------------------------

    def named(self):
        return self.noun

    def instance_state(self, instances, key, public_model):
        return change.instances_report(instances, lambda i: swap.fallback_models(i['url'], public_model, key))

    def originals(self, instances, key):
        return [], None, {'fallbacks': {}}

    def applied_fallbacks(self, original_fallbacks):
        return [self.params['target_model']]

    def in_place(self, state):
        return all(f == [self.params['target_model']] for f in state.values())

    def not_in_place(self, entry, state):
        return ('ledger entry %s (run %s) holds a %s change of %s, but the instances report %s, not the fallback: '
                'run playbooks/restore.yml first' % (entry['id'], entry.get('run_id'), entry['state'],
                                                     self.params['config_path'], state))

    def finish(self, instances, key, entry, steps, result):
        result.update(fallbacks={s['instance']: s['fallbacks'] for s in steps},
                      message='added the fallback %s -> %s and restarted %d instances one at a time'
                      % (self.params['public_model'], self.params['target_model'], len(steps)))


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            change.change_argument_spec(required_in_every_state=False),
            state=dict(type='str', required=True, choices=['checked', 'added', 'removed']),
            public_url=dict(type='str'),
            public_model=dict(type='str'),
            target_model=dict(type='str'),
            api_key_file=dict(type='path', no_log=False),
            public_backends=dict(type='list', elements='str', default=[]),
            target_backends=dict(type='list', elements='str', default=[]),
            request_timeout_s=dict(type='float', default=30.0),
        ),
        supports_check_mode=True,
    )


def main():
    GatewayFallback(build_module()).run()


if __name__ == '__main__':
    main()
