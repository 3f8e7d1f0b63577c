# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A LiteLLM proxy config file: its model roles and fallbacks, and the same config with one general fallback added.

The gateway-specific half of the fallback_route role that runs on the controller (the other half, the instances'
HTTP API and their rolling restart, is plugins/module_utils/_gateway_swap.py). LiteLLM reads three fallback kinds
from ``litellm_settings`` or ``router_settings``: ``context_window_fallbacks``, ``content_policy_fallbacks`` and
``fallbacks``, the general one that also covers a backend that is down. Each is a list of one-key
mappings ``{role: [target, ...]}``.

The config with the fallback is written for the length of a run only; the original bytes are put back from a
backup. So this module may re-serialise the YAML (comments are not kept in the temporary file) but must not change
any setting besides the one it adds, which ``with_fallback`` checks by parsing its own output.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import yaml

FALLBACK_KINDS = ('fallbacks', 'context_window_fallbacks', 'content_policy_fallbacks')
SETTINGS_SECTIONS = ('litellm_settings', 'router_settings')


class LiteLLMConfigError(Exception):
    """The config cannot be read, or the fallback cannot be added; the message says why."""


def parse_config(text):
    """The config as a mapping; LiteLLMConfigError when it is not YAML, not a mapping, or has no model list."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise LiteLLMConfigError('not valid YAML: %s' % str(exc).replace('\n', ' ')) from None
    if not isinstance(data, dict):
        raise LiteLLMConfigError('expected a mapping at the top level, found %s' % type(data).__name__)
    models = data.get('model_list')
    if not isinstance(models, list) or not models:
        raise LiteLLMConfigError('expected a non-empty model_list, found %r' % (models,))
    for index, entry in enumerate(models):
        if not isinstance(entry, dict) or not isinstance(entry.get('model_name'), str):
            raise LiteLLMConfigError('model_list[%d] has no model_name: %r' % (index, entry))
    for section in SETTINGS_SECTIONS:
        if data.get(section) is not None and not isinstance(data[section], dict):
            raise LiteLLMConfigError('%s must be a mapping, found %r' % (section, data[section]))
    return data


def _fallback_map(data, kind):
    """``{role: [targets]}`` of one fallback kind, from both settings sections."""
    found = {}
    for section in SETTINGS_SECTIONS:
        entries = (data.get(section) or {}).get(kind)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise LiteLLMConfigError('%s.%s must be a list of {role: [targets]}, found %r' % (section, kind, entries))
        for entry in entries:
            if not isinstance(entry, dict):
                raise LiteLLMConfigError('%s.%s has an entry that is not a mapping: %r' % (section, kind, entry))
            for role, targets in entry.items():
                targets = targets if isinstance(targets, list) else [targets]
                found.setdefault(str(role), []).extend(str(t) for t in targets)
    return found


def config_roles(text):
    """What the config offers: ``{models: [role, ...], backends: {role: [api_base, ...]}, fallbacks: {...},
    context_window_fallbacks: {...}, content_policy_fallbacks: {...}}``, roles in file order, each once.

    ``backends`` are the deployments' ``litellm_params.api_base`` values: what the gateway's
    ``x-litellm-model-api-base`` response header names, so a reply tells which role's backend served it."""
    data = parse_config(text)
    models, backends = [], {}
    for entry in data['model_list']:
        if entry['model_name'] not in models:
            models.append(entry['model_name'])
        params = entry.get('litellm_params')
        api_base = params.get('api_base') if isinstance(params, dict) else None
        bases = backends.setdefault(entry['model_name'], [])
        if isinstance(api_base, str) and api_base not in bases:
            bases.append(api_base)
    summary = {'models': models, 'backends': backends}
    for kind in FALLBACK_KINDS:
        summary[kind] = _fallback_map(data, kind)
    return summary


def with_fallback(text, public_model, target_model):
    """The config with ``litellm_settings.fallbacks`` gaining ``{public_model: [target_model]}``.

    Refused (LiteLLMConfigError) when a role is missing from model_list, the two are the same, or the config
    already has a general fallback for the public role: that fallback belongs to the operator, and an experiment
    that adds its own on top could not tell which one served."""
    data = parse_config(text)
    summary = config_roles(text)
    missing = [m for m in (public_model, target_model) if m not in summary['models']]
    if missing:
        raise LiteLLMConfigError('model role(s) %s not in the config\'s model_list (it has %s)'
                                 % (', '.join(missing), ', '.join(summary['models'])))
    if public_model == target_model:
        raise LiteLLMConfigError('the fallback target must be another role than the public one (%s)' % public_model)
    existing = summary['fallbacks'].get(public_model)
    if existing:
        raise LiteLLMConfigError('the config already has a general fallback for %s -> %s; remove it or choose '
                                 'another public role' % (public_model, ', '.join(existing)))
    changed = copy.deepcopy(data)
    settings = changed.get('litellm_settings')
    if settings is None:
        settings = changed['litellm_settings'] = {}
    settings['fallbacks'] = list(settings.get('fallbacks') or []) + [{public_model: [target_model]}]
    new_text = yaml.safe_dump(changed, sort_keys=False, default_flow_style=False)
    # nothing but the one entry may differ
    check = yaml.safe_load(new_text)
    check['litellm_settings']['fallbacks'] = check['litellm_settings']['fallbacks'][:-1]
    if not check['litellm_settings']['fallbacks']:
        del check['litellm_settings']['fallbacks']
    if not check['litellm_settings'] and 'litellm_settings' not in data:
        del check['litellm_settings']
    if check != data:
        raise LiteLLMConfigError('re-serialising the config changed more than the added fallback')
    return new_text


def with_roles(text, roles):
    """The config with one ``model_list`` deployment added per role in ``roles`` (``[{name, model, api_base}]``,
    an OpenAI-compatible backend each, as the lab's and the quarantine topology's solo replicas are).

    Refused (LiteLLMConfigError) when ``roles`` is empty or malformed, or names a role the config already has: an
    existing role belongs to the operator, and a second deployment under its name would take a share of its
    traffic. Nothing else in the config may change, which is checked by parsing the output."""
    data = parse_config(text)
    if not isinstance(roles, list) or not roles:
        raise LiteLLMConfigError('expected a non-empty list of roles to add, found %r' % (roles,))
    existing = config_roles(text)['models']
    names = []
    for index, role in enumerate(roles):
        if not isinstance(role, dict) or sorted(role) != ['api_base', 'model', 'name']:
            raise LiteLLMConfigError('roles[%d] must be {name, model, api_base}, found %r' % (index, role))
        for key in ('name', 'model', 'api_base'):
            if not isinstance(role[key], str) or not role[key]:
                raise LiteLLMConfigError('roles[%d].%s must be a non-empty string, found %r' % (index, key, role[key]))
        if role['name'] in existing or role['name'] in names:
            raise LiteLLMConfigError('the config already has a model role %s; choose another name for the added '
                                     'role' % role['name'])
        names.append(role['name'])
    changed = copy.deepcopy(data)
    changed['model_list'] = list(changed['model_list']) + [
        {'model_name': role['name'],
         'litellm_params': {'model': 'openai/%s' % role['model'], 'api_base': role['api_base'], 'api_key': 'none'}}
        for role in roles]
    new_text = yaml.safe_dump(changed, sort_keys=False, default_flow_style=False)
    check = yaml.safe_load(new_text)
    check['model_list'] = check['model_list'][:len(data['model_list'])]
    if check != data:
        raise LiteLLMConfigError('re-serialising the config changed more than the added roles')
    return new_text
