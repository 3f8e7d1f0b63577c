# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab model's tokenizer, chat template and text generator.

A word (``\\w+``) or a punctuation mark is one token, so a client can predict prompt lengths, and the server's counts
are exact. The generator is deterministic: seeded from the model name and the prompt, it writes sentences from a
tiny grammar, so the same request always gets the same answer and different prompts get different answers.

The lab model "emits EOS" after one to four sentences only when a request sets no token limit; with a limit it
behaves as if ``ignore_eos`` were set and produces exactly that many tokens (unless a stop string matches), which is
what benchmarks need.
"""

from __future__ import annotations

import hashlib
import random
import re
import zlib

TOKEN_RE = re.compile(r"\w+|[^\w\s]")
PIECE_RE = re.compile(r"\s*(?:\w+|[^\w\s])")
ROLES = ("system", "developer", "user", "assistant", "tool")
EOS_TOKEN_ID = 2
FIRST_WORD_ID = 100
UNKNOWN_ID_BASE = 1000
VOCAB_SIZE = 151936

# A tiny grammar: enough variety for text that reads like text.
WORDS = {
    "det": ["the", "a", "every", "one", "this", "that", "each", "our"],
    "adj": ["quiet", "steady", "bright", "narrow", "careful", "distant", "patient", "simple", "warm", "clear",
            "small", "second", "early", "shared", "open", "silent", "gentle", "rapid"],
    "noun": ["link", "host", "model", "river", "signal", "garden", "request", "lantern", "window", "token",
             "engine", "harbor", "letter", "bridge", "answer", "morning", "path", "record", "stone", "cloud"],
    "verb": ["carries", "watches", "follows", "answers", "holds", "crosses", "finds", "keeps", "measures",
             "remembers", "joins", "returns", "shapes", "opens", "meets", "builds"],
    "prep": ["across", "beside", "under", "toward", "through", "beyond", "along", "near", "over", "behind"],
    "adv": ["slowly", "again", "today", "carefully", "together", "quietly", "still", "once", "there", "soon"],
}


def _vocabulary() -> dict[str, int]:
    """Fixed ids for every token the generator can write (so ``output_ids`` are stable across runs)."""
    words = sorted({w for group in WORDS.values() for w in group} | {w.capitalize() for w in WORDS["det"]})
    return {tok: FIRST_WORD_ID + i for i, tok in enumerate([".", ",", *words])}


VOCAB = _vocabulary()


def tokenize(text: str) -> list[str]:
    """Every word (``\\w+``) and every punctuation mark is one token."""
    return TOKEN_RE.findall(text or "")


def token_id(tok: str) -> int:
    """The id of a token: the vocabulary's, else a stable hash above the vocabulary (prompts use any word)."""
    known = VOCAB.get(tok)
    if known is not None:
        return known
    return UNKNOWN_ID_BASE + zlib.crc32(tok.encode()) % (VOCAB_SIZE - UNKNOWN_ID_BASE)


def content_text(content) -> str:
    """A message's text: a string, or the concatenated ``text`` parts of a content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def render_chat(messages: list[dict]) -> str:
    """The chat template: one ``ROLE: CONTENT`` line per message, then ``assistant:``."""
    lines = [f"{m['role']}: {content_text(m.get('content'))}" for m in messages]
    return "\n".join([*lines, "assistant:"])


def _sentence(rng: random.Random) -> list[str]:
    pick = rng.choice
    words = [pick(WORDS["det"])]
    if rng.random() < 0.6:
        words.append(pick(WORDS["adj"]))
    words += [pick(WORDS["noun"]), pick(WORDS["verb"]), pick(WORDS["det"])]
    if rng.random() < 0.4:
        words.append(pick(WORDS["adj"]))
    words.append(pick(WORDS["noun"]))
    if rng.random() < 0.7:
        words += [pick(WORDS["prep"]), pick(WORDS["det"]), pick(WORDS["noun"])]
    if rng.random() < 0.3:
        words += [",", pick(WORDS["adv"])]
    words[0] = words[0].capitalize()
    return [*words, "."]


def generate(model: str, prompt_key: str, limit: int | None, seed=None) -> list[str]:
    """The answer's tokens: exactly ``limit`` of them, or one to four sentences when ``limit`` is None."""
    digest = hashlib.sha256(f"{model}\0{prompt_key}\0{seed}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    tokens: list[str] = []
    if limit is None:
        for _sentence_number in range(rng.randint(1, 4)):
            tokens += _sentence(rng)
        return tokens
    while len(tokens) < limit:
        tokens += _sentence(rng)
    return tokens[:limit]


def pieces(tokens: list[str]) -> list[str]:
    """Each token as it appears in the text: words after the first get a leading space, punctuation none."""
    return [tok if (i == 0 or not tok[0].isalnum()) else f" {tok}" for i, tok in enumerate(tokens)]


def apply_stop(text_pieces: list[str], stop: list[str]) -> tuple[list[str], str | None]:
    """Cut the answer before the first stop string: ``(pieces of the kept text, the stop string matched)``.

    The text is cut where the stop string starts; a word cut in the middle stays as a (shorter) token.
    """
    if not stop:
        return text_pieces, None
    text = "".join(text_pieces)
    hits = [(i, s) for s in stop if s and (i := text.find(s)) >= 0]
    if not hits:
        return text_pieces, None
    cut, matched = min(hits)
    return PIECE_RE.findall(text[:cut]), matched
