# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The prompts of the workload client (_workload_prompts): deterministic, one word a token, and shared where a kind
shares a prefix."""

from ansible_collections.inferlab.distributed.plugins.module_utils._workload_prompts import (
    DEFAULT_PROMPT_TOKENS,
    WORDS,
    build_prompts,
)


def test_prompts_are_deterministic_and_one_word_per_token():
    first = build_prompts("concurrent", 3, prompt_tokens=50, seed=4)
    assert first == build_prompts("concurrent", 3, prompt_tokens=50, seed=4)
    assert first != build_prompts("concurrent", 3, prompt_tokens=50, seed=5)
    for text, requested in first:
        assert requested == 50
        words = text.split(" ")
        assert len(words) == 50 and all(w.isalpha() and w.islower() and w in WORDS for w in words)
    assert len({text for text, _n in first}) == 3
    assert len({tuple(text.split(" ")[:8]) for text, _n in first}) == 3  # no shared opening


def test_default_prompt_length():
    [(text, requested)] = build_prompts("single_stream", 1)
    assert requested == DEFAULT_PROMPT_TOKENS == len(text.split(" "))


def test_repeated_prefix_shares_the_prefix_only():
    prompts = build_prompts("repeated_prefix", 4, prefix_tokens=300, seed=1)
    words = [text.split(" ") for text, _n in prompts]
    assert all(n == 316 for _text, n in prompts) and all(len(w) == 316 for w in words)
    assert all(w[:300] == words[0][:300] for w in words)
    assert len({" ".join(w[300:]) for w in words}) == 4
    longer = build_prompts("repeated_prefix", 2, prompt_tokens=400, prefix_tokens=300, seed=1)
    assert longer[0][1] == 400 and longer[0][0].split(" ")[:300] == words[0][:300]


def test_long_context_extends_the_repeated_prefix():
    """The long prompt starts with the same words as a repeated_prefix batch of the same seed, as the reference's
    near-200K request reused the cached 120K prefix."""
    [(long_text, requested)] = build_prompts("long_context", 1, prompt_tokens=2000, seed=3)
    [(prefixed, _n)] = build_prompts("repeated_prefix", 1, prefix_tokens=1200, seed=3)
    assert requested == 2000 and len(long_text.split(" ")) == 2000
    assert long_text.split(" ")[:1200] == prefixed.split(" ")[:1200]
    assert long_text.split(" ")[1200:1216] != prefixed.split(" ")[1200:1216]
