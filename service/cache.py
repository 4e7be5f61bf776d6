"""Sentences translated before, answered without decoding them again.

Clients send the same sentences over and over: a site's menus and footers on every page, a catalog sent again
with a few strings changed, a document's repeated headings. The cache keeps each decoded sentence under what
decided its translation: the model as loaded (a reload starts afresh: its key differs), the sentence's source
pieces and the decoding options (beam, n-best, penalties, with or without attention rows). A hit returns the
translation the engine gave that sentence the first time; what is built on it afterwards (joining, glossary terms,
markup) is recomputed for each request, so a cached answer is the same answer the request would have got, but for
the int8 graphs' dependence on batch mates (docs/bundle.md#batch-mates), where it is one of the answers it could
have got.

Least recently used first out, bounded by an estimate of the bytes held (MT_CACHE_MB; 0 turns it off). Entries are
never changed after they are stored: everything downstream builds new objects from them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from core.translation import Translation

ENTRY_BYTES = 400
"""What an entry costs besides its pieces, ids, scores and attention: the key, the objects, the dict slot."""
PIECE_BYTES = 120
"""A piece's share: its string, its id, its log-probability, and the key's id."""


def size_of(translation: Translation) -> int:
    """An estimate of the memory an entry holds (tests/service/test_cache.py keeps it within a factor of two of what
    tracemalloc measures)."""
    size = ENTRY_BYTES + PIECE_BYTES * len(translation.source_pieces)
    for hypothesis in translation.hypotheses:
        size += ENTRY_BYTES + PIECE_BYTES * len(hypothesis.token_ids) + len(hypothesis.text) * 2
        if hypothesis.attention is not None:
            size += int(hypothesis.attention.nbytes)
    return size


class TranslationCache:
    """Key -> Translation, least recently used out first, at most ``max_bytes`` (estimated) held."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[Hashable, tuple[Translation, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Translation | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, translation: Translation) -> None:
        """Keep ``translation``; one without a usable hypothesis (a failed sentence) is not kept."""
        if not translation.hypotheses or translation.hypotheses[0].text is None:
            return
        size = size_of(translation)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._entries[key] = (translation, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0
