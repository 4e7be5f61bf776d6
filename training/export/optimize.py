"""fp16 and int8 versions of traced fp32 graphs."""

from __future__ import annotations

import contextlib
from pathlib import Path

import onnx

from training.export.common import ExportError

FP32_OUTPUTS_OF_FP16 = ["topk_logprobs", "topk_ids", "attention", "src_mask"]
FP16_KEEP_FP32_OPS = ["LayerNormalization", "Softmax", "LogSoftmax", "TopK", "ReduceMean"]


def to_fp16_weights(src: Path, dst: Path, smallest: int = 1024) -> None:
    """fp32 graphs with their float weights stored as fp16: each float initializer of at least ``smallest``
    values becomes an fp16 one and a Cast back to float32 under the original name. onnxruntime folds the Casts
    when it loads the graph (its constant folding), so the session holds fp32 weights and computes in fp32
    like the fp32 graphs, from weights rounded to fp16 like the fp16 ones."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = onnx.load(str(src))
    taken = {t.name for t in graph.graph.initializer} | {o for n in graph.graph.node for o in n.output}
    casts, halves = [], []
    for init in list(graph.graph.initializer):
        if init.data_type != TensorProto.FLOAT or int(np.prod(init.dims)) < smallest:
            continue
        name = init.name + "_fp16"
        while name in taken:
            name += "_"
        taken.add(name)
        halves.append(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), name))
        casts.append(helper.make_node("Cast", [name], [init.name], to=TensorProto.FLOAT, name=f"widen_{init.name}"))
        graph.graph.initializer.remove(init)
    graph.graph.initializer.extend(halves)
    for node in reversed(casts):
        graph.graph.node.insert(0, node)
    onnx.save(graph, str(dst))


def to_fp16(src: Path, dst: Path) -> None:
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    graph = onnx.load(str(src))
    keep = [t.name for t in [*graph.graph.input, *graph.graph.output] if t.name in FP32_OUTPUTS_OF_FP16]
    half = convert_float_to_float16(graph, keep_io_types=keep, op_block_list=DEFAULT_OP_BLOCK_LIST + FP16_KEEP_FP32_OPS)
    sort_nodes(half.graph)  # the converter appends its Cast nodes after their consumers
    fold_casts(half.graph)
    onnx.save(half, str(dst))


_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)
_VIEWS = ("Reshape", "Unsqueeze", "Squeeze", "Flatten")
"""Operators that only reshape: a Cast may move across them."""


def fold_casts(graph: onnx.GraphProto) -> int:
    """Collapse each float Cast of a float Cast (possibly through reshapes that nothing else reads) into one Cast:
    ``Cast(Cast(x, T1), T2)`` becomes ``Cast(x, T2)``. The fp16 converter brackets every operator it keeps in fp32
    with a Cast to fp16 after it and one back to fp32 before the next, so between LogSoftmax and TopK (both kept in
    fp32) and after the output projection the log-probabilities went to fp16 and back: kernels that only round (one a
    Cast, a launch each in a step that runs ~100 kernels, docs/inference-core.md) and 3 significant digits lost where
    the next operator reads fp32 anyway. What is left may cast a tensor to its own type, which onnxruntime removes when
    it opens the graph (its CastElimination). Returns how many Casts went; tensors whose type changed lose their
    ``value_info``."""
    removed = 0
    while True:
        producer = {out: node for node in graph.node for out in node.output}
        readers: dict[str, int] = {}
        for node in graph.node:
            for name in node.input:
                readers[name] = readers.get(name, 0) + 1
        for out in graph.output:
            readers[out.name] = readers.get(out.name, 0) + 1
        for node in graph.node:
            if node.op_type != "Cast" or _cast_to(node) not in _FLOATS:
                continue
            views, above = [], producer.get(node.input[0])
            while above is not None and above.op_type in _VIEWS and readers[above.output[0]] == 1:
                views.append(above)
                above = producer.get(above.input[0])
            if above is None or above.op_type != "Cast" or _cast_to(above) not in _FLOATS:
                continue
            if readers[above.output[0]] != 1:
                continue
            (views[-1] if views else node).input[0] = above.input[0]  # the topmost reader skips the first Cast
            retyped = {view.output[0] for view in views}
            kept = [v for v in graph.value_info if v.name not in retyped]
            del graph.value_info[:]
            graph.value_info.extend(kept)
            graph.node.remove(above)
            removed += 1
            break
        else:
            return removed


def _cast_to(node: onnx.NodeProto) -> int:
    return next(a.i for a in node.attribute if a.name == "to")


def sort_nodes(graph: onnx.GraphProto) -> None:
    """Reorder nodes topologically, otherwise keeping their order."""
    known = {t.name for t in graph.input} | {t.name for t in graph.initializer} | {""}
    pending = list(graph.node)
    ordered: list[onnx.NodeProto] = []
    while pending:
        ready = [n for n in pending if all(i in known for i in n.input)]
        if not ready:
            names = [n.name for n in pending[:5]]
            raise ExportError(f"fp16 conversion left a cycle or a dangling input near nodes {names}")
        ready_ids = {id(n) for n in ready}
        pending = [n for n in pending if id(n) not in ready_ids]
        for node in ready:
            ordered.append(node)
            known.update(node.output)
    del graph.node[:]
    graph.node.extend(ordered)


def output_projection(graph: onnx.GraphProto) -> str | None:
    """The name of the product after the last layer norm (the logits over the vocabulary), if there is one."""
    norms = [n.output[0] for n in graph.node if n.op_type in ("LayerNormalization", "SkipLayerNormalization")]
    products = [n.name for n in graph.node if n.op_type in ("MatMul", "Gemm") and norms and norms[-1] in n.input]
    if len(products) > 1:
        raise ExportError(f"more than one product reads the last layer norm: {products}")
    return products[0] if products else None


def to_int8(src: Path, dst: Path, per_channel: bool = False, fp32_logits: bool = False) -> None:
    """Dynamic int8 quantization of the constant MatMul weights (measured choices in docs/bundle.md).

    ``per_channel``: one weight scale per output column instead of one per matrix, still 7-bit
    (reduce_range), so it stays exact on CPUs without VNNI. ``fp32_logits``: leave the output projection
    (the product after the last LayerNormalization, over the whole vocabulary) in fp32; where int8 costs too
    much BLEU, that product is where most of it goes (docs/default-model.md, model 0.8.0).

    onnxruntime's quant_pre_process changed nothing here (its symbolic shape inference cannot follow the
    tensor ``k`` of TopK, and the rest left the parity figures identical), so it is not run.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # onnxruntime's symbolic shape inference, when it gives up on a graph, leaves sym_shape_infer_temp.onnx
    # and its external-data files in the working directory: keep them out of the user's. Paths are made
    # absolute before the chdir: a relative output path must mean the same directory after it.
    src, dst = src.resolve(), dst.resolve()
    excluded = []
    if fp32_logits:
        projection = output_projection(onnx.load(str(src)).graph)
        if projection is None:
            raise ExportError(f"{src}: no output projection after the last LayerNormalization")
        excluded = [projection]
    with contextlib.chdir(src.parent):  # the fp32 scratch directory, deleted after the export
        quantize_dynamic(
            src,
            dst,
            weight_type=QuantType.QInt8,
            per_channel=per_channel,
            reduce_range=True,  # 7-bit weights: no saturation in AVX2's u8 x s8 products (no VNNI)
            op_types_to_quantize=["MatMul", "Gemm"],
            nodes_to_exclude=excluded,
            # DefaultTensorType: the type of tensors shape inference cannot follow, those after the
            # com.microsoft nodes of fused-attention graphs (training/fused.py); every activation here is float.
            extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT},
        )
