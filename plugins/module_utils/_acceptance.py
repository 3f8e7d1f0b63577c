# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Acceptance of a served model: the ladder's verdicts, rank health, cross-rank consistency and link traffic.

The lesson behind it (the reference experiment): a formed NCCL group, loaded weights or a green /health is not
acceptance. Only real generated responses are, while every rank still runs with a clean log and the data crossed
the intended link. Standard library only; ``plugins/filter/serving.py`` wraps these for the ``sglang_tp`` role.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core

LADDER_STEPS = ('first_response', 'repeated', 'concurrent', 'repeated_prefix', 'long_context')
TRIAL_KINDS = ('single_stream', 'concurrent')
# The per-trial figures: name -> (kind of the batch it comes from, definition). A trial's figure is one number, so
# that N trials give N samples of it (the spread across trials, and compare's bootstrap).
TRIAL_FIGURES = {
    'single_stream_output_tok_s': ('single_stream', 'median output tok/s per request, TTFT included, concurrency 1'),
    'single_stream_decode_tok_s': ('single_stream', 'median decode tok/s per request, TTFT excluded, concurrency 1'),
    'single_stream_ttft_ms': ('single_stream', 'median TTFT in ms, concurrency 1'),
    'aggregate_output_tok_s': ('concurrent', 'aggregate output tok/s of the concurrent batch (all output tokens / '
                                             'batch wall time)'),
}
MAX_LINE = 300


class AcceptanceError(ValueError):
    """Input that does not have the shape these functions document."""


def _mapping(value, what):
    if not isinstance(value, dict):
        raise AcceptanceError('%s must be a dict, got %s' % (what, type(value).__name__))
    return value


def model_manifest(files, root):
    """``ansible.builtin.find`` results -> ``{relative path: {size, sha256}}`` (sha256 None when not computed)."""
    if not isinstance(files, list):
        raise AcceptanceError('model_manifest needs the list of files that ansible.builtin.find returned')
    prefix = root.rstrip('/') + '/'
    manifest = {}
    for entry in files:
        entry = _mapping(entry, 'each file')
        path = entry.get('path')
        if not isinstance(path, str) or not path.startswith(prefix):
            raise AcceptanceError('file %r is not under the model directory %s' % (path, root))
        manifest[path[len(prefix):]] = {'size': entry.get('size'), 'sha256': entry.get('checksum')}
    return manifest


def version_tuple(text):
    """``0.5.23`` / ``0.5.23.post1`` / ``v0.5.23-lab`` -> ``(0, 5, 23)``: the leading dotted numbers."""
    match = re.match(r'v?(\d+(?:\.\d+)*)', str(text or '').strip())
    if not match:
        raise AcceptanceError('cannot read a version from %r' % (text,))
    return tuple(int(part) for part in match.group(1).split('.'))


def sglang_too_old(found, minimum):
    """Whether an SGLang version is older than ``minimum``, by their leading dotted numbers; a version that does not
    start with numbers is too old too (nothing can tell)."""
    try:
        return version_tuple(found) < version_tuple(minimum)
    except AcceptanceError:
        return True


def sglang_older_than(identities, minimum):
    """``{host: {"versions": {"sglang": ...}}}`` -> ``HOST runs SGLang FOUND`` for each host whose SGLang is older
    than ``minimum`` (see :func:`sglang_too_old`), in the dict's order: a release check of its own, as mode nextn's."""
    identities = _mapping(identities, 'identities')
    found = {host: (_mapping(identity, 'identity of %s' % host).get('versions') or {}).get('sglang')
             for host, identity in identities.items()}
    return ['%s runs SGLang %s' % (host, version or 'of no version') for host, version in found.items()
            if sglang_too_old(version, minimum)]


def rank_mismatches(identities, min_sglang_version=''):
    """Differences between ranks, one sentence each naming the host and the item.

    ``identities``: ``{host: {"versions": {sglang, torch, cuda, nccl}, "model": manifest}}``; the first host (in
    the dict's order: the ring's) is the reference.
    """
    identities = _mapping(identities, 'identities')
    if not identities:
        raise AcceptanceError('rank_mismatches needs at least one host')
    hosts = list(identities)
    reference_host = hosts[0]
    reference = _mapping(identities[reference_host], 'identity of %s' % reference_host)
    problems = []
    for host in hosts:
        identity = _mapping(identities[host], 'identity of %s' % host)
        versions = _mapping(identity.get('versions'), 'versions of %s' % host)
        if min_sglang_version and sglang_too_old(versions.get('sglang'), min_sglang_version):
            problems.append('%s runs SGLang %s, older than the required %s'
                            % (host, versions.get('sglang'), min_sglang_version))
        if host == reference_host:
            continue
        for item in sorted(set(reference['versions']) | set(versions)):
            if reference['versions'].get(item) != versions.get(item):
                problems.append('%s has %s %s where %s has %s' % (
                    host, item, versions.get(item), reference_host, reference['versions'].get(item)))
        problems.extend(_manifest_differences(reference_host, reference.get('model') or {}, host,
                                              identity.get('model') or {}))
    return problems


def _manifest_differences(ref_host, ref, host, other):
    problems = []
    for name in sorted(set(ref) | set(other)):
        if name not in other:
            problems.append('%s lacks model file %s (present on %s)' % (host, name, ref_host))
        elif name not in ref:
            problems.append('%s has model file %s that %s lacks' % (host, name, ref_host))
        elif ref[name].get('size') != other[name].get('size'):
            problems.append('%s has model file %s of %s bytes where %s has %s' % (
                host, name, other[name].get('size'), ref_host, ref[name].get('size')))
        elif ref[name].get('sha256') != other[name].get('sha256'):
            problems.append('%s has model file %s with sha256 %s where %s has %s' % (
                host, name, other[name].get('sha256'), ref_host, ref[name].get('sha256')))
    return problems


def log_failure_lines(text, patterns, limit=10):
    """The lines of a rank's log that match any of ``patterns`` (regular expressions), at most ``limit``."""
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise AcceptanceError('patterns must be a list of regular expressions')
    try:
        compiled = [re.compile(p) for p in patterns]
    except re.error as exc:
        raise AcceptanceError('a log failure pattern is not a valid regular expression: %s' % exc) from exc
    lines = (text or '').splitlines()
    found = []
    for index, line in enumerate(lines):
        if any(c.search(line) for c in compiled):
            line = line.strip()
            if line.startswith('Traceback'):
                line += ' ... ' + _exception_line(lines, index)
            found.append(line if len(line) <= MAX_LINE else line[:MAX_LINE] + '...')
            if len(found) >= limit:
                break
    return found


def _exception_line(lines, start):
    """The line that ends the traceback starting at ``lines[start]``: the exception and its message."""
    for line in lines[start + 1:]:
        if line and not line[0].isspace() and not set(line) <= set('^~ -'):
            return line.strip()
    return '(the traceback is cut off)'


def rank_problems(healths):
    """``[{host, rank, running, pid, failure_lines}]`` -> one sentence per problem, naming the rank."""
    if not isinstance(healths, list):
        raise AcceptanceError('rank_problems needs a list of rank states')
    problems = []
    for health in healths:
        health = _mapping(health, 'each rank state')
        who = 'rank %s on %s' % (health.get('rank'), health.get('host'))
        if not _truthy(health.get('running')):
            pid = health.get('pid')
            problems.append('%s%s is not running' % (who, ' (pid %s)' % pid if pid not in (None, '') else ''))
        lines = health.get('failure_lines') or []
        if lines:
            problems.append('%s logged: %s' % (who, ' | '.join(lines[:3])))
    return problems


def _truthy(value):
    if isinstance(value, str):
        return value.strip().lower() in ('true', 'yes', '1')
    return bool(value)


def _accept_length(batch):
    value = batch.get('spec_accept_length')
    if isinstance(value, dict):
        value = value.get('value')
    return value


def ladder_step_verdict(step, max_accept_length=None):
    """Judge one ladder step: ``{step, batch, error, ranks}`` -> the same with ``passed`` and ``problems``.

    ``error`` is llm_workload's message when the module itself failed (a refused cache flush, a bad option), and
    ``ranks`` the list of rank problems read after the batch (see :func:`rank_problems`). With speculation on,
    ``max_accept_length`` (num_steps + 1) bounds the observed accept length from above; it is never below 1.
    """
    step = dict(_mapping(step, 'step'))
    name = step.get('step')
    if name not in LADDER_STEPS:
        raise AcceptanceError('unknown ladder step %r (expected one of %s)' % (name, ', '.join(LADDER_STEPS)))
    problems = []
    batch = step.get('batch')
    if step.get('error'):
        problems.append('the batch did not complete: %s' % step['error'])
    if isinstance(batch, dict):
        problems.extend(batch_problems(name, batch, max_accept_length))
    elif not step.get('error'):
        problems.append('the batch returned no result')
    problems.extend(step.get('ranks') or [])
    step['problems'] = problems
    step['passed'] = not problems
    return step


def batch_problems(name, batch, max_accept_length):
    """What is wrong with one workload batch: failed requests, requests without tokens, a repeated prefix not served
    from the cache (``name`` repeated_prefix), an accept length outside [1, ``max_accept_length``]."""
    problems = []
    requests = batch.get('records') or []
    failed = [r for r in requests if not r.get('ok')]
    if failed or batch.get('failed'):
        first = failed[0] if failed else {}
        problems.append('%s of %s requests failed%s' % (
            len(failed) or batch.get('failed'), len(requests) or batch.get('requests'),
            ', first: %s' % _describe_failure(first) if first else ''))
    if not requests:
        problems.append('no request records in the batch')
    for index, request in enumerate(requests):
        if request.get('ok') and not request.get('output_tokens'):
            problems.append('request %s returned no tokens' % index)
    if name == 'repeated_prefix':
        repeats = [r for r in requests[1:] if r.get('ok')]
        if not repeats or not any((r.get('cached_tokens') or 0) > 0 for r in repeats):
            problems.append('the repeated prefix was not served from the cache (cached tokens 0 after the first '
                            'request)')
    if max_accept_length is not None:
        accept = _accept_length(batch)
        if accept is None:
            problems.append('speculation is on but no accept length was reported')
        elif not 1 <= float(accept) <= float(max_accept_length):
            problems.append('accept length %s outside [1, %s]' % (accept, max_accept_length))
    return problems


def _describe_failure(request):
    """llm_workload's error of a record: ``{kind, message, body}``."""
    error = request.get('error') or {}
    if not isinstance(error, dict):
        error = {'message': error}
    return '%s: %s' % (error.get('kind') or 'error', str(error.get('message') or request.get('status'))[:MAX_LINE])


def link_traffic(window, link_interface, mgmt_interface, min_ratio):
    """Bytes on the direct link against the management interface, summed over the window's hosts (rx + tx).

    ``window``: ``{"window": name, "hosts": {host: counters_window_result}}``.
    """
    window = _mapping(window or {}, 'window')
    hosts = window.get('hosts') or {}
    result = {'link_interface': link_interface, 'mgmt_interface': mgmt_interface, 'min_ratio': float(min_ratio),
              'link_bytes': 0, 'mgmt_bytes': 0, 'ratio': None, 'ok': False}
    if not hosts or not all(isinstance(h, dict) and h.get('interfaces') for h in hosts.values()):
        result['message'] = 'no counter window deltas for every host'
        return result
    for host, delta in sorted(hosts.items()):
        for key, interface in (('link_bytes', link_interface), ('mgmt_bytes', mgmt_interface)):
            counters = delta['interfaces'].get(interface)
            if counters is None:
                result['message'] = 'host %s has no counters for interface %s' % (host, interface)
                return result
            result[key] += int(counters.get('rx_bytes') or 0) + int(counters.get('tx_bytes') or 0)
    if result['mgmt_bytes']:
        result['ratio'] = round(result['link_bytes'] / float(result['mgmt_bytes']), 2)
        result['ok'] = result['ratio'] >= float(min_ratio)
    else:
        result['ok'] = result['link_bytes'] > 0
    result['message'] = '%s bytes on %s and %s on %s (ratio %s, at least %s needed)' % (
        result['link_bytes'], link_interface, result['mgmt_bytes'], mgmt_interface,
        result['ratio'] if result['ratio'] is not None else 'n/a', result['min_ratio'])
    return result


def _trial_figure(name, batch):
    """One trial's figure ``name`` (TRIAL_FIGURES) from its batch; None when the batch has none."""
    if name == 'aggregate_output_tok_s':
        value = batch.get('aggregate_output_tok_s')
    else:
        key, scale = ('ttft_s', 1000.0) if name == 'single_stream_ttft_ms' else (name[len('single_stream_'):], 1.0)
        value = (batch.get(key) or {}).get('median') if isinstance(batch.get(key), dict) else None
        value = None if value is None else value * scale
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def spread(values):
    """Median, min and max of the values that are numbers, and how many there were."""
    numbers = sorted(v for v in values if v is not None)
    if not numbers:
        return {'median': None, 'min': None, 'max': None, 'n': 0}
    middle = len(numbers) // 2
    median = numbers[middle] if len(numbers) % 2 else (numbers[middle - 1] + numbers[middle]) / 2.0
    return {'median': median, 'min': numbers[0], 'max': numbers[-1], 'n': len(numbers)}


def trials_summary(results, ranks=None, max_accept_length=None):
    """The measured trials of a served mode for the record.

    ``results``: the registered ``results`` of the trials task, one per batch, in order: each has ``item`` =
    ``[trial number, kind]`` (kind in TRIAL_KINDS), and ``batch`` (llm_workload's) or ``msg`` when the module
    failed. ``ranks``: the rank problems read after the last trial. Each batch is judged as a ladder batch is
    (failed requests, no tokens, accept length). Per figure (TRIAL_FIGURES): one value per trial, and their median,
    min and max across the trials.
    """
    if not isinstance(results, list):
        raise AcceptanceError('trials_summary needs the list of results of the trials task')
    trials, problems = {}, []
    for index, result in enumerate(results):
        result = _mapping(result, 'each trial result')
        item = result.get('item')
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and item[1] in TRIAL_KINDS):
            raise AcceptanceError('trial result %s: item must be [trial, kind] with kind one of %s, got %r'
                                  % (index, ', '.join(TRIAL_KINDS), item))
        trial, kind = int(item[0]), item[1]
        entry = trials.setdefault(trial, {'trial': trial, 'batches': {}, 'problems': []})
        batch = result.get('batch') if isinstance(result.get('batch'), dict) else None
        entry['batches'][kind] = batch
        found = []
        if result.get('failed'):
            found.append('the batch did not complete: %s' % str(result.get('msg'))[:MAX_LINE])
        if batch is not None:
            found.extend(batch_problems(kind, batch, max_accept_length))
        elif not result.get('failed'):
            found.append('the batch returned no result')
        entry['problems'].extend('%s: %s' % (kind, p) for p in found)
        problems.extend('trial %s %s: %s' % (trial, kind, p) for p in found)
    problems.extend(ranks or [])
    ordered = [trials[n] for n in sorted(trials)]
    figures = {}
    for name, (kind, definition) in TRIAL_FIGURES.items():
        values = [_trial_figure(name, t['batches'][kind]) if t['batches'].get(kind) else None for t in ordered]
        figures[name] = dict(spread(values), definition=definition, values=values)
    return {'count': len(ordered), 'passed': not problems, 'problems': problems, 'trials': ordered,
            'figures': figures}


def acceptance_summary(steps, traffic, trials=None):
    """The ladder's outcome for the record: every step's verdict, the traffic check and one ``passed``.

    ``traffic`` is :func:`link_traffic`'s judgement of the ladder's counter window, None when no window was opened;
    ``trials`` is :func:`trials_summary`'s result when the mode ran measured trials (their problems fail it too).
    """
    if not isinstance(steps, list):
        raise AcceptanceError('steps must be the list of judged ladder steps')
    if traffic is not None:
        _mapping(traffic, 'traffic')
    names = [s.get('step') for s in steps]
    missing = [name for name in LADDER_STEPS if name not in names]
    problems = [p for s in steps for p in s.get('problems', [])]
    if missing:
        problems.append('steps not reached: %s' % ', '.join(missing))
    if traffic is None:
        problems.append('no counter window')
    elif not traffic['ok']:
        problems.append('direct link traffic too low: %s' % traffic['message'])
    if trials is not None:
        problems.extend(_mapping(trials, 'trials').get('problems') or [])
    return {'passed': not problems, 'problems': problems, 'steps': steps, 'traffic': traffic}


def public_environment(environment):
    """An environment for the record: the values of _ledger_core.VISIBLE_ENV_PREFIXES's names as they are, other values
    redacted (a token passed to a rank must not reach the record)."""
    return _ledger_core.redact_environment(_mapping(environment, 'environment'))
