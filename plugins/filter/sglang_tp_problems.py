# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What stops the sglang_tp role's ranks from launching: the plan's problems, a ring host's, or the ring's, each one
message that says what was expected, what was found and which variable to set (roles/sglang_tp/tasks/preflight.yml).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: sglang_tp_problems
short_description: Everything that stops the sglang_tp role's ranks from launching, one message each
version_added: 0.3.0
author: inferlab developers (@inferlab)
description:
  - Judges the sglang_tp role's inputs and what M(inferlab.distributed.sglang_rank_info) read on the ring hosts, and
    returns one message per problem, each saying what was expected, what was found and which variable to set. An
    empty list means the ranks can launch.
  - Without O(host) and O(ring), the plan alone - the modes (distinct, from C(baseline) and C(nextn), baseline
    first), the concurrency sweep's levels (distinct, at least 1) and requests per slot (at least 1), its request
    rate (above 0, or none) and burstiness (above 0). The same on every ring host, so the role checks it once.
  - With O(host), one ring host - a container manager without an image, the launch settings SGLang would refuse or
    silently change (P(inferlab.distributed.sglang_spec_problems#filter) for each mode's rank spec), the model
    directory, its C(config.json), the context length, the NCCL interface, a listener on rank 0's ports (rank 0's
    read, the same message on every host), and versions that could not be read.
  - With O(ring), the ring once every host judged itself - a ring host that is not in the play (it failed its own
    checks, or was left out), else an SGLang older than the plan's minimum for mode C(nextn) or at all, and ranks
    that differ in versions or model files (P(inferlab.distributed.rank_mismatches#filter)).
  - A wrong value an operator set (a mode list that is a string, a level that is not a number) is a problem; input
    of the wrong shape (a missing key, a read that is not a dict) fails naming the key.
options:
  _input:
    description:
      - The plan, the same on every ring host - C(modes), C(sweep_concurrency), C(sweep_requests_per_slot),
        C(sweep_request_rate), C(sweep_burstiness), C(min_sglang_version), C(nextn_min_sglang_version) and
        C(variable_for), which variable sets each field of a rank spec (the top-level key of a dotted field).
    type: dict
    required: true
  host:
    description:
      - One ring host - C(name), C(rank), C(process_manager), C(container_image), C(specs) (the rank spec of each
        mode), C(ring) (the ring as P(inferlab.distributed.sglang_spec_problems#filter) takes it), C(model_path),
        C(context_length), C(link_interface), C(port), C(dist_init_addr), C(read) (its
        M(inferlab.distributed.sglang_rank_info) result) and C(rank0) (C(name), and C(listeners) as rank 0's read
        returned them, or null when rank 0 was not read).
    type: dict
  ring:
    description:
      - The ring - C(hosts) (the group C(ring), in order), and for each ring host in the play C(reads) (its
        M(inferlab.distributed.sglang_rank_info) result, as registered) and C(checks) (its own check's result, as
        registered; null when it did not run). A host missing from C(reads), whose read failed or whose own check
        failed (a caller's rescue keeps it in the play) did not pass its checks. A host whose versions could not be
        read is left out of the comparisons (its own check names it, in a site dry run that goes on past it).
    type: dict
"""

EXAMPLES = r"""
- name: Stop if this host cannot launch its rank
  inferlab.distributed.preflight_check:
    that: false
    fail_msg: "{{ item }}"
    quiet: true
  loop: "{{ plan | inferlab.distributed.sglang_tp_problems(host=this_host) }}"
"""

RETURN = r"""
_value:
  description: One message per problem, in the order the checks run; empty when there is none.
  type: list
  elements: str
  sample:
    - >-
      Stop if NCCL's interface is missing on lab-a: expected interface tb9 (NCCL_SOCKET_IFNAME==tb9), found
      Device "tb9" does not exist.; set inferlab_link_interface or bring the link up
"""

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.module_utils import _acceptance
from ansible_collections.inferlab.distributed.plugins.plugin_utils import _sglang_launch
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain

MODES = ('baseline', 'nextn')
CONTAINER_MANAGERS = ('docker', 'podman')
PLAN_KEYS = ('modes', 'sweep_concurrency', 'sweep_requests_per_slot', 'sweep_request_rate', 'sweep_burstiness',
             'min_sglang_version', 'nextn_min_sglang_version', 'variable_for')
HOST_KEYS = ('name', 'rank', 'process_manager', 'container_image', 'specs', 'ring', 'model_path', 'context_length',
             'link_interface', 'port', 'dist_init_addr', 'read', 'rank0')
READ_KEYS = ('model', 'config', 'link', 'versions')
RING_KEYS = ('hosts', 'reads', 'checks')


class _Malformed(ValueError):
    """Input of the wrong shape: a role's bug, not an operator's value."""


def _mapping(value, what, keys=()):
    if not isinstance(value, dict):
        raise _Malformed('%s must be a dict, found %s' % (what, type(value).__name__))
    missing = [key for key in keys if key not in value]
    if missing:
        raise _Malformed('%s has no %s' % (what, ', '.join(missing)))
    return value


# --- Jinja's own readings, which the checks were written in -------------------------------------------------------

def _text(value):
    """A value as a template shows it in a message: None as nothing."""
    return '' if value is None else str(value)


def _int(value):
    """Jinja's ``int`` filter: a number, its text (or a float's), else 0."""
    try:
        return int(value, 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def _float(value):
    """Jinja's ``float`` filter: the number, else 0.0."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _distinct(values):
    """Jinja's ``unique``, for values that may not be hashable: each once, in order."""
    seen = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


# --- the plan ------------------------------------------------------------------------------------------------------

def _modes_ok(modes):
    if not isinstance(modes, list) or not modes:
        return False
    if any(mode not in MODES for mode in modes) or len(_distinct(modes)) != len(modes):
        return False
    return 'nextn' not in modes or 'baseline' not in modes or modes.index('baseline') < modes.index('nextn')


def plan_problems(plan):
    plan = _mapping(plan, 'the plan', PLAN_KEYS)
    problems = []
    modes = plan['modes']
    if not _modes_ok(modes):
        problems.append(
            'Stop if the serving plan is not baseline before speculation: expected sglang_tp_modes to be a list of '
            'distinct modes from [baseline, nextn] with baseline first, found %s; set sglang_tp_modes' % _text(modes))
    levels, per_slot = plan['sweep_concurrency'], plan['sweep_requests_per_slot']
    if (not isinstance(levels, list) or any(_int(level) < 1 for level in levels)
            or len(_distinct(levels)) != len(levels) or _int(per_slot) < 1):
        problems.append(
            'Stop if the concurrency sweep cannot run: expected distinct levels of at least 1 and at least 1 request '
            'per slot, found levels %s and %s per slot; set inferlab_sweep_concurrency (sglang_tp_sweep_concurrency) '
            'or inferlab_sweep_requests_per_slot' % (_text(levels), _text(per_slot)))
    rate, burstiness = plan['sweep_request_rate'], plan['sweep_burstiness']
    if not (rate is None or _float(rate) > 0) or not _float(burstiness) > 0:
        problems.append(
            'Stop if the concurrency sweep cannot run: expected a request rate above 0 a second (or none: every '
            'request of a batch at once) and a burstiness above 0, found %s and %s; set inferlab_sweep_request_rate '
            'or inferlab_sweep_burstiness' % (_text(rate), _text(burstiness)))
    return problems


# --- one ring host -------------------------------------------------------------------------------------------------

def _launch_problems(plan, host):
    """The launch settings of every mode's rank spec, each problem once, as one message (the role's wording)."""
    specs = _mapping(host['specs'], 'host.specs')
    found = []
    for spec in specs.values():
        try:
            found.extend(_sglang_launch.spec_problems(spec, host['ring']))
        except _sglang_launch.SpecError as exc:
            raise _Malformed('malformed SGLang rank spec: %s' % exc) from None
    found = _distinct(found)
    if not found:
        return []
    variable_for = _mapping(plan['variable_for'], 'plan.variable_for')
    parts = ['%s (expected %s, found %s; set %s)' % (
        _text(problem['message']), _text(problem['expected']), _text(problem['found']),
        _text(variable_for.get(problem['field'].split('.')[0], problem['field']))) for problem in found]
    return ['Stop before launch on %s (rank %s): %s' % (_text(host['name']), _text(host['rank']), '; '.join(parts))]


def host_problems(plan, host):
    plan = _mapping(plan, 'the plan', PLAN_KEYS)
    host = _mapping(host, 'host', HOST_KEYS)
    read = _mapping(host['read'], 'host.read', READ_KEYS)
    model = _mapping(read['model'], 'host.read.model', ('exists', 'directory'))
    config = _mapping(read['config'], 'host.read.config', ('parsed', 'error'))
    link = _mapping(read['link'], 'host.read.link', ('present', 'error'))
    rank0 = _mapping(host['rank0'], 'host.rank0', ('name', 'listeners'))
    name, model_path = _text(host['name']), _text(host['model_path'])
    problems = []
    if host['process_manager'] in CONTAINER_MANAGERS and not host['container_image']:
        problems.append(
            'Stop if the ranks\' container has no image: expected sglang_tp_container_image (an image reference such '
            'as lmsysorg/sglang:v0.5.6) with sglang_tp_process_manager %s, found none; set sglang_tp_container_image'
            % _text(host['process_manager']))
    problems.extend(_launch_problems(plan, host))
    if not model['directory']:
        problems.append(
            'Stop if the model is missing on %s: expected a directory at %s, found %s; set sglang_tp_model_path '
            '(inferlab_model_path) or copy the model there' % (name, model_path,
                                                               'a file' if model['exists'] else 'nothing'))
    parsed = config['parsed']
    if not isinstance(parsed, dict):
        problems.append(
            'Stop if the model directory is not a model on %s: expected a JSON config.json in %s, found %s; set '
            'sglang_tp_model_path (inferlab_model_path)' % (name, model_path,
                                                            config['error'] or 'a file that is not a JSON object'))
    context = host['context_length'] or (parsed or {}).get('max_position_embeddings')
    if not re.match(r'^[0-9]+$', str(context)):
        problems.append(
            'Stop if the context length is unknown: the long-context step needs sglang_tp_context_length or '
            'max_position_embeddings in %s/config.json, found neither; set sglang_tp_context_length' % model_path)
    if not link['present']:
        interface = _text(host['link_interface'])
        problems.append(
            'Stop if NCCL\'s interface is missing on %s: expected interface %s (NCCL_SOCKET_IFNAME==%s), found %s; '
            'set inferlab_link_interface or bring the link up' % (name, interface, interface,
                                                                  (link['error'] or '').strip() or 'no such interface'))
    listeners = rank0['listeners']
    lines = _mapping(listeners, 'host.rank0.listeners', ('lines',))['lines'] if listeners is not None else []
    if lines:
        problems.append(
            'Stop if a port is busy on %s (rank 0): expected ports %s (HTTP) and %s (rendezvous) free, found '
            'listeners: %s; set sglang_tp_port or sglang_tp_dist_init_port'
            % (_text(rank0['name']), _text(host['port']), _text(host['dist_init_addr']).rsplit(':', maxsplit=1)[-1],
               ' | '.join(_text(line) for line in lines)))
    versions = read['versions']
    if versions is None or not isinstance(_mapping(versions, 'host.read.versions', ('parsed',))['parsed'], dict):
        problems.append(
            'Stop if the versions cannot be read on %s: expected sglang_tp_version_command to print one JSON object '
            'of the versions the ranks run (sglang, torch, cuda, nccl), found %s; install SGLang where the ranks '
            'run, or set sglang_tp_version_command (inferlab_sglang_version_command)'
            % (name, _text((versions or {}).get('error')) or 'no command'))
    return problems


# --- the ring ------------------------------------------------------------------------------------------------------

def _passed(read, check):
    """Whether a ring host in the play passed its own checks: its read succeeded and its check did not fail (a
    failure a caller rescued keeps the host in the play). None: not in the play, or never read."""
    if read is None:
        return False
    read = _mapping(read, 'a ring host\'s read')
    if read.get('failed') or not all(key in read for key in READ_KEYS):
        return False
    return check is None or not _mapping(check, 'a ring host\'s check').get('failed')


def ring_problems(plan, ring):
    plan = _mapping(plan, 'the plan', PLAN_KEYS)
    ring = _mapping(ring, 'ring', RING_KEYS)
    hosts, reads = ring['hosts'], _mapping(ring['reads'], 'ring.reads')
    checks = _mapping(ring['checks'], 'ring.checks')
    if not isinstance(hosts, list):
        raise _Malformed('ring.hosts must be a list, found %s' % type(hosts).__name__)
    not_ready = [host for host in hosts if not _passed(reads.get(host), checks.get(host))]
    if not_ready:
        return ['Stop before launch: every ring host holds a rank and must pass its checks, found %s failed or left '
                'out of this play (see their errors above; do not --limit a serving run)' % ', '.join(not_ready)]
    identities = {}
    for host in hosts:
        versions = reads[host]['versions']
        versions = _mapping(versions, 'ring.reads[%s].versions' % host, ('parsed',))['parsed'] if versions else None
        if isinstance(versions, dict):  # else its own check named it
            model = _mapping(reads[host]['model'], 'ring.reads[%s].model' % host, ('files',))
            identities[host] = {'versions': versions, 'model': model['files']}
    if not identities:
        return []
    problems = []
    minimum = plan['nextn_min_sglang_version']
    too_old = _acceptance.sglang_older_than(identities, minimum) if 'nextn' in plan['modes'] and minimum else []
    if too_old:
        problems.append(
            'Stop before launch: mode nextn needs SGLang %s or later, found %s. Before it, the draft worker\'s '
            'FlashInfer autotune drops the target\'s tuned tactics (upstream commit fc5a979f merges the caches across '
            'speculative workers), which breaks NEXTN. Install SGLang %s or later, leave '
            'nextn out of sglang_tp_modes, or set sglang_tp_nextn_min_sglang_version to "" for a build that carries '
            'the fix' % (minimum, ', '.join(too_old), minimum))
    mismatches = _acceptance.rank_mismatches(identities, plan['min_sglang_version'])
    if mismatches:
        problems.append(
            'Stop before launch: every rank must run the same software and the same model, found %s; install the '
            'same versions and copy the same model to every ring host (%s), or set sglang_tp_min_sglang_version'
            % ('; '.join(mismatches), ', '.join(hosts)))
    return problems


def sglang_tp_problems(plan, host=None, ring=None):
    """See DOCUMENTATION."""
    try:
        if host is not None and ring is not None:
            raise _Malformed('give host or ring, not both')
        if host is not None:
            return host_problems(plain(plan), plain(host))
        if ring is not None:
            return ring_problems(plain(plan), plain(ring))
        return plan_problems(plain(plan))
    except (_Malformed, _acceptance.AcceptanceError) as exc:
        raise AnsibleFilterError('sglang_tp_problems: %s' % exc) from None


class FilterModule(object):
    def filters(self):
        return {'sglang_tp_problems': sglang_tp_problems}
