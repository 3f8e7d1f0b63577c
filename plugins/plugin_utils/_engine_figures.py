# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A served mode's figures that only an engine which times itself allows: the workload client against the server's
own ``timings`` (``client_server_agreement``), and the link's bytes per token the engine counted
(``link_bytes_per_token``).

The client against the server, per single-stream request that carries the server's timings (llama-server's):

- judged: the client's ``latency_s`` (the request sent to its stream's end) over the server's ``prompt_ms +
  predicted_ms`` (the request's whole time in the engine). The server's span lies inside the client's, so the ratio
  is at least 1 and its excess is the transport, HTTP and the client's own reading. It is judged on the median of the
  requests, against a stated tolerance.
- recorded beside it, not judged: the decode rates in one definition (the client's tokens after the first over the
  time after the first, against the server's ``predicted_n - 1`` over ``predicted_ms``), and the client's TTFT against
  the server's ``prompt_ms``. A client that reads its first chunk late (a starved CPU) moves time from its decode to
  its TTFT while their sum holds: observed on the lab, a client decode rate 2.13 times the server's under load. So the
  split is shown and the whole is judged.

Concurrent batches are left out: a request that waits for a free slot is timed by the client and not by the server.

Standard library only, Python 3.8+ syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.inferlab.distributed.plugins.module_utils._acceptance import AcceptanceError, spread

DEFINITIONS = {
    'latency_ratio': "per single-stream request, the client's latency_s over the server's (prompt_ms + "
                     "predicted_ms) / 1000; judged on the median",
    'decode': "the client's (output_tokens - 1) / (latency_s - ttft_s) against the server's (predicted_n - 1) / "
              "predicted_ms: one definition, medians over the requests (recorded, not judged)",
    'prompt': "the client's ttft_s against the server's prompt_ms / 1000, medians (recorded, not judged)",
}


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _timed_requests(batches):
    """``(record, timings, server_s)`` of each OK record of single-stream batches (concurrency 1) with the server's
    prompt and generation times; ``server_s``: their sum in seconds, the request's whole time in the engine."""
    found = []
    for batch in batches or []:
        if not isinstance(batch, dict) or batch.get('concurrency') != 1:
            continue
        for record in batch.get('records') or []:
            timings = record.get('server_timings') if isinstance(record, dict) else None
            if (record.get('ok') and isinstance(timings, dict) and _number(record.get('latency_s'))
                    and _number(timings.get('prompt_ms')) and _number(timings.get('predicted_ms'))
                    and timings['prompt_ms'] + timings['predicted_ms'] > 0):
                found.append((record, timings, (timings['prompt_ms'] + timings['predicted_ms']) / 1000.0))
    return found


def _median(values):
    return spread(values)['median']


def _server_decode(timings):
    predicted = timings.get('predicted_n')
    if not _number(predicted) or predicted < 2 or not timings['predicted_ms']:
        return None
    return (predicted - 1) / timings['predicted_ms'] * 1000.0


def client_server_agreement(batches, tolerance):
    """The client against the server over ``batches`` (llm_workload batches; None entries skipped): ``{requests,
    tolerance, latency_ratio: {median, min, max, n}, client_latency_s, server_latency_s, decode: {client_tok_s,
    server_tok_s}, prompt: {client_ttft_s, server_prompt_s}, definitions, passed, problems}``; medians over the
    requests. ``passed`` when the median latency ratio is within ``tolerance`` of 1. No timed request is a problem:
    the judge must not pass on nothing."""
    if not _number(tolerance) or tolerance <= 0:
        raise AcceptanceError('the tolerance must be a number above 0, got %r' % (tolerance,))
    timed = _timed_requests(batches)
    result = {
        'requests': len(timed),
        'tolerance': float(tolerance),
        'latency_ratio': spread([record['latency_s'] / server_s for record, _timings, server_s in timed]),
        'client_latency_s': _median([record['latency_s'] for record, _timings, _server_s in timed]),
        'server_latency_s': _median([server_s for _record, _timings, server_s in timed]),
        'decode': {'client_tok_s': _median([record.get('decode_tok_s') for record, _timings, _server_s in timed]),
                   'server_tok_s': _median([_server_decode(timings) for _record, timings, _server_s in timed])},
        'prompt': {'client_ttft_s': _median([record.get('ttft_s') for record, _timings, _server_s in timed]),
                   'server_prompt_s': _median([t['prompt_ms'] / 1000.0 for _record, t, _server_s in timed])},
        'definitions': DEFINITIONS,
        'problems': [],
    }
    median = result['latency_ratio']['median']
    if not timed:
        result['problems'].append(
            'no single-stream request carried the server\'s timings, so the client could not be checked against '
            'the server (is the URL llama-server itself, not a gateway that drops "timings"?)')
    elif abs(median - 1.0) > tolerance:
        figures = (tolerance * 100, len(timed), result['client_latency_s'], result['server_latency_s'], median,
                   1.0 + tolerance)
        result['problems'].append(
            'the client and the server disagree beyond the tolerance of %g %%: over %d single-stream requests the '
            'client measured a median latency of %.3f s, the server %.3f s of prompt and generation (median ratio '
            '%.3f, at most %.3f allowed)' % figures)
    result['passed'] = not result['problems']
    return result


def link_bytes_per_token(window, link_interface, engine_window):
    """The bytes the link carried per token the engine counted in the same window: ``{link_interface,
    tx_bytes: {host: bytes}, bytes, generated_tokens, processed_tokens, per_generated_token, per_processed_token,
    problem}``. Each byte on a point-to-point or switched link is sent once, so the hosts' ``tx_bytes`` are summed
    (``rx + tx`` would count it twice). Processed tokens: the prompt tokens the engine evaluated (cached ones
    excluded) plus the generated ones; every one of them crosses the link as activations. ``window``: ``{window,
    hosts: {host: counters_window_result}}``; ``engine_window``: the llamacpp_metrics_delta filter's result."""
    result = {'link_interface': link_interface, 'tx_bytes': {}, 'bytes': None, 'generated_tokens': None,
              'processed_tokens': None, 'per_generated_token': None, 'per_processed_token': None, 'problem': None}
    hosts = (window or {}).get('hosts') if isinstance(window, dict) else None
    for host, delta in sorted((hosts or {}).items()):
        counters = ((delta or {}).get('interfaces') or {}).get(link_interface) if isinstance(delta, dict) else None
        if not isinstance(counters, dict) or not _number(counters.get('tx_bytes')):
            result['problem'] = 'host %s has no tx_bytes for %s in the window' % (host, link_interface)
            return result
        result['tx_bytes'][host] = int(counters['tx_bytes'])
    if not result['tx_bytes']:
        result['problem'] = 'the window has no host'
        return result
    counters = (engine_window or {}).get('counters') if isinstance(engine_window, dict) else None
    generated = (counters or {}).get('tokens_predicted_total')
    prompt = (counters or {}).get('prompt_tokens_total')
    result['bytes'] = sum(result['tx_bytes'].values())
    if not _number(generated) or not _number(prompt):
        result['problem'] = "the engine's window has no token counters (its /metrics were not both read)"
        return result
    result.update(generated_tokens=int(generated), processed_tokens=int(generated + prompt))
    if generated:
        result['per_generated_token'] = result['bytes'] / float(generated)
    if generated + prompt:
        result['per_processed_token'] = result['bytes'] / float(generated + prompt)
    return result
