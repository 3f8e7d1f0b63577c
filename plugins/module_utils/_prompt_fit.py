# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Prompts sized in the server's own tokens, not in words.

A word is one token for the lab's emulator and for many BPE vocabularies, but not for every tokenizer: on a
byte-vocabulary llama-server a 200-word prompt is about 1,700 tokens, and a near-context-length request sized in
words would overflow the context. Here the server counts (``POST /tokenize``), and the word count is searched: the
most words of a deterministic word stream whose text has at most the requested tokens. The count grows with the words
(one more word never takes tokens away), so the search narrows a bracket, guessing by the last ratio of tokens to
words; a handful of calls, each a tokenization of the prompt.

The text found is a whole number of words, so it may be a few tokens short of the request (a word of the lab's byte
vocabulary is about 7 tokens): the records keep the count found beside the one requested.

Standard library only, Python 3.8+ syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.client
import json

MAX_CALLS = 12


class TokenizerError(ValueError):
    """The server's tokenizer could not be asked, or answered something else than a token list."""


def fit_words(count_tokens, text_of, target, max_calls=MAX_CALLS, base=0):
    """``(words, tokens)``: the most words whose ``text_of(words)`` has at most ``target`` tokens by
    ``count_tokens``, within ``max_calls`` counts; ``(0, 0)`` when even one word is too many.

    ``base``: the tokens the count includes besides the words (a prefix that the words follow), so that the guesses
    scale the words' own tokens. Without it a long prefix and a short suffix look like one slow ratio, and the search
    runs out of calls before it reaches the few words that fit."""
    low, high = (0, 0), None  # (words, tokens) known to fit; the fewest words known not to fit
    words = max(target - base, 1)
    for _call in range(max_calls):
        tokens = count_tokens(text_of(words))
        if tokens <= target:
            low = max(low, (words, tokens))
            if tokens == target:
                break
        else:
            high = words if high is None else min(high, words)
        guess = int(words * (target - base) / (tokens - base)) if tokens > base else words * 2
        if high is not None:
            guess = min(guess, high - 1)
        guess = max(guess, low[0] + 1)
        if (high is not None and guess >= high) or guess == words:
            break
        words = guess
    return low


class ServerTokenizer:
    """``count(text)``: how many tokens the server's ``POST /tokenize`` (llama-server: ``{"content": text}`` ->
    ``{"tokens": [...]}``) makes of a text, without special tokens; ``calls`` says how often it was asked."""

    def __init__(self, call, headers, timeout):
        self.call, self.headers, self.timeout, self.calls = call, headers, timeout, 0

    def count(self, text):
        self.calls += 1
        body = json.dumps({"content": text, "add_special": False}).encode("utf-8")
        try:
            status, answer = self.call("POST", "/tokenize", self.timeout, headers=self.headers, body=body)
        except (OSError, http.client.HTTPException) as exc:
            raise TokenizerError("POST /tokenize failed: %s: %s" % (type(exc).__name__, exc)) from None
        if status != 200:
            raise TokenizerError("POST /tokenize answered HTTP %d: %s" % (status, answer.strip()[:300]))
        try:
            tokens = json.loads(answer)["tokens"]
        except (ValueError, KeyError, TypeError):
            raise TokenizerError("POST /tokenize answered no token list: %s" % answer.strip()[:300]) from None
        if not isinstance(tokens, list):
            raise TokenizerError("POST /tokenize answered tokens that are not a list: %s" % answer.strip()[:300])
        return len(tokens)
