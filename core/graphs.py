"""The graph I/O contract: every ONNX graph of a bundle, its tensors' names, types and shapes, in one place.

``training.export.trace`` traces and builds the graphs with these names and dynamic axes, the engine binds
them and refuses a bundle whose graphs lack them, and the manifest records what the export wrote. Shapes are
tuples of sizes: a string is a dynamic axis (its name), an int is fixed; ``FLOAT`` is the bundle's float type
(float32, or float16 for fp16 bundles). docs/bundle.md describes each graph.

The decoder step takes one position per sentence, so sentences that started at different steps share one
call (continuous batching): the self-attention cache is right-aligned, a sentence at position ``p``
owning the last ``p`` of its ``T`` columns, and the graph masks the others.
"""

from __future__ import annotations

from dataclasses import dataclass

FLOAT = "float"
"""The bundle's float type: float32, or float16 in fp16 bundles."""

GRAPHS = ("encoder", "decoder", "select", "merge", "trim")
"""encoder: sources -> per-sentence memory; decoder: one step of every hypothesis; select: keep some
sentences' memory; merge: append new sentences' memory to the running set's; trim: drop the cache columns
and source positions no running sentence still reads."""

STATIC_GRAPHS = ("static_decoder", "place")
"""Optional, in the GPU graph set (docs/bundle.md, "Static shapes"): static_decoder is the decoder step with a
cache of fixed width (the oldest column dropped as the new one is appended), so that every step of a running
set has the same shapes and a GPU can replay it as one captured CUDA graph; place writes new sentences' memory
into given rows (slots) of a fixed-size memory, padded to its source width."""

STATIC_EXTRAS = ("grow", "compact")
"""Written beside ``STATIC_GRAPHS`` by exports since 2026-11-26, optional to the engine. grow copies a static
running set's state into the buffers of a larger bucket on the device (padding: masked source positions for the
running sentences, free slots, empty cache columns on the left); without it the engine moves the state through
the host. compact copies the slots still running into a smaller bucket's buffers (``slot_index``: the old slot of
each new one; ``row_index``: the old cache row of each new one), so that a set whose sentences finished stops
computing their free slots; without it the set keeps its size."""

LEAN_STEP = "decoder_lean"
"""Optional, in a GPU set with fused attention, written by exports since session 41 (``python -m training lean-step``
adds it to an older bundle): the decoder step without its ``attention`` output and the nodes only that output needs
(in fused graphs the reported layer's scores computed again with plain operators), which the engine runs on CUDA
(``Engine.load`` ``lean_step``) for the steps no sentence of the running set asked for attention rows. Its graph reads
the set's weights file, so it adds no weights to the bundle. On an H200 it ran 1.145x the full step at batch 1 and
1.055x at 32 as a graph alone (docs/inference-core.md)."""

STATIC_LEAN = "static_decoder_lean"
"""Optional, beside ``static_decoder`` in a GPU set with fused attention (exports and ``python -m training lean-step``
since session 44): the static step without its ``attention`` output and the nodes only that output needs, as
``LEAN_STEP`` is to ``decoder``. It reads and writes the same buffers as the static step, so a running set takes
either, step by step: the engine replays it where no sentence asks for attention rows (``Engine.load`` ``lean_step``,
the default on CUDA; inference/static_state.py)."""

MASKED_STEP = "decoder_masked"
"""Optional, in any set, written by ``export --masked-step`` (session 43): the decoder step whose self-attention
caches never move. Each layer's is onnxruntime's ``DecoderMaskedMultiHeadAttention`` over the set's buffers of
``columns`` columns, bound as both past and present: a step writes column ``step`` of every row in place and reads
each row's past through ``beams`` (for each sentence, hypothesis and column, the hypothesis of that sentence whose
row holds the column), so no row is gathered; ``own`` (rows, step + 1) int32 says which columns are each row's (its
sentence's, from its admission). The engine runs it with ``Engine.load(masked_step=True)`` (inference/clock_state.py;
docs/inference-core.md, "The cache without moves")."""

MASKED_MOVE = "masked_move"
"""Written beside ``MASKED_STEP``: moves the masked step's caches into buffers of other sizes on the device (more or
fewer slots and hypotheses, the clock's columns to the front, more columns), so that a set on CUDA never takes its
caches through the host. Each cache tensor is viewed as (rows, heads, a, columns, b) (``key_split`` /
``value_split``: (rows, heads, 1, columns, d_head) in the plain layout, (rows, heads, d_head / x, columns, x) for
keys in CUDA's kernel's), gathered by ``rows`` on the first axis and by ``columns`` on the fourth, and viewed back
(``key_merge`` / ``value_merge``); an index may point at any row or column where the new buffer holds nothing yet."""

OPTIONAL_GRAPHS = (*STATIC_GRAPHS, *STATIC_EXTRAS, LEAN_STEP, STATIC_LEAN, MASKED_STEP, MASKED_MOVE)
"""Graphs a set may have beside ``GRAPHS``."""


PACKED_STEP_IDS = "step_ids"
"""A static_decoder exported since session 25 (2026-11-26) takes ``tokens``, ``positions`` and ``reorder`` as this
one int64 vector, ``tokens`` flattened (``rows``), then ``positions`` (``batch``), then ``reorder`` (``rows``):
``2 * rows + batch`` long, its dimension ``PACKED_LEN``. One copy from the host a step instead of three (on an
H200 each ``update_inplace`` cost about 23 µs of a 0.43 ms batch-1 step, docs/inference-core.md)."""
PACKED_TOPK = "topk"
"""... and returns ``topk_logprobs`` and ``topk_ids`` as this one float32 tensor (batch, hyps, 2, k): the
log-probs, then the ids as floats (exact below 2**24). One copy to the host a step instead of two."""
PACKED_LEN = "packed"

KEY_LAYOUT = "key_layout"
"""A static step exported with ``--static-attention decoder-masked`` since session 46 takes this extra input, a uint8
tensor of shape (``KEY_A``, ``KEY_B``) whose values are never read: its shape is the layout of the key caches the
step's ``DecoderMaskedMultiHeadAttention`` reads and writes, each (rows, heads, steps, d_head) seen as (rows, heads,
a, steps, b). The plain layout is (1, d_head) (onnxruntime's CPU kernel); CUDA's kernel keeps keys as (d_head / x, x),
``x`` values in 16 bytes (4 in fp32, 8 in fp16). The engine binds it and fixes both dimensions per session, so every
index the window's gather computes from them folds to a constant. Values keep the plain layout on both."""
KEY_A, KEY_B = "key_a", "key_b"
WINDOW = "window"
"""... and returns each layer's gathered window as an output more, ``window_k_<i>`` / ``window_v_<i>`` (rows, heads,
``steps``, d_head) after the ``present_*``: the caches ``DecoderMaskedMultiHeadAttention`` then reads and writes in
place. The engine binds each to the same buffer as the layer's ``present_*``, so the window is gathered straight into
the present and the kernel, finding its past and present one buffer, copies nothing (it copies the past into the
present first wherever they differ: one cache copy a tensor a step fewer)."""
GROW_KEY_SPLIT = "key_split"
"""``grow`` graphs written since session 46 take this (5,) int64 input beside ``cache_split``: the five-axis view of
the key caches, (slots, hyps, heads * a, columns, b) in ``KEY_LAYOUT``'s terms, so that grow pads the columns of keys
kept in CUDA's layout too; ``cache_split`` still views the values (and every cache of an older grow)."""

SHORTLIST_INPUTS = ("vocab", "weight", "bias", "mask")
"""What ``decoder_shortlist`` (optional, main graphs: a vocabulary shortlist, docs/bundle.md) takes beyond the decoder
step's inputs, which it shares, as it shares its outputs: ``vocab`` (N,) int64 the pieces scored, ascending;
``weight`` (N, d_model) and ``bias`` (N,) float their rows of the output projection; ``mask`` (rows, N) float32, 0 for
the pieces each hypothesis row may take and -inf for the others, added to the logits before the log-softmax. Its
``topk_ids`` are vocabulary ids."""


def cache_names(prefix: str, layers: int) -> list[str]:
    """Per-layer key/value tensors: ``prefix`` "past" (decoder inputs) or "present" (decoder outputs), each
    (rows, heads, steps, d_head), or "cross" (encoder outputs, decoder inputs), each (batch, heads, src_len,
    d_head) -> [prefix_k_0, prefix_v_0, prefix_k_1, prefix_v_1, ...]."""
    return [f"{prefix}_{kv}_{i}" for i in range(layers) for kv in ("k", "v")]


def memory_names(layers: int) -> list[str]:
    """What the encoder leaves per sentence for the decoder: the padding mask, then cross K/V per layer."""
    return ["src_mask", *cache_names("cross", layers)]


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    """int64, bool or FLOAT"""
    shape: tuple[str | int, ...]

    @property
    def dynamic_axes(self) -> dict[int, str]:
        return {axis: size for axis, size in enumerate(self.shape) if isinstance(size, str)}

    @property
    def source_axis(self) -> int:
        """The axis of source positions in a memory tensor."""
        return self.shape.index("src_len")


@dataclass(frozen=True)
class GraphSpec:
    role: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.outputs]

    @property
    def dynamic_axes(self) -> dict[str, dict[int, str]]:
        return {t.name: t.dynamic_axes for t in (*self.inputs, *self.outputs) if t.dynamic_axes}


def _memory(layers: int, heads: int | str, d_head: int | str, batch: str = "batch") -> list[TensorSpec]:
    cross = [TensorSpec(n, FLOAT, (batch, heads, "src_len", d_head)) for n in cache_names("cross", layers)]
    return [TensorSpec("src_mask", "bool", (batch, "src_len")), *cross]


def _renamed(specs: list[TensorSpec], prefix: str, batch: str) -> list[TensorSpec]:
    return [TensorSpec(prefix + t.name, t.dtype, (batch, *t.shape[1:])) for t in specs]


def _resized(specs: list[TensorSpec], prefix: str) -> list[TensorSpec]:
    """``specs`` renamed with ``prefix``, their batch and source axes too (a state graph's outputs of other sizes)."""
    return [
        TensorSpec(
            prefix + t.name, t.dtype, tuple(prefix + str(s) if s in ("batch", "src_len") else s for s in t.shape)
        )
        for t in specs
    ]


SHAPES_OF_MOVES = (("key_split", 5), ("value_split", 5), ("key_merge", 4), ("value_merge", 4))
"""``MASKED_MOVE``'s shape inputs and their lengths."""


def graph_spec(role: str, layers: int, heads: int | str = "heads", d_head: int | str = "d_head") -> GraphSpec:
    """The inputs and outputs of a bundle's ``role`` graph for a decoder of ``layers`` layers."""
    memory = _memory(layers, heads, d_head)
    static_cache = [TensorSpec(n, FLOAT, ("rows", heads, "steps", d_head)) for n in cache_names("past", layers)]
    if role == "encoder":
        return GraphSpec(role, (TensorSpec("src_ids", "int64", ("batch", "src_len")),), tuple(memory))
    if role == "decoder":
        past = [TensorSpec(n, FLOAT, ("past_rows", heads, "step", d_head)) for n in cache_names("past", layers)]
        present = [TensorSpec(n, FLOAT, ("rows", heads, "step_plus_1", d_head)) for n in cache_names("present", layers)]
        fixed_in = [
            TensorSpec("tokens", "int64", ("batch", "hyps")),
            TensorSpec("positions", "int64", ("batch",)),
            TensorSpec("reorder", "int64", ("rows",)),
            TensorSpec("k", "int64", (1,)),
        ]
        fixed_out = [
            TensorSpec("topk_logprobs", "float32", ("batch", "hyps", "k")),
            TensorSpec("topk_ids", "int64", ("batch", "hyps", "k")),
            TensorSpec("attention", "float32", ("batch", "hyps", "src_len")),
        ]
        return GraphSpec(role, (*fixed_in, *memory, *past), (*fixed_out, *present))
    if role == MASKED_STEP:
        decoder = graph_spec("decoder", layers, heads, d_head)
        tokens, positions, _, k = decoder.inputs[:4]
        buffers = [TensorSpec(n, FLOAT, ("rows", heads, "columns", d_head)) for n in cache_names("past", layers)]
        written = [TensorSpec(n, FLOAT, ("rows", heads, "columns", d_head)) for n in cache_names("present", layers)]
        clock = [TensorSpec("own", "int32", ("rows", "seen")), TensorSpec("step", "int32", (1,))]
        beams = TensorSpec("beams", "int32", ("batch", "hyps", "columns"))
        inputs = (tokens, positions, beams, k, memory[0], *clock, *memory[1:], *buffers)
        return GraphSpec(role, inputs, (*decoder.outputs[: -len(written)], *written))
    if role == MASKED_MOVE:
        caches = [TensorSpec(n, FLOAT, ("rows", heads, "columns", d_head)) for n in cache_names("past", layers)]
        moved = [TensorSpec("moved_" + t.name, FLOAT, ("moved_rows", heads, "moved_columns", d_head)) for t in caches]
        index = [TensorSpec("rows", "int64", ("moved_rows",)), TensorSpec("columns", "int64", ("moved_columns",))]
        shapes = [TensorSpec(n, "int64", (size,)) for n, size in SHAPES_OF_MOVES]
        return GraphSpec(role, (*caches, *index, *shapes), tuple(moved))
    if role == LEAN_STEP:
        decoder = graph_spec("decoder", layers, heads, d_head)
        return GraphSpec(role, decoder.inputs, tuple(t for t in decoder.outputs if t.name != "attention"))
    if role == "static_decoder":
        decoder = graph_spec("decoder", layers, heads, d_head)
        cache_out = [TensorSpec(n, FLOAT, ("rows", heads, "steps", d_head)) for n in cache_names("present", layers)]
        steps_in, steps_out = decoder.inputs[: -len(static_cache)], decoder.outputs[: -len(cache_out)]
        return GraphSpec(role, (*steps_in, *static_cache), (*steps_out, *cache_out))
    if role == STATIC_LEAN:
        static = graph_spec("static_decoder", layers, heads, d_head)
        return GraphSpec(role, static.inputs, tuple(t for t in static.outputs if t.name != "attention"))
    if role == "place":
        new = _renamed(memory, "new_", "new_batch")
        new = [TensorSpec(t.name, t.dtype, tuple("new_src_len" if s == "src_len" else s for s in t.shape)) for t in new]
        placed = [TensorSpec("placed_" + t.name, t.dtype, t.shape) for t in memory]
        return GraphSpec(role, (*memory, *new, TensorSpec("slots", "int64", ("new_batch",))), tuple(placed))
    if role == "grow":
        pads = [
            TensorSpec("mask_width_pads", "int64", (4,)),
            TensorSpec("mask_slot_pads", "int64", (4,)),
            TensorSpec("memory_pads", "int64", (8,)),
            TensorSpec("cache_split", "int64", (5,)),
            TensorSpec("cache_pads", "int64", (10,)),
            TensorSpec("cache_merge", "int64", (4,)),
        ]
        grown = _resized(memory, "grown_")
        grown += [
            TensorSpec("grown_" + t.name, FLOAT, ("grown_rows", heads, "grown_steps", d_head)) for t in static_cache
        ]
        return GraphSpec(role, (*memory, *static_cache, *pads), tuple(grown))
    if role == "compact":
        index = [TensorSpec("slot_index", "int64", ("kept",)), TensorSpec("row_index", "int64", ("kept_rows",))]
        kept = [TensorSpec("compact_" + t.name, t.dtype, ("kept", *t.shape[1:])) for t in memory]
        kept += [TensorSpec("compact_" + t.name, FLOAT, ("kept_rows", *t.shape[1:])) for t in static_cache]
        return GraphSpec(role, (*memory, *static_cache, *index), tuple(kept))
    if role == "select":
        kept = [TensorSpec("kept_" + t.name, t.dtype, ("kept", *t.shape[1:])) for t in memory]
        return GraphSpec(role, (*memory, TensorSpec("keep", "int64", ("kept",))), tuple(kept))
    if role == "merge":
        new = _renamed(memory, "new_", "new_batch")
        return GraphSpec(role, (*memory, *new), tuple(_resized(memory, "merged_")))
    if role == "trim":
        past = [TensorSpec(n, FLOAT, ("rows", heads, "step", d_head)) for n in cache_names("past", layers)]
        cut = [TensorSpec("start", "int64", ()), TensorSpec("src_len", "int64", ())]
        trimmed = [
            TensorSpec("trimmed_" + t.name, t.dtype, tuple("kept_src_len" if s == "src_len" else s for s in t.shape))
            for t in memory
        ]
        trimmed += [TensorSpec("trimmed_" + t.name, FLOAT, ("rows", heads, "kept_steps", d_head)) for t in past]
        return GraphSpec(role, (*memory, *past, *cut), tuple(trimmed))
    raise ValueError(f"unknown graph role {role!r}: a bundle holds {', '.join(GRAPHS + OPTIONAL_GRAPHS)}")
