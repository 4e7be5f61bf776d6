"""A running set's device state whose self-attention caches never move (the bundle's masked step).

``engine.DeviceState`` hands the decoder step last step's caches and the beam's reorder: every step gathers every
row's cache and grows it by a column, a copy of the whole cache a step. ``ClockState`` keeps the caches where they
were written instead (docs/inference-core.md, "The cache without moves"), for ``core.graphs.MASKED_STEP``, whose
self-attention is onnxruntime's ``DecoderMaskedMultiHeadAttention``:

* **slots**: each running sentence owns a slot from admission to its end: a row of the memory (source mask, cross
  keys and values) and ``hyps`` rows of the caches. A sentence that leaves frees its slot; free slots run along
  with the others (their outputs ignored) until half are free, when the set moves into fewer slots.
* **a clock**: the set's step ``t`` writes column ``t`` of every row's caches, in the buffers themselves (bound as
  both the step's past and present). A sentence at position ``p`` owns the columns ``t - p .. t``: the step's
  ``own`` mask. When the clock reaches the buffers' last column, the columns still owned move to the front (the
  buffers grow when they would be more than half full after it).
* **a beam index**: ``beams[slot, i, c]`` is the hypothesis of the slot whose row holds column ``c`` of hypothesis
  ``i``'s past. A step's reorder sets each new hypothesis' index to its parent's, and the column the parent wrote
  last to the parent: a few numpy calls on the host where the caches would have been gathered on the device.

The moves between sizes (more slots, hypotheses, source positions or columns, fewer slots) are rare. The caches move
on the device, by the bundle's ``MASKED_MOVE`` graph (through the host for a bundle without it); the memory, a
fraction of their size, through the host. On CUDA the kernel keeps keys as (rows, heads, d_head / x, columns, x), x
values in 16 bytes, which the moves follow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import onnxruntime as ort

from core.graphs import MASKED_MOVE, MASKED_STEP
from inference.static_state import bucket

if TYPE_CHECKING:
    from inference.engine import Engine

MIN_SLOTS = 1
MIN_HYPS = 4
MIN_WIDTH = 16
MIN_COLUMNS = 32
COLUMNS_PER_SOURCE = 2
"""A new set's buffers have columns for this many times its longest source, so that the clock seldom reaches their
end (each move of the columns copies the caches through the host); a step reads only the columns it owns."""
COMPACT_BELOW = 2
"""On the CPU a set whose running sentences fill at most half its slots moves into fewer. On the 2-core CPU (int8
graphs, 128 sentences in batches of 32) half decoded 0.94x the engine's dynamic state, a quarter 0.81x, and moving
into exactly the running sentences whenever one left 0.89x (docs/inference-core.md, session 43). On CUDA a set whose
bundle lacks ``MASKED_MOVE`` keeps its slots until it empties: its caches would go through the host (at batch 128 a
round trip of ~0.5 GB)."""


class ClockState:
    """The device side of a running set (a beam_search.Stepper) for the masked step (module docstring)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        arch = engine.manifest["architecture"]
        self.heads, self.d_head = int(arch["n_heads"]), int(arch["d_head"])
        self.slots = self.hyps = self.width = self.columns = 0
        self.t = 0
        """the column the next step writes"""
        self.slot_of: list[int] = []
        """each running sentence's slot, in the search's order"""
        self.lens: list[int] = []
        """each running sentence's source length, EOS included"""
        self.memory: list[ort.OrtValue] = []
        self.caches: list[ort.OrtValue] = []
        self.beams = np.zeros((0, 0, 0), np.int32)
        self._prev_hyps = 0  # the last step's hypotheses a sentence; 0: no step since the set was (re)started
        self._cuda_keys = engine.device[0] == "cuda"

    # -- the state's arrays -------------------------------------------------------------------------------------

    def _value(self, array: np.ndarray) -> ort.OrtValue:
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), *self.engine.device)

    def _empty_memory(self, slots: int, width: int) -> list[np.ndarray]:
        """Memory of free slots: one visible source position of zeros, so that their attention stays finite."""
        mask = np.ones((slots, width), bool)
        mask[:, 0] = False
        cross = [
            np.zeros((slots, self.heads, width, self.d_head), self.engine.float_type) for _ in range(2 * self._layers)
        ]
        return [mask, *cross]

    @property
    def _compacts(self) -> bool:
        """Whether a set moves into fewer slots: on the CPU, and on CUDA where the caches move on the device."""
        return self.engine.device[0] == "cpu" or MASKED_MOVE in self.engine.sessions

    def _keys(self, array: np.ndarray, native: bool) -> np.ndarray:
        """A key cache between the plain layout (rows, heads, columns, d_head) and CUDA's kernel's."""
        if not self._cuda_keys:
            return array
        rows, heads, columns, d_head = array.shape
        x = 16 // array.itemsize
        if native:  # plain -> (rows, heads, d_head / x, columns, x)
            moved = array.reshape(rows, heads, columns, d_head // x, x).transpose(0, 1, 3, 2, 4)
        else:
            moved = array.reshape(rows, heads, d_head // x, columns, x).transpose(0, 1, 3, 2, 4)
        return np.ascontiguousarray(moved).reshape(rows, heads, columns, d_head)

    def _rebuild(self, order: list[int], slots: int, hyps: int, width: int, columns: int, start: int = 0) -> None:
        """New buffers of these sizes: new slot ``j`` takes old slot ``order[j]``'s memory and caches (its first
        ``min`` hypotheses and source positions), and the old columns ``start .. t - 1`` become ``0 .. t - start - 1``
        (the clock moves back by ``start``)."""
        kept = min(self.t - start, columns)
        mine = np.asarray(order, dtype=np.int64)
        memory = self._empty_memory(slots, width)
        if self.memory:
            w = min(width, self.width)
            memory[0][: len(mine), :w] = self.memory[0].numpy()[mine, :w]  # the source mask: (slots, width)
            for new, old in zip(memory[1:], self.memory[1:], strict=True):  # cross: (slots, heads, width, d_head)
                new[: len(mine), :, :w] = old.numpy()[mine, :, :w]
        beams = np.zeros((slots, hyps, columns), np.int32)
        h = min(hyps, self.hyps)
        if self.caches and kept > 0:
            beams[: len(mine), :h, :kept] = self.beams[mine, :h, start : start + kept]
        if self.caches and kept > 0 and MASKED_MOVE in self.engine.sessions:
            self.caches = self._moved(mine, slots, hyps, columns, start, kept)
        else:
            shape = (slots * hyps, self.heads, columns, self.d_head)
            caches = [np.zeros(shape, self.engine.float_type) for _ in range(2 * self._layers)]
            if self.caches and kept > 0:
                old_rows = (mine[:, None] * self.hyps + np.arange(h)).reshape(-1)
                new_rows = (np.arange(len(mine))[:, None] * hyps + np.arange(h)).reshape(-1)
                for index, (new, old) in enumerate(zip(caches, self.caches, strict=True)):
                    plain = self._keys(old.numpy(), native=False) if index % 2 == 0 else old.numpy()
                    new[new_rows, :, :kept] = plain[old_rows, :, start : start + kept]
            self.caches = [self._value(self._keys(c, native=True) if i % 2 == 0 else c) for i, c in enumerate(caches)]
        self.memory = [self._value(array) for array in memory]
        self.beams = beams
        self.slots, self.hyps, self.width, self.columns = slots, hyps, width, columns
        self.t -= start

    def _split(self, rows: int, columns: int, key: bool) -> tuple[int, ...]:
        """A cache tensor's five-axis view for ``MASKED_MOVE``: its columns on the fourth axis, in the layout of the
        kernel that reads it (CUDA's keys: (rows, heads, d_head / x, columns, x); everything else plain)."""
        if key and self._cuda_keys:
            x = 16 // np.dtype(self.engine.float_type).itemsize
            return rows, self.heads, self.d_head // x, columns, x
        return rows, self.heads, 1, columns, self.d_head

    def _moved(
        self, mine: np.ndarray, slots: int, hyps: int, columns: int, start: int, kept: int
    ) -> list[ort.OrtValue]:
        """The caches moved into buffers of ``slots * hyps`` rows and ``columns`` columns on the device (the
        bundle's ``MASKED_MOVE``): new slot ``j`` takes old slot ``mine[j]``'s first hypotheses, the old columns
        ``start .. start + kept - 1`` become the first; every other row and column copies row or column 0, which
        no step reads before writing it (a row's own columns are only those it wrote)."""
        engine, h = self.engine, min(hyps, self.hyps)
        rows = np.zeros(slots * hyps, dtype=np.int64)
        new_rows = (np.arange(len(mine))[:, None] * hyps + np.arange(h)).reshape(-1)
        rows[new_rows] = (mine[:, None] * self.hyps + np.arange(h)).reshape(-1)
        picked = np.zeros(columns, dtype=np.int64)
        picked[:kept] = np.arange(start, start + kept)
        old_rows = self.slots * self.hyps
        merged = np.array((slots * hyps, self.heads, columns, self.d_head), dtype=np.int64)
        inputs: dict[str, Any] = {name: v._ortvalue for name, v in zip(engine.past_names, self.caches, strict=True)}
        inputs |= {"rows": rows, "columns": picked, "key_merge": merged, "value_merge": merged}
        inputs["key_split"] = np.array(self._split(old_rows, self.columns, key=True), dtype=np.int64)
        inputs["value_split"] = np.array(self._split(old_rows, self.columns, key=False), dtype=np.int64)
        moved = engine.run_graph(MASKED_MOVE, inputs, ["moved_" + name for name in engine.past_names])
        return [ort.OrtValue(value) for value in moved]

    @property
    def _layers(self) -> int:
        return len(self.engine.past_names) // 2

    def _reset(self) -> None:
        self.slots = self.hyps = self.width = self.columns = self.t = self._prev_hyps = 0
        self.slot_of, self.lens, self.memory, self.caches = [], [], [], []
        self.beams = np.zeros((0, 0, 0), np.int32)

    # -- beam_search.Stepper --------------------------------------------------------------------------------------

    def admit(self, sources: list[list[int]]) -> None:
        engine = self.engine
        width = max(len(ids) for ids in sources) + 1
        running = len(self.slot_of)
        if not self.memory:
            columns = bucket(COLUMNS_PER_SOURCE * width, MIN_COLUMNS)
            self.slots, self.hyps, self.columns = 0, MIN_HYPS, columns
            self._rebuild([], bucket(len(sources), MIN_SLOTS), MIN_HYPS, bucket(width, MIN_WIDTH), columns)
        elif running + len(sources) > self.slots or width > self.width:
            slots = bucket(running + len(sources), self.slots)
            self._rebuild(list(range(self.slots)), slots, self.hyps, bucket(width, self.width), self.columns)
        taken = set(self.slot_of)
        free = [s for s in range(self.slots) if s not in taken][: len(sources)]
        new = engine.run_graph("encoder", {"src_ids": engine.source_batch(sources)}, engine.memory_names)
        at = np.asarray(free, dtype=np.int64)
        for index, (value, fresh) in enumerate(zip(self.memory, new, strict=True)):
            rows = fresh.numpy()
            host = value.numpy()  # on the CPU a view of the buffer; on CUDA a copy, written back below
            host[at] = True if index == 0 else 0  # the slot's previous sentence's positions past the new source
            if index == 0:  # the source mask: (slots, width)
                host[at, : rows.shape[1]] = rows
            else:  # cross keys and values: (slots, heads, width, d_head)
                host[at, :, : rows.shape[2]] = rows
            if self.engine.device[0] != "cpu":
                value.update_inplace(host)
        self.slot_of += free
        self.lens += [len(ids) + 1 for ids in sources]

    def step(
        self, tokens: np.ndarray, positions: np.ndarray, reorder: np.ndarray, k: int, attention: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        engine = self.engine
        assert self.memory, "step() before admit()"
        batch, hyps = tokens.shape
        if hyps > self.hyps:
            self._rebuild(list(range(self.slots)), self.slots, bucket(hyps, self.hyps), self.width, self.columns)
        if self.t >= self.columns:  # the columns still owned to the front, in larger buffers past half full
            keep = int(positions.max())
            columns = max(self.columns, bucket(2 * keep, MIN_COLUMNS))
            self._rebuild(list(range(self.slots)), self.slots, self.hyps, self.width, columns, start=self.t - keep)
        t, slots = self.t, np.asarray(self.slot_of, dtype=np.int64)
        if self._prev_hyps and t > 0:  # each hypothesis' past is its parent's, and the column the parent wrote
            parent = (reorder.reshape(batch, hyps) % self._prev_hyps).astype(np.int32)
            index = self.beams[slots[:, None], parent]  # (batch, hyps, columns)
            index[:, :, t - 1] = parent
            self.beams[slots[:, None], np.arange(hyps)] = index
        grid = np.full((self.slots, self.hyps), engine.bos_id, dtype=np.int64)
        grid[slots, :hyps] = tokens
        at = np.zeros(self.slots, dtype=np.int64)
        at[slots] = positions
        first = t - np.repeat(at, self.hyps)  # each row's first own column
        own = (np.arange(t + 1)[None, :] >= first[:, None]).astype(np.int32)
        inputs: dict[str, Any] = {
            "tokens": grid,
            "positions": at,
            "beams": self.beams,
            "k": np.full(engine.k_shape, k, dtype=np.int64),
            "own": own,
            "step": np.array([t], dtype=np.int32),
            **{name: value._ortvalue for name, value in zip(engine.memory_names, self.memory, strict=True)},
            **{name: value._ortvalue for name, value in zip(engine.past_names, self.caches, strict=True)},
        }
        bound = {name: value._ortvalue for name, value in zip(engine.present_names, self.caches, strict=True)}
        outputs = ["topk_logprobs", "topk_ids", "attention"]
        top_lp, top_ids, rows = engine.run_graph(MASKED_STEP, inputs, outputs, cpu=3 if attention else 2, bound=bound)
        self.t += 1
        self._prev_hyps = hyps
        picked = (slots[:, None], np.arange(hyps))
        return top_lp.numpy()[picked], top_ids.numpy()[picked], rows.numpy()[picked] if attention else None

    def keep(self, sentences: np.ndarray) -> None:
        self.slot_of = [self.slot_of[i] for i in sentences.tolist()]
        self.lens = [self.lens[i] for i in sentences.tolist()]
        if not self.slot_of:  # the set is empty: the next admit starts afresh
            self._reset()
        elif self._compacts and len(self.slot_of) <= self.slots // COMPACT_BELOW:
            running = len(self.slot_of)
            width = bucket(max(self.lens), MIN_WIDTH)
            self._rebuild(self.slot_of, bucket(running, MIN_SLOTS), self.hyps, width, self.columns)
            self.slot_of = list(range(running))
