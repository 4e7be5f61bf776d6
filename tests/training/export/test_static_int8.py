"""int8-static: the rewrite against the integer arithmetic it stands for, and the property it exists for: a
sentence translates the same alone, batched, and admitted into a running set mid-run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from core.bundle import read_manifest
from core.translation import DecodeOptions
from inference.engine import Engine
from testkit.synthetic import make_pairs
from training.export import ExportError, export_bundle
from training.export.static_int8 import activation_scale, quantize, quantize_weight, read_sentences

K, N, M = 16, 12, 8


def _two_products(path: Path) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """x [b, t, K] -> MatMul W1 -> Add bias -> Relu -> MatMul W2 -> y, and a second reader of x (MatMul W3)."""
    rng = np.random.default_rng(0)
    w1, w2, w3 = (rng.normal(size=s).astype(np.float32) for s in ((K, N), (N, M), (K, M)))
    bias = rng.normal(size=N).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="p1"),
        helper.make_node("Add", ["h", "bias"], ["hb"], name="add"),
        helper.make_node("Relu", ["hb"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["y"], name="p2"),
        helper.make_node("MatMul", ["x", "w3"], ["z"], name="p3"),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (w2, "w2"), (w3, "w3"), (bias, "bias"))]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", K])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["b", "t", c]) for n, c in (("y", M), ("z", M))],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return (w1, w2, w3), bias


def _reference(x: np.ndarray, weight: np.ndarray, lo: float, hi: float, bias: np.ndarray | None) -> np.ndarray:
    """What the quantized product computes, in numpy: the input rounded to uint8 on the calibrated range (values
    outside it clipped), the weight to int8 per column, their integer product scaled back."""
    scale, zero = activation_scale(lo, hi)
    q = np.clip(np.round(x / scale) + zero, 0, 255).astype(np.int64) - zero
    q_w, w_scale = quantize_weight(weight)
    out = (q @ q_w.astype(np.int64)).astype(np.float64) * scale * w_scale
    return (out + bias if bias is not None else out).astype(np.float32)


def test_each_weight_product_becomes_the_integer_product_on_its_calibrated_range(tmp_path: Path) -> None:
    (w1, w2, w3), bias = _two_products(tmp_path / "g.onnx")
    ranges = {"x": (-2.0, 1.5), "r": (0.0, 6.0)}
    assert quantize(tmp_path / "g.onnx", tmp_path / "q.onnx", ranges) == 3
    graph = onnx.load(str(tmp_path / "q.onnx")).graph
    ops = [n.op_type for n in graph.node]
    # x is quantized once for its two readers; the bias Add is inside the first product; no float weight is left
    assert ops.count("QuantizeLinear") == 2 and ops.count("MatMulIntegerToFloat") == 3
    assert "Add" not in ops and "MatMul" not in ops
    assert not {"w1", "w2", "w3"} & {t.name for t in graph.initializer}
    session = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).normal(size=(3, 5, K)).astype(np.float32) * 1.5  # some beyond [-2, 1.5]: clipped
    assert (x > 1.5).any() and (x < -2).any()
    y, z = session.run(["y", "z"], {"x": x})
    hidden = np.maximum(_reference(x, w1, *ranges["x"], bias), 0)
    np.testing.assert_allclose(z, _reference(x, w3, *ranges["x"], None), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y, _reference(hidden, w2, *ranges["r"], None), rtol=1e-3, atol=1e-3)
    # each row on its own: the first row alone gives what it gave in the batch, bit for bit
    alone = session.run(["y", "z"], {"x": x[:1]})
    assert np.array_equal(alone[0], y[:1]) and np.array_equal(alone[1], z[:1])


def test_a_product_without_a_calibrated_range_is_refused(tmp_path: Path) -> None:
    _two_products(tmp_path / "g.onnx")
    with pytest.raises(ExportError, match="no calibrated range for 'r'"):
        quantize(tmp_path / "g.onnx", tmp_path / "q.onnx", {"x": (-1.0, 1.0)})


def test_scales_hold_zero_exactly_and_survive_constant_inputs() -> None:
    scale, zero = activation_scale(0.5, 3.0)  # widened to [0, 3]
    assert zero == 0 and scale == pytest.approx(3 / 255)
    scale, zero = activation_scale(-1.0, 1.0)
    assert round(0 / scale) + zero == zero and 0 < zero < 255
    assert activation_scale(0.0, 0.0) == (1.0, 0)
    q, s = quantize_weight(np.array([[0.0, 1.0], [0.0, -2.0]], dtype=np.float32))
    assert q.dtype == np.int8 and s[0] == 1.0 and q[:, 0].tolist() == [0, 0] and q[1, 1] == -63


def test_calibration_sentences_are_read_from_a_tsv_or_lines_and_sampled(tmp_path: Path) -> None:
    tsv = tmp_path / "a.tsv"
    tsv.write_text("".join(f"source {i}\ttarget {i}\n" for i in range(50)) + "\n", encoding="utf-8")
    drawn = read_sentences(tsv, n=10)
    assert len(drawn) == 10 == len(set(drawn)) and all(s.startswith("source ") for s in drawn)
    assert drawn == read_sentences(tsv, n=10)  # seeded
    lines = tmp_path / "b.txt"
    lines.write_text("one\n\ntwo\n", encoding="utf-8")
    assert read_sentences(lines) == ["one", "two"]
    with pytest.raises(ExportError, match="does not exist"):
        read_sentences(tmp_path / "missing.tsv")
    with pytest.raises(ExportError, match="at least one sentence"):
        read_sentences(lines, n=0)


@pytest.fixture(scope="module")
def static_bundle(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model in int8-static, calibrated on the file it was trained on (the default)."""
    out = tmp_path_factory.mktemp("bundles") / "static"
    export_bundle(tiny_checkpoint, out, quantize="int8-static", tolerance=10.0, calibration_sentences=64)
    return out


def _sources(n: int) -> list[str]:
    return [src for src, _ in make_pairs(n, seed=11)]


def test_int8_static_export_records_its_calibration(static_bundle: Path, tiny_checkpoint: Path) -> None:
    manifest = read_manifest(static_bundle)
    assert manifest["export"]["quantize"] == "int8-static"
    assert manifest["export"]["calibration"]["sentences"] == 64
    trained_on = torch.load(tiny_checkpoint, map_location="cpu", weights_only=False)["config"]["data"]["train"]
    assert manifest["export"]["calibration"]["file"] == Path(trained_on).name
    for role in ("encoder", "decoder"):
        ops = [n.op_type for n in onnx.load(str(static_bundle / f"{role}.onnx")).graph.node]
        assert "MatMulIntegerToFloat" in ops and "DynamicQuantizeLinear" not in ops, role


def test_a_sentence_translates_the_same_alone_batched_and_admitted_mid_run(static_bundle: Path) -> None:
    engine = Engine.load(static_bundle, provider="cpu", threads=1)
    assert engine.graphs_dtype == "int8-static"
    sources = _sources(24)
    options = DecodeOptions()
    alone = [engine.translate([s], options)[0].best.token_ids for s in sources]
    for size in (5, 24):
        batched = [
            t.best.token_ids
            for i in range(0, len(sources), size)
            for t in engine.translate(sources[i : i + size], options)
        ]
        assert batched == alone, f"batch {size}"
    running = engine.running_set()
    results: dict[int, list[int]] = {}
    waiting = list(enumerate(sources))
    while waiting or running:
        if waiting:  # two more every step: each joins sentences already decoding, at a different step
            running.admit([(key, text, options) for key, text in waiting[:2]])
            waiting = waiting[2:]
        for key, translation in running.step():
            results[int(key)] = translation.best.token_ids
    assert [results[i] for i in range(len(sources))] == alone


def test_calibration_is_refused_where_it_means_nothing_or_is_missing(tiny_checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="--calibration is for --quantize int8-static"):
        export_bundle(tiny_checkpoint, tmp_path / "a", quantize="int8-channel", calibration=tmp_path / "x.tsv")
    with pytest.raises(ExportError, match="does not exist"):
        export_bundle(tiny_checkpoint, tmp_path / "b", quantize="int8-static", calibration=tmp_path / "x.tsv")
    assert not (tmp_path / "b").exists()
    moved = tmp_path / "moved.pt"  # a checkpoint whose training file is not where it was
    saved = torch.load(tiny_checkpoint, map_location="cpu", weights_only=False)
    saved["config"]["data"]["train"] = str(tmp_path / "gone.tsv")
    torch.save(saved, moved)
    with pytest.raises(ExportError, match="trained on .*gone.tsv.*--calibration FILE"):
        export_bundle(moved, tmp_path / "c", quantize="int8-static")


def test_export_cli_takes_a_calibration_file(
    tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from training.cli import main

    calibration = tmp_path / "calibration.txt"
    calibration.write_text("".join(s + "\n" for s in _sources(20)), encoding="utf-8")
    out = tmp_path / "bundle"
    args = ["export", str(tiny_checkpoint), str(out), "--quantize", "int8-static-fp32-logits"]
    assert main([*args, "--calibration", str(calibration), "--tolerance", "10"]) == 0
    assert json.loads(capsys.readouterr().out)["calibration"] == {"file": "calibration.txt", "sentences": 20}
    export = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["export"]
    assert export["calibration"] == {"file": "calibration.txt", "sentences": 20}
    decoder = onnx.load(str(out / "decoder.onnx")).graph
    norm = [n.output[0] for n in decoder.node if n.op_type == "LayerNormalization"][-1]
    assert [n.op_type for n in decoder.node if norm in n.input] == ["MatMul"]  # the logits stay fp32
