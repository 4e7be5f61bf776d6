"""Continuous batching: the engine's running sets are kept full sentence by sentence, between decoder steps.

Requests put their sentences in one FIFO queue per engine. Each of ``inflight`` worker threads owns a running
set on that engine (``engine.running_set()``, inference/engine.py) and loops: drop the sentences nobody waits
for any more, admit waiting sentences in arrival order up to the sentence and token budget, run one decoder
step, and hand every finished sentence back to the event loop at once. So a short sentence leaves as soon as it
is done instead of waiting for the longest one of its batch, and a new request joins at the next step instead
of waiting for a whole batch (or within ``admit_every`` steps, when admissions are grouped: on a GPU an encoder
call costs about two decoder steps whatever its size, docs/scheduler.md). Sentences with different decode
options share a running set. A request's future resolves when all its sentences are done; arrival order keeps
any request from starving behind later ones.

A step that fails fails nobody at first: its sentences are taken out and each request is decoded again alone,
so a sentence that breaks the engine fails only its own request (the batcher's contract, service/batcher.py).

Requests carry their engine: after a reload, sentences tokenized by the old model finish on it, and its
workers exit once they have been idle for ``IDLE_EXIT_S``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.translation import DecodeOptions, Translation
from service.batcher import (
    BatcherClosed,
    BatchFailed,
    BatchLimits,
    Job,
    QueueBound,
    RequestTimeout,
)
from service.metrics import Metrics, model_label

log = logging.getLogger(__name__)

IDLE_EXIT_S = 1.0
"""A worker with nothing to do for this long exits; the next request starts a new one."""
ROOM_SHARE = 4
"""With ``admit_every`` > 1, waiting sentences that fill a running set's free room are admitted at once only while
that room is at least a quarter of the set (``_admission_due``)."""


class RunningSet(Protocol):
    def __len__(self) -> int: ...

    def admit(self, items: Iterable[tuple[Hashable, str | list[int], DecodeOptions]]) -> None: ...

    def step(self) -> list[tuple[Hashable, Translation]]: ...

    def drop(self, keys: Iterable[Hashable]) -> None: ...


class StepEngine(Protocol):
    """What the scheduler needs of an engine."""

    @property
    def manifest(self) -> dict[str, Any]: ...

    @property
    def max_source_pieces(self) -> int: ...

    def running_set(self) -> RunningSet: ...


@dataclass(eq=False)
class _Item:
    job: Job
    index: int
    ids: list[int]
    tokens: int
    options: DecodeOptions
    enqueued: float
    key: int = 0


@dataclass(eq=False)
class _Lane:
    """One engine's queue and workers."""

    engine: StepEngine
    waiting: deque[_Item] = field(default_factory=deque)
    workers: int = 0


class Scheduler(QueueBound):
    """Same interface as service.batcher.Batcher; decodes with running sets instead of whole batches."""

    def __init__(self, limits: BatchLimits, metrics: Metrics | None = None):
        super().__init__(limits, metrics)
        self._cond = threading.Condition()
        self._lanes: dict[int, _Lane] = {}
        self._keys = itertools.count(1)
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Called on the event loop that will await the translations: the workers post results to it."""
        self._loop = asyncio.get_running_loop()

    async def translate(
        self, engine: StepEngine, batch: Sequence[list[int]], options: DecodeOptions, timeout_s: float
    ) -> list[Translation]:
        """Translate ``batch`` (source ids per sentence) on ``engine``: one Translation each."""
        if not batch:
            return []
        if self._closing or self._loop is None:
            raise BatcherClosed("the server is shutting down")
        n = len(batch)
        self._check_admission(n)
        job = Job(self._loop.create_future(), [None] * n, n)
        now, cap = time.monotonic(), engine.max_source_pieces
        items = [_Item(job, i, list(ids), min(len(ids), cap) + 1, options, now) for i, ids in enumerate(batch)]
        with self._cond:
            lane = self._lanes.get(id(engine))
            if lane is None:
                lane = self._lanes[id(engine)] = _Lane(engine)
            for item in items:
                item.key = next(self._keys)
            lane.waiting.extend(items)
            self._set_depth(self._depth + n)
            while lane.workers < self.limits.inflight:
                lane.workers += 1
                self._start_worker(lane)
            self._cond.notify_all()
        try:
            return await asyncio.wait_for(job.future, timeout_s)
        except TimeoutError:
            self._abandon(job)
            raise RequestTimeout(timeout_s) from None
        except BaseException:
            self._abandon(job)  # a failure, or a client gone: its other sentences need not run
            raise

    async def close(self, timeout_s: float = 30.0) -> None:
        """Finish what is queued and running (at most ``timeout_s``), then stop; later requests are refused."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._cond:
                if not self._lanes:
                    return
            await asyncio.sleep(0.01)
        log.error("scheduler: work not drained within %.0f s; failing what is left", timeout_s)
        with self._cond:
            for lane in self._lanes.values():
                for item in lane.waiting:
                    _post(self._loop, item.job.fail, BatcherClosed("the server is shutting down"))
                lane.waiting.clear()
            self._set_depth(0)

    # -- the worker threads -------------------------------------------------------------------

    def _work(self, lane: _Lane) -> None:
        running = lane.engine.running_set()
        items: dict[Hashable, _Item] = {}
        since_admit = 0  # steps run since this set last admitted
        try:
            while True:
                with self._cond:
                    idle_since = time.monotonic()
                    while not items and not self._has_waiting(lane):
                        if self._closing or time.monotonic() - idle_since >= IDLE_EXIT_S:
                            return
                        self._cond.wait(IDLE_EXIT_S / 4)
                    admit = self._take(lane, items) if self._admission_due(lane, items, since_admit) else []
                since_admit = 0 if admit else since_admit + 1
                gone = [key for key, item in items.items() if item.job.abandoned]
                if gone:
                    running.drop(gone)
                    for key in gone:
                        del items[key]
                if admit:
                    self._admit(lane, running, items, admit)
                if not items:
                    continue
                size, started = len(items), time.monotonic()
                tokens = size * max(i.tokens for i in items.values())
                try:
                    done = running.step()
                except Exception as err:
                    log.warning("a step of %d sentences failed (%r); decoding each request alone", len(items), err)
                    suspects, items = list(items.values()), {}
                    running = lane.engine.running_set()
                    self._alone(lane, suspects)
                    continue
                self._observe_step(size, tokens, time.monotonic() - started)
                for key, translation in done:
                    item = items.pop(key)
                    _post(self._loop, item.job.deliver, item.index, translation)
                self._count(lane, [t for _, t in done])
        except Exception as err:  # a bug here must not hang the requests it holds
            log.exception("scheduler: a worker failed")
            failure = BatchFailed(f"internal error while decoding: {err!r}")
            for item in items.values():
                _post(self._loop, item.job.fail, failure)
        finally:
            with self._cond:
                lane.workers -= 1
                if lane.workers == 0 and not lane.waiting:
                    self._lanes.pop(id(lane.engine), None)
                elif lane.workers == 0:  # work arrived as the last worker left
                    lane.workers += 1
                    self._start_worker(lane)

    def _start_worker(self, lane: _Lane) -> None:
        """A worker for ``lane``: on the engine's own decoding threads when it has them (static steps: the threads
        that captured its CUDA graphs at load, which outlive the worker), else on a thread of its own."""
        threads = getattr(lane.engine, "decode_threads", None)
        if threads is not None:
            threads.submit(self._work, lane)
        else:
            threading.Thread(target=self._work, args=(lane,), name="mt-inference", daemon=True).start()

    def _admission_due(self, lane: _Lane, items: dict[Hashable, _Item], since_admit: int) -> bool:
        """Whether a running set takes in waiting sentences before this step (under the lock): every
        ``admit_every`` steps, and at once when it is empty or the waiting sentences fill its free room, if that
        room is at least ``1 / ROOM_SHARE`` of the set (an admission costs about a step whatever its size, so a
        nearly full set waits for its next turn instead of admitting a few at every step)."""
        every, refill_at = self.limits.admit_every, self.limits.refill_at
        if items and refill_at is not None and len(items) > refill_at:
            return False
        room = self.limits.max_sentences - len(items)
        return (
            every <= 1
            or not items
            or since_admit >= every - 1
            or (len(lane.waiting) >= room and room * ROOM_SHARE >= self.limits.max_sentences)
        )

    def _has_waiting(self, lane: _Lane) -> bool:
        while lane.waiting and lane.waiting[0].job.abandoned:
            lane.waiting.popleft()
            self._set_depth(self._depth - 1)
        return bool(lane.waiting)

    def _take(self, lane: _Lane, items: dict[Hashable, _Item]) -> list[_Item]:
        """Waiting sentences for a running set, within its budget (under the lock): in arrival order, or, when
        ``admit_by_length`` is on and not all of them fit, the run of similar lengths that holds the oldest."""
        limits = self.limits
        count = len(items)
        longest = max((i.tokens for i in items.values()), default=0)

        def fits(n: int, tokens: int) -> bool:  # one more sentence of ``tokens`` beside n (the first always fits)
            return n < limits.max_sentences and (not n or (n + 1) * tokens <= limits.max_tokens)

        taken: list[_Item] = []
        while self._has_waiting(lane) and fits(count, max(longest, lane.waiting[0].tokens)):
            taken.append(lane.waiting.popleft())
            count, longest = count + 1, max(longest, taken[-1].tokens)
        if taken and limits.admit_by_length and self._has_waiting(lane):
            lane.waiting.extendleft(reversed(taken))
            taken = self._similar(lane, items)
        if taken:
            self._set_depth(self._depth - len(taken))
        return taken

    def _similar(self, lane: _Lane, items: dict[Hashable, _Item]) -> list[_Item]:
        """The waiting sentences of similar length that fit beside ``items`` and hold the oldest: the waiting
        ones sorted by length, cut into runs by the budget, as the batch scheduler cuts its batches. The oldest
        is always taken, so no sentence waits behind a stream of others; lengths that decode together finish
        together, and the set stays full instead of draining behind a long one (docs/scheduler.md)."""
        limits, oldest = self.limits, lane.waiting[0]
        count = len(items)
        base = max((i.tokens for i in items.values()), default=0)
        run: list[_Item] = []
        longest = base
        for item in sorted((i for i in lane.waiting if not i.job.abandoned), key=lambda i: (i.tokens, i.enqueued)):
            n = count + len(run)
            if n >= limits.max_sentences or (n and (n + 1) * max(longest, item.tokens) > limits.max_tokens):
                if any(i is oldest for i in run):
                    break
                run, longest = [], base  # sorted by length: this one fits alone, as the oldest did
            run.append(item)
            longest = max(longest, item.tokens)
        chosen = {id(i) for i in run}
        lane.waiting = deque(i for i in lane.waiting if id(i) not in chosen)
        return sorted(run, key=lambda i: i.key)  # admitted in arrival order

    def _admit(self, lane: _Lane, running: RunningSet, items: dict[Hashable, _Item], admit: list[_Item]) -> None:
        now = time.monotonic()
        try:
            running.admit((i.key, i.ids, i.options) for i in admit)
            if self.metrics:
                self.metrics.admit_seconds.observe(time.monotonic() - now)
            accepted = admit
        except ValueError:  # bad ids or options somewhere: admit one by one, fail only the bad ones
            accepted = []
            for item in admit:
                try:
                    running.admit([(item.key, item.ids, item.options)])
                    accepted.append(item)
                except ValueError as err:
                    _post(self._loop, item.job.fail, BatchFailed(f"bad input: {err}"))
        mid_run = bool(items)
        for item in accepted:
            items[item.key] = item
        if self.metrics:
            m = self.metrics
            for item in accepted:
                m.queue_wait_seconds.observe(now - item.enqueued)
            m.input_tokens.labels(model_label(lane.engine)).inc(
                sum(min(len(i.ids), lane.engine.max_source_pieces) for i in accepted)
            )
            if mid_run:
                m.admitted_mid_run.inc(len(accepted))

    def _alone(self, lane: _Lane, suspects: list[_Item]) -> None:
        """Decode each request of a failed step on its own: only the one that breaks the engine fails."""
        jobs: dict[int, list[_Item]] = {}
        for item in suspects:
            jobs.setdefault(id(item.job), []).append(item)
        for group in jobs.values():
            job = group[0].job
            if job.abandoned:
                continue
            running = lane.engine.running_set()
            pending: dict[Hashable, _Item] = {i.key: i for i in group}
            try:
                running.admit((i.key, i.ids, i.options) for i in group)
                while pending:
                    for key, translation in running.step():
                        item = pending.pop(key)
                        _post(self._loop, job.deliver, item.index, translation)
            except Exception as err:
                log.exception("a request's %d sentences failed on their own", len(group))
                failure = BatchFailed(f"the engine failed on this request's sentences: {err!r}")
                _post(self._loop, job.fail, failure)

    # -- bookkeeping --------------------------------------------------------------------------

    def _abandon(self, job: Job) -> None:
        job.abandoned = True
        with self._cond:
            self._cond.notify_all()

    def _observe_step(self, size: int, tokens: int, seconds: float) -> None:
        """A step's batch is its running set: mt_batch_size_* per step, as the batcher's are per batch."""
        if self.metrics:
            self.metrics.batch_sentences.observe(size)
            self.metrics.batch_tokens.observe(tokens)
            self.metrics.step_seconds.observe(seconds)

    def _count(self, lane: _Lane, translations: list[Translation]) -> None:
        done = len(translations)
        with self._cond:
            self._count_decoded(done)
        if self.metrics and done:
            model = model_label(lane.engine)
            self.metrics.sentences.labels(model).inc(done)
            self.metrics.generated_tokens.labels(model).inc(
                sum(len(t.hypotheses[0].token_ids) for t in translations if t.hypotheses)
            )


def _post(loop: asyncio.AbstractEventLoop | None, callback: object, *args: object) -> None:
    """Run ``callback(*args)`` on the event loop (from a worker thread); a closed loop has nobody to tell."""
    try:
        assert loop is not None
        loop.call_soon_threadsafe(callback, *args)  # type: ignore[arg-type]
    except RuntimeError:
        pass
