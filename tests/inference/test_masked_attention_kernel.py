"""What the next decoder step's design (docs/inference-core.md, "The cache without moves") needs of onnxruntime's
``DecoderMaskedMultiHeadAttention`` on the CPU, checked against numpy: a set's step ``t`` writes the new key and value
into column ``t`` of the bound buffer itself and touches no other column; each row attends to the columns it owns
(from its admission to ``t``) through a beam index, which names for each row and column the row of its sentence
that holds the key. Pinned here so that an onnxruntime upgrade that changes the kernel fails a test, not a
translation."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

HEADS, D_HEAD, BEAM = 2, 16, 4


def _session(rows: int, columns: int) -> ort.InferenceSession:
    d_model = HEADS * D_HEAD
    v = helper.make_tensor_value_info
    cache = [rows, HEADS, columns, D_HEAD]
    inputs = [
        *(v(name, TensorProto.FLOAT, [rows, 1, d_model]) for name in ("query", "key", "value")),
        v("own", TensorProto.INT32, [rows, "total"]),
        v("past_key", TensorProto.FLOAT, cache),
        v("past_value", TensorProto.FLOAT, cache),
        v("step", TensorProto.INT32, [1]),
        v("beams", TensorProto.INT32, [rows // BEAM, BEAM, columns]),
    ]
    outputs = [v("out", TensorProto.FLOAT, [rows, 1, d_model])]
    outputs += [v(name, TensorProto.FLOAT, cache) for name in ("present_key", "present_value")]
    node = helper.make_node(
        "DecoderMaskedMultiHeadAttention",
        ["query", "key", "value", "own", "", "past_key", "past_value", "step", "beam_width", "beams"],
        ["out", "present_key", "present_value"],
        domain="com.microsoft",
        num_heads=HEADS,
        past_present_share_buffer=1,
        mask_filter_value=-10000.0,
    )
    beam_width = helper.make_tensor("beam_width", TensorProto.INT32, [1], [BEAM])
    graph = helper.make_graph([node], "clock", inputs, outputs, [beam_width])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 8
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("step", [1, 6, 30])
def test_a_step_writes_its_column_in_place_and_attends_to_each_rows_own_columns_through_the_beam_index(
    step: int,
) -> None:
    rows, columns = 8, 32
    rng = np.random.default_rng(step)
    query, key, value = (rng.standard_normal((rows, 1, HEADS * D_HEAD)).astype(np.float32) for _ in range(3))
    past_key, past_value = (rng.standard_normal((rows, HEADS, columns, D_HEAD)).astype(np.float32) for _ in range(2))
    beams = rng.integers(0, BEAM, (rows // BEAM, BEAM, columns)).astype(np.int32)
    admitted = rng.integers(0, step + 1, rows)  # a row admitted at step a owns columns a .. step
    own = (np.arange(step + 1)[None, :] >= admitted[:, None]).astype(np.int32)
    buffers = {"past_key": past_key.copy(), "past_value": past_value.copy()}
    feeds = {"query": query, "key": key, "value": value, "own": own, "step": np.array([step], np.int32), "beams": beams}
    session = _session(rows, columns)
    binding = session.io_binding()
    held = {name: ort.OrtValue.ortvalue_from_numpy(array) for name, array in {**feeds, **buffers}.items()}
    for name, value_ in held.items():
        binding.bind_ortvalue_input(name, value_)
    out = ort.OrtValue.ortvalue_from_shape_and_type([rows, 1, HEADS * D_HEAD], np.float32)
    binding.bind_ortvalue_output("out", out)
    binding.bind_ortvalue_output("present_key", held["past_key"])  # past and present: one buffer
    binding.bind_ortvalue_output("present_value", held["past_value"])
    session.run_with_iobinding(binding)

    heads = (x.reshape(rows, HEADS, D_HEAD) for x in (query, key, value))
    q, k, v = heads
    written_key, written_value = held["past_key"].numpy(), held["past_value"].numpy()
    assert np.array_equal(written_key[:, :, step], k) and np.array_equal(written_value[:, :, step], v)
    others = [c for c in range(columns) if c != step]
    assert np.array_equal(written_key[:, :, others], past_key[:, :, others])
    assert np.array_equal(written_value[:, :, others], past_value[:, :, others])
    expected = np.empty((rows, HEADS, D_HEAD), np.float32)
    for r in range(rows):
        first_row = r // BEAM * BEAM
        cached = [(first_row + beams[r // BEAM, r % BEAM, c], c) for c in range(admitted[r], step)]
        keys = np.stack([past_key[h, :, c] for h, c in cached] + [k[r]], axis=1)
        values = np.stack([past_value[h, :, c] for h, c in cached] + [v[r]], axis=1)
        scores = np.einsum("hd,hnd->hn", q[r], keys) / np.sqrt(D_HEAD)
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
        expected[r] = np.einsum("hn,hnd->hd", weights, values)
    np.testing.assert_allclose(out.numpy().reshape(rows, HEADS, D_HEAD), expected, atol=1e-5)


def test_the_key_mask_covers_the_columns_up_to_the_step_not_the_buffer() -> None:
    """The mask's width is the step's ``t + 1`` (it changes every step): a replayed CUDA graph could not follow it,
    one more reason the captured step needs another scheme (docs/inference-core.md)."""
    rows, columns, step = 4, 16, 5
    session = _session(rows, columns)
    zeros = np.zeros((rows, 1, HEADS * D_HEAD), np.float32)
    cache = np.zeros((rows, HEADS, columns, D_HEAD), np.float32)
    feeds = {
        "query": zeros,
        "key": zeros,
        "value": zeros,
        "past_key": cache,
        "past_value": cache.copy(),
        "step": np.array([step], np.int32),
        "beams": np.zeros((1, BEAM, columns), np.int32),
    }
    session.run(None, {**feeds, "own": np.ones((rows, step + 1), np.int32)})
    with pytest.raises(Exception, match="key_padding_mask"):
        session.run(None, {**feeds, "own": np.ones((rows, columns), np.int32)})


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_the_move_graph_moves_keys_in_the_layout_of_cudas_kernel(tiny_masked_bundle, dtype: type) -> None:  # type: ignore[no-untyped-def]
    """The bundle's masked_move graph, given the five-axis views ClockState gives it for keys in CUDA's layout
    ((rows, heads, d_head / x, columns, x), x values in 16 bytes), moves rows and columns as the same move of the
    plain layout does: checked on the CPU, where the step itself reads the plain one."""
    import inference.clock_state as clock_state
    from inference.clock_state import ClockState
    from inference.engine import Engine

    engine = Engine.load(tiny_masked_bundle, provider="cpu", threads=1, masked_step=True)
    state = ClockState(engine)
    state._cuda_keys, engine.float_type = True, dtype  # as on CUDA (the float type only sets x)
    rows, heads, columns, d_head = 8, state.heads, 12, state.d_head
    rng = np.random.default_rng(3)
    plain = rng.standard_normal((rows, heads, columns, d_head)).astype(dtype).astype(np.float32)  # exact in both
    native = state._keys(plain.astype(dtype), native=True).astype(np.float32)  # the graph moves fp32 here
    state.slots, state.hyps, state.columns, state.t = 4, 2, columns, 10
    state.caches = [ort.OrtValue.ortvalue_from_numpy(native)] * (2 * state._layers)
    state.beams = np.zeros((4, 2, columns), np.int32)
    moved = state._moved(np.array([3, 1]), slots=2, hyps=4, columns=16, start=4, kept=6)
    got = state._keys(moved[0].numpy().astype(dtype), native=False).astype(np.float32)
    old = plain.reshape(4, 2, heads, columns, d_head)
    new = got.reshape(2, 4, heads, 16, d_head)
    np.testing.assert_array_equal(new[:, :2, :, :6], old[[3, 1]][:, :, :, 4:10])
    assert clock_state.MASKED_MOVE in engine.sessions


def _to_layout(plain: np.ndarray, a: int, b: int) -> np.ndarray:
    """Keys (rows, heads, columns, d_head) as a kernel keeps them that reads (rows, heads, a, columns, b)."""
    rows, heads, columns, d_head = plain.shape
    moved = plain.reshape(rows, heads, columns, a, b).transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(moved).reshape(rows, heads, columns, d_head)


def _from_layout(native: np.ndarray, a: int, b: int) -> np.ndarray:
    rows, heads, columns, d_head = native.shape
    moved = native.reshape(rows, heads, a, columns, b).transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(moved).reshape(rows, heads, columns, d_head)


# CUDA's layouts of 16-value heads: fp32 (x = 4) and fp16 (x = 8); the graphs here are fp32, the layout any (a, b)
CUDA_LAYOUTS = [(4, 4), (2, 8)]


def static_step_feeds(
    engine: Any, dims: Any, layout: tuple[int, int], seed: int = 5
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
    """Random inputs of one decoder-masked static step of ``dims`` (``random_step_inputs``, positions below the
    columns), its key caches in ``layout`` (core/graphs.py KEY_LAYOUT): the feeds, the caches in the plain layout by
    name, and the step's reorder."""
    from core.graphs import KEY_LAYOUT, PACKED_STEP_IDS
    from training.export.feeds import random_step_inputs

    rng = np.random.default_rng(seed)
    feeds = random_step_inputs(engine.manifest, dims.slots, dims.hyps, rng, source=dims.width, cached=dims.columns)
    feeds["positions"] = np.minimum(feeds["positions"], dims.columns - 1)  # a static step's rule
    feeds["k"] = feeds["k"].reshape(engine.k_shape)
    feeds[KEY_LAYOUT] = np.zeros(layout, np.uint8)
    plain = {name: feeds[name] for name in engine.past_names}
    for name in engine.past_names[::2]:  # the keys
        feeds[name] = _to_layout(plain[name], *layout)
    reorder = feeds["reorder"]
    if engine.static_packed:
        packed = (feeds.pop("tokens").reshape(-1), feeds.pop("positions"), feeds.pop("reorder"))
        feeds[PACKED_STEP_IDS] = np.concatenate(packed)
    return feeds, plain, reorder


@pytest.mark.parametrize("layout", CUDA_LAYOUTS)
def test_the_decoder_masked_static_step_gathers_its_window_of_keys_in_the_layout_it_is_given(
    tiny_static_masked_bundle, layout: tuple[int, int]
) -> None:  # type: ignore[no-untyped-def]
    """The static step exported with ``--static-attention decoder-masked`` gathers each row's window (the row it
    continues, without its oldest column, a placeholder last) from key caches kept in the layout its ``key_layout``
    input's shape gives, (rows, heads, a, columns, b) as CUDA's kernel keeps them, and values in the plain one. Run
    on the CPU with a CUDA layout: the present outside the column the CPU's kernel writes (in its plain layout) is
    the window in the given layout. Fails when the gather ignores the layout (it then moves plain columns)."""
    from core.graphs import KEY_LAYOUT
    from inference.engine import Engine
    from inference.static_state import Dims, StaticSession

    engine = Engine.load(tiny_static_masked_bundle, provider="cpu", threads=1, graphs="cuda", static_step=True)
    assert engine.static_key_layout is not None and engine.static_key_layout.shape == (1, 16)  # the CPU's: plain
    engine.static_key_layout = np.zeros(layout, np.uint8)
    dims = Dims(slots=2, hyps=4, width=16, columns=32)
    session = StaticSession(engine, dims).session
    assert KEY_LAYOUT in {i.name for i in session.get_inputs()}
    feeds, plain, reorder = static_step_feeds(engine, dims, layout)
    names = [o.name for o in session.get_outputs()]
    got = dict(zip(names, session.run(None, feeds), strict=True))
    columns, d_head = dims.columns, int(engine.manifest["architecture"]["d_head"])
    taken = [*range(1, columns), columns - 1]  # the window: the oldest column dropped, the placeholder last
    written = slice((columns - 1) * d_head, columns * d_head)  # the CPU kernel's new column, in its plain layout
    for name, past in plain.items():
        window = past[reorder][:, :, taken]
        present = got[name.replace("past_", "present_")]
        if name.startswith("past_v_"):
            np.testing.assert_array_equal(present[:, :, : columns - 1], window[:, :, : columns - 1])
            continue
        rows, heads = window.shape[:2]
        expected = _to_layout(window, *layout).reshape(rows, heads, -1)
        kept = np.ones(columns * d_head, bool)
        kept[written] = False
        assert not np.array_equal(expected, window.reshape(rows, heads, -1))  # the layouts differ: the check can fail
        np.testing.assert_array_equal(present.reshape(rows, heads, -1)[:, :, kept], expected[:, :, kept])


@pytest.mark.parametrize("layout", [(1, 16), *CUDA_LAYOUTS])
def test_grow_moves_keys_in_the_layout_of_the_static_step(tiny_static_masked_bundle, layout: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """The bundle's grow, given the five-axis view StaticState gives it for keys in a layout (core/graphs.py
    GROW_KEY_SPLIT), moves a set into a larger bucket (more slots, hypotheses and columns, the new columns on the
    left) as the same move of plain keys does; values stay plain. Fails when the keys are viewed as plain."""
    from inference.engine import Engine
    from inference.static_state import Dims, StaticState

    engine = Engine.load(tiny_static_masked_bundle, provider="cpu", threads=1, graphs="cuda", static_step=True)
    assert "grow" in engine.sessions
    a, b = layout
    engine.static_key_layout = np.zeros(layout, np.uint8)
    old = engine.static_pool.acquire(Dims(slots=2, hyps=2, width=16, columns=32))
    new = engine.static_pool.acquire(Dims(slots=4, hyps=4, width=32, columns=64))
    rng = np.random.default_rng(7)
    plain = []
    for name, value in zip(engine.past_names, old.caches[0], strict=True):
        cache = rng.standard_normal(value.shape()).astype(np.float32)
        plain.append(cache)
        value.update_inplace(_to_layout(cache, a, b) if name.startswith("past_k_") else cache)
    state = StaticState(engine)
    state._grow(old, new)
    for name, cache, value in zip(engine.past_names, plain, new.caches[0], strict=True):
        got = value.numpy()
        grown = _from_layout(got, a, b) if name.startswith("past_k_") else got
        grid = grown.reshape(4, 4, *grown.shape[1:])
        np.testing.assert_array_equal(grid[:2, :2, :, 32:], cache.reshape(2, 2, *cache.shape[1:]))
        np.testing.assert_array_equal(grid[:2, :2, :, :32], 0)  # the new columns, on the left, empty
