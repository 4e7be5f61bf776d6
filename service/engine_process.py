"""The engine in a process of its own (``MT_ENGINE_PROCESS``), so that HTTP work never holds its GIL.

In one process the scheduler's worker thread shares Python's GIL with the event loop (HTTP, validation, JSON)
and the request threads (sentence splitting, tokenization, answers). Each time a decoder step's graph call
returns, the worker waits for the GIL before its beam search can run, and on a GPU, where the graph call is short,
that wait is a large part of a step: with an engine that costs nothing, a step of the server took 1.16-4.86 ms at
16-128 clients on this project's 2-core machine, all of it waiting (docs/scheduler.md, "The engine in a process of
its own").

With this on, the server process keeps HTTP, splitting and tokenization (a light ``BundleFront`` per model:
manifest and tokenizer), and a child process (``spawn``) loads the engines and runs the continuous scheduler
(service/scheduler.py) unchanged. They talk over one pipe:

* server -> engine: ``load`` (a bundle, answered ``loaded`` or ``load_failed``), ``unload`` (a replaced model's
  last request is done), ``translate`` (a request's source ids and options), ``cancel`` (timed out, client gone),
  ``close``;
* engine -> server: ``done`` / ``failed`` per request, with the engine's queue depth, and every 0.2 s the
  metrics its scheduler recorded (``_Recorder``), which the server adds to its own registry.

The queue bound, 503s and Retry-After stay in the server (``QueueBound``): its depth is what the engine last
reported waiting plus what was sent since. If the engine process dies, every request in it fails (500), later
ones get 503, and the server exits non-zero through ``on_death`` (``python -m service``'s fatal path), so that
its supervisor restarts it.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import functools
import itertools
import logging
import multiprocessing
import signal
import threading
import time
import types
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prometheus_client import ProcessCollector

from core.bundle import BundleError, read_manifest
from core.casing import Casing
from core.tokenizer import Tokenizer, TokenizerError
from core.translation import DecodeOptions, Translation
from inference.capture import GATE
from inference.static_state import OPENED
from service.batcher import BatcherClosed, BatchFailed, BatchLimits, QueueBound, RequestTimeout
from service.loader import LoadFailed
from service.metrics import Metrics

log = logging.getLogger(__name__)

FLUSH_S = 0.2
"""How often the engine process sends the metrics its scheduler recorded."""
CLOSE_S = 10.0
"""How long the server waits for the engine process to exit once told to, before it kills it."""


class BundleFront:
    """What the server process needs of a model: its manifest and tokenizer (the graphs load in the engine
    process). Same interface as the engine for ``tokenize``, ``manifest`` and ``max_source_pieces``."""

    def __init__(self, bundle: Path):
        self.manifest = read_manifest(bundle, verify=False)  # the engine process verifies every file
        try:
            self.tokenizer = Tokenizer(bundle)
        except TokenizerError as err:
            raise BundleError(f"bundle {bundle}: {err}") from err
        self.casing = Casing.load(bundle, self.manifest)
        self.max_source_pieces = int(self.manifest["max_source_pieces"])

    def tokenize(self, text: str) -> list[int]:
        """As ``Engine.tokenize``: a sentence in capitals folded (core/casing.py)."""
        return self.tokenizer.encode_source(self.casing.fold(text))

    def unknown_spans(self, text: str) -> list[tuple[int, int]]:
        return self.tokenizer.unknown_spans(text)


def bundle_front(bundle: Path, *, provider: str, threads: int) -> BundleFront:
    return BundleFront(bundle)


class RemoteEngine:
    """A model loaded in the engine process, as the server process sees it (service/loader.py ``Engine``)."""

    def __init__(self, front: Any, remote_id: int, info: dict[str, Any]):
        self.front = front
        self.remote_id = remote_id
        self.manifest: dict[str, Any] = front.manifest
        self.max_source_pieces: int = front.max_source_pieces
        self.provider: str = info["provider"]
        self.graphs: str = info.get("graphs", "main")
        self.graphs_dtype: str | None = info.get("graphs_dtype")

    def tokenize(self, text: str) -> list[int]:
        return list(self.front.tokenize(text))

    def unknown_spans(self, text: str) -> list[tuple[int, int]]:
        return list(self.front.unknown_spans(text))

    def warmup(self) -> None:
        """Done: the engine process warms a model up before it answers ``loaded``."""

    def translate_ids(self, batch: list[list[int]], options: DecodeOptions) -> list[Translation]:
        raise NotImplementedError("a model in the engine process is decoded through EngineProcess.translate")

    def running_set(self) -> Any:
        raise NotImplementedError("a model in the engine process is decoded through EngineProcess.translate")


class EngineProcess(QueueBound):
    """The server side: starts the engine process, loads models into it (``load``, an engine loader) and sends it
    requests (``translate``, the batcher interface of service/scheduler.py)."""

    def __init__(
        self,
        loader: Callable[..., Any],
        front: Callable[..., Any],
        limits: BatchLimits,
        metrics: Metrics | None = None,
        *,
        log_level: str = "info",
        on_death: Callable[[str], None] | None = None,
    ):
        super().__init__(limits, metrics)
        self._loader, self._front, self._log_level, self._on_death = loader, front, log_level, on_death
        self._lock = threading.Lock()  # starting the process, and each send
        self._conn: Any = None
        self._process: Any = None
        self._ids = itertools.count(1)
        self._loads: dict[int, concurrent.futures.Future[tuple[Any, ...]]] = {}
        self._pending: dict[int, tuple[asyncio.Future[list[Translation]], int]] = {}
        self._sent = 0  # sentences sent so far
        self._reported = (0, 0)  # the engine process's last word: sentences waiting there, of how many received
        self._unloads: collections.deque[int] = collections.deque()
        self._closing = False
        self._dead: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the engine loader (called from ModelSlot's loading thread) ------------------------------

    def load(self, bundle: Path, *, provider: str, threads: int) -> RemoteEngine:
        front = self._front(bundle, provider=provider, threads=threads)  # a bad manifest fails here, at once
        remote_id = next(self._ids)
        answer: concurrent.futures.Future[tuple[Any, ...]] = concurrent.futures.Future()
        self._loads[remote_id] = answer
        self._send(("load", remote_id, str(bundle), provider, threads))
        reply = answer.result()
        if reply[0] == "load_failed":
            _, reason, bad_bundle = reply
            raise LoadFailed(bundle, reason, bad_bundle)  # worded as an in-process load's
        engine = RemoteEngine(front, remote_id, reply[1])
        weakref.finalize(engine, self._unload, remote_id)  # its last request done, the engine process drops it
        return engine

    def _unload(self, remote_id: int) -> None:
        """A RemoteEngine's finalizer: it may run inside any allocation, ``_send`` included, so it only queues the
        message, which the loop sends."""
        self._unloads.append(remote_id)
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._send_unloads)
            except RuntimeError:  # the loop is closed: the engine process goes with it
                pass

    def _send_unloads(self) -> None:
        while self._unloads and self._dead is None and not self._closing:
            self._send(("unload", self._unloads.popleft()))

    # -- the batcher interface -------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()

    async def translate(
        self, engine: Any, batch: Sequence[list[int]], options: DecodeOptions, timeout_s: float
    ) -> list[Translation]:
        """Translate ``batch`` (source ids per sentence) on ``engine`` (a RemoteEngine) in the engine process."""
        if not batch:
            return []
        if self._closing or self._loop is None or self._dead is not None:
            raise BatcherClosed(self._dead or "the server is shutting down")
        n = len(batch)
        self._check_admission(n)
        request = next(self._ids)
        future: asyncio.Future[list[Translation]] = self._loop.create_future()
        self._pending[request] = (future, n)
        self._sent += n
        self._update_depth()
        # the engine process times out too, a second later: a request is never left there if a cancel is lost
        self._send(("translate", request, engine.remote_id, [list(ids) for ids in batch], options, timeout_s + 1))
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            self._cancel(request)
            raise RequestTimeout(timeout_s) from None
        except BaseException:
            self._cancel(request)
            raise

    def _cancel(self, request: int) -> None:
        if self._pending.pop(request, None) is not None and self._dead is None:
            self._send(("cancel", request))

    async def close(self, timeout_s: float = 30.0) -> None:
        """Finish what was sent (at most ``timeout_s``), then stop the engine process."""
        self._closing = True
        deadline = time.monotonic() + timeout_s
        while self._pending and self._dead is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for future, _ in self._pending.values():
            if not future.done():
                future.set_exception(BatcherClosed("the server is shutting down"))
        self._pending.clear()
        if self._process is not None:
            if self._dead is None:
                self._send(("close",))
            await asyncio.to_thread(self._stop_process)

    def _stop_process(self) -> None:
        self._process.join(CLOSE_S)
        if self._process.is_alive():
            log.error("engine process: still running %.0f s after close; killed", CLOSE_S)
            self._process.kill()
            self._process.join(CLOSE_S)

    # -- the pipe ----------------------------------------------------------------------------------

    def _send(self, message: tuple[Any, ...]) -> None:
        with self._lock:
            if self._process is None:
                self._start_process()
            try:
                self._conn.send(message)
            except (OSError, ValueError) as err:  # the engine process is gone; the reader says why
                log.warning("engine process: could not send %s: %s", message[0], err)

    def _start_process(self) -> None:
        context = multiprocessing.get_context("spawn")  # never fork a process that runs onnxruntime's threads
        ours, theirs = context.Pipe()
        self._process = context.Process(
            target=_engine_main,
            args=(theirs, self._loader, self.limits, self._log_level),
            name="mt-engine",
            daemon=True,
        )
        self._process.start()
        theirs.close()
        self._conn = ours
        if self.metrics is not None:  # where the models' memory is: mt_engine_process_resident_memory_bytes, ...
            pid = self._process.pid
            ProcessCollector(namespace="mt_engine", pid=lambda: pid, registry=self.metrics.registry)
        threading.Thread(target=self._read, name="mt-engine-reader", daemon=True).start()
        log.info("engine process started (pid %d)", self._process.pid)

    def _read(self) -> None:
        """The server's one reader of the pipe (a thread): answers to the loop, load replies to their waiters,
        metrics into the registry."""
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind in ("done", "failed", "depth"):
                if self._loop is not None:
                    with contextlib.suppress(RuntimeError):  # the loop closed: keep draining the pipe to its end
                        self._loop.call_soon_threadsafe(self._answer, message)
            elif kind in ("loaded", "load_failed"):
                answer = self._loads.pop(message[1], None)
                if answer is not None:
                    answer.set_result((kind, *message[2:]))
            elif kind == "metrics":
                self._record(message[1], message[2], message[3])
        if self._closing:  # told to close (close() joins it), or gone while the server stops anyway
            return
        self._process.join(1.0)
        code = self._process.exitcode
        self._dead = f"the engine process exited (code {code})"
        log.critical("%s; failing its requests", self._dead)
        for answer in list(self._loads.values()):
            answer.set_result(("load_failed", self._dead, False))
        self._loads.clear()
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._fail_all)
        if self._on_death is not None and not self._closing:
            self._on_death(self._dead)

    def _update_depth(self) -> None:
        """The queue's depth: what the engine process last said waits there, and what was sent since."""
        depth, received = self._reported
        self._set_depth(max(0, depth + self._sent - received))

    def _answer(self, message: tuple[Any, ...]) -> None:
        """On the loop: ``("depth", depth, received)``, or a request's result, ``("done", id, translations, depth,
        received)`` or ``("failed", id, (kind, text), depth, received)``."""
        self._reported = (message[-2], message[-1])
        self._update_depth()
        if message[0] == "depth":
            return
        kind, request, result = message[:3]
        found = self._pending.pop(request, None)
        if found is None:  # timed out or cancelled meanwhile
            return
        future, sentences = found
        if kind == "done":
            self._count_decoded(sentences)
            if not future.done():
                future.set_result(result)
        elif not future.done():
            name, text = result
            future.set_exception(BatcherClosed(text) if name == "BatcherClosed" else BatchFailed(text))

    def _fail_all(self) -> None:
        for future, _ in self._pending.values():
            if not future.done():
                future.set_exception(BatchFailed(self._dead or "the engine process exited"))
        self._pending.clear()

    def _record(self, calls: list[_Call], opened: dict[str, int], captures: int) -> None:
        """Replay the engine process's metric calls on this registry; its static-step counts become ours."""
        OPENED.clear()
        OPENED.update(opened)
        GATE.captures = captures
        if self.metrics is None:
            return
        for name, labels, method, value in calls:
            series = getattr(self.metrics, name)
            if labels:
                series = series.labels(*labels)
            getattr(series, method)(value)


# -- the engine process ----------------------------------------------------------------------------


_Call = tuple[str, tuple[str, ...], str, float]
"""A metric call: the Metrics attribute, its label values, the method (observe, inc, set) and the value."""


class _Recorder:
    """Stands for service.metrics.Metrics in the engine process: records each call its scheduler makes
    (``metrics.step_seconds.observe(s)``, ``metrics.sentences.labels(m).inc(n)``) for the server to replay."""

    def __init__(self, on_depth: Callable[[], None]) -> None:
        self.calls: collections.deque[_Call] = collections.deque()  # appended by the workers, emptied by the loop
        self.on_depth = on_depth
        """called when the scheduler's queue depth changes (from any thread)"""

    def __getattr__(self, name: str) -> Any:
        if name == "queue_depth":  # the server keeps the queue bound: it hears of each change (_Engines)
            return types.SimpleNamespace(set=lambda value: self.on_depth())
        return _Series(self.calls, name, ())

    def take(self) -> list[_Call]:
        calls = []
        while self.calls:
            calls.append(self.calls.popleft())
        return calls


@dataclasses.dataclass
class _Series:
    calls: collections.deque[_Call]
    name: str
    label_values: tuple[str, ...]

    def labels(self, *values: str) -> _Series:
        return _Series(self.calls, self.name, tuple(values))

    def observe(self, value: float) -> None:
        self.calls.append((self.name, self.label_values, "observe", value))

    def inc(self, value: float = 1.0) -> None:
        self.calls.append((self.name, self.label_values, "inc", value))

    def set(self, value: float) -> None:
        self.calls.append((self.name, self.label_values, "set", value))


def _engine_main(conn: Any, loader: Callable[..., Any], limits: BatchLimits, log_level: str) -> None:
    """The engine process: until told to close, or until the server is gone (the pipe closes)."""
    from service.logs import configure_logging

    configure_logging(log_level)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the server drains us
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    asyncio.run(_Engines(conn, loader, limits).serve())


class _Engines:
    def __init__(self, conn: Any, loader: Callable[..., Any], limits: BatchLimits):
        from service.scheduler import Scheduler

        self.conn, self.loader = conn, loader
        self.loop: asyncio.AbstractEventLoop | None = None
        self.depth_due = False
        self.recorder = _Recorder(self._depth_changed)
        # the server keeps the queue bound: nothing is refused here
        self.scheduler = Scheduler(dataclasses.replace(limits, max_queue=1 << 40), self.recorder)  # type: ignore[arg-type]
        self.engines: dict[int, Any] = {}
        self.tasks: dict[int, asyncio.Task[list[Translation]]] = {}
        self.received = 0  # sentences received so far
        self.static_sent: tuple[dict[str, int], int] = ({}, 0)  # the static-step counts the server last heard of
        self.closing = False

    async def serve(self) -> None:
        loop = self.loop = asyncio.get_running_loop()
        self.scheduler.start()
        readable = asyncio.Event()
        loop.add_reader(self.conn.fileno(), readable.set)
        flusher = loop.create_task(self._flush_every())
        try:
            while not self.closing:
                await readable.wait()
                readable.clear()
                try:
                    while not self.closing and self.conn.poll():
                        self._handle(self.conn.recv())
                except (EOFError, OSError):  # the server is gone: nobody waits for anything here
                    return
            await self.scheduler.close()
            while self.tasks:
                await asyncio.sleep(0.01)
            self._flush()
        finally:
            flusher.cancel()
            loop.remove_reader(self.conn.fileno())

    def _handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "translate":
            _, request, remote_id, batch, options, timeout_s = message
            task = asyncio.get_running_loop().create_task(self._translate(remote_id, batch, options, timeout_s))
            self.tasks[request] = task
            task.add_done_callback(functools.partial(self._answer, request))
        elif kind == "cancel":
            cancelled = self.tasks.pop(message[1], None)
            if cancelled is not None:
                cancelled.cancel()
        elif kind == "load":
            asyncio.get_running_loop().create_task(self._load(*message[1:]))
        elif kind == "unload":
            engine = self.engines.pop(message[1], None)
            if engine is not None:
                log.info("engine process: %s %s unloaded", engine.manifest.get("name"), engine.manifest.get("version"))
        elif kind == "close":
            self.closing = True

    def _depth_changed(self) -> None:
        """Tell the server the queue's new depth, once per turn of the loop however often it changed."""
        if not self.depth_due and self.loop is not None:
            self.depth_due = True
            self.loop.call_soon_threadsafe(self._report_depth)

    def _report_depth(self) -> None:
        self.depth_due = False
        self._send(("depth", self.scheduler.depth, self.received))

    async def _translate(
        self, remote_id: int, batch: list[list[int]], options: DecodeOptions, timeout_s: float
    ) -> list[Translation]:
        self.received += len(batch)  # in the same turn as the scheduler queues them: a depth report counts both
        engine = self.engines.get(remote_id)
        if engine is None:
            raise BatchFailed(f"model {remote_id} is not loaded in the engine process")
        return await self.scheduler.translate(engine, batch, options, timeout_s)

    def _answer(self, request: int, task: asyncio.Task[list[Translation]]) -> None:
        if self.tasks.pop(request, None) is None or task.cancelled():  # cancelled by the server: it waits no more
            return
        error = task.exception()
        depth = self.scheduler.depth
        if error is None:
            self._send(("done", request, task.result(), depth, self.received))
        else:
            if not isinstance(error, (BatchFailed, BatcherClosed, RequestTimeout)):
                log.error("engine process: a request failed: %r", error)
            self._send(("failed", request, (type(error).__name__, str(error)), depth, self.received))

    async def _load(self, remote_id: int, bundle: str, provider: str, threads: int) -> None:
        """Load and warm up a model; the reason of a failure as service/loader.py words it in one process."""
        try:
            engine = await asyncio.to_thread(self.loader, Path(bundle), provider=provider, threads=threads)
        except BundleError as err:
            self._send(("load_failed", remote_id, str(err), True))
            return
        except Exception as err:
            log.exception("engine process: loading %s failed", bundle)
            self._send(("load_failed", remote_id, f"{type(err).__name__}: {err}", False))
            return
        try:
            await asyncio.to_thread(engine.warmup)
        except Exception as err:
            log.exception("engine process: warm-up of %s failed", bundle)
            self._send(("load_failed", remote_id, f"warm-up translation failed: {type(err).__name__}: {err}", False))
            return
        self.engines[remote_id] = engine
        info = {"provider": engine.provider, "graphs": str(getattr(engine, "graphs", "main"))}
        info["graphs_dtype"] = getattr(engine, "graphs_dtype", None)
        self._send(("loaded", remote_id, info))

    async def _flush_every(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_S)
            self._flush()

    def _flush(self) -> None:
        calls, static = self.recorder.take(), (dict(OPENED), GATE.captures)
        if calls or static != self.static_sent:  # an idle static-step server sends nothing
            self.static_sent = static
            self._send(("metrics", calls, *static))

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            self.conn.send(message)
        except (OSError, ValueError):  # the server is gone
            self.closing = True
