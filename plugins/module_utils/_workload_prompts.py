# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The prompts of a workload batch (``_llm_workload``): words drawn from ``WORDS`` with a generator seeded per role,
one word a requested token, or fitted to the server's own tokenizer (``_prompt_fit``).

One word stream per role (the shared prefix, each suffix, each unique prompt), so a ``long_context`` prompt starts
with the ``repeated_prefix`` batch's prefix of the same seed. Standard library only, Python 3.8+ syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random

from ansible_collections.inferlab.distributed.plugins.module_utils._prompt_fit import fit_words

DEFAULT_PROMPT_TOKENS = 128
SUFFIX_TOKENS = 16

# Common English words, each one token for the lab server and for common BPE tokenizers (with its leading space).
WORDS = tuple("""
time year people way day man thing woman life child world school state family student group country problem hand
part place case week company system program question work government number night point home water room mother
area money story fact month lot right study book eye job word business issue side kind head house service friend
father power hour game line end member law car city community name president team minute idea kid body information
back parent face others level office door health person art war history party result change morning reason
research girl guy moment air teacher force education foot boy age policy music market sense nation plan college
interest death experience effect class control care field development role effort rate heart drug show leader light
voice wife police mind price report decision son view relationship town road arm difference value building action
model season society tax director position player record paper space ground form event official matter center couple
site project activity star table need court oil situation cost industry figure street image phone data picture
""".split())


def _words(stream, count):
    return random.Random(stream).choices(WORDS, k=count)


def _sized_prompts(kind, requests, sized, prompt_tokens=None, prefix_tokens=None, seed=0):
    """``[(text, requested_tokens, content_tokens)]`` per request index, each text made by ``sized(stream, target,
    before)``: the words of ``stream`` that make ``before`` + text ``target`` tokens long, and their count (None when
    not counted). One word stream per role, so a long_context prompt starts with the repeated_prefix batch's prefix."""
    if kind == "repeated_prefix":
        total = prefix_tokens + SUFFIX_TOKENS if prompt_tokens is None else prompt_tokens
        prefix, _tokens = sized("inferlab:%d:prefix" % seed, prefix_tokens, "")
        prompts = []
        for index in range(requests):
            suffix, tokens = sized("inferlab:%d:suffix:%d" % (seed, index), total, prefix + " ")
            prompts.append((prefix + " " + suffix, total, tokens))
        return prompts
    if kind == "long_context":
        text, tokens = sized("inferlab:%d:prefix" % seed, prompt_tokens, "")
        return [(text, prompt_tokens, tokens)] * requests
    length = DEFAULT_PROMPT_TOKENS if prompt_tokens is None else prompt_tokens
    prompts = []
    for index in range(requests):
        text, tokens = sized("inferlab:%d:unique:%d" % (seed, index), length, "")
        prompts.append((text, length, tokens))
    return prompts


def build_prompts(kind, requests, prompt_tokens=None, prefix_tokens=None, seed=0):
    """The batch's prompts, ``[(text, requested_tokens)]`` per request index, one word a token; see the module
    docstring per kind.

    Deterministic for a given seed (on any Python 3.8+), so a rerun sends the same text and its cache label means
    what it says.
    """
    def in_words(stream, target, before):
        return " ".join(_words(stream, target - len(before.split()))), None

    return [(text, requested) for text, requested, _tokens in _sized_prompts(
        kind, requests, in_words, prompt_tokens=prompt_tokens, prefix_tokens=prefix_tokens, seed=seed)]


def build_fitted_prompts(kind, requests, count_tokens, prompt_tokens=None, prefix_tokens=None, seed=0):
    """The batch's prompts as ``build_prompts`` makes them, each sized in the server's tokens (``count_tokens``,
    _prompt_fit): ``[(text, requested_tokens, content_tokens)]``, content_tokens the count found."""
    def fitted(stream, target, before):
        words, tokens = fit_words(lambda text: count_tokens(before + text),
                                  lambda count: " ".join(_words(stream, count)), target,
                                  base=count_tokens(before) if before else 0)
        return " ".join(_words(stream, words)), tokens

    return _sized_prompts(kind, requests, fitted, prompt_tokens=prompt_tokens, prefix_tokens=prefix_tokens,
                          seed=seed)
