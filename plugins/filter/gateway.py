# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Gateway config filters: gateway_config_roles, gateway_config_with_fallback, gateway_config_with_roles.

Several filters live in this file, so each one's DOCUMENTATION, EXAMPLES and RETURN are in a sidecar file named
after it (plugins/filter/<filter>.yml). The gateway-specific logic is one module per gateway kind; today the only
kind is ``litellm`` (plugins/plugin_utils/_litellm_config.py). Adding a gateway is one entry in ``_KINDS``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.plugin_utils import _litellm_config
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain

# gateway kind -> (config module, its error class)
_KINDS = {
    'litellm': (_litellm_config, _litellm_config.LiteLLMConfigError),
}


def _kind(name, kind):
    if kind not in _KINDS:
        raise AnsibleFilterError('%s: unknown gateway kind %r (known: %s); set inferlab_gateway_kind'
                                 % (name, kind, ', '.join(sorted(_KINDS))))
    return _KINDS[kind]


def gateway_config_roles(text, kind='litellm'):
    """See plugins/filter/gateway_config_roles.yml."""
    module, error = _kind('gateway_config_roles', kind)
    try:
        return module.config_roles(plain(text))
    except error as exc:
        raise AnsibleFilterError('gateway_config_roles: the %s config cannot be read: %s' % (kind, exc)) from None


def gateway_config_with_fallback(text, public_model, target_model, kind='litellm'):
    """See plugins/filter/gateway_config_with_fallback.yml."""
    module, error = _kind('gateway_config_with_fallback', kind)
    try:
        return module.with_fallback(plain(text), plain(public_model), plain(target_model))
    except error as exc:
        raise AnsibleFilterError('gateway_config_with_fallback: %s' % exc) from None


def gateway_config_with_roles(text, roles, kind='litellm'):
    """See plugins/filter/gateway_config_with_roles.yml."""
    module, error = _kind('gateway_config_with_roles', kind)
    try:
        return module.with_roles(plain(text), plain(roles))
    except error as exc:
        raise AnsibleFilterError('gateway_config_with_roles: %s' % exc) from None


class FilterModule(object):
    """inferlab gateway config filters."""

    def filters(self):
        return {
            'gateway_config_roles': gateway_config_roles,
            'gateway_config_with_fallback': gateway_config_with_fallback,
            'gateway_config_with_roles': gateway_config_with_roles,
        }
