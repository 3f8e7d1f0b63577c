# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read what NCCL says about its collectives, and compare the link's bytes with what the TP collectives must move.

Two sources, both observed:

- the COLL lines of an ``NCCL_DEBUG=INFO`` log (``NCCL_DEBUG_SUBSYS`` including COLL), one per collective call, at
  enqueue time, without a duration::

      [2026-03-01 12:00:00] gpu-a:4242:4242 [0] NCCL INFO AllReduce: opCount 1f sendbuff 0x7f.. recvbuff 0x7f..
      count 4096 datatype 9 op 0 root 0 comm 0x55.. [nranks=2] stream 0x55..

  (one line in the log). The ``[timestamp] `` prefix exists from NCCL 2.26.2 on, and on INFO lines only with
  ``NCCL_DEBUG_TIMESTAMP_LEVELS`` including INFO; its default format ``[%F %T] `` is read, with or without
  sub-seconds (``%Nf``), as local time of the host that wrote it (or ``utc_offset_s`` when given). The count is
  ``%zu`` from NCCL 2.26 on and ``%zi`` before: both are digits. A collective replayed in a CUDA graph prints no
  line. Words after ``stream <ptr>`` (RCCL adds some) are ignored.
- the NCCL Inspector profiler plugin's JSON (NCCL 2.28.3 on, format v4.0): one object per line with ``header``,
  ``metadata`` and ``coll_perf``; with its verbose dump, ``coll_perf.event_trace_ts`` too. Each dump writes the
  latest completed collective of each communicator, so records can be a sample of the collectives: ``coll_sn``
  shows the gaps.

Nothing here raises on bad input text: a line that cannot be read is a problem (``"line N: ..."``) in the result.
The theory (``allreduce_theory``) is kept apart from the observed figures, and every result carries its inputs.

Standard library only, Python 3.8+ syntax: this file may run on managed hosts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import re
import statistics
import time

from ansible_collections.inferlab.distributed.plugins.module_utils._link_verdict import percentile_nearest_rank

# ncclDataType_t (nccl.h): number -> (name, bytes per element).
DATATYPES = {
    0: ('ncclInt8', 1), 1: ('ncclUint8', 1), 2: ('ncclInt32', 4), 3: ('ncclUint32', 4), 4: ('ncclInt64', 8),
    5: ('ncclUint64', 8), 6: ('ncclFloat16', 2), 7: ('ncclFloat32', 4), 8: ('ncclFloat64', 8),
    9: ('ncclBfloat16', 2), 10: ('ncclFloat8e4m3', 1), 11: ('ncclFloat8e5m2', 1),
}
# ncclRedOp_t (nccl.h); numbers from 5 on are reduction ops a program created (ncclRedOpCreatePreMulSum).
REDUCTION_OPS = {0: 'sum', 1: 'prod', 2: 'max', 3: 'min', 4: 'avg'}
CUSTOM_REDUCTION_OP = 'custom'

# NCCL's debug prefix, ``[timestamp ]host:pid:tid [cudaDev] NCCL INFO <message>``.
INFO_LINE = re.compile(r'^(?:\[(?P<timestamp>[^\]]*)\] )?(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) '
                       r'\[(?P<device>\d+)\] NCCL INFO (?P<message>.*)$')
COLL_MESSAGE = re.compile(
    r'^(?P<op>[A-Za-z]+): opCount (?P<opcount>[0-9a-fA-F]+) sendbuff (?P<sendbuff>\S+) recvbuff (?P<recvbuff>\S+) '
    r'count (?P<count>\d+) datatype (?P<datatype>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>\S+) '
    r'\[nranks=(?P<nranks>\d+)\] stream (?P<stream>\S+)(?: .*)?$')
# What makes a line a COLL line, readable or not: a truncated or garbled one still says this.
COLL_MARK = re.compile(r'[A-Za-z]+: opCount\b')
# NCCL's operation names (ncclFuncToString and newer ones); a message that is one of them cut short is a COLL line.
COLL_START = re.compile(r'^(?:AllReduce|AllGatherV?|ReduceScatter|Broadcast|Reduce|Send|Recv|SendRecv|AlltoAll|Gather|'
                        r'Scatter)(?::|$)')
TIMESTAMP = re.compile(r'^(?P<seconds>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.(?P<fraction>\d{1,9}))?$')

# The Inspector's fields this reader needs: (section, key, type).
INSPECTOR_FIELDS = (
    ('header', 'id', str), ('header', 'rank', int), ('header', 'n_ranks', int),
    ('metadata', 'inspector_output_format_version', str), ('metadata', 'dump_timestamp_us', int),
    ('metadata', 'hostname', str), ('metadata', 'pid', int),
    ('coll_perf', 'coll', str), ('coll_perf', 'coll_sn', int), ('coll_perf', 'coll_msg_size_bytes', int),
    ('coll_perf', 'coll_exec_time_us', int), ('coll_perf', 'coll_algobw_gbs', float),
    ('coll_perf', 'coll_busbw_gbs', float),
)

# A Megatron-style TP layer all-reduces twice: after attention's output projection and after the MLP's down
# projection. The caller says how many its model does (``allreduces_per_layer``); this is the usual figure.
MEGATRON_ALLREDUCES_PER_LAYER = 2


class NcclInputError(ValueError):
    """An input of the overhead arithmetic or of a summary is out of range; the message names it."""


def _problem(number, text, line):
    return 'line %d: %s: %r' % (number, text, line[:160])


def _parse_lines(text, parse_line):
    """``{records, lines, problems}``: ``parse_line`` on each line, records numbered from 1, problems by line."""
    records, problems = [], []
    lines = (text or '').splitlines()
    for number, line in enumerate(lines, 1):
        record, problem = parse_line(line)
        if record is not None:
            record['line'] = number
            records.append(record)
        if problem is not None:
            problems.append(_problem(number, problem, line))
    return {'records': records, 'lines': len(lines), 'problems': problems}


def parse_timestamp(text, utc_offset_s=None):
    """Epoch seconds of a ``[%F %T] `` timestamp (``%F %T.%Nf`` too); None when it is not in that format.

    NCCL prints local time: ``utc_offset_s`` is the writer's offset from UTC (east positive); None reads it as this
    machine's local time, right when the log is read on the host that wrote it.
    """
    match = TIMESTAMP.match(text)
    if not match:
        return None
    try:
        fields = time.strptime(match.group('seconds'), '%Y-%m-%d %H:%M:%S')
    except ValueError:
        return None
    if utc_offset_s is None:
        seconds = time.mktime(fields[:8] + (-1,))
    else:
        seconds = calendar.timegm(fields) - utc_offset_s
    fraction = match.group('fraction')
    return seconds + (int(fraction) / 10 ** len(fraction) if fraction else 0)


def parse_coll_line(line, utc_offset_s=None):
    """``(record, problem)`` for one log line: ``(None, None)`` when it is not a COLL line at all.

    A record has ``op, opcount, count, datatype, datatype_name, element_size, bytes, reduction, root, nranks, comm,
    host, pid, tid, device, rank_key, timestamp`` (epoch seconds or None) and ``time_us`` None (COLL lines carry no
    duration). ``bytes`` is count x element size: the message size of that call (for AllGather the count sent by a
    rank, for ReduceScatter the count each rank receives, as NCCL's API takes them).
    """
    prefix = INFO_LINE.match(line)
    if not prefix:
        if COLL_MARK.search(line):
            return None, 'a COLL message without NCCL\'s "host:pid:tid [dev] NCCL INFO " prefix'
        return None, None
    message = prefix.group('message')
    if not (COLL_MARK.match(message) or COLL_START.match(message)):
        return None, None
    coll = COLL_MESSAGE.match(message)
    if not coll:
        return None, 'not a complete COLL line ("<Op>: opCount <hex> ... [nranks=<n>] stream <ptr>"; truncated?)'
    datatype = int(coll.group('datatype'))
    if datatype not in DATATYPES:
        return None, 'datatype %d is not one of ncclDataType_t 0-%d' % (datatype, max(DATATYPES))
    name, size = DATATYPES[datatype]
    count = int(coll.group('count'))
    redop = int(coll.group('redop'))
    timestamp, problem = None, None
    if prefix.group('timestamp') is not None:
        timestamp = parse_timestamp(prefix.group('timestamp'), utc_offset_s)
        if timestamp is None:
            problem = 'timestamp [%s] is not in the format "[%%F %%T] " (read as untimed)' % prefix.group('timestamp')
    record = {
        'op': coll.group('op'), 'opcount': int(coll.group('opcount'), 16), 'count': count, 'datatype': datatype,
        'datatype_name': name, 'element_size': size, 'bytes': count * size,
        'reduction': REDUCTION_OPS.get(redop, CUSTOM_REDUCTION_OP), 'root': int(coll.group('root')),
        'nranks': int(coll.group('nranks')), 'comm': coll.group('comm'), 'host': prefix.group('host'),
        'pid': int(prefix.group('pid')), 'tid': int(prefix.group('tid')), 'device': int(prefix.group('device')),
        'rank_key': '%s:%s' % (prefix.group('host'), prefix.group('pid')), 'timestamp': timestamp, 'time_us': None,
    }
    return record, problem


def parse_coll_log(text, utc_offset_s=None):
    """``{records, lines, problems}`` of an NCCL debug log's text: one record per COLL line, in order.

    Lines that are not COLL lines (other INFO lines, WARN lines, anything else) are skipped. A COLL line that cannot
    be read is a problem with its line number and is not a record.
    """
    return _parse_lines(text, lambda line: parse_coll_line(line.rstrip('\r'), utc_offset_s))


def _field(obj, section, key, kind):
    """The value of ``obj[section][key]`` when it has the type ``kind`` (an int for a float too), else None."""
    value = obj.get(section, {}).get(key) if isinstance(obj.get(section), dict) else None
    if isinstance(value, bool):
        return None
    if kind is float and isinstance(value, int):
        return float(value)
    return value if isinstance(value, kind) else None


def parse_inspector_line(line):
    """``(record, problem)`` for one line of an Inspector log; ``(None, None)`` for a blank line.

    A record has ``op, sn, bytes, time_us, timing_source`` (None before the plugin wrote it), ``algobw_gbs,
    busbw_gbs, rank, nranks, comm, host, pid, rank_key, format_version``, and ``timestamp`` (epoch seconds) with
    ``timestamp_source``: the collective's start (``coll_start_ts``) when the dump is verbose, else the dump's
    time (``dump_timestamp_us``, after the collective completed).
    """
    if not line.strip():
        return None, None
    try:
        obj = json.loads(line)
    except ValueError:
        return None, 'not a JSON object (truncated?)'
    if not isinstance(obj, dict):
        return None, 'not a JSON object'
    values = {}
    for section, key, kind in INSPECTOR_FIELDS:
        values[key] = _field(obj, section, key, kind)
        if values[key] is None:
            return None, '%s.%s is missing or not %s' % (section, key, 'a number' if kind is float else kind.__name__)
    perf = obj['coll_perf']
    timing_source = perf.get('coll_timing_source')
    trace = perf.get('event_trace_ts')
    start_us = trace.get('coll_start_ts') if isinstance(trace, dict) else None
    verbose = isinstance(start_us, int) and not isinstance(start_us, bool) and start_us > 0
    record = {
        'op': values['coll'], 'sn': values['coll_sn'], 'bytes': values['coll_msg_size_bytes'],
        'time_us': values['coll_exec_time_us'], 'timing_source': timing_source if isinstance(timing_source, str)
        else None, 'algobw_gbs': values['coll_algobw_gbs'], 'busbw_gbs': values['coll_busbw_gbs'],
        'rank': values['rank'], 'nranks': values['n_ranks'], 'comm': values['id'], 'host': values['hostname'],
        'pid': values['pid'], 'rank_key': '%s:%d' % (values['hostname'], values['pid']),
        'format_version': values['inspector_output_format_version'],
        'timestamp': (start_us if verbose else values['dump_timestamp_us']) / 1e6,
        'timestamp_source': 'coll_start_ts' if verbose else 'dump_timestamp_us',
    }
    return record, None


def parse_inspector_log(text):
    """``{records, lines, problems}`` of an Inspector output file (``<host>-pid<pid>.log``), one record per line."""
    return _parse_lines(text, parse_inspector_line)


def _timing(records):
    """Time and bandwidth figures of timed records: total, median and p99 (nearest rank) time, median bandwidths."""
    times = [r['time_us'] for r in records]
    return {'time_us_total': sum(times), 'time_us_median': statistics.median(times),
            'time_us_p99': percentile_nearest_rank(times, 99),
            'algobw_gbs_median': statistics.median([r['algobw_gbs'] for r in records]),
            'busbw_gbs_median': statistics.median([r['busbw_gbs'] for r in records])}


def _in_window(record, start, end):
    return start <= record['timestamp'] < end


def summarize(records, start=None, end=None, whole_log=False):
    """Collectives per kind in a window ``[start, end)`` (epoch seconds) of one or more ranks' records.

    Records without a timestamp are ``untimed``: they count only when ``whole_log`` says the whole log is the window
    (then nothing is cut by time, and ``start``/``end`` are only noted). Per kind: ``count`` and ``bytes`` over all
    ranks, ``per_rank`` ``{rank_key: {count, bytes}}``, and where the records are timed (Inspector) the figures of
    ``_timing`` per kind and per rank, with each rank's ``time_share`` of the window when it has both ends. For
    Inspector records ``per_rank`` also has ``sn_first`` and ``sn_last``: more sequence numbers than records means
    the dumps sampled the collectives.
    """
    if not whole_log and (start is None or end is None):
        raise NcclInputError('a window needs start and end (epoch seconds), or whole_log=True')
    if start is not None and end is not None and end <= start:
        raise NcclInputError('the window ends (%s) before it starts (%s)' % (end, start))
    kept, untimed, outside = [], 0, 0
    for record in records:
        if whole_log:
            kept.append(record)
        elif record['timestamp'] is None:
            untimed += 1
        elif _in_window(record, start, end):
            kept.append(record)
        else:
            outside += 1
    window_s = end - start if start is not None and end is not None else None
    kinds = {}
    for op in sorted({r['op'] for r in kept}):
        of_kind = [r for r in kept if r['op'] == op]
        kind = {'count': len(of_kind), 'bytes': sum(r['bytes'] for r in of_kind), 'per_rank': {}}
        timed = all(r['time_us'] is not None for r in of_kind)
        if timed:
            kind.update(_timing(of_kind))
        for rank_key in sorted({r['rank_key'] for r in of_kind}):
            of_rank = [r for r in of_kind if r['rank_key'] == rank_key]
            rank = {'count': len(of_rank), 'bytes': sum(r['bytes'] for r in of_rank)}
            if timed:
                rank.update(_timing(of_rank))
                rank['time_share'] = rank['time_us_total'] / 1e6 / window_s if window_s else None
            if 'sn' in of_rank[0]:
                rank['sn_first'] = min(r['sn'] for r in of_rank)
                rank['sn_last'] = max(r['sn'] for r in of_rank)
            kind['per_rank'][rank_key] = rank
        kinds[op] = kind
    return {'window': {'start': start, 'end': end, 'whole_log': whole_log}, 'records': len(kept),
            'untimed': untimed, 'outside': outside, 'collectives': kinds}


def ring_allreduce_send_factor(tp_size):
    """Bytes each rank sends per byte all-reduced by a ring: 2(n-1)/n (n = 2: 1)."""
    return 2.0 * (tp_size - 1) / tp_size


def _positive_int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise NcclInputError('%s must be an integer >= %d, got %r' % (name, minimum, value))
    return value


def allreduce_theory(hidden_size, num_layers, dtype_bytes, tp_size, prompt_tokens, generated_tokens,
                     allreduces_per_layer, verify_steps=None, verify_width=None):
    """The bytes a TP rank must send for its all-reduces in theory, with the inputs.

    Every token a forward pass processes all-reduces a ``hidden_size`` vector of ``dtype_bytes`` elements
    ``allreduces_per_layer`` times per layer (2 for a Megatron-style layer: attention output and MLP output).
    Tokens processed: ``prompt_tokens`` (the prefill's, cached ones excluded: they are not computed again) plus the
    decode's, ``generated_tokens`` without speculation, or ``verify_steps`` x ``verify_width`` with it (NEXTN,
    EAGLE: every verify step runs ``verify_width`` = the draft tokens through the model, accepted or not). A ring
    all-reduce of S bytes makes each rank send about 2(n-1)/n x S bytes.
    """
    for name, value in (('hidden_size', hidden_size), ('num_layers', num_layers), ('dtype_bytes', dtype_bytes),
                        ('allreduces_per_layer', allreduces_per_layer)):
        _positive_int(name, value)
    _positive_int('tp_size', tp_size, 2)
    _positive_int('prompt_tokens', prompt_tokens, 0)
    _positive_int('generated_tokens', generated_tokens, 0)
    if (verify_steps is None) != (verify_width is None):
        raise NcclInputError('verify_steps and verify_width go together (speculative decoding), got %r and %r'
                             % (verify_steps, verify_width))
    if verify_steps is None:
        decode_tokens = generated_tokens
    else:
        decode_tokens = _positive_int('verify_steps', verify_steps, 0) * _positive_int('verify_width', verify_width)
    tokens = prompt_tokens + decode_tokens
    bytes_per_token = hidden_size * dtype_bytes * allreduces_per_layer * num_layers
    allreduced = tokens * bytes_per_token
    factor = ring_allreduce_send_factor(tp_size)
    return {
        'inputs': {'hidden_size': hidden_size, 'num_layers': num_layers, 'dtype_bytes': dtype_bytes,
                   'tp_size': tp_size, 'prompt_tokens': prompt_tokens, 'generated_tokens': generated_tokens,
                   'allreduces_per_layer': allreduces_per_layer, 'verify_steps': verify_steps,
                   'verify_width': verify_width},
        'tokens_processed': tokens,
        'allreduce_bytes_per_token': bytes_per_token,
        'allreduce_bytes': allreduced,
        'ring_send_factor': factor,
        'theory_bytes_sent_per_rank': allreduced * factor,
        'formula': 'tokens_processed x hidden_size x dtype_bytes x allreduces_per_layer x num_layers x 2(n-1)/n',
    }


def wire_overhead(theory, observed_bytes_sent):
    """``observed_bytes_sent`` (a rank's host, on the link, in the window) over the theory's bytes per rank.

    The observed bytes include everything on the wire: Ethernet, IP and TCP headers, NCCL's own protocol, and any
    other traffic on the link in the window. A ratio near 1 says the link carried about what the collectives need.
    """
    _positive_int('observed_bytes_sent', observed_bytes_sent, 0)
    expected = theory['theory_bytes_sent_per_rank']
    return {'observed_bytes_sent': observed_bytes_sent, 'theory': theory,
            'ratio': observed_bytes_sent / expected if expected else None}


def window_collectives(start, end, coll_text=None, inspector_texts=(), utc_offset_s=None, max_problems=10):
    """One rank host's collectives in the window ``[start, end)`` (epoch seconds of the host that wrote the traces).

    The Inspector's records when ``inspector_texts`` (the text of each of its files) hold any, for they are timed;
    else the COLL lines of ``coll_text`` (a rank's log). ``source`` says which: ``inspector``, ``coll``, or ``none``
    when neither holds a collective (NCCL_DEBUG_SUBSYS without COLL, or no trace asked for). A COLL trace without
    timestamps (NCCL before 2.26.2, or NCCL_DEBUG_TIMESTAMP_LEVELS without INFO) cannot be cut to the window: its
    lines are counted in ``untimed``, never guessed into it. At most ``max_problems`` problems are kept;
    ``problem_count`` counts them all.
    """
    parsed = {'records': [], 'lines': 0, 'problems': []}
    source = 'none'
    for text in inspector_texts:
        one = parse_inspector_log(text)
        parsed['records'].extend(one['records'])
        parsed['lines'] += one['lines']
        parsed['problems'].extend(one['problems'])
    if parsed['records']:
        source = 'inspector'
    elif coll_text is not None:
        inspector_problems = parsed['problems']
        parsed = parse_coll_log(coll_text, utc_offset_s)
        parsed['problems'] = inspector_problems + parsed['problems']
        if parsed['records']:
            source = 'coll'
    summary = summarize(parsed['records'], start, end)
    summary.update({'source': source, 'lines': parsed['lines'], 'problem_count': len(parsed['problems']),
                    'problems': parsed['problems'][:max_problems]})
    return summary


UNREPORTED_CACHE = 'the server reported no cached tokens for some batches: all their prompt tokens count'
# config.json's torch_dtype -> bytes per element of the activations the TP all-reduces carry.
DTYPE_BYTES = {'bfloat16': 2, 'float16': 2, 'half': 2, 'float32': 4, 'float': 4}


def batches_wire_overhead(batches, model_config, tp_size, observed_bytes_sent, verify_width=None,
                          allreduces_per_layer=MEGATRON_ALLREDUCES_PER_LAYER):
    """The wire overhead of one served mode's window: each host's link bytes sent over the TP all-reduces' theory.

    ``batches``: the workload batches sent in the window (the ladder's and the trials'; None entries are skipped).
    Tokens processed: each batch's ``prompt_tokens_total`` less its ``cached_tokens_total`` (a server that reports
    no cached tokens counts them all, and a note says so), and ``output_tokens_total``; with speculative decoding
    (``verify_width``: the draft tokens each verify step runs) the verify steps are each batch's output tokens over
    its ``spec_accept_length.value``. ``model_config``: config.json's ``hidden_size``, ``num_hidden_layers`` and
    ``torch_dtype``. ``observed_bytes_sent``: ``{host: the link interface's tx_bytes in the window}``.

    Returns ``{theory, hosts: {host: {observed_bytes_sent, ratio}}, notes, problem}``: ``problem`` (and no theory)
    when an input is missing, never an exception for data a run can lack.
    """
    notes = []
    batches = [b for b in (batches or []) if isinstance(b, dict)]
    config = model_config if isinstance(model_config, dict) else {}
    dtype = config.get('torch_dtype')
    missing = [key for key in ('hidden_size', 'num_hidden_layers') if not isinstance(config.get(key), int)]
    problem = None
    if missing:
        problem = 'the model config has no %s' % ' or '.join(missing)
    elif dtype not in DTYPE_BYTES:
        problem = 'the model config\'s torch_dtype %r is not one of %s' % (dtype, ', '.join(sorted(DTYPE_BYTES)))
    elif not batches:
        problem = 'no workload batch in the window'
    prompt = generated = verify_steps = 0
    for batch in batches if problem is None else []:
        total, cached = batch.get('prompt_tokens_total') or 0, batch.get('cached_tokens_total')
        if cached is None:
            cached = 0
            if total and UNREPORTED_CACHE not in notes:
                notes.append(UNREPORTED_CACHE)
        output = batch.get('output_tokens_total') or 0
        prompt += max(total - cached, 0)
        generated += output
        if verify_width is not None and output:
            accept = (batch.get('spec_accept_length') or {}).get('value')
            if not accept:
                problem = 'a speculative batch (%s) has no spec_accept_length to count its verify steps' % (
                    batch.get('kind') or 'unnamed')
                break
            verify_steps += int(round(output / accept))
    if problem is not None:
        return {'theory': None, 'hosts': {}, 'notes': notes, 'problem': problem}
    theory = allreduce_theory(config['hidden_size'], config['num_hidden_layers'], DTYPE_BYTES[dtype], tp_size,
                              prompt, generated, allreduces_per_layer,
                              verify_steps=verify_steps if verify_width is not None else None,
                              verify_width=verify_width)
    hosts = {}
    for host, sent in sorted((observed_bytes_sent or {}).items()):
        if isinstance(sent, int) and not isinstance(sent, bool) and sent >= 0:
            hosts[host] = {'observed_bytes_sent': sent, 'ratio': wire_overhead(theory, sent)['ratio']}
        else:
            hosts[host] = {'observed_bytes_sent': None, 'ratio': None}
            notes.append('%s: no link bytes sent in the window' % host)
    return {'theory': theory, 'hosts': hosts, 'notes': notes, 'problem': None}
