"""Sentences translated before, answered without decoding them again.

Clients send the same sentences over and over: a site's menus and footers on every page, a catalog sent again
with a few strings changed, a document's repeated headings. The cache keeps each decoded sentence under what
decided its translation: the model as loaded (a reload starts afresh: its key differs), the sentence's source
pieces and the decoding options (beam, n-best, penalties, with or without attention rows). A hit returns the
translation the engine gave that sentence the first time; what is built on it afterwards (joining, glossary terms,
markup) is recomputed for each request, so a cached answer is the same answer the request would have got, but for
the int8 graphs' dependence on batch mates (docs/bundle.md#batch-mates), where it is one of the answers it could
have got.

A sentence another request is decoding at that moment is waited for rather than decoded twice; if that request
fails, the waiting one decodes it itself.

Least recently used first out, bounded by an estimate of the bytes held (MT_CACHE_MB; 0 turns it off). Entries are
never changed after they are stored: everything downstream builds new objects from them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

from core.translation import Translation
from service.batcher import RequestTimeout

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


Decode = Callable[[list[Hashable], float], Awaitable[list[Translation]]]
"""Decodes the sentences of these keys within that many seconds (the server's batcher, in the route)."""


@dataclass(frozen=True)
class Looked:
    """A request's sentences through the cache: their translations, and how many it did not decode itself."""

    translations: list[Translation]
    hits: int
    """sentences answered from the cache or by another request decoding the same one at that moment"""
    decoded: int
    """distinct sentences this request decoded"""


class TranslationCache:
    """Key -> Translation, least recently used out first, at most ``max_bytes`` (estimated) held; and the keys being
    decoded right now, so that a request bringing one of them waits for it instead of decoding it again."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[Hashable, tuple[Translation, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._pending: dict[Hashable, asyncio.Future[Translation | None]] = {}
        """Keys some request is decoding (event loop only); None as result: it failed, decode it yourself."""

    async def translate(self, keys: list[Hashable], decode: Decode, timeout: float) -> Looked:
        """Each key's translation: kept from before, being decoded by another request (awaited), or decoded here,
        once per distinct key, and kept. The request's own decoding goes first and its results are handed to the
        requests waiting for them before it waits for others', so two requests waiting on each other both finish.
        A request whose sentence another one failed to decode decodes it itself."""
        deadline = time.monotonic() + timeout
        found: dict[Hashable, Translation] = {}
        mine: list[Hashable] = []
        theirs: dict[Hashable, asyncio.Future[Translation | None]] = {}
        loop = asyncio.get_running_loop()
        for key in dict.fromkeys(keys):
            hit = self.get(key)
            if hit is not None:
                found[key] = hit
            elif key in self._pending:
                theirs[key] = self._pending[key]
            else:
                mine.append(key)
                self._pending[key] = loop.create_future()
        decoded = await self._decode(mine, decode, deadline, found)
        if theirs:
            done, _ = await asyncio.wait(list(theirs.values()), timeout=max(0.0, deadline - time.monotonic()))
            if len(done) < len(theirs):
                raise RequestTimeout(timeout)
            for key, future in theirs.items():
                translation = future.result()
                if translation is not None:
                    found[key] = translation
            again = [key for key in theirs if key not in found]
            decoded += await self._decode(again, decode, deadline, found, waited=False)
        return Looked([found[key] for key in keys], hits=sum(key not in mine for key in keys), decoded=decoded)

    async def _decode(
        self,
        keys: list[Hashable],
        decode: Decode,
        deadline: float,
        found: dict[Hashable, Translation],
        waited: bool = True,
    ) -> int:
        """Decode ``keys`` (registered as pending when ``waited``), keep them and hand them to their waiters."""
        if not keys:
            return 0
        try:
            translations = await decode(keys, max(0.001, deadline - time.monotonic()))
        except BaseException:
            for key in keys if waited else ():
                self._pending.pop(key).set_result(None)  # its waiters decode it themselves
            raise
        for key, translation in zip(keys, translations, strict=True):
            self.put(key, translation)
            found[key] = translation
            if waited:
                self._pending.pop(key).set_result(translation)
        return len(keys)

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
