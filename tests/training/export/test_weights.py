"""One weight file per graph set (training/export/weights.py): shared tensors stored once, graphs unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from training.export.weights import ALIGN, WEIGHTS_FILE, share_weights


def _graph(path: Path, weight: np.ndarray, own: np.ndarray, bias: np.ndarray) -> None:
    """y = (x @ weight) @ own + bias."""
    nodes = [
        helper.make_node("MatMul", ["x", "weight"], ["h"]),
        helper.make_node("MatMul", ["h", "own"], ["o"]),
        helper.make_node("Add", ["o", "bias"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        path.stem,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", weight.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", own.shape[1]])],
        [numpy_helper.from_array(a, n) for a, n in ((weight, "weight"), (own, "own"), (bias, "bias"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))


def test_a_tensor_two_graphs_hold_is_stored_once(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    shared = rng.standard_normal((64, 64), dtype=np.float32)  # 16 KiB, in both graphs
    owns = [rng.standard_normal((64, 32), dtype=np.float32) for _ in range(2)]  # 8 KiB each, different
    bias = rng.standard_normal(8, dtype=np.float32)[:1].repeat(32)  # 128 bytes: stays inside
    for i, own in enumerate(owns):
        _graph(tmp_path / f"g{i}.onnx", shared, own, bias)
    x = rng.standard_normal((3, 64), dtype=np.float32)
    before = [(x @ shared) @ own + bias for own in owns]

    sizes = share_weights(tmp_path, ["g0.onnx", "g1.onnx"])

    assert sizes["held"] == 2 * shared.nbytes + owns[0].nbytes + owns[1].nbytes
    written = (tmp_path / WEIGHTS_FILE).stat().st_size
    assert sizes["written"] == written
    assert shared.nbytes + 2 * owns[0].nbytes <= written < shared.nbytes + 2 * owns[0].nbytes + 3 * ALIGN
    assert sizes["saved"] == sizes["held"] - written >= shared.nbytes - 3 * ALIGN
    for i, own in enumerate(owns):
        path = tmp_path / f"g{i}.onnx"
        proto = onnx.load(str(path), load_external_data=False)
        where = {t.name: t.data_location for t in proto.graph.initializer}
        assert where == {"weight": TensorProto.EXTERNAL, "own": TensorProto.EXTERNAL, "bias": TensorProto.DEFAULT}
        assert path.stat().st_size < 1024  # the graph file no longer holds the weights
        onnx.checker.check_model(str(path), full_check=True)
        loaded = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
        assert np.array_equal(loaded["weight"], shared) and np.array_equal(loaded["own"], own)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(session.run(None, {"x": x})[0], before[i], rtol=1e-5, atol=1e-5)
    offsets = {
        int(next(e.value for e in t.external_data if e.key == "offset"))
        for i in range(2)
        for t in onnx.load(str(tmp_path / f"g{i}.onnx"), load_external_data=False).graph.initializer
        if t.data_location == TensorProto.EXTERNAL
    }
    assert len(offsets) == 3 and all(o % ALIGN == 0 for o in offsets)
