"""Cross-request batching: sentences from concurrent requests share engine calls.

Requests put their sentences (token ids) in a queue, grouped by engine and decoding options (only
those may share a batch). A scheduler task on the event loop takes the group holding the oldest
sentence; once the group can fill a batch, or its oldest sentence has waited ``max_wait_s``, it
sorts the group by length, cuts it into batches by token budget, and runs the batch holding the
oldest sentence in a worker thread, so the event loop keeps answering while the engine decodes.
At most ``inflight`` batches decode at once (2 by default): while one batch's beam search does its
host-side bookkeeping between steps, the other's graph call keeps the cores busy; with one batch at a
time a fifth of a 2-core machine sat idle at saturation (docs/reports/load/report.md).

Requests carry their engine: a request tokenized by one model is decoded by that model, even if the
app swapped in another meanwhile (the old engine lives until its last queued sentence is done).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.translation import DecodeOptions, Translation
from service.metrics import Metrics, model_label

log = logging.getLogger(__name__)


class BatchEngine(Protocol):
    """What the batcher needs of an engine."""

    @property
    def manifest(self) -> dict[str, Any]: ...

    @property
    def max_source_pieces(self) -> int: ...

    def translate_ids(self, batch: list[list[int]], options: DecodeOptions) -> list[Translation]: ...


class QueueFull(Exception):
    """The queue bound is reached: the client should retry after ``retry_after`` seconds."""

    def __init__(self, queued: int, wanted: int | None, limit: int, retry_after: int):
        adds = f", this request adds {wanted}" if wanted is not None else ""
        super().__init__(
            f"the server is overloaded: {queued} sentences are queued{adds}, the bound is {limit}; "
            f"retry in {retry_after} s"
        )
        self.retry_after = retry_after


class TooManySentences(Exception):
    """One request alone has more sentences than the queue may hold: it can never be served."""

    def __init__(self, sentences: int, limit: int, at_least: bool = False):
        count = f"at least {sentences}" if at_least else str(sentences)
        super().__init__(
            f"the request has {count} sentences but the queue holds at most {limit} "
            "(MT_MAX_QUEUE); send fewer or shorter texts per request"
        )


class RequestTimeout(Exception):
    def __init__(self, timeout_s: float):
        super().__init__(f"the translation did not finish within {timeout_s:g} s (MT_REQUEST_TIMEOUT_S)")


class BatchFailed(Exception):
    """The engine raised while decoding a batch that held some of this request's sentences."""


class BatcherClosed(Exception):
    """The server is shutting down."""


@dataclass(frozen=True)
class BatchLimits:
    max_tokens: int = 4096
    """Budget of one batch in source tokens, padding included: sentences x (longest + EOS)."""
    max_sentences: int = 64
    max_wait_s: float = 0.005
    max_queue: int = 1024
    """Most sentences waiting (not yet decoding)."""
    inflight: int = 2
    """Most batches decoding at once, each in its own worker thread on the same engine."""
    admit_every: int = 1
    """Continuous scheduler: a running set takes in waiting sentences at most every this many steps (at once
    when it is empty, or when the waiting ones fill its free room), so that one encoder call serves several."""
    refill_at: int | None = None
    """Continuous scheduler: a running set takes in waiting sentences only while at most this many decode in it
    (None: always). On the CPU a small number keeps continuous batching's low latency at low load, while under
    load a set fills, drains and refills much as a whole batch does, which costs less there (docs/scheduler.md)."""
    admit_by_length: bool = False
    """Continuous scheduler: when not every waiting sentence fits in a set, it takes the run of similar lengths that
    holds the oldest (as the batch scheduler cuts its batches) instead of the first in arrival order (the server's
    default: ``MT_ADMIT_BY_LENGTH``, on)."""


@dataclass(eq=False)
class Job:
    """One request's sentences; its future resolves when all are translated, or at a failure (both schedulers;
    called on the event loop)."""

    future: asyncio.Future[list[Translation]]
    results: list[Translation | None]
    remaining: int
    abandoned: bool = False
    """Nobody waits any more (failure, timeout, client gone): sentences not yet decoded need not be."""

    def deliver(self, index: int, translation: Translation) -> None:
        if self.future.done():  # failed, timed out or cancelled: nobody waits for it
            return
        self.results[index] = translation
        self.remaining -= 1
        if self.remaining == 0:
            self.future.set_result([t for t in self.results if t is not None])

    def fail(self, error: Exception) -> None:
        self.abandoned = True
        if not self.future.done():
            self.future.set_exception(error)


@dataclass(eq=False)
class _Item:
    job: Job
    index: int
    ids: list[int]
    tokens: int
    enqueued: float


@dataclass(eq=False)
class _Group:
    engine: BatchEngine
    options: DecodeOptions
    items: list[_Item] = field(default_factory=list)  # in arrival order


class QueueBound:
    """The queue bound both schedulers keep: its depth (and gauge), early refusal, Retry-After from the rate."""

    def __init__(self, limits: BatchLimits, metrics: Metrics | None = None):
        if limits.inflight < 1:
            raise ValueError(f"inflight={limits.inflight} must be at least 1")
        self.limits = limits
        self.metrics = metrics
        self._depth = 0
        self._rate = 0.0  # sentences per second recently decoded, for Retry-After
        self._rate_window: tuple[float, int] = (time.monotonic(), 0)  # (since, sentences decoded since)

    @property
    def depth(self) -> int:
        """Sentences waiting, not yet decoding."""
        return self._depth

    def check_room(self, sentences: int) -> None:
        """QueueFull now if ``sentences`` more cannot be queued: lets a request be refused before the
        costly sentence splitting and tokenization (``translate`` checks again with the real count)."""
        limit = self.limits.max_queue
        if 0 < sentences <= limit and self._depth + sentences > limit:
            raise QueueFull(self._depth, sentences, limit, self._retry_after())

    def refusal(self) -> QueueFull | None:
        """QueueFull when not one more sentence fits (the queue is at its bound), else None: the request middleware
        then refuses a decoding request before its body is parsed and validated (service/middleware.py)."""
        limit = self.limits.max_queue
        if self._depth >= limit:
            return QueueFull(self._depth, None, limit, self._retry_after())
        return None

    def _check_admission(self, sentences: int) -> None:
        """TooManySentences or QueueFull for a request of ``sentences`` that cannot be queued now."""
        limit = self.limits.max_queue
        if sentences > limit:
            raise TooManySentences(sentences, limit)
        if self._depth + sentences > limit:
            raise QueueFull(self._depth, sentences, limit, self._retry_after())

    def _count_decoded(self, sentences: int) -> None:
        """Count sentences decoded into the rate Retry-After divides the depth by: the rate of each window of a
        second or more, smoothed (the schedulers that answer sentence by sentence; the batch scheduler rates its
        batches)."""
        now = time.monotonic()
        since, count = self._rate_window
        count += sentences
        if now - since >= 1.0:
            rate = count / (now - since)
            self._rate = rate if self._rate == 0 else 0.8 * self._rate + 0.2 * rate
            since, count = now, 0
        self._rate_window = (since, count)

    def _retry_after(self) -> int:
        if self._rate <= 0:
            return 1
        return max(1, min(60, math.ceil(self._depth / self._rate)))

    def _set_depth(self, depth: int) -> None:
        self._depth = depth
        if self.metrics:
            self.metrics.queue_depth.set(depth)


class Batcher(QueueBound):
    def __init__(self, limits: BatchLimits, metrics: Metrics | None = None):
        super().__init__(limits, metrics)
        self._groups: dict[tuple[int, DecodeOptions], _Group] = {}
        self._wakeup = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=limits.inflight, thread_name_prefix="mt-inference")
        self._slots = asyncio.Semaphore(limits.inflight)
        self._running: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._schedule(), name="mt-batcher")

    async def translate(
        self,
        engine: BatchEngine,
        batch: Sequence[list[int]],
        options: DecodeOptions,
        timeout_s: float,
    ) -> list[Translation]:
        """Translate ``batch`` (source ids per sentence) on ``engine``: one Translation each."""
        if not batch:
            return []
        if self._closing or self._task is None:
            raise BatcherClosed("the server is shutting down")
        n = len(batch)
        self._check_admission(n)
        job = Job(asyncio.get_running_loop().create_future(), [None] * n, n)
        group = self._groups.setdefault((id(engine), options), _Group(engine, options))
        now = time.monotonic()
        cap = engine.max_source_pieces
        group.items += [_Item(job, i, ids, min(len(ids), cap) + 1, now) for i, ids in enumerate(batch)]
        self._set_depth(self._depth + n)
        self._wakeup.set()
        try:
            return await asyncio.wait_for(job.future, timeout_s)
        except TimeoutError:
            self._discard(job)
            raise RequestTimeout(timeout_s) from None
        except BaseException:
            self._discard(job)  # a failed batch, or a client gone: its other sentences need not run
            raise

    async def close(self, timeout_s: float = 30.0) -> None:
        """Finish what is queued (at most ``timeout_s``), then stop; later requests are refused."""
        self._closing = True
        self._wakeup.set()
        if self._task is not None:
            try:
                async with asyncio.timeout(timeout_s):
                    await asyncio.shield(self._task)
                    while self._running:  # the batches still decoding
                        await asyncio.wait(list(self._running))
            except TimeoutError:
                log.error(
                    "batcher: queue not drained within %.0f s; failing %d sentences",
                    timeout_s,
                    self._depth,
                )
                self._task.cancel()
            except Exception:
                log.exception("batcher: scheduler failed")
        for group in self._groups.values():
            for item in group.items:
                item.job.fail(BatcherClosed("the server is shutting down"))
        self._groups.clear()
        self._set_depth(0)
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- scheduling ---------------------------------------------------------------------------

    async def _schedule(self) -> None:
        while True:
            group = self._oldest_group()
            if group is None:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            wait = group.items[0].enqueued + self.limits.max_wait_s - time.monotonic()
            if wait > 0 and not self._closing and not self._full(group):
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), wait)
                except TimeoutError:
                    pass
                continue
            await self._slots.acquire()  # a free inference thread; the queue may have changed meanwhile
            if self._oldest_group() is not group:
                self._slots.release()
                continue
            items = self._take_batch(group)
            task = asyncio.get_running_loop().create_task(self._run_guarded(group, items))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _run_guarded(self, group: _Group, items: list[_Item]) -> None:
        try:
            await self._run_batch(group, items)
        except Exception as err:  # a bug here must not stop the scheduler and hang everyone
            log.exception("batcher: scheduling a batch failed")
            for item in items:
                item.job.fail(BatchFailed(f"internal error while batching: {err!r}"))
        finally:
            self._slots.release()

    def _oldest_group(self) -> _Group | None:
        groups = [g for g in self._groups.values() if g.items]
        return min(groups, key=lambda g: g.items[0].enqueued) if groups else None

    def _full(self, group: _Group) -> bool:
        items = group.items
        if len(items) >= self.limits.max_sentences:
            return True
        return len(items) * max(i.tokens for i in items) >= self.limits.max_tokens

    def _take_batch(self, group: _Group) -> list[_Item]:
        """Sort the group by length, cut it by budget, take the batch holding the oldest one."""
        oldest = group.items[0]
        batch: list[_Item] = []
        for item in sorted(group.items, key=lambda i: (i.tokens, i.enqueued)):
            longest = max(item.tokens, batch[-1].tokens if batch else 0)
            if batch and (
                len(batch) >= self.limits.max_sentences or (len(batch) + 1) * longest > self.limits.max_tokens
            ):
                if any(i is oldest for i in batch):
                    break
                batch = []
            batch.append(item)
        taken = {id(i) for i in batch}
        group.items = [i for i in group.items if id(i) not in taken]
        if not group.items:
            del self._groups[(id(group.engine), group.options)]
        self._set_depth(self._depth - len(batch))
        return batch

    async def _run_batch(self, group: _Group, items: list[_Item]) -> None:
        """Decode a batch; if it fails, retry each request alone: a bad input fails only its own."""
        if self.metrics:
            now = time.monotonic()
            for item in items:
                self.metrics.queue_wait_seconds.observe(now - item.enqueued)
        try:
            results = await self._decode(group, items)
        except Exception as err:
            jobs = list({id(i.job): i.job for i in items}.values())
            if len(jobs) == 1:
                log.exception("a batch of %d sentences failed", len(items))
                _fail(items, err)
                return
            log.warning("a batch of %d requests failed (%r); retrying each alone", len(jobs), err)
            for job in jobs:
                mine = [i for i in items if i.job is job]
                if job.future.done():
                    continue
                try:
                    _deliver(mine, await self._decode(group, mine))
                except Exception as own:
                    log.exception("a request's %d sentences failed on their own", len(mine))
                    _fail(mine, own)
            return
        _deliver(items, results)

    async def _decode(self, group: _Group, items: list[_Item]) -> list[Translation]:
        """One engine call in the inference thread, with its metrics."""
        tokens = len(items) * max(i.tokens for i in items)
        ids = [item.ids for item in items]
        if self.metrics:
            self.metrics.batch_sentences.observe(len(items))
            self.metrics.batch_tokens.observe(tokens)
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        # An engine with static steps decodes on its own threads, those that captured its CUDA graphs at load.
        executor = getattr(group.engine, "decode_threads", None) or self._executor
        results = await loop.run_in_executor(executor, group.engine.translate_ids, ids, group.options)
        if len(results) != len(ids):
            raise RuntimeError(f"engine returned {len(results)} translations for {len(ids)}")
        elapsed = time.monotonic() - started
        rate = len(items) / max(elapsed, 1e-6)
        self._rate = rate if self._rate == 0 else 0.8 * self._rate + 0.2 * rate
        if self.metrics:
            m = self.metrics
            m.decode_seconds.observe(elapsed)
            cap = group.engine.max_source_pieces
            model = model_label(group.engine)
            m.input_tokens.labels(model).inc(sum(min(len(i.ids), cap) for i in items))
            m.generated_tokens.labels(model).inc(sum(len(t.hypotheses[0].token_ids) for t in results if t.hypotheses))
            m.sentences.labels(model).inc(len(items))
        return results

    def _discard(self, job: Job) -> None:
        """Drop a finished or abandoned request's sentences that are still queued."""
        removed = 0
        for key, group in list(self._groups.items()):
            keep = [i for i in group.items if i.job is not job]
            removed += len(group.items) - len(keep)
            group.items = keep
            if not keep:
                del self._groups[key]
        if removed:
            self._set_depth(self._depth - removed)


def _deliver(items: list[_Item], results: list[Translation]) -> None:
    for item, translation in zip(items, results, strict=True):
        item.job.deliver(item.index, translation)


def _fail(items: list[_Item], error: Exception) -> None:
    failure = BatchFailed(f"the engine failed on this request's sentences: {error!r}")
    for item in items:
        item.job.fail(failure)
