# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_prompt_fit: the word search against brute force, on counters shaped like real tokenizers, and the tokenizer's
answers that are not a token list."""

import json
import random

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils._prompt_fit import (
    MAX_CALLS,
    ServerTokenizer,
    TokenizerError,
    fit_words,
)

VOCABULARY = ["link", "ring", "rank", "tensor", "a", "throughput", "of"]
WORDS = random.Random(3).choices(VOCABULARY, k=20000)


def text_of(count):
    return " ".join(WORDS[:count])


def byte_vocab(text):  # the lab's llama-server: a leading U+2581 and every byte, spaces as U+2581
    return len(("\u2581" + text.replace(" ", "\u2581")).encode())


def word_vocab(text):  # one token a word, and a chat-free BOS
    return len(text.split()) + 1


def brute_force(count, target):
    best = (0, 0)
    for words in range(1, 3 * target):
        tokens = count(text_of(words))
        if tokens > target:
            break
        best = (words, tokens)
    return best


@pytest.mark.parametrize("count", [byte_vocab, word_vocab])
@pytest.mark.parametrize("target", [1, 5, 17, 128, 1000, 4711])
def test_the_search_finds_what_brute_force_finds_within_its_calls(count, target):
    calls = []

    def counted(text):
        calls.append(text)
        return count(text)

    assert fit_words(counted, text_of, target) == brute_force(count, target)
    assert len(calls) <= MAX_CALLS


@pytest.mark.parametrize("suffix", [1, 7, 16, 40])
@pytest.mark.parametrize("prefix_words", [150, 600])
def test_a_short_suffix_after_a_long_prefix_is_found_within_its_calls(prefix_words, suffix):
    # the repeated_prefix step: a prefix of ~1,000-4,000 byte tokens, then a suffix of a few tokens after it
    before = " ".join(WORDS[-prefix_words:]) + " "
    base = byte_vocab(before)
    calls = []

    def counted(text):
        calls.append(text)
        return byte_vocab(before + text)

    found = fit_words(counted, text_of, base + suffix, base=base)
    assert found == brute_force(lambda text: byte_vocab(before + text), base + suffix)
    assert len(calls) <= MAX_CALLS
    if suffix >= 16:  # the longest word of the vocabulary is 11 tokens with its space
        assert found[0] >= 1


def test_one_word_too_many_tokens_gives_nothing():
    assert fit_words(lambda text: 50 * len(text.split()), text_of, 10) == (0, 0)


class Answers:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.bodies = []

    def __call__(self, method, path, timeout, headers=None, body=None):
        self.bodies.append((method, path, json.loads(body)))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_the_server_is_asked_without_special_tokens_and_counted():
    call = Answers((200, '{"tokens": [1, 2, 3]}'))
    tokenizer = ServerTokenizer(call, {}, 5)
    assert tokenizer.count("one two") == 3
    assert call.bodies == [("POST", "/tokenize", {"content": "one two", "add_special": False})]
    assert tokenizer.calls == 1


@pytest.mark.parametrize("answer, message", [
    ((500, "boom"), "POST /tokenize answered HTTP 500: boom"),
    ((200, "<html>"), "POST /tokenize answered no token list: <html>"),
    ((200, '{"count": 3}'), 'POST /tokenize answered no token list: {"count": 3}'),
    ((200, '{"tokens": 3}'), 'POST /tokenize answered tokens that are not a list: {"tokens": 3}'),
    (ConnectionRefusedError(111, "Connection refused"),
     "POST /tokenize failed: ConnectionRefusedError: [Errno 111] Connection refused"),
])
def test_an_answer_that_is_not_a_token_list_is_named(answer, message):
    with pytest.raises(TokenizerError) as error:
        ServerTokenizer(Answers(answer), {}, 5).count("x")
    assert str(error.value) == message
