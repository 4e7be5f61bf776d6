"""Static int8: every weight product's input scale calibrated once, at export, on real sentences.

onnxruntime's dynamic quantization (``--quantize int8*``, training/export/optimize.py) scales each product's
input by the largest value of the whole batch, so a sentence's batch mates move its rounding and, for about
half the sentences of the shipped model, its translation (docs/bundle.md, "Batch mates"). Here each product
gets a fixed scale instead: the range its input took while the fp32 graphs translated calibration sentences.
Every row is then rounded the same way whatever shares its batch, and the integer products are exact, so a
sentence translates the same alone and batched, like the float graphs.

The rewrite is ours, not onnxruntime's static quantizer: that one's QDQ graphs reach the integer kernels only
through onnxruntime's fusions, and on a CPU its MatMul+Add fusion runs first and leaves most products as
float Gemms on dequantized weights (slower than fp32). Each product becomes two nodes: QuantizeLinear of its
input (shared by the products that read the same tensor) and com.microsoft.MatMulIntegerToFloat with the int8
weights, their per-column scales and the bias of the Add that followed. That pair costs what onnxruntime's
fused DynamicQuantizeMatMul costs (docs/bundle.md).
"""

from __future__ import annotations

import logging
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from training.export.common import CALIBRATION_SENTENCES, ExportError
from training.export.optimize import output_projection

log = logging.getLogger(__name__)

WEIGHT_LEVELS = 63
"""Weights are rounded to -63..63 (7 bits), like the dynamic int8 graphs: no saturation in AVX2's u8 x s8
pair sums on CPUs without VNNI (255 * 63 * 2 < 32768)."""

Ranges = dict[str, tuple[float, float]]


def read_sentences(path: str | Path, n: int = CALIBRATION_SENTENCES, seed: int = 0) -> list[str]:
    """``n`` source sentences drawn (seeded) from a TSV (its first column) or a file of one sentence a line."""
    path = Path(path)
    if n < 1:
        raise ExportError(f"--calibration-sentences {n}: calibrating needs at least one sentence")
    if not path.is_file():
        raise ExportError(f"calibration file {path} does not exist: give source sentences with --calibration FILE")
    with open(path, encoding="utf-8") as handle:
        sentences = [s for line in handle if (s := line.split("\t", 1)[0].strip())]
    if not sentences:
        raise ExportError(f"calibration file {path} holds no sentences")
    if len(sentences) > n:
        sentences = random.Random(seed).sample(sentences, n)
    return sentences


def weight_products(graph: onnx.GraphProto, exclude: frozenset[str] | set[str] = frozenset()) -> list[onnx.NodeProto]:
    """The MatMuls of an activation by a constant 2-D float weight: the products quantized."""
    weights = {t.name: t for t in graph.initializer if t.data_type == TensorProto.FLOAT and len(t.dims) == 2}
    return [n for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights and n.name not in exclude]


class _Observer:
    """Runs the inputs a graph is given through a copy of it whose weight products' inputs are outputs too,
    and keeps each one's smallest and largest value."""

    def __init__(self, path: Path):
        import onnxruntime as ort

        model = onnx.load(str(path))  # external weights are read from beside the graph
        known = {o.name for o in model.graph.output}
        self.names = sorted({n.input[0] for n in weight_products(model.graph)})
        model.graph.output.extend(
            helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in self.names if n not in known
        )
        options = ort.SessionOptions()
        options.log_severity_level = 3
        self.session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.ranges: Ranges = {}

    def observe(self, inputs: dict[str, Any]) -> None:
        feed = {k: (v if isinstance(v, np.ndarray) else v.numpy()) for k, v in inputs.items() if k in self.inputs}
        for name, value in zip(self.names, self.session.run(self.names, feed), strict=True):
            if value.size == 0:
                continue
            lo, hi = float(value.min()), float(value.max())
            old = self.ranges.get(name)
            self.ranges[name] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))


def calibrate(bundle: Path, sentences: list[str], batch: int = 16, progress: bool = True) -> dict[str, Ranges]:
    """Translate ``sentences`` with the fp32 bundle's engine (beam search, default options) and return, per
    graph (encoder, decoder), the range every weight product's input took: the decoder's over every step of
    every hypothesis, as it runs when serving."""
    from core.bundle import GRAPH_FILES
    from core.translation import DecodeOptions
    from inference.engine import Engine

    engine = Engine.load(bundle, provider="cpu", graphs="main")
    observers = {role: _Observer(bundle / GRAPH_FILES[role]) for role in ("encoder", "decoder")}
    run = engine.run_graph

    def observed(role: str, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> list[Any]:
        if role in observers:
            observers[role].observe(inputs)
        return run(role, inputs, *args, **kwargs)

    engine.run_graph = observed  # type: ignore[method-assign]  # this engine only: it is dropped afterwards
    started = time.perf_counter()
    bar = _progress(len(sentences), progress)
    for i in range(0, len(sentences), batch):
        engine.translate(sentences[i : i + batch], DecodeOptions())
        bar.update(len(sentences[i : i + batch]))
    bar.close()
    log.info("calibrated on %d sentences in %.1f s", len(sentences), time.perf_counter() - started)
    return {role: observer.ranges for role, observer in observers.items()}


def _progress(total: int, show: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc="calibrating int8 scales", unit="sentence", disable=not show, leave=False)


def quantize(src: Path, dst: Path, ranges: Ranges, fp32_logits: bool = False) -> int:
    """Write ``src`` with its weight products in static int8 to ``dst``; returns how many were quantized.

    ``ranges``: the calibrated range of each product's input (``calibrate``). ``fp32_logits`` keeps the
    output projection in fp32, as ``int8-channel-fp32-logits`` does."""
    model = onnx.load(str(src))
    graph = model.graph
    projection = output_projection(graph) if fp32_logits else None
    products = weight_products(graph, {projection} if projection else set())
    chosen = {id(n) for n in products}
    inits = {t.name: t for t in graph.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)
    graph_outputs = {o.name for o in graph.output}

    nodes: list[onnx.NodeProto] = []
    fused_adds: set[int] = set()
    quantized_inputs: dict[str, tuple[str, str, str]] = {}
    quantized_weights: set[str] = set()
    new_inits: list[onnx.TensorProto] = []
    for node in graph.node:
        if id(node) in fused_adds:
            continue
        if id(node) not in chosen:
            nodes.append(node)
            continue
        a, b = node.input
        if a not in ranges:
            raise ExportError(f"{src.name}: no calibrated range for {a!r}, the input of {node.name}")
        if a not in quantized_inputs:
            scale, zero = activation_scale(*ranges[a])
            names = (f"{a}_q8", f"{a}_q8_scale", f"{a}_q8_zero")
            new_inits += [
                numpy_helper.from_array(np.array(scale, dtype=np.float32), names[1]),
                numpy_helper.from_array(np.array(zero, dtype=np.uint8), names[2]),
            ]
            nodes.append(helper.make_node("QuantizeLinear", [a, names[1], names[2]], [names[0]], name=f"{a}_quantize"))
            quantized_inputs[a] = names
        q_a, a_scale, a_zero = quantized_inputs[a]
        weight = numpy_helper.to_array(inits[b])
        # named as onnxruntime's quantizer names them, which import-bundle reads back
        w_names = (f"{b}_quantized", f"{b}_scale", f"{b}_zero_point")
        if b not in quantized_weights:
            q_w, w_scale = quantize_weight(weight)
            new_inits += [
                numpy_helper.from_array(q_w, w_names[0]),
                numpy_helper.from_array(w_scale, w_names[1]),
                numpy_helper.from_array(np.zeros(weight.shape[1], dtype=np.int8), w_names[2]),
            ]
            quantized_weights.add(b)
        inputs = [q_a, w_names[0], a_scale, w_names[1], a_zero, w_names[2]]
        output = node.output[0]
        fused = _bias_add(node, consumers, inits, graph_outputs, weight.shape[1])
        if fused is not None:
            add, bias = fused
            inputs.append(bias)
            output = add.output[0]
            fused_adds.add(id(add))
        nodes.append(
            helper.make_node("MatMulIntegerToFloat", inputs, [output], name=f"{node.name}_int8", domain="com.microsoft")
        )
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(new_inits)
    used = {name for node in graph.node for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]  # the float weights now quantized are dropped
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if not any(op.domain == "com.microsoft" for op in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(model, str(dst))
    return len(products)


def activation_scale(lo: float, hi: float) -> tuple[float, int]:
    """uint8 scale and zero point of the range [lo, hi] widened to hold 0 (so that 0 is exact)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi - lo <= 0:
        return 1.0, 0
    scale = (hi - lo) / 255.0
    return scale, int(np.clip(round(-lo / scale), 0, 255))


def quantize_weight(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 weights in -WEIGHT_LEVELS..WEIGHT_LEVELS with one symmetric scale per output column."""
    largest = np.abs(weight).max(axis=0)
    scale = np.where(largest > 0, largest / WEIGHT_LEVELS, 1.0).astype(np.float32)
    return np.clip(np.round(weight / scale), -WEIGHT_LEVELS, WEIGHT_LEVELS).astype(np.int8), scale


def _bias_add(
    node: onnx.NodeProto,
    consumers: dict[str, list[onnx.NodeProto]],
    inits: dict[str, onnx.TensorProto],
    graph_outputs: set[str],
    columns: int,
) -> tuple[onnx.NodeProto, str] | None:
    """The Add of a constant bias that is the product's only reader, and the bias's name, if there is one (it is
    fused into the product)."""
    output = node.output[0]
    readers = consumers.get(output, [])
    if output in graph_outputs or len(readers) != 1 or readers[0].op_type != "Add":
        return None
    add = readers[0]
    other = [i for i in add.input if i != output]
    if len(other) != 1 or other[0] not in inits:
        return None
    bias = inits[other[0]]
    return (add, other[0]) if bias.data_type == TensorProto.FLOAT and list(bias.dims) == [columns] else None
