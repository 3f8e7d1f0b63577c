# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Serving acceptance filters for the acceptance role and the engines' roles: ladder verdicts, rank health,
consistency, link traffic, measured and cold/warm prefix trials, a concurrency sweep's points, the client against
the server and the link's bytes per token.

Several filters live in this file, so each one's documentation is in a sidecar file named after it
(plugins/filter/<filter>.yml). The logic is in plugins/module_utils/_acceptance.py and plugins/plugin_utils/
(_prefix_trials.py, _sweep.py, _engine_figures.py), standard library only; these wrappers turn their errors into
AnsibleFilterError.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.module_utils import _acceptance
from ansible_collections.inferlab.distributed.plugins.plugin_utils import _engine_figures, _prefix_trials, _sweep
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain


def _wrap(function):
    def wrapper(*args, **kwargs):
        try:
            return function(*[plain(a) for a in args], **{k: plain(v) for k, v in kwargs.items()})
        except _acceptance.AcceptanceError as exc:
            raise AnsibleFilterError('%s: %s' % (function.__name__, exc)) from exc
    wrapper.__name__ = function.__name__
    wrapper.__doc__ = function.__doc__
    return wrapper


class FilterModule(object):
    def filters(self):
        return dict((f.__name__, _wrap(f)) for f in (
            _acceptance.model_manifest,
            _acceptance.rank_mismatches,
            _acceptance.sglang_older_than,
            _acceptance.log_failure_lines,
            _acceptance.rank_problems,
            _acceptance.ladder_step_verdict,
            _acceptance.link_traffic,
            _acceptance.trials_summary,
            _acceptance.acceptance_summary,
            _acceptance.public_environment,
            _prefix_trials.prefix_trials_summary,
            _sweep.sweep_points,
            _engine_figures.client_server_agreement,
            _engine_figures.link_bytes_per_token,
        ))
