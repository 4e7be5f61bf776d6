"""What the next decoder step's design (docs/inference-core.md, "The cache without moves") needs of onnxruntime's
``DecoderMaskedMultiHeadAttention`` on the CPU, checked against numpy: a set's step ``t`` writes the new key and value
into column ``t`` of the bound buffer itself and touches no other column; each row attends to the columns it owns
(from its admission to ``t``) through a beam index, which names for each row and column the row of its sentence
that holds the key. Pinned here so that an onnxruntime upgrade that changes the kernel fails a test, not a
translation."""

from __future__ import annotations

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
