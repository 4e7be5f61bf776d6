"""Fused attention (``export --attention fused`` / ``--gpu-attention fused``, training/fused.py): onnxruntime's
MultiHeadAttention and SkipLayerNormalization kernels in place of a dozen plain nodes per attention.

What decodes with them is checked token for token against the PyTorch reference in
tests/inference/test_engine_vs_reference.py (the ``fused`` and ``fused-static`` engines); here: the graphs hold
the kernels and fewer nodes, they compute what the plain graphs compute for pre-norm and post-norm models, their
PyTorch side computes what the model's ``attend`` computes, and a fused bundle imports back to its weights."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from core.bundle import read_manifest
from training import checkpoint
from training.config import ModelConfig
from training.export.import_bundle import import_bundle
from training.export.trace import trace_graphs
from training.fused import MASKED, CachedSelfAttention, KeyMaskedAttention
from training.incremental import decoder_example, encoder_example, spec, static_example
from training.model import Transformer


def _optimized_ops(path: Path, tmp_path: Path) -> collections.Counter[str]:
    """The node types onnxruntime runs for the graph at ``path`` after its own optimizations."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / f"{path.parent.name}-{path.name}")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(options.optimized_model_filepath, load_external_data=False)
    return collections.Counter(n.op_type for n in optimized.graph.node)


def test_fused_graphs_hold_the_kernels_and_fewer_nodes(
    tiny_bundle: Path, tiny_fused_bundle: Path, tmp_path: Path
) -> None:
    manifest = read_manifest(tiny_fused_bundle)
    assert manifest["export"]["attention"] == "fused" and manifest["variants"]["cuda"]["attention"] == "fused"
    assert read_manifest(tiny_bundle)["export"]["attention"] == "plain"
    layers = manifest["architecture"]
    expected_attention = {
        "encoder": layers["encoder_layers"],
        "decoder": 2 * layers["decoder_layers"],
        "cuda/static_decoder": 2 * layers["decoder_layers"],
    }
    for role, attentions in expected_attention.items():
        fused = _optimized_ops(tiny_fused_bundle / f"{role}.onnx", tmp_path)
        assert fused["MultiHeadAttention"] == attentions, role
        assert fused["SkipLayerNormalization"] >= attentions, role  # every residual but the first one's
        assert fused["Softmax"] <= 1, role  # only the attention weights the decoder reports
        if "/" not in role:
            plain = _optimized_ops(tiny_bundle / f"{role}.onnx", tmp_path)
            assert plain["MultiHeadAttention"] == 0 and plain["SkipLayerNormalization"] == 0
            assert sum(fused.values()) < 0.85 * sum(plain.values()), (role, fused, plain)


def _run(path: Path, names: list[str], inputs: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    shapes = {i.name: i.shape for i in session.get_inputs()}  # k: the traced scalar, the graph's 1-element vector
    feeds = {
        name: t.numpy().reshape([int(d) for d in shapes[name]]) if name == "k" else t.numpy()
        for name, t in zip(names, inputs, strict=True)
    }
    return session.run(None, feeds)


@pytest.mark.parametrize("pre_norm", [True, False])
def test_fused_graphs_compute_what_the_plain_ones_compute(pre_norm: bool, tmp_path: Path) -> None:
    """Random weights, pre-norm (the sum of each fused residual is read again) and post-norm (it is not);
    every output of the encoder, the decoder step and the static step, at sentences of different positions."""
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=50, d_model=32, n_heads=4, d_ff=64, encoder_layers=2, decoder_layers=2, pre_norm=pre_norm
    )
    model = Transformer(config).eval()
    for kind in ("plain", "fused"):
        (tmp_path / kind).mkdir()
        with torch.no_grad():
            trace_graphs(model, tmp_path / kind, 17, -1, static=True, attention=kind)
    examples = {
        "encoder": encoder_example(model, batch=3, src_len=6),
        "decoder": decoder_example(model, batch=3, hyps=2, src_len=5, step=4),
        "static_decoder": static_example(model, batch=3, hyps=2, src_len=5, step=6),
    }
    for role, example in examples.items():
        names = spec(role, model).input_names
        plain = _run(tmp_path / "plain" / f"{role}.onnx", names, example)
        fused = _run(tmp_path / "fused" / f"{role}.onnx", names, example)
        for name, a, b in zip(spec(role, model).output_names, plain, fused, strict=True):
            if a.dtype.kind == "f":
                np.testing.assert_allclose(b, a, atol=2e-5, rtol=1e-4, err_msg=f"{role}.{name}")
            else:
                np.testing.assert_array_equal(b, a, err_msg=f"{role}.{name}")
    for role in examples:  # every residual block's norm is fused, none is lost
        fused_ops = collections.Counter(
            n.op_type for n in onnx.load(str(tmp_path / "fused" / f"{role}.onnx")).graph.node
        )
        plain_ops = collections.Counter(
            n.op_type for n in onnx.load(str(tmp_path / "plain" / f"{role}.onnx")).graph.node
        )
        norms = fused_ops["LayerNormalization"] + fused_ops["SkipLayerNormalization"]
        assert norms == plain_ops["LayerNormalization"], role
        blocks = (2 if role == "encoder" else 3) * (
            config.encoder_layers if role == "encoder" else config.decoder_layers
        )
        assert fused_ops["SkipLayerNormalization"] >= blocks - 1, (role, fused_ops)
        # The projections' biases are added inside the kernels: every block's output projection in its norm, the
        # self-attentions' query/key/value biases in the attention (the cross-attention's keys come projected).
        graph = onnx.load(str(tmp_path / "fused" / f"{role}.onnx")).graph
        nodes, constants = graph.node, {t.name for t in graph.initializer}
        producer = {name: n.op_type for n in nodes for name in n.output}
        biases = {n.output[0] for n in nodes if n.op_type == "Add" and any(name in constants for name in n.input)}
        for norm in (n for n in nodes if n.op_type == "SkipLayerNormalization"):
            after_product = any(producer.get(name) == "MatMul" for name in norm.input[:2])
            assert after_product == (len(norm.input) == 5), (role, norm.name)
            assert not biases & set(norm.input[:2]), (role, norm.name)  # no bias added before the kernel
        biased_norms = [n for n in nodes if n.op_type == "SkipLayerNormalization" and len(n.input) == 5]
        assert len(biased_norms) >= blocks - 1, (role, len(biased_norms))
        self_attentions = config.encoder_layers if role == "encoder" else config.decoder_layers
        biased = [n for n in nodes if n.op_type == "MultiHeadAttention" and len(n.input) > 3 and n.input[3]]
        assert len(biased) == self_attentions, role


def test_the_pytorch_side_computes_what_the_model_attends() -> None:
    """The functions' own arithmetic (what eager decoding and the export's parity check run) against
    ``MultiHeadAttention.attend`` with its boolean masks."""
    torch.manual_seed(1)
    config = ModelConfig(vocab_size=50, d_model=32, n_heads=4, d_ff=64, encoder_layers=1, decoder_layers=1)
    attn = Transformer(config).eval().decoder_layers[0].cross_attn
    heads, d_head = config.n_heads, config.d_model // config.n_heads

    def split(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.size(0), x.size(1), heads, d_head).transpose(1, 2)

    def merge(x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2).reshape(x.size(0), x.size(2), -1)

    query, memory = torch.randn(3, 2, config.d_model), torch.randn(3, 7, config.d_model)
    keep = torch.ones(3, 7, dtype=torch.int32)
    keep[0, 4:], keep[2, 6:] = 0, 0
    key, value = split(memory), split(memory * 0.5)
    expected, weights = attn.attend(split(query), key, value, (keep == 0)[:, None, None, :])
    for k, v in ((key, value), (merge(key), merge(value))):  # split into heads, or (B, S, d_model)
        out, scores = KeyMaskedAttention.apply(query, k, v, None, keep, heads)
        torch.testing.assert_close(out, merge(expected))
        torch.testing.assert_close(scores.softmax(dim=-1), weights)
        assert (scores[0, :, :, 4:] == MASKED).all()

    rows, cached = 4, 5
    new = [torch.randn(rows, 1, config.d_model) for _ in range(3)]
    past_k, past_v = torch.randn(rows, heads, cached, d_head), torch.randn(rows, heads, cached, d_head)
    own = torch.ones(rows, cached + 1, dtype=torch.int32)
    own[1, :3], own[3, :5] = 0, 0  # rows that started later own only the last columns
    out, keys, values = CachedSelfAttention.apply(*new, None, own, past_k, past_v, heads)
    expected_keys = torch.cat([past_k, split(new[1])], dim=2)
    expected_values = torch.cat([past_v, split(new[2])], dim=2)
    torch.testing.assert_close(keys, expected_keys)
    torch.testing.assert_close(values, expected_values)
    expected, _ = attn.attend(split(new[0]), expected_keys, expected_values, (own == 0)[:, None, None, :])
    torch.testing.assert_close(out, merge(expected))


def test_a_fused_bundle_imports_back_to_its_weights(
    tiny_checkpoint: Path, tiny_fused_bundle: Path, tmp_path: Path
) -> None:
    summary = import_bundle(tiny_fused_bundle, tmp_path / "imported.pt")
    assert summary["weights"] == "fp32" and summary["parity"]
    original, _, _ = checkpoint.load_model(tiny_checkpoint)
    imported, _, _ = checkpoint.load_model(tmp_path / "imported.pt")
    for (name, a), (_, b) in zip(original.named_parameters(), imported.named_parameters(), strict=True):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=0, msg=name)


def test_fused_graphs_quantize_to_int8_and_decode_like_plain_int8(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """int8 quantization (export --quantize) of fused graphs: onnxruntime's quantizer cannot infer the types
    after the com.microsoft nodes, so it is told they are float; the int8 fused bundle passes its parity check and
    its beams are the plain int8 bundle's."""
    from core.translation import DecodeOptions
    from inference.engine import Engine
    from testkit.synthetic import make_pairs
    from training.export import export_bundle

    engines = {}
    for kind in ("plain", "fused"):
        export_bundle(tiny_checkpoint, tmp_path / kind, attention=kind, quantize="int8-channel", tolerance=3.0)
        engines[kind] = Engine.load(tmp_path / kind, provider="cpu", threads=1)
    assert _optimized_ops(tmp_path / "fused" / "decoder.onnx", tmp_path)["MultiHeadAttention"] == 4
    texts = [source for source, _ in make_pairs(24, seed=3, min_len=2, max_len=7)]
    options = DecodeOptions(beam_size=4)
    plain, fused = (engines[k].translate(texts, options) for k in ("plain", "fused"))
    same = sum(a.best.token_ids == b.best.token_ids for a, b in zip(plain, fused, strict=True))
    assert same >= len(texts) - 1, f"{len(texts) - same} of {len(texts)} differ"
