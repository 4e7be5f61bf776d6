"""The model as one onnxruntime ``BeamSearch`` operator (com.microsoft): the whole search inside one ``run``.

The issue "The inference core, re-cut for the GPU" asks to measure onnxruntime's own beam search against our
Python loop over the step graphs (``bench/ort_beam_search.py`` does). The operator drives two subgraphs in the
layout onnxruntime's T5 support expects (onnxruntime/contrib_ops/cpu/transformers/subgraph_t5_*.cc):

* encoder: ``encoder_input_ids``, ``encoder_attention_mask`` (int32, batch x beams rows) ->
  ``present_key_cross_0``, ``present_value_cross_0``, ... (our ``EncoderGraph``'s cross K/V);
* decoder: ``input_ids`` (int32, rows x 1), ``encoder_attention_mask``, ``past_key_self_i`` /
  ``past_value_self_i`` for every layer, then ``past_key_cross_i`` / ``past_value_cross_i`` -> ``logits``
  (rows x 1 x vocab), ``present_key_self_i`` / ``present_value_self_i``: our ``DecoderStep`` with every row at
  the position its cache length says, returning logits (PAD and BOS barred as in our search).

The operator has no attention output and no running set (it decodes a batch to its end), and it scores
hypotheses as Hugging Face does (its own early stopping), so it is a measurement here, not a serving path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
import torch
from onnx import TensorProto, helper
from torch import Tensor, nn

from training.export.trace import trace_module
from training.incremental import DecoderStep, EncoderGraph, decoder_layers
from training.model import Transformer


class _Encoder(nn.Module):
    def __init__(self, model: Transformer):
        super().__init__()
        self.encoder = EncoderGraph(model)

    def forward(self, encoder_input_ids: Tensor, encoder_attention_mask: Tensor) -> tuple[Tensor, ...]:
        pad = self.encoder.model.config.pad_id
        ids = torch.where(encoder_attention_mask.bool(), encoder_input_ids.long(), pad)  # the mask says what to read
        return self.encoder(ids)[1:]


class _Decoder(nn.Module):
    def __init__(self, model: Transformer):
        super().__init__()
        self.step = DecoderStep(model, logits=True)
        self.layers = len(decoder_layers(model))

    def forward(self, input_ids: Tensor, encoder_attention_mask: Tensor, *past: Tensor) -> tuple[Tensor, ...]:
        own, cross = past[: 2 * self.layers], past[2 * self.layers :]
        rows = input_ids.size(0)
        positions = torch.zeros(rows, dtype=torch.long) + own[0].size(2)
        reorder = torch.arange(rows)  # onnxruntime reorders the cache itself
        k = torch.tensor(1)
        return self.step(input_ids.long(), positions, reorder, k, encoder_attention_mask == 0, *cross, *own)


def _names(kind: str, prefix: str, layers: int) -> list[str]:
    return [f"{prefix}_{kv}_{kind}_{i}" for i in range(layers) for kv in ("key", "value")]


def _subgraph(
    module: nn.Module,
    example: tuple[Tensor, ...],
    inputs: list[str],
    outputs: list[str],
    axes: dict[str, dict[int, str]],
    opset: int,
    path: Path,
) -> onnx.GraphProto:
    trace_module(module, example, path, inputs, outputs, axes, opset)
    return onnx.load(str(path)).graph


def export_beam_search(model: Transformer, out: Path, opset: int = 17, no_repeat_ngram: int = 0) -> Path:
    """Write ``out`` (one .onnx file): a BeamSearch node over the model's encoder and decoder subgraphs.

    Inputs: ``input_ids`` int32 (batch, src_len) padded with PAD, source pieces + EOS; ``max_length``,
    ``min_length``, ``num_beams``, ``num_return_sequences`` int32 [1]; ``length_penalty``,
    ``repetition_penalty`` float [1]; ``attention_mask`` int32 (batch, src_len), 0 at padding. Output
    ``sequences`` int32 (batch, returned, max_length): BOS, the generated pieces, then EOS and PAD.
    """
    cfg = model.config
    model.eval()
    layers, heads, d_head = cfg.decoder_layers, cfg.n_heads, cfg.d_model // cfg.n_heads
    rows, src_len, steps = 3, 5, 2
    ids = torch.randint(4, cfg.vocab_size, (rows, src_len), dtype=torch.int32)
    ids[:, -1] = cfg.eos_id
    ids[0, -2:] = cfg.pad_id
    mask = (ids != cfg.pad_id).to(torch.int32)
    work = out.parent / f".{out.name}.parts"
    work.mkdir(parents=True, exist_ok=True)
    cross_out = _names("cross", "present", layers)
    enc_axes = {"encoder_input_ids": {0: "rows", 1: "src_len"}, "encoder_attention_mask": {0: "rows", 1: "src_len"}}
    enc_axes |= {n: {0: "rows", 2: "src_len"} for n in cross_out}
    with torch.no_grad():
        encoder = _subgraph(
            _Encoder(model),
            (ids, mask),
            ["encoder_input_ids", "encoder_attention_mask"],
            cross_out,
            enc_axes,
            opset,
            work / "encoder.onnx",
        )
        own_in, cross_in = _names("self", "past", layers), _names("cross", "past", layers)
        own_out = _names("self", "present", layers)
        past = [torch.randn(rows, heads, steps, d_head) for _ in own_in] + [
            torch.randn(rows, heads, src_len, d_head) for _ in cross_in
        ]
        dec_axes = {
            "input_ids": {0: "rows"},
            "encoder_attention_mask": {0: "rows", 1: "src_len"},
            "logits": {0: "rows"},
        }
        dec_axes |= {n: {0: "rows", 2: "steps"} for n in own_in}
        dec_axes |= {n: {0: "rows", 2: "src_len"} for n in cross_in}
        dec_axes |= {n: {0: "rows", 2: "steps_plus_1"} for n in own_out}
        decoder = _subgraph(
            _Decoder(model),
            (torch.randint(4, cfg.vocab_size, (rows, 1), dtype=torch.int32), mask, *past),
            ["input_ids", "encoder_attention_mask", *own_in, *cross_in],
            ["logits", *own_out],
            dec_axes,
            opset,
            work / "decoder.onnx",
        )
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "src_len"]),
        *(
            helper.make_tensor_value_info(n, TensorProto.INT32, [1])
            for n in ("max_length", "min_length", "num_beams", "num_return_sequences")
        ),
        *(helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("length_penalty", "repetition_penalty")),
    ]
    # The operator would mask only left padding on its own (Hugging Face's T5 convention); ours is on the right.
    inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "src_len"]))
    outputs = [
        helper.make_tensor_value_info("sequences", TensorProto.INT32, ["batch", "returned", "max_length"]),
        helper.make_tensor_value_info("sequences_scores", TensorProto.FLOAT, ["batch", "returned"]),
    ]
    node = helper.make_node(
        "BeamSearch",
        [*(i.name for i in inputs[:-1]), "", "", "attention_mask"],  # no vocab masks
        [o.name for o in outputs],
        domain="com.microsoft",
        eos_token_id=cfg.eos_id,
        pad_token_id=cfg.pad_id,
        decoder_start_token_id=cfg.bos_id,
        no_repeat_ngram_size=no_repeat_ngram,
        early_stopping=1,
        model_type=1,
        vocab_size=cfg.vocab_size,
        encoder=encoder,
        decoder=decoder,
    )
    graph = helper.make_graph([node], "beam_search", inputs, outputs)
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    )
    proto.ir_version = onnx.load(str(work / "decoder.onnx")).ir_version
    onnx.save(proto, str(out))
    for part in work.iterdir():
        part.unlink()
    work.rmdir()
    return out


def run_beam_search(
    session: Any, engine: Any, sources: list[list[int]], beam: int, max_length: int, with_scores: bool = False
) -> Any:
    """The best hypothesis of each source (ids without EOS) from a session of ``export_beam_search``'s model,
    ``max_length`` pieces at most (EOS included, as DecodeOptions.max_length), without BOS, EOS and padding;
    with ``with_scores`` also its score (the log-probability sum over the length counting the start token)."""
    import numpy as np

    ids = engine.source_batch([ids[: engine.max_source_pieces] for ids in sources]).astype(np.int32)  # as the engine
    feed = {
        "input_ids": ids,
        "attention_mask": (ids != engine.pad_id).astype(np.int32),
        "max_length": np.array([max_length + 1], np.int32),  # the operator counts the start token
        "min_length": np.array([1], np.int32),
        "num_beams": np.array([beam], np.int32),
        "num_return_sequences": np.array([1], np.int32),
        "length_penalty": np.array([1.0], np.float32),
        "repetition_penalty": np.array([1.0], np.float32),
    }
    sequences, scores = session.run(["sequences", "sequences_scores"], feed)
    out = []
    for row in sequences[:, 0, 1:].tolist():
        end = row.index(engine.eos_id) if engine.eos_id in row else len(row)
        out.append([t for t in row[:end] if t != engine.pad_id])
    return (out, scores[:, 0].tolist()) if with_scores else out
