"""Tracing: the model's incremental forward (training.incremental) to ONNX with PyTorch's TorchScript-based
exporter (``dynamo=False``: it keeps every axis dynamic and takes ``k`` of top-k as a tensor input), and the
small state graphs (select, merge, trim) written directly in ONNX."""

from __future__ import annotations

import logging
import shutil
import warnings
from pathlib import Path

import onnx
import torch

from core.bundle import DECODER_FILE, ENCODER_FILE, GRAPH_FILES
from core.graphs import (
    FLOAT,
    GROW_KEY_SPLIT,
    KEY_A,
    KEY_B,
    KEY_LAYOUT,
    MASKED_MOVE,
    MASKED_STEP,
    PACKED_LEN,
    PACKED_STEP_IDS,
    PACKED_TOPK,
    STATIC_EXTRAS,
    WINDOW,
    TensorSpec,
    cache_names,
    graph_spec,
)
from training.export import static_int8
from training.export.common import ATTENTION_KINDS
from training.export.optimize import to_fp16, to_fp16_weights, to_int8
from training.export.weights import share_weights
from training.fused import drop_unused_outputs, fuse_skip_layer_norm
from training.incremental import (
    DecoderStep,
    EncoderGraph,
    decoder_example,
    encoder_example,
    masked_example,
    spec,
    static_example,
)
from training.model import Transformer

log = logging.getLogger(__name__)


def trace_module(
    module: torch.nn.Module,
    example: tuple[torch.Tensor, ...],
    path: Path,
    inputs: list[str],
    outputs: list[str],
    dynamic_axes: dict[str, dict[int, str]],
    opset: int,
) -> None:
    """``module`` traced on ``example`` to ``path`` with these tensor names and dynamic axes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer and deprecation warnings about the legacy exporter
        torch.onnx.export(
            module,
            example,
            str(path),
            dynamo=False,
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=dynamic_axes,
            opset_version=opset,
            do_constant_folding=True,
        )


def trace_graphs(
    model: Transformer,
    directory: Path,
    opset: int,
    attention_layer: int,
    static: bool = False,
    attention: str = "fused",
    pack_encoder: bool = True,
    masked: bool = False,
    static_masked: bool = False,
) -> None:
    """encoder.onnx and decoder.onnx in fp32 into ``directory``; with ``static`` also static_decoder.onnx.
    ``pack_encoder``: the encoder skips padding in its position-wise work (the CPU's choice; the GPU set's is not
    to: ``EncoderGraph.pack``).

    ``attention="fused"``: every attention is one onnxruntime ``MultiHeadAttention`` node and every residual
    addition is fused with the layer norm that reads it (training/fused.py); ``"plain"``: standard ONNX
    operators only, as the model writes them. ``static_masked`` (fused only): the static step's self-attention
    as ``DecoderMaskedMultiHeadAttention`` (``DecoderStep.static_masked``)."""
    if static_masked and attention != "fused":
        raise ValueError("static_masked needs fused attention: it is an onnxruntime kernel")
    if attention not in ATTENTION_KINDS:
        raise ValueError(f"attention={attention!r}: use one of {', '.join(ATTENTION_KINDS)}")
    fused = attention == "fused"
    graphs = [
        ("encoder", EncoderGraph(model, fused=fused, pack=pack_encoder), encoder_example(model)),
        ("decoder", DecoderStep(model, attention_layer, fused=fused), decoder_example(model)),
    ]
    if static:  # its example cache is wider than every example position: the static cache's rule
        graphs.append(
            (
                "static_decoder",
                DecoderStep(model, attention_layer, static=True, fused=fused, static_masked=static_masked),
                static_example(model, step=5),
            )
        )
    if masked:  # the step whose caches never move (core/graphs.py MASKED_STEP)
        graphs.append(
            (MASKED_STEP, DecoderStep(model, attention_layer, fused=fused, masked=True), masked_example(model))
        )
    for role, module, example in graphs:
        contract = spec(role, model)
        path = directory / GRAPH_FILES[role]
        names, outputs, axes = contract.input_names, contract.output_names, contract.dynamic_axes
        if role == "static_decoder" and static_masked:  # the key caches' layout, plain in the example; the windows
            d_head = model.config.d_model // model.config.n_heads
            example = (*example, torch.zeros(1, d_head, dtype=torch.uint8))
            windows = cache_names(WINDOW, model.config.decoder_layers)
            names, outputs = [*names, KEY_LAYOUT], [*outputs, *windows]
            axes = {**axes, KEY_LAYOUT: {0: KEY_A, 1: KEY_B}} | {w: {0: "rows", 2: "steps"} for w in windows}
        trace_module(module, example, path, names, outputs, axes, opset)
        graph = onnx.load(str(path))
        if role != "encoder":
            k_on_the_host(graph)
        if fused:
            drop_unused_outputs(graph)
            fuse_skip_layer_norm(graph)
        onnx.save(graph, str(path))


def pack_static_io(path: Path) -> None:
    """The static decoder at ``path`` rewritten to take ``tokens``, ``positions`` and ``reorder`` as one vector and
    to return its top-k log-probs and ids as one tensor (core/graphs.py ``PACKED_STEP_IDS``, ``PACKED_TOPK``): a
    step then costs one copy from the host and one back instead of three and two. The sizes come from the cache
    and the source mask, so with the bucket's free dimensions fixed they fold to constants. Run on the graph as
    written to the bundle (its weights in ``weights.bin`` stay untouched): after an fp16 conversion, which would
    pass the ids through float16 (exact only to 2048)."""
    from onnx import TensorProto, helper

    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    unpacked = ("tokens", "positions", "reorder")
    kept_inputs = [i for i in graph.input if i.name not in unpacked]
    if len(kept_inputs) != len(graph.input) - 3:
        raise ValueError(f"{path}: expected inputs {unpacked} to pack, found {[i.name for i in graph.input]}")
    cache = next(i.name for i in graph.input if i.name.startswith("past_k_"))

    def const(name: str, values: list[int]) -> str:
        graph.initializer.append(helper.make_tensor(name, TensorProto.INT64, [len(values)], values))
        return name

    zero, one, last = const("pack_zero", [0]), const("pack_one", [1]), const("pack_end", [2**62])
    nodes = [  # zero is also every Slice's axis
        helper.make_node("Shape", [cache], ["pack_cache_shape"]),
        helper.make_node("Gather", ["pack_cache_shape", zero], ["pack_rows"], axis=0),
        helper.make_node("Shape", ["src_mask"], ["pack_mask_shape"]),
        helper.make_node("Gather", ["pack_mask_shape", zero], ["pack_batch"], axis=0),
        helper.make_node("Add", ["pack_rows", "pack_batch"], ["pack_rows_batch"]),
        helper.make_node("Slice", [PACKED_STEP_IDS, zero, "pack_rows", zero, one], ["pack_tokens"]),
        helper.make_node("Concat", ["pack_batch", const("pack_minus_one", [-1])], ["pack_token_shape"], axis=0),
        helper.make_node("Reshape", ["pack_tokens", "pack_token_shape"], ["tokens"]),
        helper.make_node("Slice", [PACKED_STEP_IDS, "pack_rows", "pack_rows_batch", zero, one], ["positions"]),
        helper.make_node("Slice", [PACKED_STEP_IDS, "pack_rows_batch", last, zero, one], ["reorder"]),
    ]
    if not {"topk_logprobs", "topk_ids"} <= {o.name for o in graph.output}:
        raise ValueError(f"{path}: no topk_logprobs and topk_ids outputs to pack")
    axis = const("pack_axis2", [2])
    (lp_type,) = [o.type.tensor_type.elem_type for o in graph.output if o.name == "topk_logprobs"]
    lp, nodes_out = "topk_logprobs", []
    if lp_type != TensorProto.FLOAT:  # float32 in every set (fp16 ones keep them so): a Cast only where they are not
        lp = "pack_lp"
        nodes_out.append(helper.make_node("Cast", ["topk_logprobs"], [lp], to=TensorProto.FLOAT))
    nodes_out += [
        helper.make_node("Cast", ["topk_ids"], ["pack_ids"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", [lp, axis], ["pack_lp_2"]),
        helper.make_node("Unsqueeze", ["pack_ids", axis], ["pack_ids_2"]),
        helper.make_node("Concat", ["pack_lp_2", "pack_ids_2"], [PACKED_TOPK], axis=2),
    ]
    rest = [o for o in graph.output if o.name not in ("topk_logprobs", "topk_ids")]
    topk = helper.make_tensor_value_info(PACKED_TOPK, TensorProto.FLOAT, ["batch", "hyps", 2, "k"])
    step_ids = helper.make_tensor_value_info(PACKED_STEP_IDS, TensorProto.INT64, [PACKED_LEN])
    new_nodes = nodes + list(graph.node) + nodes_out
    del graph.node[:]
    graph.node.extend(new_nodes)
    del graph.input[:]
    graph.input.extend([step_ids, *kept_inputs])
    del graph.output[:]
    graph.output.extend([topk, *rest])
    onnx.save(model, str(path))
    onnx.checker.check_model(str(path))


def k_on_the_host(model: onnx.ModelProto) -> None:
    """The decoder's ``k`` input made the 1-element vector that TopK reads, instead of a scalar reshaped in the
    graph. onnxruntime's CUDA TopK reads ``k`` on the host, and its provider runs that Reshape on the GPU: the
    step then copied ``k`` to the device and back (a MemcpyToHost node and a stream sync per step), and a graph
    with a Memcpy node cannot be captured as a CUDA graph (measured on an H200 with onnxruntime 1.31: "cannot use
    the graph capture feature ... all compute graph nodes have not been partitioned to the
    CUDAExecutionProvider"). The engine feeds ``k`` in the shape the graph declares, so older bundles (a scalar
    ``k``) still load."""
    graph = model.graph
    (k_input,) = [i for i in graph.input if i.name == "k"]
    producers = {out: node for node in graph.node for out in node.output}
    rewired = 0
    for node in graph.node:
        if node.op_type != "TopK":
            continue
        reshape = producers.get(node.input[1])
        if reshape is None or reshape.op_type not in ("Reshape", "Unsqueeze") or reshape.input[0] != "k":
            raise ValueError(f"TopK {node.name} reads k through {reshape.op_type if reshape else 'nothing'}")
        node.input[1] = "k"
        rewired += 1
    if rewired != 1:
        raise ValueError(f"expected one TopK reading k, found {rewired}")
    while True:  # the Reshape left without readers, and the shape constant it read
        used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
        dead = [n for n in graph.node if n.op_type in ("Reshape", "Unsqueeze", "Constant") and n.output[0] not in used]
        if not dead:
            break
        for node in dead:
            graph.node.remove(node)
    dims = k_input.type.tensor_type.shape
    del dims.dim[:]
    dims.dim.add().dim_value = 1


def write_graphs(
    model: Transformer,
    fp32_dir: Path,
    out: Path,
    mode: str,
    quantize: str,
    static: bool = False,
    ranges: dict[str, dict[str, tuple[float, float]]] | None = None,
    masked: bool = False,
) -> None:
    """The five graphs of a bundle in ``out``: encoder and decoder from the traced fp32 ones in ``fp32_dir``
    (converted to ``mode``: fp32, fp16, fp16w or int8) with their weights in one file, each tensor once
    (training/export/weights.py), then the state graphs typed like the encoder's outputs.
    With ``static`` also the static-shape pair (core/graphs.py ``STATIC_GRAPHS``): static_decoder, converted
    like the decoder, and place. ``ranges``: per graph role, the calibrated input ranges that ``int8-static``
    quantizes with (training/export/static_int8.py)."""
    out.mkdir(parents=True)
    model_files = [ENCODER_FILE, DECODER_FILE] + ([GRAPH_FILES["static_decoder"]] if static else [])
    model_files += [GRAPH_FILES[MASKED_STEP]] if masked else []
    steps = (DECODER_FILE, GRAPH_FILES[MASKED_STEP])  # their logits stay fp32 where the quantization says so
    masked_roles = (MASKED_MOVE,) if masked else ()
    for role_file in model_files:
        src, dst = fp32_dir / role_file, out / role_file
        if mode == "fp16":
            to_fp16(src, dst)
        elif mode == "fp16w":
            to_fp16_weights(src, dst)
        elif mode == "int8" and quantize.startswith("int8-static"):
            logits = quantize.endswith("fp32-logits") and role_file in steps
            if ranges is None:
                raise ValueError(f"{quantize} needs the calibrated ranges")
            role = next(r for r, f in GRAPH_FILES.items() if f == role_file)
            static_int8.quantize(src, dst, ranges[role], fp32_logits=logits)
        elif mode == "int8":
            logits = quantize.endswith("fp32-logits") and role_file in steps
            to_int8(src, dst, per_channel=quantize.startswith("int8-channel"), fp32_logits=logits)
        else:
            shutil.copyfile(src, dst)
    saved = share_weights(out, model_files)
    log.info("%s: weights shared by the graphs stored once, %.1f MB saved", out.name, saved["saved"] / 1e6)
    for role_file in model_files:
        onnx.checker.check_model(str(out / role_file), full_check=True)
    encoder_graph = onnx.load(str(out / ENCODER_FILE))
    for role in ("select", "merge", "trim", *(("place", *STATIC_EXTRAS) if static else ()), *masked_roles):
        onnx.save(state_graph(role, encoder_graph, model), str(out / GRAPH_FILES[role]))
        onnx.checker.check_model(str(out / GRAPH_FILES[role]), full_check=True)


def state_graph(role: str, encoder: onnx.ModelProto, model: Transformer) -> onnx.ModelProto:
    """``role``'s state graph (:func:`sized_state_graph`) for this model."""
    cfg = model.config
    return sized_state_graph(role, encoder, cfg.decoder_layers, cfg.n_heads, cfg.d_model // cfg.n_heads)


def sized_state_graph(role: str, encoder: onnx.ModelProto, layers: int, heads: int, d_head: int) -> onnx.ModelProto:
    """select, merge, trim or place: the small graphs that reshape the running set's device state between steps.

    They only gather, pad, concatenate and slice, so they are written directly in ONNX, typed like the
    encoder's outputs (fp16 bundles stay fp16): select keeps some sentences' memory (``keep``, one Gather per
    tensor); merge pads the running and the new sentences' memory to the longer source (padding masked) and
    stacks them; trim cuts the memory's source axis to ``src_len`` and drops the first ``start`` columns of
    every cache tensor; place pads new sentences' memory to the running set's source width and writes it into
    the rows ``slots`` (ScatterND with an index per slot, head and position; the engine binds the output to the
    input's own buffer, so the fixed-size memory of a static running set is updated where it lies).
    """
    from onnx import TensorProto, helper

    float_type = next(o.type.tensor_type.elem_type for o in encoder.graph.output if o.name == "cross_k_0")
    contract = graph_spec(role, layers, heads, d_head)
    elem = {"int64": TensorProto.INT64, "bool": TensorProto.BOOL, "float32": TensorProto.FLOAT}

    def value(t: TensorSpec) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(t.name, float_type if t.dtype == FLOAT else elem[t.dtype], list(t.shape))

    nodes: list[onnx.NodeProto] = []
    constants = [
        helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
        helper.make_tensor("one", TensorProto.INT64, [1], [1]),
        helper.make_tensor("big", TensorProto.INT64, [1], [2**62]),
        helper.make_tensor("shape_1", TensorProto.INT64, [1], [1]),
    ]
    if role == MASKED_MOVE:  # each cache viewed in five axes, gathered by rows and by columns, viewed back
        for i, t in enumerate(contract.inputs[: 2 * layers]):
            kind = "key" if i % 2 == 0 else "value"
            nodes += [
                helper.make_node("Reshape", [t.name, f"{kind}_split"], [f"{t.name}_split"]),
                helper.make_node("Gather", [f"{t.name}_split", "rows"], [f"{t.name}_rows"], axis=0),
                helper.make_node("Gather", [f"{t.name}_rows", "columns"], [f"{t.name}_columns"], axis=3),
                helper.make_node("Reshape", [f"{t.name}_columns", f"{kind}_merge"], [f"moved_{t.name}"]),
            ]
    elif role == "select":
        for t in contract.inputs[: 1 + 2 * layers]:
            nodes.append(helper.make_node("Gather", [t.name, "keep"], [f"kept_{t.name}"], axis=0))
    elif role == "merge":
        for t in contract.inputs[: 1 + 2 * layers]:
            axis, rank = t.source_axis, len(t.shape)
            for side in ("", "new_"):
                nodes.append(
                    helper.make_node("Shape", [side + t.name], [f"{side}{t.name}_len"], start=axis, end=axis + 1)
                )
            nodes.append(helper.make_node("Max", [f"{t.name}_len", f"new_{t.name}_len"], [f"{t.name}_width"]))
            padded = []
            for side in ("", "new_"):
                name = side + t.name
                nodes.append(helper.make_node("Sub", [f"{t.name}_width", f"{name}_len"], [f"{name}_short"]))
                pads = ["zero"] * (rank + axis) + [f"{name}_short"] + ["zero"] * (rank - axis - 1)
                nodes.append(helper.make_node("Concat", pads, [f"{name}_pads"], axis=0))
                fill = f"fill_{t.name}"
                nodes.append(helper.make_node("Pad", [name, f"{name}_pads", fill], [f"{name}_padded"]))
                padded.append(f"{name}_padded")
            if t.dtype == "bool":  # padding is masked
                constants.append(helper.make_tensor(f"fill_{t.name}", TensorProto.BOOL, [], [True]))
            else:
                constants.append(helper.make_tensor(f"fill_{t.name}", float_type, [], [0]))
            nodes.append(helper.make_node("Concat", padded, [f"merged_{t.name}"], axis=0))
    elif role == "place":
        nodes.append(helper.make_node("Unsqueeze", ["slots", "one"], ["slot_rows"]))
        constants.append(helper.make_tensor("zero_scalar", TensorProto.INT64, [], [0]))  # Range's bounds (the indices)
        constants.append(helper.make_tensor("one_scalar", TensorProto.INT64, [], [1]))
        indexed: dict[int, str] = {}  # the indices of each rank of index, built once (every cross tensor shares them)
        for t in contract.inputs[: 1 + 2 * layers]:
            axis, rank, new = t.source_axis, len(t.shape), "new_" + t.name
            nodes.append(helper.make_node("Shape", [t.name], [f"{t.name}_width"], start=axis, end=axis + 1))
            nodes.append(helper.make_node("Shape", [new], [f"{new}_len"], start=axis, end=axis + 1))
            nodes.append(helper.make_node("Sub", [f"{t.name}_width", f"{new}_len"], [f"{new}_short"]))
            pads = ["zero"] * (rank + axis) + [f"{new}_short"] + ["zero"] * (rank - axis - 1)
            nodes.append(helper.make_node("Concat", pads, [f"{new}_pads"], axis=0))
            nodes.append(helper.make_node("Pad", [new, f"{new}_pads", f"fill_{t.name}"], [f"{new}_padded"]))
            padding = [True] if t.dtype == "bool" else [0]
            constants.append(
                helper.make_tensor(f"fill_{t.name}", TensorProto.BOOL if t.dtype == "bool" else float_type, [], padding)
            )
            # onnxruntime's CUDA ScatterND copies each index's slice in one thread: indexed by slot only, a slot's
            # heads x width x d_head values went one at a time (10 ms a call on an H100, docs/inference-core.md,
            # session 42). Every position of every head is an index of its own, so a thread copies d_head values
            # (the mask: one).
            index_rank = rank if t.dtype == "bool" else rank - 1
            if index_rank not in indexed:
                indexed[index_rank] = _place_indices(nodes, constants, f"{new}_padded", index_rank)
            nodes.append(
                helper.make_node("ScatterND", [t.name, indexed[index_rank], f"{new}_padded"], [f"placed_{t.name}"])
            )
    elif role == "grow":
        # The pads and shapes come from the host (engine: static_state.py), so Pad and Reshape read them where
        # onnxruntime's CUDA kernels want them, on the host, with no copy.
        memory = contract.inputs[: 1 + 2 * layers]
        mask = memory[0].name
        constants.append(helper.make_tensor("masked", TensorProto.BOOL, [], [True]))
        constants.append(helper.make_tensor("visible", TensorProto.BOOL, [], [False]))
        constants.append(helper.make_tensor("nothing", float_type, [], [0]))
        # the running sentences' new source positions are padding; free slots see an all-zero source (finite)
        nodes.append(helper.make_node("Pad", [mask, "mask_width_pads", "masked"], ["mask_wide"]))
        nodes.append(helper.make_node("Pad", ["mask_wide", "mask_slot_pads", "visible"], [f"grown_{mask}"]))
        for t in memory[1:]:
            nodes.append(helper.make_node("Pad", [t.name, "memory_pads", "nothing"], [f"grown_{t.name}"]))
        for t in contract.inputs[1 + 2 * layers : 1 + 4 * layers]:  # (slots, hyps, ...): new hyps, slots, columns
            split = GROW_KEY_SPLIT if t.name.startswith("past_k_") else "cache_split"  # keys: their own view
            nodes.append(helper.make_node("Reshape", [t.name, split], [f"{t.name}_split"]))
            nodes.append(helper.make_node("Pad", [f"{t.name}_split", "cache_pads", "nothing"], [f"{t.name}_padded"]))
            nodes.append(helper.make_node("Reshape", [f"{t.name}_padded", "cache_merge"], [f"grown_{t.name}"]))
    elif role == "compact":
        for t in contract.inputs[: 1 + 2 * layers]:
            nodes.append(helper.make_node("Gather", [t.name, "slot_index"], [f"compact_{t.name}"], axis=0))
        for t in contract.inputs[1 + 2 * layers : 1 + 4 * layers]:
            nodes.append(helper.make_node("Gather", [t.name, "row_index"], [f"compact_{t.name}"], axis=0))
    elif role == "trim":
        nodes.append(helper.make_node("Reshape", ["start", "shape_1"], ["start_1"]))
        nodes.append(helper.make_node("Reshape", ["src_len", "shape_1"], ["src_len_1"]))
        constants.append(helper.make_tensor("axis_steps", TensorProto.INT64, [1], [2]))
        for t in contract.inputs[: 1 + 2 * layers]:
            constants.append(helper.make_tensor(f"axis_{t.name}", TensorProto.INT64, [1], [t.source_axis]))
            nodes.append(
                helper.make_node("Slice", [t.name, "zero", "src_len_1", f"axis_{t.name}"], [f"trimmed_{t.name}"])
            )
        for t in contract.inputs[1 + 2 * layers : -2]:
            nodes.append(helper.make_node("Slice", [t.name, "start_1", "big", "axis_steps"], [f"trimmed_{t.name}"]))
    else:
        raise ValueError(f"{role!r} is not a state graph (select, merge, trim, place, grow, compact)")
    inputs = [value(t) for t in contract.inputs]
    if role == "grow":  # beside the contract's (core/graphs.py GROW_KEY_SPLIT): older grow graphs lack it
        inputs.append(value(TensorSpec(GROW_KEY_SPLIT, "int64", (5,))))
    graph = helper.make_graph(nodes, role, inputs, [value(t) for t in contract.outputs], initializer=constants)
    model = helper.make_model(graph, opset_imports=list(encoder.opset_import))
    model.ir_version = encoder.ir_version
    return model


def _place_indices(nodes: list[onnx.NodeProto], constants: list[onnx.TensorProto], updates: str, rank: int) -> str:
    """Nodes that make ScatterND indices for ``updates`` (new sentences' memory, padded to the set's width) that
    address its first ``rank`` axes one by one: shape (*updates.shape[:rank], rank), the first coordinate the slot
    (``slot_rows``), the others each position's own. Returns the indices' name."""
    from onnx import TensorProto, helper

    prefix = f"index{rank}"
    lead, grid = f"{prefix}_lead", f"{prefix}_grid"
    nodes.append(helper.make_node("Shape", [updates], [lead], start=0, end=rank))
    nodes.append(helper.make_node("Concat", [lead, "one"], [grid], axis=0))
    coordinates = []
    for axis in range(rank):
        line = [1] * (rank + 1)
        line[axis] = -1
        constants.append(helper.make_tensor(f"{prefix}_line{axis}", TensorProto.INT64, [rank + 1], line))
        if axis == 0:
            values = "slot_rows"
        else:
            size, count = f"{prefix}_size{axis}", f"{prefix}_count{axis}"
            nodes.append(helper.make_node("Shape", [updates], [size], start=axis, end=axis + 1))
            nodes.append(helper.make_node("Squeeze", [size, "zero"], [count]))
            values = f"{prefix}_range{axis}"
            nodes.append(helper.make_node("Range", ["zero_scalar", count, "one_scalar"], [values]))
        nodes.append(helper.make_node("Reshape", [values, f"{prefix}_line{axis}"], [f"{prefix}_along{axis}"]))
        nodes.append(helper.make_node("Expand", [f"{prefix}_along{axis}", grid], [f"{prefix}_coordinate{axis}"]))
        coordinates.append(f"{prefix}_coordinate{axis}")
    nodes.append(helper.make_node("Concat", coordinates, [f"{prefix}_indices"], axis=-1))
    return f"{prefix}_indices"
