"""A running set's device state in fixed shapes, so that a GPU can replay each decoder step as one CUDA graph.

The engine's default state (``engine.DeviceState``) fits its tensors to the running set: the cache grows by a
column a step, finished sentences are cut out of the memory, new ones appended. Every step then has new shapes,
and onnxruntime launches the step's ~100 kernels one by one, each with its host work: on an H100 a step costs
1.1-1.3 ms whatever the batch (docs/inference-core.md). :class:`StaticState` keeps every tensor at a fixed size
instead, so that onnxruntime's CUDA provider can capture a step once and then replay it with one launch:

* **slots**: each running sentence owns a slot (a row of the memory, ``hyps`` rows of the cache) from admission
  to its end. A sentence that leaves frees its slot (nothing is copied); a new one is written into a free slot
  by the bundle's ``place`` graph, in place. Free slots run along with the others and their outputs are ignored.
* **the cache keeps its width**: the bundle's ``static_decoder`` graph drops the oldest column as it appends
  the new one; a sentence's own columns are the last ``position + 1`` (core/graphs.py).
* **sizes come in buckets** (powers of two: slots, hypotheses per slot, source width, cache columns), and a
  running set moves to the next bucket only when it must (a copy through the host). Each bucket's decoder is a
  session of its own whose free dimensions are fixed, so onnxruntime folds every shape computation away.
* **buffers are reused**: the device tensors of a bucket, and the bindings and CUDA graph ids that point at
  them, live in a pool on the engine. A finished ``Engine.translate`` hands them back and the next call of the
  same size replays the graphs already captured.
* **the bound tensors never move**: per step the host writes tokens, positions and the cache reorder into the
  same device buffers (``update_inplace``) and reads back the top-k and the attention rows; the cache ping-pongs
  between two buffers, so each bucket has two graphs per ``k``.

On the CPU the same code runs without capture (the tests check it token for token against the PyTorch reference);
it is slower there than ``DeviceState`` (attention over the whole bucket), so the engine uses it only when asked
(``Engine.load(static_step=True)``).
"""

from __future__ import annotations

import collections
import contextlib
import statistics
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import onnxruntime as ort
from onnxruntime.capi import _pybind_state as _C

from core.graphs import GROW_KEY_SPLIT, KEY_A, KEY_B, KEY_LAYOUT, PACKED_LEN, PACKED_STEP_IDS, PACKED_TOPK
from inference.capture import GATE

if TYPE_CHECKING:
    from inference.engine import Engine

MIN_SLOTS = 1
MIN_HYPS = 4
"""Beam 4 is the default: a set of new sentences (one hypothesis each) starts at the width it will need."""
MIN_WIDTH = 16
MIN_COLUMNS = 32
"""The fewest cache columns a set has; longer ones take 64, 128, 256 columns."""
COLUMNS_SLACK = 8
"""A new set starts with cache columns for its median source's length plus this many (then the bucket of that), not
the fewest: on the five en-de-next test sets a sentence's hypotheses reached 2.9 positions past its source's length
on average, and a third of the sentences alone went past 32 columns, each then moving its set up a bucket (a
``grow`` call, ~2.4 ms on an H100 in session 42, where a batch-1 step replays in ~0.25 ms); with the source's length
plus 8 none of 300 did, and 32 of them had a larger bucket than they needed (docs/inference-core.md). The median,
not the longest: every sentence of a set admitted together is at the same position, so the set needs the columns of
the step it is at, and one long sentence would make every step of a large batch attend over its columns (a batch of
128 with one source of 150 pieces: 256 columns from the first step; bench/gpu_session/graph_calls.py)."""
COMPACT_BELOW = 4
"""A set whose running sentences fill at most a quarter of its slots moves to the smallest bucket that holds them
(when the bundle has the ``compact`` graph): a finished sentence's slot otherwise runs along until the set empties.
A quarter, not a half, so that a set near a bucket's edge does not move back and forth as sentences come and go."""
REUSE_BYTES = 2
"""A set moving up a bucket takes an already open larger one whose buffers are at most this many times those of the
bucket it needs, instead of opening that one (``BufferPool.fitting``)."""
POOL_FREE_BYTES = 2 << 30
"""Device memory the engine keeps in buffers no running set uses, for the next set of their sizes (2 GiB): a
server whose sets pass through many buckets would otherwise keep one of each for good."""
CAPTURE_RUNS = 3
"""onnxruntime's CUDA provider runs a graph id twice as usual (allocating what the graph needs) and captures it on
the third run, per thread (its per-thread context holds the graphs): those runs of a binding on a thread enter
the process's capture gate exclusive (inference/capture.py), the later ones, replays, shared."""


OPENED_KINDS = ("decoder", "encoder", "buffers")
OPENED: collections.Counter[str] = collections.Counter()
"""Static sessions opened in this process so far, by ``OPENED_KINDS``: ``"decoder"`` (one per ``Dims``),
``"encoder"`` (one per encoder bucket), and ``"buffers"``, the sets of device buffers allocated (each binds and
captures its own graphs). With ``GATE.captures`` they say whether a server under load still opens and captures
(service/metrics.py)."""


def bucket(n: int, least: int = 1) -> int:
    """The smallest power of two that is at least ``n`` and ``least``."""
    size = max(1, least)
    while size < n:
        size *= 2
    return size


@dataclass(frozen=True)
class Dims:
    slots: int
    hyps: int
    """hypothesis rows per slot"""
    width: int
    """source positions (EOS included) of the memory"""
    columns: int
    """self-attention cache columns"""

    @property
    def rows(self) -> int:
        return self.slots * self.hyps


class StaticSession:
    """The static decoder opened for one ``Dims``: its free dimensions fixed (onnxruntime then folds every
    Shape node); graph ids for CUDA graph capture are handed out per session. ``lean``: the static step without
    attention rows (core/graphs.py ``STATIC_LEAN``), which binds the same buffers."""

    def __init__(self, engine: Engine, dims: Dims, lean: bool = False):
        options = engine.session_options(step=True)
        layout = engine.static_key_layout.shape if engine.static_key_layout is not None else ()
        for name, value in (
            ("batch", dims.slots),
            ("hyps", dims.hyps),
            ("rows", dims.rows),
            ("src_len", dims.width),
            ("steps", dims.columns),
            (PACKED_LEN, 2 * dims.rows + dims.slots),
            *zip((KEY_A, KEY_B)[: len(layout)], layout, strict=True),  # a decoder-masked step's (KEY_LAYOUT)
        ):
            options.add_free_dimension_override_by_name(name, value)
        providers: list[Any] = list(engine.providers)
        if engine.cuda_graph:
            options.enable_mem_pattern = False
            providers[0] = (providers[0], {"enable_cuda_graph": "1"})
        path = engine.static_lean_path if lean else engine.static_decoder_path
        self.session = ort.InferenceSession(str(path), options, providers=providers)
        self.lean = lean
        OPENED["decoder"] += 1
        self.raw = self.session._sess
        self.run = self.raw.run_with_iobinding
        """How a step runs (bench/profile_decode.py wraps it to time the steps apart from the host's work)."""
        self.run_lock = threading.Lock() if engine.cuda_graph else contextlib.nullcontext()
        """Held around each run when steps are captured: onnxruntime's CUDA graph state is per session, and two
        running sets (scheduler threads) may step in the same bucket."""
        self._next_id = 0
        self._lock = threading.Lock()

    def graph_id(self) -> int:
        """A new CUDA graph annotation id (0 is onnxruntime's own, -1 means no capture)."""
        with self._lock:
            self._next_id += 1
            return self._next_id


@dataclass
class _Binding:
    session: StaticSession
    binding: Any
    run_options: Any
    outputs: tuple[Any, ...]  # device OrtValues: top-k log-probs and ids; or the packed top-k
    rows: Any  # the attention rows' device OrtValue; None for the lean step
    k: np.ndarray  # the bound k, kept alive
    runs: dict[int, int] = field(default_factory=dict)
    """runs so far per thread (``threading.get_ident``): which runs may capture (``CAPTURE_RUNS``)"""


@dataclass
class _EncoderBinding:
    """An encoder bucket's session bound to read its ``src`` and write one set of memory tensors: its own, or a
    ``Buffers``' (an empty set's admission then needs no ``place``); on CUDA with a graph id of its own."""

    binding: Any
    run_options: Any
    runs: dict[int, int] = field(default_factory=dict)
    """runs so far per thread, as ``_Binding.runs``"""


@dataclass
class Buffers:
    """Every device tensor of one bucket, and the bindings (one per k, cache parity and step graph, full or lean)
    that point at them."""

    dims: Dims
    memory: list[ort.OrtValue]
    caches: tuple[list[ort.OrtValue], list[ort.OrtValue]]
    steps: list[tuple[str, ort.OrtValue]]
    """the step's host-written inputs by name: ``step_ids`` (a packed static decoder), or tokens, positions and
    reorder"""
    bindings: dict[tuple[int, int, bool, int], _Binding] = field(default_factory=dict)
    """by k, cache parity, lean step and lane (``Engine.lane``)"""
    into: _EncoderBinding | None = None
    """the binding of the encoder bucket of these slots and width that writes into ``memory``, once used"""
    nbytes: int = 0
    """device bytes of all the tensors"""
    host: np.ndarray = field(kw_only=True)
    """the step's host inputs, packed (tokens, positions, reorder), written in place each step"""
    identity: np.ndarray = field(kw_only=True)
    """arange(rows): the reorder of rows no running hypothesis holds"""
    views: tuple[np.ndarray, np.ndarray, np.ndarray] = field(init=False)
    """``host`` as tokens (slots, hyps), positions (slots) and reorder (rows): views made once"""

    def __post_init__(self) -> None:
        d = self.dims
        self.views = (
            self.host[: d.rows].reshape(d.slots, d.hyps),
            self.host[d.rows : d.rows + d.slots],
            self.host[d.rows + d.slots :],
        )


def _lean(engine: Engine, attention: bool = False) -> bool:
    """Whether a step that asks for attention rows or not (``attention``) replays the lean static step."""
    return not attention and engine.static_lean_path is not None


def _captures(runs: dict[int, int], cuda_graph: bool) -> tuple[int, bool]:
    """This thread's id, and whether its next run of a graph with these ``runs`` per thread may capture it
    (``CAPTURE_RUNS``): then the run enters the gate exclusive. The caller records the run in ``runs``."""
    thread = threading.get_ident()
    return thread, cuda_graph and runs.get(thread, 0) < CAPTURE_RUNS


class EncoderBucket:
    """The encoder opened for ``batch`` sources of ``width`` positions (EOS and padding included), its free
    dimensions fixed, reading and writing fixed buffers: on CUDA its runs are captured and replayed like the steps'
    (``Engine.static_encoder``). One admission at a time uses it (``lock``, held until ``place`` has read the
    outputs)."""

    def __init__(self, engine: Engine, batch: int, width: int):
        assert engine.encoder_path is not None
        options = engine.session_options()
        options.add_free_dimension_override_by_name("batch", batch)
        options.add_free_dimension_override_by_name("src_len", width)
        providers: list[Any] = list(engine.providers)
        if engine.cuda_graph:
            options.enable_mem_pattern = False
            providers[0] = (providers[0], {"enable_cuda_graph": "1"})
        arch = engine.manifest["architecture"]
        heads, d_head = int(arch["n_heads"]), int(arch["d_head"])
        with GATE.shared():  # the session's weights and the buffers go to the device
            session = ort.InferenceSession(str(engine.encoder_path), options, providers=providers)
            OPENED["encoder"] += 1
            self.src = ort.OrtValue.ortvalue_from_shape_and_type([batch, width], np.int64, *engine.device)
            self.memory = [ort.OrtValue.ortvalue_from_shape_and_type([batch, width], np.bool_, *engine.device)]
            self.memory += [
                ort.OrtValue.ortvalue_from_shape_and_type(
                    [batch, heads, width, d_head], engine.float_type, *engine.device
                )
                for _ in engine.memory_names[1:]
            ]
        self.engine, self.session, self.batch, self.width = engine, session, batch, width
        self._graph_ids = 0
        self.own = self._bound(self.memory)
        self.lock = threading.Lock()

    @property
    def runs(self) -> dict[int, int]:
        """Runs of its own binding so far per thread, as ``_Binding.runs``."""
        return self.own.runs

    def run(self, src: np.ndarray, cuda_graph: bool, into: Buffers | None = None) -> None:
        """Encode ``src`` (batch, width) into ``memory``, or into the memory of ``into`` (buffers of this bucket's
        batch as slots and its width: :meth:`_into`); the caller holds ``lock``."""
        target = self.own if into is None else self._into(into)
        thread, capturing = _captures(target.runs, cuda_graph)
        with GATE.shared():
            self.src.update_inplace(src)
        with GATE.exclusive() if capturing else GATE.shared():
            self.session._sess.run_with_iobinding(target.binding, target.run_options)
        target.runs[thread] = target.runs.get(thread, 0) + 1

    def _bound(self, memory: list[ort.OrtValue]) -> _EncoderBinding:
        """A binding of the session that reads ``src`` and writes ``memory``, with the next CUDA graph id."""
        binding = _C.SessionIOBinding(self.session._sess)
        binding.bind_ortvalue_input("src_ids", self.src._ortvalue)
        for name, value in zip(self.engine.memory_names, memory, strict=True):
            binding.bind_ortvalue_output(name, value._ortvalue)
        run_options = None
        if self.engine.cuda_graph:
            self._graph_ids += 1
            run_options = ort.RunOptions()
            run_options.add_run_config_entry("gpu_graph_id", str(self._graph_ids))
        return _EncoderBinding(binding, run_options)

    def _into(self, buffers: Buffers) -> _EncoderBinding:
        """This bucket's binding that writes into ``buffers``' memory, made on first use and kept with the buffers
        (freed with them; its graph id is never used again)."""
        assert (buffers.dims.slots, buffers.dims.width) == (self.batch, self.width)
        if buffers.into is None:
            buffers.into = self._bound(buffers.memory)
        return buffers.into


class BufferPool:
    """The engine's free ``Buffers`` per ``Dims``, and the decoder sessions of each ``Dims`` (the full static step,
    and the lean one where the engine has it) and lane, opened on first use; thread-safe."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._lock = threading.Lock()
        self._sessions: dict[tuple[Dims, bool, int], StaticSession] = {}
        """by bucket, lean or full, and lane"""
        self._free: dict[Dims, list[Buffers]] = {}
        self._free_bytes = 0
        self._released: dict[int, Buffers] = {}  # kept buffers by id, oldest release first
        self._encoders: dict[tuple[int, int], EncoderBucket] = {}

    def encoder(self, batch: int, width: int) -> EncoderBucket:
        """The encoder bucket of these sizes, opened on first use."""
        with self._lock:
            found = self._encoders.get((batch, width))
        if found is None:  # opened outside the lock, as the decoder sessions
            found = EncoderBucket(self.engine, batch, width)
            with self._lock:
                found = self._encoders.setdefault((batch, width), found)
        return found

    def fitting(self, dims: Dims) -> Dims:
        """``dims``, or instead the smallest bucket already opened that is at least as large on every axis and holds
        at most ``REUSE_BYTES`` times its buffers: a set that must move up a bucket takes an open one rather than open
        a session (and on CUDA capture its graphs) while it decodes, for some padding."""
        opened = self.opened
        if dims in opened:
            return dims
        limit = REUSE_BYTES * buffer_bytes(self.engine, dims)
        fits = [
            (size, d)
            for d in opened
            if d.slots >= dims.slots
            and d.hyps >= dims.hyps
            and d.width >= dims.width
            and d.columns >= dims.columns
            and (size := buffer_bytes(self.engine, d)) <= limit
        ]
        return min(fits, key=lambda pair: pair[0])[1] if fits else dims

    @property
    def opened(self) -> set[Dims]:
        """The buckets whose decoder (either step, any lane) has been opened."""
        with self._lock:
            return {d for d, _, _ in self._sessions}

    def session(self, dims: Dims, lean: bool) -> StaticSession:
        """The calling thread's lane's decoder session of ``dims``, full or lean, opened on first use."""
        key = (dims, lean, self.engine.lane())
        with self._lock:
            found = self._sessions.get(key)
        if found is None:  # opened outside the lock: it takes a while, and a duplicate is harmless
            found = StaticSession(self.engine, dims, lean)
            with self._lock:
                found = self._sessions.setdefault(key, found)
        return found

    def acquire(self, dims: Dims) -> Buffers:
        """Free buffers of ``dims`` (with lanes, preferably ones bound for the calling thread's lane), or new ones with
        the session a set's steps take first opened (the lean step's where the engine has it: most steps ask for no
        attention rows)."""
        lane = self.engine.lane()  # (outside the lock: a thread's first call takes it)
        with self._lock:
            free = self._free.get(dims)
            if free:
                at = -1  # the latest released; with lanes, the latest with bindings for this lane (graphs captured)
                if self.engine.lanes > 1:
                    bound = (i for i in reversed(range(len(free))) if any(k[3] == lane for k in free[i].bindings))
                    at = next(bound, -1)
                found = free.pop(at)
                self._free_bytes -= found.nbytes
                del self._released[id(found)]
                return found
        self.session(dims, _lean(self.engine))
        return self._allocate(dims)

    def release(self, buffers: Buffers) -> None:
        """Keep ``buffers`` for the next set of its sizes; past ``POOL_FREE_BYTES`` of kept buffers, the longest
        unused go (their device memory freed; their bindings and graph ids go with them and are never replayed)."""
        with self._lock:
            self._free.setdefault(buffers.dims, []).append(buffers)
            self._free_bytes += buffers.nbytes
            self._released[id(buffers)] = buffers
            while self._free_bytes > POOL_FREE_BYTES and self._released:
                oldest = self._released.pop(next(iter(self._released)))
                kept = self._free[oldest.dims]
                kept[:] = [b for b in kept if b is not oldest]
                self._free_bytes -= oldest.nbytes

    @property
    def free_bytes(self) -> int:
        """Device bytes of the buffers kept for reuse."""
        return self._free_bytes

    def _allocate(self, dims: Dims) -> Buffers:
        OPENED["buffers"] += 1
        engine = self.engine
        arch = engine.manifest["architecture"]
        heads, d_head = int(arch["n_heads"]), int(arch["d_head"])

        def value(initial: np.ndarray) -> ort.OrtValue:
            out = ort.OrtValue.ortvalue_from_shape_and_type(list(initial.shape), initial.dtype, *engine.device)
            out.update_inplace(initial)
            return out

        # Free slots must stay finite: an all-visible source of zeros (a fully masked one would give NaN).
        cross = np.zeros((dims.slots, heads, dims.width, d_head), dtype=engine.float_type)
        memory = [value(np.zeros((dims.slots, dims.width), dtype=bool))]
        memory += [value(cross) for _ in engine.memory_names[1:]]
        cache = np.zeros((dims.rows, heads, dims.columns, d_head), dtype=engine.float_type)
        caches = ([value(cache) for _ in engine.past_names], [value(cache) for _ in engine.past_names])
        return Buffers(
            dims,
            memory,
            caches,
            steps=_step_inputs(engine, dims, value),
            nbytes=buffer_bytes(engine, dims),
            host=np.zeros(2 * dims.rows + dims.slots, dtype=np.int64),
            identity=np.arange(dims.rows, dtype=np.int64),
        )


def _step_inputs(engine: Engine, dims: Dims, value: Any) -> list[tuple[str, ort.OrtValue]]:
    tokens = np.full(dims.rows, engine.bos_id, dtype=np.int64)
    positions, reorder = np.zeros(dims.slots, dtype=np.int64), np.arange(dims.rows, dtype=np.int64)
    if engine.static_packed:
        return [(PACKED_STEP_IDS, value(np.concatenate((tokens, positions, reorder))))]
    grid = tokens.reshape(dims.slots, dims.hyps)
    return [("tokens", value(grid)), ("positions", value(positions)), ("reorder", value(reorder))]


def _binding(engine: Engine, buffers: Buffers, k: int, parity: int, lean: bool) -> _Binding:
    """The binding of ``buffers`` for this ``k`` and cache parity, to the full static step or the lean one of the
    calling thread's lane."""
    key = (k, parity, lean, engine.lane())
    found = buffers.bindings.get(key)
    if found is not None:
        return found
    dims, session = buffers.dims, engine.static_pool.session(buffers.dims, lean)
    binding = _C.SessionIOBinding(session.raw)
    for name, value in buffers.steps:
        binding.bind_ortvalue_input(name, value._ortvalue)
    k_value = np.full(engine.k_shape, k, dtype=np.int64)  # TopK reads k on the host, on CUDA too
    binding.bind_input("k", k_value)
    if engine.static_key_layout is not None:  # only its shape is read, and folded (core/graphs.py KEY_LAYOUT)
        binding.bind_input(KEY_LAYOUT, engine.static_key_layout)
    for name, value in zip(engine.memory_names, buffers.memory, strict=True):
        binding.bind_ortvalue_input(name, value._ortvalue)
    for name, value in zip(engine.past_names, buffers.caches[parity], strict=True):
        binding.bind_ortvalue_input(name, value._ortvalue)
    for name, value in zip(engine.present_names, buffers.caches[1 - parity], strict=True):
        binding.bind_ortvalue_output(name, value._ortvalue)
    for name, value in zip(engine.static_windows, buffers.caches[1 - parity], strict=False):
        binding.bind_ortvalue_output(name, value._ortvalue)  # gathered into the present: nothing copied (WINDOW)

    def out(shape: tuple[int, ...], dtype: type) -> ort.OrtValue:
        return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, *engine.device)

    if engine.static_packed:
        outputs: tuple[Any, ...] = (out((dims.slots, dims.hyps, 2, k), np.float32),)
        names: tuple[str, ...] = (PACKED_TOPK,)
    else:
        outputs = (out((dims.slots, dims.hyps, k), np.float32), out((dims.slots, dims.hyps, k), np.int64))
        names = ("topk_logprobs", "topk_ids")
    rows = None if lean else out((dims.slots, dims.hyps, dims.width), np.float32)
    for name, value in zip(names, outputs, strict=True):
        binding.bind_ortvalue_output(name, value._ortvalue)
    if rows is not None:
        binding.bind_ortvalue_output("attention", rows._ortvalue)
    run_options = None
    if engine.cuda_graph:
        run_options = ort.RunOptions()
        run_options.add_run_config_entry("gpu_graph_id", str(session.graph_id()))
    found = _Binding(session, binding, run_options, outputs, rows, k_value)
    buffers.bindings[key] = found
    return found


def _run(bound: _Binding, attention: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One step on ``bound``; the top-k log-probs and ids, and the attention rows when asked for (``bound`` is then
    the full step's), to the host."""
    session = bound.session
    with session.run_lock:
        session.run(bound.binding, bound.run_options)
        outputs = bound.outputs
        rows = bound.rows.numpy() if attention else None
        if len(outputs) == 1:  # packed: log-probs and ids (as floats) in one read
            topk = outputs[0].numpy()
            return topk[:, :, 0], topk[:, :, 1].astype(np.int64), rows
        return outputs[0].numpy(), outputs[1].numpy(), rows


class StaticState:
    """The device side of a running set (a beam_search.Stepper) in fixed-size, reused buffers (module docstring)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.buffers: Buffers | None = None
        self.slot_of: list[int] = []
        """the slot of each running sentence, in the search's order"""
        self._prev_slots = np.zeros(0, dtype=np.int64)  # the slots of the last step's sentences, in its order
        self._prev_hyps = 1
        self._prev_first: int | None = None  # the last step's sentence count when they held slots 0 .. n-1
        self._parity = 0  # which of the two caches holds the last step's output
        self._placed_key: tuple[Any, ...] = ()
        nothing = np.zeros(0, np.int64)
        self._placed_value: tuple[np.ndarray, np.ndarray, int | None] = (nothing, nothing, 0)

    def admit(self, sources: list[list[int]]) -> None:
        engine = self.engine
        width = max(len(ids) for ids in sources) + 1
        dims = self.buffers.dims if self.buffers else None
        want = Dims(
            slots=bucket(len(self.slot_of) + len(sources), dims.slots if dims else MIN_SLOTS),
            hyps=dims.hyps if dims else MIN_HYPS,
            width=bucket(width, dims.width if dims else MIN_WIDTH),
            columns=dims.columns if dims else first_columns(engine, statistics.median_low(map(len, sources))),
        )
        if want != dims:
            self._resize(want)
        buffers = self.buffers
        assert buffers is not None
        taken = set(self.slot_of)
        free = [s for s in range(buffers.dims.slots) if s not in taken]
        slots = free[: len(sources)]
        memory = dict(zip(engine.memory_names, (value._ortvalue for value in buffers.memory), strict=True))
        # The place outputs are the inputs' own buffers: ScatterND writes the new rows where the memory lies.
        bound = {"placed_" + name: value for name, value in memory.items()}
        encoder_batch = bucket(len(sources))
        if engine.static_encoder and len(free) >= encoder_batch:
            # The encoder in a bucket of fixed sizes (captured on CUDA): the rows past the sources are one-EOS
            # sentences (finite), written into free slots, which run along with the others and are never read.
            # An empty set (a sentence translated alone, a batch admitted whole) takes the encoder bucket of its
            # buffers' size, which may be larger than its sources need (``BufferPool.fitting``): the encoder then
            # writes into the buffers, and no place runs (on an H200 a place call cost ~2.9 ms, a replayed encoder
            # 0.46: docs/inference-core.md, session 36; on an H100 10 ms, session 42).
            empty = not self.slot_of
            shape = (buffers.dims.slots, buffers.dims.width) if empty else (encoder_batch, bucket(width, MIN_WIDTH))
            src = np.full(shape, engine.pad_id, dtype=np.int64)
            src[:, 0] = engine.eos_id
            src[: len(sources), :width] = engine.source_batch(sources)
            encoder = engine.static_pool.encoder(*src.shape)
            with encoder.lock:
                if empty:
                    encoder.run(src, engine.cuda_graph, into=buffers)
                else:
                    encoder.run(src, engine.cuda_graph)
                    inputs: dict[str, Any] = {**memory, "slots": np.array(free[:encoder_batch], dtype=np.int64)}
                    inputs |= {
                        "new_" + n: v._ortvalue for n, v in zip(engine.memory_names, encoder.memory, strict=True)
                    }
                    engine.run_graph("place", inputs, [], bound=bound)
        else:
            new = engine.run_graph("encoder", {"src_ids": engine.source_batch(sources)}, engine.memory_names)
            inputs = {**memory, "slots": np.array(slots, dtype=np.int64)}
            inputs |= {"new_" + name: value for name, value in zip(engine.memory_names, new, strict=True)}
            engine.run_graph("place", inputs, [], bound=bound)
        self.slot_of += slots

    def step(
        self, tokens: np.ndarray, positions: np.ndarray, reorder: np.ndarray, k: int, attention: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        engine = self.engine
        assert self.buffers is not None, "step() before admit()"
        batch, hyps = tokens.shape
        dims = self.buffers.dims
        if batch <= 32:  # Python's max and `in` over a short list: a tenth of numpy's two reductions at batch 1
            listed = positions.tolist()
            columns, fresh = max(listed) + 1, 0 in listed
        else:
            columns, fresh = int(positions.max()) + 1, not positions.all()
        if hyps > dims.hyps or columns > dims.columns:
            self._resize(
                Dims(dims.slots, bucket(hyps, dims.hyps), dims.width, bucket(columns, dims.columns)),
            )
        buffers = self.buffers
        assert buffers is not None
        dims = buffers.dims
        slots, rows, first = self._placed(dims, hyps)
        # The step's host inputs, written into one reused vector (packed: tokens, positions, reorder): a batch-1 step
        # is a few dozen microseconds of host work between two replays, and each numpy allocation is a part of it.
        host, (grid, at, order) = buffers.host, buffers.views
        full = first == dims.slots and hyps == dims.hyps  # every slot and row is written below: nothing to reset
        if not full:
            grid.fill(engine.bos_id)
            at.fill(0)
        if first is not None:  # the running sentences hold slots 0 .. n-1 (most sets): slices, not index arrays
            grid[:first, :hyps] = tokens
            at[:first] = positions
        else:
            grid[slots, :hyps] = tokens
            at[slots] = positions
        if len(self._prev_slots):
            if self._prev_first == len(self._prev_slots) and self._prev_hyps == dims.hyps:
                source = reorder  # the last step's sentences held slots 0 .. n-1 at this width: rows as given
            else:
                sentence, hyp = np.divmod(reorder, self._prev_hyps)
                source = self._prev_slots[sentence] * dims.hyps + hyp
            if fresh:  # a new sentence reads no cached column: any row does
                source = np.where(np.repeat(positions == 0, hyps), rows, source)
            if full:
                order[:] = source
            else:
                order[:] = buffers.identity
                order[rows] = source
        else:
            order[:] = buffers.identity
        graph_k = min(bucket(k), engine.vocab_size)
        with GATE.shared():
            if engine.static_packed:
                buffers.steps[0][1].update_inplace(host)
            else:
                for (_, value), part in zip(buffers.steps, (grid, at, order), strict=True):
                    value.update_inplace(np.ascontiguousarray(part))
            bound = _binding(engine, buffers, graph_k, self._parity, _lean(engine, attention))
            thread, capturing = _captures(bound.runs, engine.cuda_graph)
            if not capturing:  # a replay (or no capture at all): in the same shared entry
                outputs = _run(bound, attention)
        if capturing:
            with GATE.exclusive():
                outputs = _run(bound, attention)
        bound.runs[thread] = bound.runs.get(thread, 0) + 1
        top_lp, top_ids, rows_attention = outputs
        self._prev_slots, self._prev_hyps, self._parity = slots, hyps, 1 - self._parity
        self._prev_first = first
        taken: Any = slice(0, first) if first is not None else slots
        # On the CPU an output's numpy() is a view of its bound buffer, which the next step overwrites: the attention
        # rows outlive the step (hypotheses keep them), so they are copied; the top-k is read within it.
        picked = np.array(rows_attention[taken, :hyps]) if rows_attention is not None else None
        return top_lp[taken, :hyps, :k], top_ids[taken, :hyps, :k], picked

    def _placed(self, dims: Dims, hyps: int) -> tuple[np.ndarray, np.ndarray, int | None]:
        """The running sentences' slots, their first ``hyps`` rows, and their count when they hold slots 0 .. n-1
        (None otherwise): kept until the slots change (admit, keep, compact) or the shapes do."""
        key = (tuple(self.slot_of), dims.hyps, hyps)
        if self._placed_key != key:
            slots = np.array(self.slot_of, dtype=np.int64)
            rows = (slots[:, None] * dims.hyps + np.arange(hyps)).reshape(-1)
            first = len(slots) if self.slot_of == list(range(len(slots))) else None
            self._placed_key, self._placed_value = key, (slots, rows, first)
        return self._placed_value

    def keep(self, sentences: np.ndarray) -> None:
        self.slot_of = [self.slot_of[i] for i in sentences.tolist()]
        if not self.slot_of and self.buffers is not None:  # the set is empty: its buffers go back to the pool
            self.engine.static_pool.release(self.buffers)
            self.buffers, self._prev_slots, self._prev_hyps, self._parity = None, np.zeros(0, np.int64), 1, 0
        elif (
            self.buffers is not None
            and "compact" in self.engine.sessions
            and len(self.slot_of) <= self.buffers.dims.slots // COMPACT_BELOW
        ):
            self._compact()

    def _compact(self) -> None:
        """Move the running sentences into the first slots of a smaller bucket, on the device (``compact``)."""
        engine, old = self.engine, self.buffers
        assert old is not None
        a = old.dims
        b = Dims(bucket(len(self.slot_of), MIN_SLOTS), a.hyps, a.width, a.columns)
        if b.slots >= a.slots:
            return
        slot_index = np.zeros(b.slots, dtype=np.int64)  # a free slot copies slot 0: finite, and never read
        slot_index[: len(self.slot_of)] = self.slot_of
        row_index = (slot_index[:, None] * a.hyps + np.arange(a.hyps)).reshape(-1)
        with GATE.shared():
            new = engine.static_pool.acquire(b)
            inputs, bound = self._from_to(old, new, "compact_")
            inputs |= {"slot_index": slot_index, "row_index": row_index}
            engine.run_graph("compact", inputs, [], bound=bound)
        moved = np.zeros(a.slots, dtype=np.int64)  # old slot -> new slot; the last step's rows are read through it
        moved[self.slot_of] = np.arange(len(self.slot_of))
        self._prev_slots = moved[self._prev_slots]
        self._prev_first = None  # no longer slots 0 .. n-1 in the last step's order
        self.slot_of = list(range(len(self.slot_of)))
        self.buffers = new
        engine.static_pool.release(old)

    def _resize(self, dims: Dims) -> None:
        """Move the state to buffers of ``dims`` (at least as large on every axis), or of a larger bucket already open
        (``BufferPool.fitting``), on the device (``grow``) or through the host."""
        engine, old = self.engine, self.buffers
        dims = engine.static_pool.fitting(dims)
        with GATE.shared():  # a session opened, device buffers allocated and filled
            new = engine.static_pool.acquire(dims)
            self._copy_state(old, new)
        self.buffers = new
        if old is not None:
            engine.static_pool.release(old)

    def _grow(self, old: Buffers, new: Buffers) -> None:
        """What the host copy below does, on the device: the bundle's ``grow`` graph reads the old buffers and writes
        the new ones (core/graphs.py ``STATIC_EXTRAS``)."""
        engine, a, b = self.engine, old.dims, new.dims
        heads, d_head = (int(engine.manifest["architecture"][key]) for key in ("n_heads", "d_head"))
        more = {"slots": b.slots - a.slots, "width": b.width - a.width, "hyps": b.hyps - a.hyps}
        more["columns"] = b.columns - a.columns

        def ints(*values: int) -> np.ndarray:
            return np.array(values, dtype=np.int64)

        inputs, bound = self._from_to(old, new, "grown_")
        inputs |= {
            "mask_width_pads": ints(0, 0, 0, more["width"]),
            "mask_slot_pads": ints(0, 0, more["slots"], 0),
            "memory_pads": ints(0, 0, 0, 0, more["slots"], 0, more["width"], 0),
            "cache_split": ints(a.slots, a.hyps, heads, a.columns, d_head),
            # the new columns on the left: a sentence's own columns are the last ones
            "cache_pads": ints(0, 0, 0, more["columns"], 0, more["slots"], more["hyps"], 0, 0, 0),
            "cache_merge": ints(b.rows, heads, b.columns, d_head),
        }
        if engine.static_grow_keys:  # the keys in their layout: (heads, d_head) as (heads * a, b), KEY_LAYOUT
            a_, b_ = engine.static_key_layout.shape if engine.static_key_layout is not None else (1, d_head)
            inputs[GROW_KEY_SPLIT] = ints(a.slots, a.hyps, heads * a_, a.columns, b_)
        engine.run_graph("grow", inputs, [], bound=bound)

    def _from_to(self, old: Buffers, new: Buffers, prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """A state graph's inputs, the old buffers' memory and current cache, and its outputs (``prefix`` + name)
        bound to the new buffers' own."""
        engine, parity = self.engine, self._parity
        inputs: dict[str, Any] = {}
        bound: dict[str, Any] = {}
        names = [*engine.memory_names, *engine.past_names]
        olds, news = [*old.memory, *old.caches[parity]], [*new.memory, *new.caches[parity]]
        for name, before, after in zip(names, olds, news, strict=True):
            inputs[name], bound[prefix + name] = before._ortvalue, after._ortvalue
        return inputs, bound

    def _copy_state(self, old: Buffers | None, new: Buffers) -> None:
        if old is None:
            self._parity = 0
            return
        if "grow" in self.engine.sessions:
            self._grow(old, new)
            return
        a, b = old.dims, new.dims
        mask = old.memory[0].numpy()
        grown = np.zeros((b.slots, b.width), dtype=bool)
        grown[: a.slots] = True  # a running sentence's added source positions are padding
        grown[: a.slots, : a.width] = mask
        new.memory[0].update_inplace(grown)
        for old_value, new_value in zip(old.memory[1:], new.memory[1:], strict=True):
            cross = old_value.numpy()
            out = np.zeros((b.slots, *cross.shape[1:2], b.width, cross.shape[3]), dtype=cross.dtype)
            out[: a.slots, :, : a.width] = cross
            new_value.update_inplace(out)
        for old_value, new_value in zip(old.caches[self._parity], new.caches[self._parity], strict=True):
            cache = old_value.numpy()
            heads, d_head = cache.shape[1], cache.shape[3]
            out = np.zeros((b.slots, b.hyps, heads, b.columns, d_head), dtype=cache.dtype)
            grid = cache.reshape(a.slots, a.hyps, heads, a.columns, d_head)
            out[: a.slots, : a.hyps, :, b.columns - a.columns :] = grid  # right-aligned: a sentence's are the last
            new_value.update_inplace(out.reshape(b.rows, heads, b.columns, d_head))


WARM_BYTES = 1 << 30
"""Most device memory a warm-up at load (:func:`warm`) fills with buffers (1 GiB, half of ``POOL_FREE_BYTES``, so
that the sets running later still find room in the pool): every bucket of a server's smaller sets fits, the largest
ones (up to ~1.2 GiB each for the default model at 128 sentences and 256 columns) open on first use."""


@dataclass
class Warmed:
    """What :func:`warm` opened: buckets (decoder sessions with their buffers), step bindings, encoder buckets, and
    encoder bindings that write into a bucket's buffers (an empty set's admission: ``StaticState.admit``)."""

    buckets: int = 0
    bindings: int = 0
    encoders: int = 0
    into: int = 0
    nbytes: int = 0
    skipped: int = 0
    """buckets of the ladder past ``budget``: they open on first use, as without a warm-up"""


def first_columns(engine: Engine, pieces: int) -> int:
    """The cache columns of a new set whose median source has ``pieces`` pieces (``COLUMNS_SLACK``)."""
    return min(bucket(pieces + COLUMNS_SLACK, MIN_COLUMNS), bucket(engine.max_positions, MIN_COLUMNS))


def ladder(engine: Engine, max_slots: int, beam: int) -> list[Dims]:
    """Every bucket a running set of at most ``max_slots`` sentences of beam ``beam`` can reach with this engine's
    bundle, smallest buffers first: slots up to ``bucket(max_slots)``, source widths up to the longest source
    (``max_source_pieces`` + EOS), cache columns up to ``max_positions``."""

    def rungs(least: int, most: int) -> list[int]:
        sizes = [bucket(1, least)]
        while sizes[-1] < most:
            sizes.append(sizes[-1] * 2)
        return sizes

    found = [
        Dims(slots, bucket(beam, MIN_HYPS), width, columns)
        for slots in rungs(MIN_SLOTS, max_slots)
        for width in rungs(MIN_WIDTH, engine.max_source_pieces + 1)
        for columns in rungs(MIN_COLUMNS, engine.max_positions)
    ]
    return sorted(found, key=lambda d: (buffer_bytes(engine, d), d.slots, d.width, d.columns))


def buffer_bytes(engine: Engine, dims: Dims) -> int:
    """Device bytes of one bucket's buffers (``BufferPool._allocate``)."""
    arch = engine.manifest["architecture"]
    heads, d_head = int(arch["n_heads"]), int(arch["d_head"])
    item = np.dtype(engine.float_type).itemsize
    cross = dims.slots * heads * dims.width * d_head * item * (len(engine.memory_names) - 1)
    cache = dims.rows * heads * dims.columns * d_head * item * 2 * len(engine.past_names)
    return dims.slots * dims.width + cross + cache + 8 * (2 * dims.rows + dims.slots)


def warm(engine: Engine, max_slots: int, beam: int = 4, budget: int = WARM_BYTES) -> Warmed:
    """Open, before any request, what running sets of up to ``max_slots`` sentences would open as they meet each
    bucket (:func:`ladder`, smallest first, within ``budget`` bytes of buffers): each bucket's decoder session, its
    buffers, and their bindings for the graph ``k`` of beam ``beam`` (``bucket(beam + 1)``: the search asks for ``beam +
    1`` tokens plus the most any hypothesis bans, inference/beam_search.py; at beam 4 that stays within 8 until one
    bans 4, which none of 216 steps of 256 test sentences under the server's guard did in session 48, so the next
    size opens on first use), each run as often as capture needs (``CAPTURE_RUNS``; on the CPU, which captures
    nothing, one run a bucket), and on CUDA the encoder buckets of the same sizes. The buffers then wait in the pool,
    largest released first so that the pool's limit frees those first.

    onnxruntime keeps captured graphs per thread: call this on the thread that will decode
    (``Engine.decode_threads``). On an error the buckets warmed so far still go to the pool, and the error is
    raised (``Engine.warmup`` logs it and serves: the other buckets open on first use)."""
    done = Warmed()
    pool = engine.static_pool
    k = min(bucket(beam + 1), engine.vocab_size)
    opened: list[Buffers] = []  # warmed through: they go to the pool, whatever happens after
    try:
        for dims in ladder(engine, max_slots, beam):
            size = buffer_bytes(engine, dims)
            if done.nbytes + size > budget:
                done.skipped += 1
                continue
            with GATE.shared():
                buffers = pool.acquire(dims)
            for parity in (0, 1):
                with GATE.shared():
                    bound = _binding(engine, buffers, k, parity, _lean(engine))
                # On the CPU the bucket's first binding runs once (what a first run sets up is the session's), the
                # others are only bound.
                for _ in range(CAPTURE_RUNS if engine.cuda_graph else int(parity == 0)):
                    thread, capturing = _captures(bound.runs, engine.cuda_graph)
                    with GATE.exclusive() if capturing else GATE.shared():
                        _run(bound, attention=False)
                    bound.runs[thread] = bound.runs.get(thread, 0) + 1
                done.bindings += 1
            opened.append(buffers)  # a bucket that failed half-way is not kept: its buffers are freed with it
            done.buckets, done.nbytes = done.buckets + 1, done.nbytes + size
        if engine.static_encoder:

            def capture(batch: int, width: int, into: Buffers | None = None) -> None:
                """The encoder bucket's runs until captured, on one-EOS rows (finite; an admission overwrites them)."""
                encoder = pool.encoder(batch, width)
                src = np.full((batch, width), engine.pad_id, dtype=np.int64)
                src[:, 0] = engine.eos_id
                with encoder.lock:
                    for _ in range(CAPTURE_RUNS):
                        encoder.run(src, engine.cuda_graph, into)

            widths = sorted({b.dims.width for b in opened})
            for batch in sorted({b.dims.slots for b in opened}):
                for width in widths:
                    capture(batch, width)
                    done.encoders += 1
            for buffers in opened:  # the buckets an empty set's admission takes, its encoder writing into them
                d = buffers.dims
                if d.hyps == MIN_HYPS and d.columns <= first_columns(engine, d.width - 1):  # median at most longest
                    capture(d.slots, d.width, buffers)
                    done.into += 1
    finally:
        for buffers in sorted(opened, key=lambda b: -b.nbytes):
            pool.release(buffers)
    return done
