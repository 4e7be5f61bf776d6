"""The batcher on its own, driven by asyncio directly: grouping, budgets, bounds, failures."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest

from core.translation import DecodeOptions, Translation
from service.batcher import (
    Batcher,
    BatcherClosed,
    BatchFailed,
    BatchLimits,
    QueueFull,
    RequestTimeout,
    TooManySentences,
)
from service.metrics import Metrics
from testkit.fake_engine import FakeEngine

T = TypeVar("T")
GREEDY = DecodeOptions(beam_size=1)
BEAM = DecodeOptions(beam_size=4)


def engine(**fake: object) -> FakeEngine:
    return FakeEngine({"name": "fake", "version": "1", "fake": fake})


def run(limits: BatchLimits, body: Callable[[Batcher], Awaitable[T]]) -> T:
    async def main() -> T:
        batcher = Batcher(limits, Metrics())
        batcher.start()
        try:
            return await body(batcher)
        finally:
            await batcher.close(timeout_s=5)

    return asyncio.run(main())


def test_concurrent_requests_share_one_batch_and_keep_their_order() -> None:
    e = engine()
    texts = [["a b c", "d"], ["e f"], ["g h i j", "k l", "m"]]

    async def body(b: Batcher) -> list[list[str]]:
        calls = [b.translate(e, [e.tokenize(t) for t in ts], BEAM, 5) for ts in texts]
        results = await asyncio.gather(*calls)
        return [[t.best.text for t in r] for r in results]

    out = run(BatchLimits(max_wait_s=0.05), body)
    assert out == [["c b a", "d"], ["f e"], ["j i h g", "l k", "m"]]
    assert e.batch_sizes == [6]
    assert [len(ids) for ids in e.batches[0]] == sorted(len(ids) for ids in e.batches[0])


def test_different_options_never_share_a_batch() -> None:
    e = engine()

    async def body(b: Batcher) -> None:
        await asyncio.gather(
            b.translate(e, [e.tokenize("a b")], GREEDY, 5),
            b.translate(e, [e.tokenize("c d")], BEAM, 5),
            b.translate(e, [e.tokenize("e f")], GREEDY, 5),
        )

    run(BatchLimits(max_wait_s=0.05), body)
    assert sorted(zip(e.batch_sizes, [o.beam_size for o in e.options], strict=True)) == [
        (1, 4),
        (2, 1),
    ]


def test_batches_respect_the_token_and_sentence_budgets() -> None:
    e = engine()
    sentences = [" ".join(["w"] * n) for n in (1, 7, 2, 7, 3, 1, 2, 6)]

    async def body(b: Batcher) -> list[str]:
        result = await b.translate(e, [e.tokenize(s) for s in sentences], BEAM, 5)
        return [t.best.text for t in result]

    assert run(BatchLimits(max_tokens=16, max_sentences=3, max_wait_s=0.01), body) == sentences
    assert sum(e.batch_sizes) == len(sentences)
    for batch in e.batches:
        assert len(batch) <= 3
        assert len(batch) == 1 or len(batch) * (max(len(ids) for ids in batch) + 1) <= 16


def test_queue_bound_refuses_with_retry_after_and_oversized_requests_with_413() -> None:
    e = engine(delay_s=0.3)

    async def body(b: Batcher) -> tuple[QueueFull, int]:
        running = asyncio.create_task(b.translate(e, [e.tokenize("a")], BEAM, 5))
        while not e.batches:  # the first request is decoding, no longer queued
            await asyncio.sleep(0.01)
        queued = asyncio.create_task(b.translate(e, [e.tokenize("b")] * 3, BEAM, 5))
        await asyncio.sleep(0.01)
        with pytest.raises(QueueFull) as refused:
            await b.translate(e, [e.tokenize("c")] * 2, BEAM, 5)
        with pytest.raises(TooManySentences):
            await b.translate(e, [e.tokenize("d")] * 5, BEAM, 5)
        await asyncio.gather(running, queued)
        return refused.value, b.depth

    refused, depth = run(BatchLimits(max_queue=4, max_wait_s=0, inflight=1), body)  # one decodes, one queues
    assert refused.retry_after >= 1
    assert "3 sentences are queued" in str(refused)
    assert depth == 0


@pytest.mark.parametrize("inflight", [1, 2, 3])
def test_at_most_inflight_batches_decode_at_once(inflight: int) -> None:
    e = engine(delay_s=0.15)
    decode = e.translate_ids
    lock = threading.Lock()
    now = [0, 0]  # decoding now, most at once

    def counted(batch: list[list[int]], options: DecodeOptions) -> list[Translation]:
        with lock:
            now[0] += 1
            now[1] = max(now)
        try:
            return decode(batch, options)
        finally:
            with lock:
                now[0] -= 1

    e.translate_ids = counted  # type: ignore[method-assign]
    options = [DecodeOptions(beam_size=b) for b in (1, 2, 3, 4)]  # four batches: options never share one

    async def body(b: Batcher) -> list[list[Translation]]:
        return await asyncio.gather(*(b.translate(e, [e.tokenize("a b")], o, 5) for o in options))

    results = run(BatchLimits(max_wait_s=0.02, inflight=inflight), body)
    assert [r[0].best.text for r in results] == ["b a"] * 4
    assert sorted(o.beam_size for o in e.options) == [1, 2, 3, 4]
    assert now == [0, inflight]


def test_inflight_must_be_positive() -> None:
    with pytest.raises(ValueError, match="inflight=0"):
        Batcher(BatchLimits(inflight=0))


def test_timeout_drops_the_requests_queued_sentences() -> None:
    e = engine(delay_s=0.4)

    async def body(b: Batcher) -> int:
        busy = asyncio.create_task(b.translate(e, [e.tokenize("a")], BEAM, 5))
        while not e.batches:
            await asyncio.sleep(0.01)
        with pytest.raises(RequestTimeout, match="0.1 s"):
            await b.translate(e, [e.tokenize("b c")], BEAM, 0.1)
        depth = b.depth
        await busy
        await asyncio.sleep(0.05)
        return depth

    assert run(BatchLimits(max_wait_s=0, inflight=1), body) == 0  # one decodes, one queues
    assert e.batch_sizes == [1]  # the timed-out sentence was never decoded


def test_a_failing_request_fails_alone_and_the_next_batch_works() -> None:
    e = engine()

    async def body(b: Batcher) -> tuple[list[object], str]:
        results = await asyncio.gather(
            b.translate(e, [e.tokenize("good one")], BEAM, 5),
            b.translate(e, [e.tokenize("bad FAIL")], BEAM, 5),
            b.translate(e, [e.tokenize("good two")], BEAM, 5),
            return_exceptions=True,
        )
        after = await b.translate(e, [e.tokenize("still works")], BEAM, 5)
        return list(results), after[0].best.text

    results, after = run(BatchLimits(max_wait_s=0.05), body)
    assert [type(r).__name__ for r in results] == ["list", "BatchFailed", "list"]
    assert "fake engine failure" in str(results[1])
    assert after == "works still"
    assert e.batch_sizes[0] == 3  # together first, then each request alone


def test_a_single_request_failure_is_not_retried() -> None:
    e = engine()

    async def body(b: Batcher) -> None:
        with pytest.raises(BatchFailed):
            await b.translate(e, [e.tokenize("x FAIL"), e.tokenize("y")], BEAM, 5)

    run(BatchLimits(max_wait_s=0), body)
    assert e.batch_sizes == [2]


def test_close_drains_queued_work_then_refuses() -> None:
    e = engine(delay_s=0.05)

    async def main() -> None:
        b = Batcher(BatchLimits(max_wait_s=1.0), Metrics())  # would wait a second for company
        b.start()
        pending = asyncio.create_task(b.translate(e, [e.tokenize("a b")], BEAM, 5))
        await asyncio.sleep(0.01)
        await b.close(timeout_s=5)  # flushes at once instead of waiting
        assert (await pending)[0].best.text == "b a"
        with pytest.raises(BatcherClosed):
            await b.translate(e, [e.tokenize("c")], BEAM, 5)

    asyncio.run(asyncio.wait_for(main(), 3))


def test_sentences_queued_on_one_engine_are_decoded_by_that_engine() -> None:
    old, new = engine(prefix="old:"), engine(prefix="new:")

    async def body(b: Batcher) -> list[str]:
        results = await asyncio.gather(
            b.translate(old, [old.tokenize("a b")], BEAM, 5),
            b.translate(new, [new.tokenize("a b")], BEAM, 5),
        )
        return [r[0].best.text for r in results]

    assert run(BatchLimits(max_wait_s=0.05), body) == ["old:b a", "new:b a"]
    assert old.batch_sizes == [1] and new.batch_sizes == [1]


def test_an_engine_with_decoding_threads_decodes_its_batches_there() -> None:
    """An engine with static steps (``decode_threads``) decodes each batch on its own threads, those that captured
    its CUDA graphs at load, not on the batcher's."""
    e = engine()
    e.decode_threads = ThreadPoolExecutor(1, thread_name_prefix="mt-decode")  # type: ignore[attr-defined]
    warmed_on = e.decode_threads.submit(threading.get_ident).result()
    decoded_on: list[int] = []
    translate_ids = e.translate_ids

    def recorded(batch: list[list[int]], options: DecodeOptions) -> list[Translation]:
        decoded_on.append(threading.get_ident())
        return translate_ids(batch, options)

    e.translate_ids = recorded  # type: ignore[method-assign]

    async def body(b: Batcher) -> list[str]:
        out = []
        for text in ("a b", "c d e"):
            out += [t.best.text for t in await b.translate(e, [e.tokenize(text)], GREEDY, 5)]
        return out

    try:
        assert run(BatchLimits(max_wait_s=0.01), body) == ["b a", "e d c"]
    finally:
        e.decode_threads.shutdown()
    assert decoded_on == [warmed_on, warmed_on]
