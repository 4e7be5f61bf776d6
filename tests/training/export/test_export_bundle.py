"""Export: the bundle's layout and manifest, the graphs' contract, and ONNX Runtime vs PyTorch parity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from core.bundle import FORMAT_VERSION, read_manifest
from core.graphs import GRAPHS, cache_names, graph_spec, memory_names
from core.tokenizer import Tokenizer
from training.checkpoint import load_model
from training.data import read_pairs
from training.export import ExportError, export_bundle
from training.export.parity import check_parity, compare, random_sources


def _sessions(bundle: Path) -> tuple[ort.InferenceSession, ort.InferenceSession]:
    return (
        ort.InferenceSession(str(bundle / "encoder.onnx"), providers=["CPUExecutionProvider"]),
        ort.InferenceSession(str(bundle / "decoder.onnx"), providers=["CPUExecutionProvider"]),
    )


def test_bundle_holds_verified_manifest_graphs_and_vocabulary(tiny_bundle: Path) -> None:
    manifest = read_manifest(tiny_bundle)  # verifies every sha256
    assert manifest["format_version"] == FORMAT_VERSION
    assert set(manifest["files"]) >= {f"{role}.onnx" for role in GRAPHS} | {"vocab.json"}
    arch = manifest["architecture"]
    assert arch["d_head"] * arch["n_heads"] == arch["d_model"]
    assert len(Tokenizer(tiny_bundle)) == arch["vocab_size"]
    assert manifest["export"]["dtype"] == "fp32" and manifest["export"]["quantize"] == "none"
    assert manifest["export"]["parity"]["random"]["max_abs_diff"] < 1e-4
    for role in GRAPHS:
        onnx.checker.check_model(str(tiny_bundle / manifest["graphs"][role]["file"]), full_check=True)


def test_graph_contract_and_dynamic_axes(tiny_bundle: Path) -> None:
    graphs = read_manifest(tiny_bundle)["graphs"]
    arch = read_manifest(tiny_bundle)["architecture"]
    layers, heads, d_head = arch["decoder_layers"], arch["n_heads"], arch["d_head"]
    enc, dec = graphs["encoder"], graphs["decoder"]
    assert enc["inputs"]["src_ids"] == {"dtype": "int64", "shape": ["batch", "src_len"]}
    assert enc["outputs"]["src_mask"] == {"dtype": "bool", "shape": ["batch", "src_len"]}
    for i in range(layers):
        for kv in ("k", "v"):
            assert enc["outputs"][f"cross_{kv}_{i}"]["shape"] == ["batch", heads, "src_len", d_head]
            assert dec["inputs"][f"cross_{kv}_{i}"]["shape"] == ["batch", heads, "src_len", d_head]
            assert dec["inputs"][f"past_{kv}_{i}"]["shape"] == ["past_rows", heads, "step", d_head]
            assert dec["outputs"][f"present_{kv}_{i}"]["shape"] == ["rows", heads, "step_plus_1", d_head]
    assert f"past_k_{layers}" not in dec["inputs"] and "past_k" not in dec["inputs"] and "cross_k" not in dec["inputs"]
    assert dec["inputs"]["k"] == {"dtype": "int64", "shape": [1]}
    assert dec["inputs"]["positions"] == {"dtype": "int64", "shape": ["batch"]}
    for role in GRAPHS:  # what the export wrote is the contract core/graphs.py states, in its order
        spec = graph_spec(role, layers, heads, d_head)
        assert list(graphs[role]["inputs"]) == spec.input_names, role
        assert list(graphs[role]["outputs"]) == spec.output_names, role
    assert dec["inputs"]["reorder"]["shape"] == ["rows"]
    assert dec["outputs"]["topk_logprobs"] == {"dtype": "float32", "shape": ["batch", "hyps", "k"]}
    assert dec["outputs"]["topk_ids"]["dtype"] == "int64"
    assert dec["outputs"]["attention"]["shape"] == ["batch", "hyps", "src_len"]

    # Run once with shapes unlike the tracing example: batch 1, hyps 5 from 1 row, src_len 9, step 0.
    encoder, decoder = _sessions(tiny_bundle)
    mask, *cross = encoder.run(None, {"src_ids": np.array([[5] * 8 + [3]], dtype=np.int64)})
    past = np.zeros((1, heads, 0, d_head), dtype=np.float32)
    lp, ids, attn, *cache = decoder.run(
        None,
        {
            "tokens": np.full((1, 5), 2, dtype=np.int64),
            "positions": np.zeros(1, dtype=np.int64),
            **{name: past for name in cache_names("past", layers)},
            "reorder": np.zeros(5, dtype=np.int64),
            "src_mask": mask,
            **dict(zip(cache_names("cross", layers), cross, strict=True)),
            "k": np.array([7], dtype=np.int64),
        },
    )
    assert lp.shape == ids.shape == (1, 5, 7) and lp.dtype == np.float32
    assert len(cache) == 2 * layers and all(c.shape == (5, heads, 1, d_head) for c in cache)
    assert attn.shape == (1, 5, 9)
    assert np.all(np.diff(lp, axis=-1) <= 0)  # sorted, best first
    assert np.all(np.exp(lp).sum(-1) <= 1.0 + 1e-5)


def test_onnx_matches_pytorch_on_random_and_real_inputs(
    tiny_checkpoint: Path, tiny_bundle: Path, synthetic_corpus: tuple[Path, Path]
) -> None:
    model, _, _ = load_model(tiny_checkpoint)
    encoder, decoder = _sessions(tiny_bundle)
    tokenizer = Tokenizer(tiny_bundle)
    pairs = read_pairs(synthetic_corpus[1])[:12]
    reports = {
        "random": compare(model, encoder, decoder, random_sources(model, n=5, seed=3), hyps=4, steps=7),
        "real": compare(
            model,
            encoder,
            decoder,
            [tokenizer.encode_source(s) for s, _ in pairs],
            [tokenizer.encode_target(t) for _, t in pairs],
        ),
    }
    for kind, report in reports.items():
        assert report.logprobs < 1e-4, (kind, report)
        assert report.logprobs_tail < 1e-4, (kind, report)
        assert report.cache < 1e-4, (kind, report)
        assert report.cross_kv < 1e-4, (kind, report)
        assert report.attention < 1e-5, (kind, report)
        assert report.top1_agreement == 1.0, (kind, report)


def test_parity_gate_fails_the_export_above_tolerance(tiny_checkpoint: Path, tiny_bundle: Path) -> None:
    model, _, _ = load_model(tiny_checkpoint)
    with pytest.raises(ExportError, match="parity check failed on random inputs"):
        check_parity(model, tiny_bundle, Tokenizer(tiny_bundle), None, -1, "fp32", tolerance=1e-12)


def test_int8_export_via_cli_records_scores_and_translates(
    tiny_checkpoint: Path, synthetic_corpus: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.translation import DecodeOptions
    from inference.engine import Engine
    from training.cli import main

    cwd = tmp_path / "cwd"  # onnxruntime's quantizer may drop scratch files into the working directory
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    out = cwd / "int8"
    code = main(
        [
            "export",
            str(tiny_checkpoint),
            "int8",  # relative to the working directory, as users type it
            "--quantize",
            "int8",
            "--name",
            "tiny-int8",
            "--tolerance",
            "10",  # int8 on a d64 model is far from fp32 (log-probs off by up to ~3, docs/bundle.md)
            "--scores",
            '{"bleu": 12.5}',
            "--test-file",
            str(synthetic_corpus[1]),
        ]
    )
    assert code == 0
    left = sorted(p.name for p in cwd.iterdir())
    assert left == ["int8"], f"the export left files in the working directory: {left}"
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["export"]["quantize"] == "int8" and manifest["scores"] == {"bleu": 12.5}
    assert manifest["export"]["parity"]["real"]["top1_agreement"] > 0.8
    ops = {node.op_type for node in onnx.load(str(out / "decoder.onnx")).graph.node}
    assert "DynamicQuantizeLinear" in ops
    engine = Engine.load(out, provider="cpu", threads=1)
    [translation] = engine.translate(["red blue green"], DecodeOptions(beam_size=2))
    assert translation.best.token_ids and translation.best.text


def test_fp16_export_keeps_norms_and_softmax_in_fp32(tiny_checkpoint: Path, tmp_path: Path) -> None:
    manifest = export_bundle(tiny_checkpoint, tmp_path / "fp16", dtype="fp16")
    dec = manifest["graphs"]["decoder"]
    assert dec["inputs"]["past_k_0"]["dtype"] == "float16"
    assert dec["outputs"]["topk_logprobs"]["dtype"] == "float32"
    graph = onnx.shape_inference.infer_shapes(onnx.load(str(tmp_path / "fp16" / "decoder.onnx"))).graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.value_info, *graph.input]}
    for node in graph.node:
        if node.op_type in ("LayerNormalization", "Softmax", "LogSoftmax"):
            assert types.get(node.input[0]) == onnx.TensorProto.FLOAT, node.name
    parity = manifest["export"]["parity"]
    if "skipped" not in parity:  # onnxruntime's CPU provider may lack fp16 kernels
        assert parity["random"]["max_abs_diff"] < 0.1


def test_export_refuses_bad_options_and_targets(tiny_checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="exclude each other"):
        export_bundle(tiny_checkpoint, tmp_path / "a", dtype="fp16", quantize="int8")
    with pytest.raises(ExportError, match="attention_layer=7"):
        export_bundle(tiny_checkpoint, tmp_path / "b", attention_layer=7)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ExportError, match="not a bundle; refusing"):
        export_bundle(tiny_checkpoint, tmp_path / "c")


def test_int8_channel_export_has_one_weight_scale_per_output_column(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from onnx import numpy_helper

    scales = {}
    for quantize in ("int8", "int8-channel"):
        manifest = export_bundle(tiny_checkpoint, tmp_path / quantize, quantize=quantize, tolerance=10.0)
        assert manifest["export"]["quantize"] == quantize
        graph = onnx.load(str(tmp_path / quantize / "decoder.onnx")).graph
        inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        quantized = [n.input[1] for n in graph.node if n.op_type == "MatMulInteger"]
        assert quantized  # the weight's scale multiplies MatMulInteger's output further down
        scales[quantize] = (inits[quantized[0]].shape, inits[quantized[0].removesuffix("_quantized") + "_scale"].shape)
    (rows, cols), per_tensor = scales["int8"]
    assert per_tensor in ((), (1,))
    assert scales["int8-channel"] == ((rows, cols), (cols,))


def test_int8_channel_with_fp32_logits_keeps_only_the_output_projection_in_float(
    tiny_checkpoint: Path, tmp_path: Path
) -> None:
    """``int8-channel-fp32-logits``: every weight product of the decoder is quantized but the one after the last
    LayerNormalization (the logits over the vocabulary); the encoder is quantized as with int8-channel."""
    counts = {}
    for quantize in ("int8-channel", "int8-channel-fp32-logits"):
        export_bundle(tiny_checkpoint, tmp_path / quantize, quantize=quantize, tolerance=10.0)
        for role in ("encoder", "decoder"):
            graph = onnx.load(str(tmp_path / quantize / f"{role}.onnx")).graph
            norm = [n.output[0] for n in graph.node if n.op_type == "LayerNormalization"][-1]
            after_norm = [n.op_type for n in graph.node if norm in n.input]
            counts[quantize, role] = (sum(n.op_type == "MatMulInteger" for n in graph.node), after_norm)
    full, kept = counts["int8-channel", "decoder"], counts["int8-channel-fp32-logits", "decoder"]
    assert kept[0] == full[0] - 1 and "MatMul" in kept[1] and "MatMul" not in full[1]
    assert counts["int8-channel", "encoder"] == counts["int8-channel-fp32-logits", "encoder"]


def test_state_graphs_select_merge_and_trim(tiny_bundle: Path) -> None:
    """select keeps sentences, merge pads to the longer source (masked) and stacks, trim cuts the source axis
    and drops the first cache columns: checked against numpy on the real graphs."""
    arch = read_manifest(tiny_bundle)["architecture"]
    layers, heads, d_head = arch["decoder_layers"], arch["n_heads"], arch["d_head"]
    encoder, _ = _sessions(tiny_bundle)
    names = memory_names(layers)
    session = {
        r: ort.InferenceSession(str(tiny_bundle / f"{r}.onnx"), providers=["CPUExecutionProvider"]) for r in GRAPHS
    }
    old = encoder.run(None, {"src_ids": np.array([[5, 6, 3, 0], [5, 6, 7, 3]], dtype=np.int64)})
    new = encoder.run(None, {"src_ids": np.array([[7, 8, 9, 10, 11, 3]], dtype=np.int64)})
    merged = session["merge"].run(
        None, {**dict(zip(names, old, strict=True)), **{"new_" + n: v for n, v in zip(names, new, strict=True)}}
    )
    assert merged[0].tolist() == [[False] * 3 + [True] * 3, [False] * 4 + [True] * 2, [False] * 6]
    for before, after, added in zip(old[1:], merged[1:], new[1:], strict=True):
        assert after.shape == (3, heads, 6, d_head)
        np.testing.assert_array_equal(after[:2, :, :4], before)
        np.testing.assert_array_equal(after[:2, :, 4:], 0.0)
        np.testing.assert_array_equal(after[2:], added)
    kept = session["select"].run(None, {**dict(zip(names, merged, strict=True)), "keep": np.array([1, 0])})
    for before, after in zip(merged, kept, strict=True):
        np.testing.assert_array_equal(after, before[[1, 0]])
    past = [np.random.default_rng(i).normal(size=(6, heads, 5, d_head)).astype(np.float32) for i in range(2 * layers)]
    trimmed = session["trim"].run(
        None,
        {
            **dict(zip(names, kept, strict=True)),
            **dict(zip(cache_names("past", layers), past, strict=True)),
            "start": np.array(3),
            "src_len": np.array(4),
        },
    )
    assert trimmed[0].tolist() == [[False] * 4, [False] * 3 + [True]]
    for before, after in zip(kept[1:], trimmed[1 : len(names)], strict=True):
        np.testing.assert_array_equal(after, before[:, :, :4])
    for before, after in zip(past, trimmed[len(names) :], strict=True):
        np.testing.assert_array_equal(after, before[:, :, 3:])
