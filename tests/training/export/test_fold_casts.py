"""training/export/optimize.py ``fold_casts``: a float Cast of a float Cast (through reshapes nothing else reads)
becomes one Cast, so an fp16 graph set no longer rounds its log-probabilities to fp16 between two operators it keeps
in fp32 (and launches two kernels fewer a time on a GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from training.export.optimize import fold_casts

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16


def _model(nodes: list[onnx.NodeProto], outputs: list[str], initializers: list[onnx.TensorProto]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F32, [2, 3])],
        [helper.make_tensor_value_info(name, F32, None) for name in outputs],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what onnxruntime of the serving image reads
    return model


def _run(model: onnx.ModelProto, x: np.ndarray, tmp_path: Path) -> list[np.ndarray]:
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


def _chain() -> onnx.ModelProto:
    """x -> Cast fp16 -> Reshape -> Cast fp32 -> y: the converter's pattern, a reshape between its two Casts."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [6])
    nodes = [
        helper.make_node("Cast", ["x"], ["half"], to=F16),
        helper.make_node("Reshape", ["half", "shape"], ["flat"]),
        helper.make_node("Cast", ["flat"], ["y"], to=F32),
    ]
    model = _model(nodes, ["y"], [shape])
    model.graph.value_info.append(helper.make_tensor_value_info("flat", F16, [6]))  # its type changes: must go
    return model


def test_a_cast_pair_through_a_reshape_becomes_one_cast_that_no_longer_rounds(tmp_path: Path) -> None:
    x = np.array([[0.1, 1 / 3, 2.0001], [-7.123456, 1e-5, 65519.0]], dtype=np.float32)
    model = _chain()
    rounded = _run(model, x, tmp_path)[0]
    assert not np.array_equal(rounded, x.reshape(-1))  # fp16 on the way: the values were rounded
    assert fold_casts(model.graph) == 1
    assert [n.op_type for n in model.graph.node] == ["Reshape", "Cast"]
    assert not model.graph.value_info  # "flat" is float32 now: its stale type is gone
    np.testing.assert_array_equal(_run(model, x, tmp_path)[0], x.reshape(-1))


def test_a_cast_read_elsewhere_or_to_another_kind_of_type_stays(tmp_path: Path) -> None:
    nodes = [  # "half" is read twice: folding would change the other reader's input
        helper.make_node("Cast", ["x"], ["half"], to=F16),
        helper.make_node("Cast", ["half"], ["y"], to=F32),
        helper.make_node("Cast", ["half"], ["z"], to=F32),
    ]
    model = _model(nodes, ["y", "z"], [])
    assert fold_casts(model.graph) == 0 and len(model.graph.node) == 3
    nodes = [  # to an integer: not a float pair
        helper.make_node("Cast", ["x"], ["whole"], to=TensorProto.INT32),
        helper.make_node("Cast", ["whole"], ["y"], to=F32),
    ]
    model = _model(nodes, ["y"], [])
    assert fold_casts(model.graph) == 0
    np.testing.assert_array_equal(_run(model, np.full((2, 3), 2.7, np.float32), tmp_path)[0], np.full((2, 3), 2.0))


def test_an_fp16_export_has_no_float_cast_of_a_float_cast(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """Every graph of an fp16 GPU set (the static steps included): the converter's pairs around LogSoftmax and TopK
    are gone, and the set still translates (its parity check passed at export)."""
    from training.export import export_bundle
    from training.export.optimize import _FLOATS, _VIEWS, _cast_to

    out = tmp_path / "fp16"
    export_bundle(tiny_checkpoint, out, gpu_dtype="fp16", static_step=True)
    for path in sorted((out / "cuda").glob("*.onnx")):
        graph = onnx.load(str(path), load_external_data=False).graph
        producer = {o: n for n in graph.node for o in n.output}
        for node in graph.node:
            if node.op_type != "Cast" or _cast_to(node) not in _FLOATS:
                continue
            above = producer.get(node.input[0])
            while above is not None and above.op_type in _VIEWS:
                above = producer.get(above.input[0])
            folded = above is None or above.op_type != "Cast" or _cast_to(above) not in _FLOATS
            assert folded, (path.name, node.name, above.name)
        if path.name == "decoder.onnx":
            ops = [n.op_type for n in graph.node]
            assert "LogSoftmax" in ops and "TopK" in ops
