# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Cold against warm prefix trials of a served mode: the same long prompt, the server's prefix cache flushed before
each cold trial and kept for the warm one right after it, the labels alternating.

Each label must be proven per trial from the server's own ``cached_tokens``: 0 for a cold trial (the flush took), more
than 0 for a warm one (the prefix was reused). A trial whose proof fails is a problem, and its figures are left out
of its label's spread, never counted under the wrong label. Per label and figure (PREFIX_FIGURES): one value per
trial, and their median, min and max.

Standard library only, Python 3.8+ syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.inferlab.distributed.plugins.module_utils._acceptance import (
    AcceptanceError,
    batch_problems,
    spread,
)

PREFIX_LABELS = ('cold', 'warm')
# name -> definition; every figure is the trial's one request's.
PREFIX_FIGURES = {
    'ttft_ms': 'TTFT in ms (the prefill of the prompt, less its cached tokens)',
    'prefill_tok_s': 'prompt tokens / TTFT (cached tokens included in the prompt tokens)',
    'decode_tok_s': 'decode tok/s, TTFT excluded',
}


def _request(batch):
    records = batch.get('records') or []
    return records[0] if records and isinstance(records[0], dict) else {}


def _figures(request):
    ttft = request.get('ttft_s')
    prompt = request.get('prompt_tokens')
    numbers = isinstance(ttft, (int, float)) and not isinstance(ttft, bool) and ttft > 0
    return {
        'ttft_ms': ttft * 1000.0 if numbers else None,
        'prefill_tok_s': prompt / ttft if numbers and isinstance(prompt, int) and prompt > 0 else None,
        'decode_tok_s': request.get('decode_tok_s') if isinstance(request.get('decode_tok_s'), (int, float)) else None,
    }


def _proof(label, cached):
    if cached is None:
        return 'the server reported no cached tokens, so the %s label cannot be proven' % label
    if label == 'cold' and cached != 0:
        return 'cached_tokens %s after the flush (expected 0): not a cold prefill' % cached
    if label == 'warm' and cached <= 0:
        return 'cached_tokens 0 on the repeat (expected more than 0): the prefix was not reused'
    return None


def prefix_trials_summary(results, ranks=None):
    """The cold/warm prefix trials of a served mode for the record.

    ``results``: the registered ``results`` of the prefix trials task, in order; each has ``item`` = ``[pair,
    label]`` (label cold or warm) and ``batch`` (llm_workload's, one request) or ``msg`` when the module failed.
    ``ranks``: the rank problems read after the last trial.
    """
    if not isinstance(results, list):
        raise AcceptanceError('prefix_trials_summary needs the list of results of the prefix trials task')
    trials, problems = [], []
    for index, result in enumerate(results):
        if not isinstance(result, dict):
            raise AcceptanceError('prefix trial result %s must be a dict' % index)
        item = result.get('item')
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and item[1] in PREFIX_LABELS):
            raise AcceptanceError('prefix trial result %s: item must be [pair, label] with label one of %s, got %r'
                                  % (index, ', '.join(PREFIX_LABELS), item))
        pair, label = int(item[0]), item[1]
        batch = result.get('batch') if isinstance(result.get('batch'), dict) else None
        found = []
        if result.get('failed'):
            found.append('the request did not complete: %s' % str(result.get('msg'))[:300])
        request = _request(batch) if batch else {}
        cached = request.get('cached_tokens') if batch else None
        if batch is not None:
            found.extend(batch_problems('prefix_' + label, batch, None))
            if not found:
                proof = _proof(label, cached)
                if proof:
                    found.append(proof)
        elif not result.get('failed'):
            found.append('the request returned no result')
        trial = {'pair': pair, 'label': label, 'proven': not found, 'problems': found, 'cached_tokens': cached,
                 'prompt_tokens': request.get('prompt_tokens'), 'cache_flushed': (batch or {}).get('cache_flushed'),
                 'figures': _figures(request) if not found else {name: None for name in PREFIX_FIGURES}}
        trials.append(trial)
        problems.extend('pair %s %s: %s' % (pair, label, p) for p in found)
    problems.extend(ranks or [])
    figures = {}
    for label in PREFIX_LABELS:
        of_label = [t for t in trials if t['label'] == label]
        figures[label] = {}
        for name, definition in PREFIX_FIGURES.items():
            values = [t['figures'][name] for t in of_label]
            figures[label][name] = dict(spread(values), definition=definition, values=values)
    return {'pairs': len({t['pair'] for t in trials}), 'passed': not problems, 'problems': problems,
            'trials': trials, 'figures': figures}
