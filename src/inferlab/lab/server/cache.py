# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The prefix cache: token-level (page size 1, like SGLang's default radix cache), LRU, bounded by a token budget.

Each cached prefix of length n is one entry keyed by a chained hash of its n tokens, so looking up a prompt walks it
token by token and stops at the first miss. Entries are refreshed deepest first, which keeps a prefix at least as
recent as anything that extends it: eviction then removes the tails of sequences before their heads, as a radix tree
evicts leaves. Only the engine thread touches the cache.
"""

from __future__ import annotations

from collections import OrderedDict


class PrefixCache:
    def __init__(self, budget_tokens: int):
        self.budget = budget_tokens
        self._entries: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def _keys(tokens) -> list[int]:
        keys = []
        key = 0
        for tok in tokens:
            key = hash((key, tok))
            keys.append(key)
        return keys

    def match(self, tokens) -> int:
        """How many leading tokens are cached. Refreshes what matched."""
        entries = self._entries
        matched = []
        for key in self._keys(tokens):
            if key not in entries:
                break
            matched.append(key)
        for key in reversed(matched):
            entries.move_to_end(key)
        return len(matched)

    def insert(self, tokens) -> None:
        """Cache every prefix of ``tokens``, then evict the least recently used entries beyond the budget."""
        entries = self._entries
        for key in reversed(self._keys(tokens)):
            entries[key] = None
            entries.move_to_end(key)
        while len(entries) > self.budget:
            entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()
