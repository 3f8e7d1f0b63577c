# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read what llama.cpp's ``llama-server`` says of itself: its ``/metrics`` (Prometheus text, with ``--metrics``) and the
``timings`` object of each response.

A window's engine figures are the difference of two ``/metrics`` scrapes taken around it (``metrics_delta``): the
counters (``*_total``) only grow while the server lives, so a counter that went down means the server restarted
inside the window, which is reported, never subtracted. The gauges (``prompt_tokens_seconds``,
``predicted_tokens_seconds``: the server's own averages since its start) are kept as read at the window's end.

Speculative decoding's figures come from the server's counters: drafts, draft tokens and accepted tokens, and the
accepted tokens per draft position. Two definitions, kept apart:

- acceptance rate = accepted draft tokens / draft tokens;
- mean acceptance length = 1 + accepted draft tokens / drafts (the tokens each verification step yields: the
  target's own token plus the accepted ones; SGLang's ``spec_accept_length`` counts the same way).

Two decode rates, kept apart as well: the server's (``tokens_predicted_total / tokens_predicted_seconds_total``: all
generated tokens over the time spent generating, the first token included) and the workload client's (tokens after
the first over the time after the first token). Compare like with like.

Standard library only, Python 3.8+ syntax: this file may run on managed hosts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

PREFIX = "llamacpp:"
_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)(\s+\d+)?\s*$')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')

COUNTERS = ("prompt_tokens_total", "prompt_tokens_cached_total", "prompt_seconds_total", "tokens_predicted_total",
            "tokens_predicted_seconds_total", "n_decode_total", "spec_decode_num_drafts_total",
            "spec_decode_num_draft_tokens_total", "spec_decode_num_accepted_tokens_total")
PER_POSITION = "spec_decode_num_accepted_tokens_per_pos_total"

TIMINGS_FIELDS = ("cache_n", "prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms",
                  "predicted_per_second", "draft_n", "draft_n_accepted")


_VERSION = re.compile(r'^version: (\S+) \(build (\d+), commit (\w+)\)\s*$', re.M)
_FLAG = re.compile(r'(?<![\w-])(--?[A-Za-z][\w-]*)')


class MetricsError(ValueError):
    """The text is not llama-server's /metrics."""


def parse_metrics(text):
    """``{"values": {name: float}, "per_position": {position: float}}`` from /metrics text, names without the
    ``llamacpp:`` prefix. Raises MetricsError on a line that is not a sample or a comment, or on text with no
    llamacpp sample at all (a proxy's or another server's page)."""
    values = {}
    per_position = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise MetricsError("line %d is not a Prometheus sample: %r" % (number, line[:120]))
        name, labels, value = match.group(1), match.group(2), match.group(3)
        try:
            value = float(value)
        except ValueError:
            raise MetricsError("line %d: %s has the value %r, not a number" % (number, name, value)) from None
        if not name.startswith(PREFIX):
            continue
        name = name[len(PREFIX):]
        if name == PER_POSITION:
            position = dict(_LABEL.findall(labels or "")).get("position")
            if position is None or not position.isdigit():
                raise MetricsError("line %d: %s without a numeric position label" % (number, name))
            per_position[int(position)] = value
        else:
            values[name] = value
    if not values and not per_position:
        raise MetricsError("no llamacpp: sample in the text (is --metrics on, and is this llama-server?)")
    return {"values": values, "per_position": per_position}


def metrics_delta(before, after):
    """The engine's figures for the window between two parse_metrics results: the counters' differences, the rates
    and the speculative figures derived from them (null where their denominator is 0), the gauges at the end, and
    ``problems`` (a counter that went down: the server restarted inside the window)."""
    problems = []
    delta = {}
    for name in COUNTERS:
        if name in before["values"] and name in after["values"]:
            change = after["values"][name] - before["values"][name]
            if change < 0:
                problems.append("%s went down from %g to %g: the server restarted inside the window"
                                % (name, before["values"][name], after["values"][name]))
                change = None
            delta[name] = change
        else:
            delta[name] = None
    positions = {}
    for position in sorted(after["per_position"]):
        change = after["per_position"][position] - before["per_position"].get(position, 0.0)
        positions[position] = None if change < 0 else change
    drafts = delta["spec_decode_num_drafts_total"]
    draft_tokens = delta["spec_decode_num_draft_tokens_total"]
    accepted = delta["spec_decode_num_accepted_tokens_total"]
    return {
        "counters": delta,
        "accepted_per_position": positions,
        "prompt_tokens_per_s": _ratio(delta["prompt_tokens_total"], delta["prompt_seconds_total"]),
        "decode_tokens_per_s": _ratio(delta["tokens_predicted_total"], delta["tokens_predicted_seconds_total"]),
        "cached_prompt_share": _ratio(delta["prompt_tokens_cached_total"],
                                      _sum(delta["prompt_tokens_total"], delta["prompt_tokens_cached_total"])),
        "speculative": {
            "drafts": drafts,
            "draft_tokens": draft_tokens,
            "accepted_tokens": accepted,
            "acceptance_rate": _ratio(accepted, draft_tokens),
            "mean_acceptance_length": None if _ratio(accepted, drafts) is None else 1 + accepted / drafts,
        },
        "gauges": dict((name, after["values"].get(name))
                       for name in ("prompt_tokens_seconds", "predicted_tokens_seconds", "requests_processing",
                                    "requests_deferred")),
        "problems": problems,
    }


def response_timings(body):
    """The ``timings`` object of a llama-server response (a completion's JSON, or a stream's last chunk), the fields
    named in TIMINGS_FIELDS, numbers only; None when the body has none (another server, or a gateway that dropped
    it). A field that is not a number is None."""
    timings = body.get("timings") if isinstance(body, dict) else None
    if not isinstance(timings, dict):
        return None
    return dict((field, timings[field] if isinstance(timings.get(field), (int, float))
                 and not isinstance(timings.get(field), bool) else None) for field in TIMINGS_FIELDS)


def _sum(first, second):
    if first is None or second is None:
        return None
    return first + second


def _ratio(numerator, denominator):
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def parse_version(text):
    """``{"version", "build", "commit"}`` from ``llama-server --version`` (``version: 0.5.0-dev (build 1, commit
    0c1e570)``), or None when no such line is there."""
    match = _VERSION.search(text or "")
    if not match:
        return None
    return {"version": match.group(1), "build": int(match.group(2)), "commit": match.group(3)}


def help_flags(text):
    """Every flag a ``--help`` text offers: the names that start an option's line (``-c,    --ctx-size N``,
    ``--spec-draft-model, -md, --model-draft FNAME``: each name but the last ends with a comma), so that a launch's
    argv can be checked against the build that will run it."""
    flags = set()
    for line in (text or "").splitlines():
        for token in line.split():
            found = _FLAG.match(token)
            if not found or found.group(1) != token.rstrip(","):
                break
            flags.add(found.group(1))
            if not token.endswith(","):
                break
    return flags
