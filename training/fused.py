"""Attention as one onnxruntime kernel in the exported graphs.

Traced as the model writes it, one attention is a dozen small ONNX nodes (head reshapes and transposes, the
cache concatenation, two products, the mask, the softmax). A decoder step is mostly such nodes, and on a GPU each
costs a kernel launch and onnxruntime's host work whatever its size (docs/inference-core.md). onnxruntime's
``com.microsoft`` ``MultiHeadAttention`` kernel, on the CPU and on CUDA, does the same work in one node: it splits
the heads, appends the new key and value to the cache (returning the grown cache), masks and multiplies.

Each function here runs the model's arithmetic when called from PyTorch (so eager decoding and the export's parity
check compute what ``MultiHeadAttention.attend`` computes, up to the mask value below) and becomes that one node
when traced by the TorchScript-based exporter (its ``symbolic``). ``fuse_skip_layer_norm`` then merges each
residual addition with the layer norm that reads it, after tracing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

if TYPE_CHECKING:  # onnx only where graphs are rewritten: training itself does not need it
    import onnx

MASKED = -10000.0
"""What a forbidden key's score becomes: onnxruntime's own mask value (``mask_filter_value``), finite so an fp16
graph holds it. ``exp`` of a score that far below the row's best is 0 in float32, as with ``-inf``."""


def _heads(x: Tensor, heads: int) -> Tensor:
    """(B, S, heads * d_head) -> (B, heads, S, d_head)."""
    return x.reshape(x.size(0), x.size(1), heads, -1).transpose(1, 2)


def _attend(scores: Tensor, v: Tensor) -> Tensor:
    """softmax(scores) V over (B, heads, S, ·) tensors, merged back to (B, S, heads * d_head)."""
    out = scores.softmax(dim=-1) @ v
    return out.transpose(1, 2).reshape(out.size(0), out.size(2), -1)


def _scores(q: Tensor, k: Tensor) -> Tensor:
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


def _placeholder(g: Any) -> Any:
    from torch.onnx.symbolic_helper import _optional_input_placeholder_tensor

    return _optional_input_placeholder_tensor(g)


def _biased(query: Tensor, key: Tensor, value: Tensor, bias: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """The projections plus their biases (query's, key's and value's, concatenated), as the kernel adds them."""
    if bias is None:
        return query, key, value
    q_bias, k_bias, v_bias = bias.split([query.size(-1), key.size(-1), value.size(-1)])
    return query + q_bias, key + k_bias, value + v_bias


class CachedSelfAttention(torch.autograd.Function):
    """One new position per row against its cache: ``query``, ``key``, ``value`` (rows, 1, d_model) from the
    projections before their ``bias`` (3 * d_model, added inside the kernel: on CUDA in the kernel that splits the
    heads, instead of a broadcast before a Gemm), ``own`` (rows, T + 1) int32, 1 at the columns that are the row's
    own (the cache is shared by sentences at different positions), ``past_key`` / ``past_value`` (rows, heads, T,
    d_head), ``heads`` their head count (an int: the static step's past comes out of a Reshape whose head axis the
    trace does not know). Returns the attention output (rows, 1, d_model) and the grown cache, (rows, heads, T + 1,
    d_head) each."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        bias: Tensor | None,
        own: Tensor,
        past_key: Tensor,
        past_value: Tensor,
        heads: int,
    ) -> tuple[Tensor, Tensor, Tensor]:
        query, key, value = _biased(query, key, value, bias)
        keys = torch.cat([past_key, _heads(key, heads)], dim=2)
        values = torch.cat([past_value, _heads(value, heads)], dim=2)
        q = _heads(query, heads)
        scores = _scores(q, keys).masked_fill(own[:, None, None, :] == 0, MASKED)
        return _attend(scores, values), keys, values

    @staticmethod
    def symbolic(
        g: Any, query: Any, key: Any, value: Any, bias: Any, own: Any, past_key: Any, past_value: Any, heads: int
    ) -> Any:
        from torch.onnx.symbolic_helper import _is_none

        none = _placeholder(g)  # no attention bias
        outputs = g.op(
            "com.microsoft::MultiHeadAttention",
            *(query, key, value, none if _is_none(bias) else bias, own, none, past_key, past_value),
            num_heads_i=heads,
            outputs=3,
        )
        return _typed(outputs, (query, 3), (past_key, 4), (past_key, 4))


class BeamCachedAttention(torch.autograd.Function):
    """One new position per row against a cache that never moves (onnxruntime's ``DecoderMaskedMultiHeadAttention``,
    CPU and CUDA; docs/inference-core.md, "The cache without moves"). ``query``, ``key``, ``value`` (rows, 1,
    d_model) before their ``bias`` (3 * d_model or None); ``own`` (rows, t + 1) int32, 1 at the columns the row
    owns (from its sentence's admission to ``t``); ``past_key`` / ``past_value`` (rows, heads, C, d_head), the set's
    buffers; ``step`` (1,) int32, the column ``t`` this step writes; ``beams`` (sentences, hyps, C) int32, for each
    row and column the hypothesis of its sentence whose row holds that column's key (rows are sentence-major,
    ``hyps`` a sentence). Returns the output (rows, 1, d_model) and the buffers with column ``t`` written: in the
    graph the same buffers, bound as both past and present (``past_present_share_buffer``), nothing gathered.
    ``heads``: their head count where the trace cannot read it off ``past_key`` (the static step's, reshaped).
    The static step with ``static_masked`` passes its gathered window, ``step`` its last column and a beam index of
    each row's own hypothesis (training/incremental.py)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        bias: Tensor | None,
        own: Tensor,
        past_key: Tensor,
        past_value: Tensor,
        step: Tensor,
        beams: Tensor,
        heads: int | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        rows, heads = past_key.size(0), heads or past_key.size(1)
        hyps, t = beams.size(1), int(step.reshape(-1)[0])
        query, key, value = _biased(query, key, value, bias)
        present_key, present_value = past_key.clone(), past_value.clone()
        present_key[:, :, t] = _heads(key, heads)[:, :, 0]
        present_value[:, :, t] = _heads(value, heads)[:, :, 0]
        first = torch.arange(rows, device=beams.device) // hyps * hyps  # each row's sentence's first row
        held = first[:, None] + beams.reshape(rows, -1)[:, : t + 1].long()  # (rows, t + 1): the row holding a column
        held[:, t] = torch.arange(rows, device=beams.device)  # the new column is the row's own
        columns = torch.arange(t + 1, device=beams.device)
        keys = present_key[held, :, columns].transpose(1, 2)  # (rows, heads, t + 1, d_head)
        values = present_value[held, :, columns].transpose(1, 2)
        scores = _scores(_heads(query, heads), keys).masked_fill(own[:, None, None, :] == 0, MASKED)
        return _attend(scores, values), present_key, present_value

    @staticmethod
    def symbolic(
        g: Any,
        query: Any,
        key: Any,
        value: Any,
        bias: Any,
        own: Any,
        past_key: Any,
        past_value: Any,
        step: Any,
        beams: Any,
        heads: int | None = None,
    ) -> Any:
        from torch.onnx.symbolic_helper import _get_tensor_dim_size, _is_none

        none = _placeholder(g)  # no attention bias
        # beam_width: the hyps axis of the beam index, an int32 on the host (onnxruntime reads it there)
        shape = g.op("Shape", beams)
        width = g.op("Gather", shape, g.op("Constant", value_t=torch.tensor([1])), axis_i=0)
        width = g.op("Cast", width, to_i=6)  # int32
        outputs = g.op(
            "com.microsoft::DecoderMaskedMultiHeadAttention",
            *(query, key, value, own, none, past_key, past_value, step, width, beams),
            *(() if _is_none(bias) else (bias,)),
            num_heads_i=heads or _get_tensor_dim_size(past_key, 1),
            past_present_share_buffer_i=1,
            mask_filter_value_f=MASKED,
            outputs=3,
        )
        return _typed(outputs, (query, 3), (past_key, 4), (past_key, 4))


class KeyMaskedAttention(torch.autograd.Function):
    """Queries against keys with padding: ``query`` (B, S_q, d_model); ``key`` / ``value`` either (B, S, d_model)
    (the encoder's self-attention) or already split into heads, (B, heads, S, d_head) (the decoder's
    cross-attention over the encoder's projections); ``bias`` the three projections' biases (3 * d_model, added
    inside the kernel; onnxruntime allows it only with (B, S, d_model) keys) or None; ``keep`` (B, S) int32, 1 at
    a real token. Returns the output (B, S_q, d_model) and the masked scores (B, heads, S_q, S), ``MASKED`` at
    padding, whose softmax is the attention weights (onnxruntime masks by replacing the scores, not by adding to
    them)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, query: Tensor, key: Tensor, value: Tensor, bias: Tensor | None, keep: Tensor, heads: int
    ) -> tuple[Tensor, Tensor]:
        query, key, value = _biased(query, key, value, bias)
        if key.dim() == 3:
            key, value = _heads(key, heads), _heads(value, heads)
        q = _heads(query, heads)
        scores = _scores(q, key).masked_fill(keep[:, None, None, :] == 0, MASKED)
        return _attend(scores, value), scores

    @staticmethod
    def symbolic(g: Any, query: Any, key: Any, value: Any, bias: Any, keep: Any, heads: int) -> Any:
        from torch.onnx.symbolic_helper import _is_none

        if _is_none(bias):
            bias = _placeholder(g)
        # Outputs 1 and 2 (the cache it would grow) are left unnamed after tracing: ``drop_unused_outputs``.
        out, _, _, scores = g.op(
            "com.microsoft::MultiHeadAttention", query, key, value, bias, keep, num_heads_i=heads, outputs=4
        )
        return _typed((out, scores), (query, 3), (query, 4))


def _typed(outputs: Any, *like: tuple[Any, int]) -> Any:
    """Give each traced output the element type of an input and a rank, every axis dynamic: the exporter cannot
    infer a ``com.microsoft`` node's outputs, and a wrong fixed size would be worse than none."""
    for output, (source, rank) in zip(outputs, like, strict=True):
        output.setType(source.type().with_sizes([None] * rank))
    return outputs


def drop_unused_outputs(model: onnx.ModelProto) -> None:
    """Leave the outputs of ``com.microsoft`` nodes that nothing reads unnamed, so onnxruntime does not compute
    them (a traced node names every output it declares)."""
    read = {name for node in model.graph.node for name in node.input} | {o.name for o in model.graph.output}
    for node in model.graph.node:
        if node.domain == "com.microsoft":
            for i, name in enumerate(node.output):
                if name not in read:
                    node.output[i] = ""


def fuse_skip_layer_norm(model: onnx.ModelProto) -> int:
    """Each ``LayerNormalization`` over the last axis of an ``Add`` of two activations of the same shape becomes
    one ``com.microsoft`` ``SkipLayerNormalization`` (on the CPU and on CUDA): the residual addition and the
    norm in one kernel. Where the sum is read elsewhere too (pre-norm: it is the next residual), the fused node
    returns it as its fourth output under the same name. Where one side of the sum is a projection plus its bias
    (a constant vector) read nowhere else, the bias becomes the kernel's fifth input and its ``Add`` goes: on CUDA
    that is one broadcast kernel less per projection, since onnxruntime's Gemm copies its bias into the output
    before the product. Returns how many were fused."""
    from onnx import helper

    graph = model.graph
    producer = {name: node for node in graph.node for name in node.output}
    constants = {t.name: t for t in graph.initializer}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    outputs = {o.name for o in graph.output}
    shapes = _inferred_shapes(model)
    fused, dropped = 0, set()  # dropped: the Adds now inside the kernels (residual sums, projection biases)
    for index, node in enumerate(list(graph.node)):
        if node.op_type != "LayerNormalization" or node.domain not in ("", "ai.onnx") or len(node.output) != 1:
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), -1)
        add = producer.get(node.input[0])
        if axis != -1 or add is None or add.op_type != "Add" or len(node.input) < 3:
            continue
        if any(name in constants or producer.get(name) is None for name in add.input):
            continue  # a bias or a graph input: not a residual of two activations
        if not _same_shape(shapes.get(add.input[0]), shapes.get(add.input[1])):
            continue
        epsilon = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
        sum_elsewhere = readers.get(add.output[0], 0) > 1 or add.output[0] in outputs
        terms: list[str] = list(add.input)
        bias: list[str] = []
        for side, term in enumerate(terms):  # a projection's bias, added inside the kernel rather than before it
            biased = producer.get(term)
            if bias or biased is None or biased.op_type != "Add" or readers.get(term) != 1 or term in outputs:
                continue
            found = [i for i, name in enumerate(biased.input) if _is_vector(constants.get(name), shapes.get(term))]
            if len(found) == 1 and producer.get(biased.input[1 - found[0]]) is not None:
                terms[side], bias = biased.input[1 - found[0]], [biased.input[found[0]]]
                dropped.add(term)
        skip = helper.make_node(
            "SkipLayerNormalization",
            [*terms, node.input[1], node.input[2], *bias],
            [node.output[0], "", "", add.output[0] if sum_elsewhere else ""],
            name=f"skip_{node.name or index}",
            domain="com.microsoft",
            epsilon=epsilon,
        )
        position = list(graph.node).index(node)
        graph.node.insert(position, skip)
        graph.node.remove(node)
        dropped.add(add.output[0])
        fused += 1
    for node in list(graph.node):
        if node.op_type == "Add" and node.output[0] in dropped:
            graph.node.remove(node)
    if fused and not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return fused


def _is_vector(constant: onnx.TensorProto | None, shape: list[int | None] | None) -> bool:
    """Whether ``constant`` is a float vector as long as the last axis of ``shape``: a bias that kernel adds."""
    return (
        constant is not None
        and constant.data_type == 1  # float
        and len(constant.dims) == 1
        and shape is not None
        and len(shape) > 0
        and shape[-1] == constant.dims[0]
    )


def _same_shape(sa: list[int | None] | None, sb: list[int | None] | None) -> bool:
    """Whether two inferred shapes have the same rank, the same known last axis and no dimension known to differ."""
    if sa is None or sb is None or len(sa) != len(sb) or len(sa) < 2:
        return False
    return all(x == y or x is None or y is None for x, y in zip(sa, sb, strict=True)) and sa[-1] is not None


def _inferred_shapes(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    shapes: dict[str, list[int | None]] = {}
    for info in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
        dims = info.type.tensor_type.shape.dim
        if info.type.tensor_type.HasField("shape"):
            shapes[info.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return shapes
