"""bench/node_cost.py's graphs: the links it counts are there, run, and compute what they say."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from bench.node_cost import WIDTH, graph


@pytest.mark.parametrize(("kind", "per_link"), [("add", 1), ("shape", 5)])
def test_each_link_is_its_nodes_and_the_chain_computes_them(kind: str, per_link: int) -> None:
    links = 3
    model = onnx.load_from_string(graph(kind, links))
    assert len(model.graph.node) == links * per_link
    x = np.arange(4 * WIDTH, dtype=np.float32).reshape(4, WIDTH)
    outputs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    if kind == "add":  # each link doubles
        np.testing.assert_array_equal(outputs[0], x * 2**links)
    else:  # the data passes through; each link's shape work reads the rows
        np.testing.assert_array_equal(outputs[0], x)
        assert [list(o) for o in outputs[1:]] == [[4, 4]] * links
