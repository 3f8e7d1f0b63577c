# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A concurrency sweep's points: the same request mix sent to one deployment at each concurrency level, every level
once per trial round (the rounds rotate through the levels, so that a drift over the sweep reaches every level
alike). Each point keeps its batch's summary figures, not its per-request records: a sweep to 32 concurrent
requests would otherwise carry thousands of them into the record.

Standard library only, Python 3.8+ syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.inferlab.distributed.plugins.module_utils._acceptance import AcceptanceError

# The batch figures a point keeps (llm_workload's batch; the statistics are {n, mean, median, p99, min, max}).
POINT_FIGURES = ('kind', 'cache', 'error', 'wall_s', 'ok', 'failed', 'aggregate_output_tok_s', 'ttft_s', 'itl_s',
                 'output_tok_s', 'latency_s')


def _whole(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise AcceptanceError('expects %s to be a whole number, found %r' % (what, value))
    try:
        number = int(value)
    except ValueError:
        raise AcceptanceError('expects %s to be a whole number, found %r' % (what, value)) from None
    if number < 1:
        raise AcceptanceError('expects %s of at least 1, found %d' % (what, number))
    return number


def _started(batch):
    records = batch.get('records') or []
    first = records[0] if records and isinstance(records[0], dict) else {}
    start = first.get('start') if isinstance(first.get('start'), dict) else {}
    return start.get('wall')


def sweep_points(results):
    """llm_workload results registered over loop items ``[trial, level]`` -> one point per batch, in the order sent:
    ``{trial, level, started, error, batch}``; ``batch`` holds POINT_FIGURES, or is null (and ``error`` says why)
    when the batch was never sent."""
    if not isinstance(results, list):
        raise AcceptanceError('expects the registered results of the sweep loop (a list), found %s'
                              % type(results).__name__)
    points = []
    for index, result in enumerate(results):
        item = result.get('item') if isinstance(result, dict) else None
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise AcceptanceError('result %d: expects its loop item to be [trial, level], found %r' % (index, item))
        batch = result.get('batch') if isinstance(result.get('batch'), dict) else None
        points.append({
            'trial': _whole(item[0], 'result %d\'s trial' % index),
            'level': _whole(item[1], 'result %d\'s concurrency level' % index),
            'started': _started(batch) if batch else None,
            'error': (batch.get('error') if batch else (result.get('msg') or 'the batch was not sent')),
            'batch': dict((name, batch.get(name)) for name in POINT_FIGURES) if batch else None,
        })
    return points
