"""Checkpoint -> model bundle: encoder.onnx, decoder.onnx, vocabulary and manifest.json.

``python -m training export CKPT OUT_DIR``. The graphs are traced with PyTorch's TorchScript-based
exporter (``dynamo=False``): it keeps every axis dynamic and takes ``k`` of top-k as a tensor input. fp16
is a conversion of the fp32 graphs that leaves LayerNorm, softmax and the log-softmax/top-k head in fp32;
int8 is onnxruntime's dynamic quantization of the fp32 graphs' MatMuls. Before the bundle is written,
ONNX Runtime is compared with PyTorch on random and (with ``--test-file``) real inputs, and the export
fails when they differ by more than the tolerance. The bundle format is documented in docs/bundle.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import onnx
import onnxruntime as ort
import torch

from core.bundle import DECODER_FILE, ENCODER_FILE, GRAPH_FILES, MANIFEST_FILE, write_manifest
from core.graphs import GRAPHS
from core.tokenizer import Tokenizer
from training.checkpoint import load_model, write_vocab_files
from training.export_graphs import (
    DecoderStep,
    EncoderGraph,
    decoder_example,
    encoder_example,
    spec,
    state_graph,
)
from training.model import Transformer
from training.parity import ParityReport, compare, random_sources

log = logging.getLogger(__name__)

DEFAULT_OPSET = 17  # first opset with LayerNormalization; onnxruntime >= 1.14 runs it
DTYPES = ("fp32", "fp16")
QUANTIZATIONS = ("none", "int8", "int8-channel")
# Largest |ONNX - PyTorch| accepted at export, by what the graphs hold. fp32 differs only by the order of
# float operations; fp16 and int8 change the weights themselves (measured figures in docs/bundle.md).
TOLERANCES = {"fp32": 1e-3, "fp16": 0.1, "int8": 1.0}
FP32_OUTPUTS_OF_FP16 = ["topk_logprobs", "topk_ids", "attention", "src_mask"]
FP16_KEEP_FP32_OPS = ["LayerNormalization", "Softmax", "LogSoftmax", "TopK", "ReduceMean"]
REAL_PARITY_SENTENCES = 16
GPU_VARIANT = "cuda"
"""Where ``--gpu-dtype`` puts a second set of graphs, and its key in the manifest's ``variants``."""


class ExportError(ValueError):
    """The checkpoint cannot be exported as asked; the message names the value and the fix."""


def export_bundle(
    checkpoint: str | Path,
    out_dir: str | Path,
    *,
    name: str | None = None,
    version: str = "0.1.0",
    source_language: str = "en",
    target_language: str = "de",
    dtype: str = "fp32",
    quantize: str = "none",
    opset: int = DEFAULT_OPSET,
    attention_layer: int = -1,
    gpu_dtype: str = "none",
    scores: dict[str, Any] | None = None,
    test_file: str | Path | None = None,
    tolerance: float | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write a bundle for ``checkpoint`` into ``out_dir`` and return its manifest.

    The bundle is assembled in a sibling temporary directory and moved into place only once the parity
    check has passed, so ``out_dir`` never holds half a bundle.
    """
    if dtype not in DTYPES:
        raise ExportError(f"dtype={dtype!r}: use one of {', '.join(DTYPES)}")
    if quantize not in QUANTIZATIONS:
        raise ExportError(f"quantize={quantize!r}: use one of {', '.join(QUANTIZATIONS)}")
    if gpu_dtype not in ("none", *DTYPES):
        raise ExportError(f"gpu_dtype={gpu_dtype!r}: use none, {', '.join(DTYPES)}")
    if dtype == "fp16" and quantize != "none":
        raise ExportError("--dtype fp16 and --quantize int8 exclude each other: int8 quantizes fp32 graphs")
    if opset < DEFAULT_OPSET:
        raise ExportError(f"opset={opset}: the graphs need opset {DEFAULT_OPSET} or later (LayerNormalization)")
    out = Path(out_dir)
    _check_target(out, overwrite)
    model, config, vocab_files = load_model(checkpoint)
    layers = config.model.decoder_layers
    if not -layers <= attention_layer < layers:
        raise ExportError(
            f"attention_layer={attention_layer}: the model has {layers} decoder layers (use -{layers}..{layers - 1})"
        )
    mode = "int8" if quantize.startswith("int8") else dtype
    tolerance = TOLERANCES[mode] if tolerance is None else tolerance

    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        started = time.perf_counter()
        fp32_dir = work / "fp32"
        fp32_dir.mkdir()
        _export_graphs(model, fp32_dir, opset, attention_layer)
        bundle = work / "bundle"
        _write_graphs(model, fp32_dir, bundle, mode, quantize)
        if gpu_dtype != "none":
            _write_graphs(model, fp32_dir, bundle / GPU_VARIANT, gpu_dtype, "none")
        shutil.rmtree(fp32_dir)
        write_vocab_files(vocab_files, bundle)
        tokenizer = Tokenizer(bundle)
        if len(tokenizer) != config.model.vocab_size:
            raise ExportError(
                f"{checkpoint}: vocabulary has {len(tokenizer)} pieces but the model "
                f"{config.model.vocab_size} embeddings; the checkpoint is inconsistent"
            )
        parity = _parity(model, bundle, tokenizer, test_file, attention_layer, mode, tolerance)
        variants = {}
        if gpu_dtype != "none":
            gpu_parity = _parity(
                model, bundle / GPU_VARIANT, tokenizer, test_file, attention_layer, gpu_dtype, TOLERANCES[gpu_dtype]
            )
            variants[GPU_VARIANT] = {
                "dtype": gpu_dtype,
                "provider": "CUDAExecutionProvider",
                "graphs": {role: tensor_specs(bundle / GPU_VARIANT / GRAPH_FILES[role], bundle) for role in GRAPHS},
                "parity": gpu_parity,
            }
        manifest = _manifest(
            model,
            tokenizer,
            bundle,
            name or Path(checkpoint).stem,
            version,
            source_language,
            target_language,
            {
                "opset": opset,
                "dtype": dtype,
                "quantize": quantize,
                "attention_layer": attention_layer % layers,
                "exporter": f"torch.onnx TorchScript (torch {torch.__version__}, onnx {onnx.__version__})",
                "checkpoint": Path(checkpoint).name,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "parity": parity,
            },
            scores or {},
        )
        if variants:
            manifest["variants"] = variants
        write_manifest(bundle, manifest)
        if out.exists():
            shutil.rmtree(out)
        os.replace(bundle, out)
        log.info("exported %s to %s in %.1f s", checkpoint, out, time.perf_counter() - started)
        manifest["files"] = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))["files"]
        return manifest
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _write_graphs(model: Transformer, fp32_dir: Path, out: Path, mode: str, quantize: str) -> None:
    """The five graphs of a bundle in ``out``: encoder and decoder from the traced fp32 ones in ``fp32_dir``
    (converted to ``mode``: fp32, fp16 or int8), then the state graphs typed like the encoder's outputs."""
    out.mkdir(parents=True)
    for role_file in (ENCODER_FILE, DECODER_FILE):
        src, dst = fp32_dir / role_file, out / role_file
        if mode == "fp16":
            _to_fp16(src, dst)
        elif mode == "int8":
            _to_int8(src, dst, per_channel=quantize == "int8-channel")
        else:
            shutil.copyfile(src, dst)
        onnx.checker.check_model(str(dst), full_check=True)
    encoder_graph = onnx.load(str(out / ENCODER_FILE))
    for role in ("select", "merge", "trim"):
        onnx.save(state_graph(role, encoder_graph, model), str(out / GRAPH_FILES[role]))
        onnx.checker.check_model(str(out / GRAPH_FILES[role]), full_check=True)


def _check_target(out: Path, overwrite: bool) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory; choose another OUT_DIR")
    if any(out.iterdir()):
        if not (out / MANIFEST_FILE).is_file():
            raise ExportError(f"{out} is a non-empty directory that is not a bundle; refusing to replace it")
        if not overwrite:
            raise ExportError(f"{out} already holds a bundle; pass --overwrite to replace it")


def _export_graphs(model: Transformer, directory: Path, opset: int, attention_layer: int) -> None:
    encoder, decoder = spec("encoder", model), spec("decoder", model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer and deprecation warnings about the legacy exporter
        torch.onnx.export(
            EncoderGraph(model),
            encoder_example(model),
            str(directory / ENCODER_FILE),
            dynamo=False,
            input_names=encoder.input_names,
            output_names=encoder.output_names,
            dynamic_axes=encoder.dynamic_axes,
            opset_version=opset,
            do_constant_folding=True,
        )
        torch.onnx.export(
            DecoderStep(model, attention_layer),
            decoder_example(model),
            str(directory / DECODER_FILE),
            dynamo=False,
            input_names=decoder.input_names,
            output_names=decoder.output_names,
            dynamic_axes=decoder.dynamic_axes,
            opset_version=opset,
            do_constant_folding=True,
        )


def _to_fp16(src: Path, dst: Path) -> None:
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    graph = onnx.load(str(src))
    keep = [t.name for t in [*graph.graph.input, *graph.graph.output] if t.name in FP32_OUTPUTS_OF_FP16]
    half = convert_float_to_float16(graph, keep_io_types=keep, op_block_list=DEFAULT_OP_BLOCK_LIST + FP16_KEEP_FP32_OPS)
    _sort_nodes(half.graph)  # the converter appends its Cast nodes after their consumers
    onnx.save(half, str(dst))


def _sort_nodes(graph: onnx.GraphProto) -> None:
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


def _to_int8(src: Path, dst: Path, per_channel: bool = False) -> None:
    """Dynamic int8 quantization of the constant MatMul weights (measured choices in docs/bundle.md).

    ``per_channel``: one weight scale per output column instead of one per matrix, still 7-bit
    (reduce_range), so it stays exact on CPUs without VNNI.

    onnxruntime's quant_pre_process changed nothing here (its symbolic shape inference cannot follow the
    tensor ``k`` of TopK, and the rest left the parity figures identical), so it is not run.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # onnxruntime's symbolic shape inference, when it gives up on a graph, leaves sym_shape_infer_temp.onnx
    # and its external-data files in the working directory: keep them out of the user's. Paths are made
    # absolute before the chdir: a relative output path must mean the same directory after it.
    src, dst = src.resolve(), dst.resolve()
    with contextlib.chdir(src.parent):  # the fp32 scratch directory, deleted after the export
        quantize_dynamic(
            src,
            dst,
            weight_type=QuantType.QInt8,
            per_channel=per_channel,
            reduce_range=True,  # 7-bit weights: no saturation in AVX2's u8 x s8 products (no VNNI)
            op_types_to_quantize=["MatMul", "Gemm"],
            extra_options={"MatMulConstBOnly": True},
        )


def _parity_providers(mode: str) -> list[str]:
    """fp16 graphs are checked on the GPU when onnxruntime has a usable one (that is where they run);
    everything else on the CPU, the reference platform of the tolerances."""
    if mode == "fp16":
        from inference.engine import choose_providers

        return choose_providers("auto")
    return ["CPUExecutionProvider"]


def _sessions(bundle: Path, providers: list[str]) -> tuple[ort.InferenceSession, ort.InferenceSession]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return (
        ort.InferenceSession(str(bundle / ENCODER_FILE), options, providers=providers),
        ort.InferenceSession(str(bundle / DECODER_FILE), options, providers=providers),
    )


def _parity(
    model: Transformer,
    bundle: Path,
    tokenizer: Tokenizer,
    test_file: str | Path | None,
    attention_layer: int,
    mode: str,
    tolerance: float,
) -> dict[str, Any]:
    try:
        encoder, decoder = _sessions(bundle, _parity_providers(mode))
    except Exception as err:  # onnxruntime raises its own exception types
        if mode != "fp16":
            raise
        # The CPU provider lacks fp16 kernels for some ops; the check then needs a GPU machine.
        log.warning("parity check skipped: onnxruntime cannot run the fp16 graphs on CPU: %s", err)
        return {"skipped": f"onnxruntime CPU cannot run fp16 graphs: {str(err)[:200]}"}
    reports: dict[str, ParityReport] = {}
    try:
        reports["random"] = compare(model, encoder, decoder, random_sources(model), attention_layer=attention_layer)
        if test_file:
            sources, targets = _real_inputs(model, tokenizer, test_file)
            reports["real"] = compare(model, encoder, decoder, sources, targets, attention_layer=attention_layer)
    except Exception as err:
        if mode != "fp16" or "NOT_IMPLEMENTED" not in str(err):
            raise
        log.warning("parity check skipped: onnxruntime cannot run the fp16 graphs on CPU: %s", err)
        return {"skipped": f"onnxruntime CPU cannot run fp16 graphs: {str(err)[:200]}"}
    result: dict[str, Any] = {"tolerance": tolerance, "provider": decoder.get_providers()[0]}
    for kind, report in reports.items():
        result[kind] = report.to_dict()
        log.info(
            "parity (%s inputs): max |ONNX - PyTorch|: log-probs %.3g (any top-k: %.3g), attention %.3g, "
            "cache %.3g, cross K/V %.3g; top-1 agreement %.3f",
            kind,
            report.logprobs,
            report.logprobs_tail,
            report.attention,
            report.cache,
            report.cross_kv,
            report.top1_agreement,
        )
        if report.max_abs_diff > tolerance:
            raise ExportError(
                f"parity check failed on {kind} inputs: max |ONNX - PyTorch| of log-probs and attention = "
                f"{report.max_abs_diff:.3g} "
                f"> tolerance {tolerance:g} ({json.dumps(report.to_dict())}); the export is wrong or the "
                "tolerance too tight for this dtype (--tolerance)"
            )
    return result


def _real_inputs(
    model: Transformer, tokenizer: Tokenizer, test_file: str | Path
) -> tuple[list[list[int]], list[list[int]]]:
    from training.data import read_pairs

    pairs = read_pairs(test_file)[:REAL_PARITY_SENTENCES]
    if not pairs:
        raise ExportError(f"--test-file {test_file} holds no sentence pairs")
    limit = model.config.max_positions - 1
    sources = [tokenizer.encode_source(s)[:limit] for s, _ in pairs]
    targets = [tokenizer.encode_target(t)[:limit] for _, t in pairs]
    return sources, targets


def tensor_specs(path: Path, bundle: Path | None = None) -> dict[str, Any]:
    """Names, element types and shapes (symbolic axes by name) of a graph's inputs and outputs; ``file`` is
    the path relative to ``bundle`` (default: the graph's directory)."""
    graph = onnx.load(str(path), load_external_data=False).graph

    def spec(value: onnx.ValueInfoProto) -> dict[str, Any]:
        tensor = value.type.tensor_type
        dims = [d.dim_param or d.dim_value for d in tensor.shape.dim]
        return {"dtype": onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).name, "shape": dims}

    return {
        "file": path.relative_to(bundle or path.parent).as_posix(),
        "inputs": {v.name: spec(v) for v in graph.input},
        "outputs": {v.name: spec(v) for v in graph.output},
    }


def _manifest(
    model: Transformer,
    tokenizer: Tokenizer,
    bundle: Path,
    name: str,
    version: str,
    source_language: str,
    target_language: str,
    export_options: dict[str, Any],
    scores: dict[str, Any],
) -> dict[str, Any]:
    cfg = model.config
    specials = tokenizer.specials
    return {
        "name": name,
        "version": version,
        "source_language": source_language,
        "target_language": target_language,
        "architecture": {
            "type": "transformer-encoder-decoder",
            "encoder_layers": cfg.encoder_layers,
            "decoder_layers": cfg.decoder_layers,
            "d_model": cfg.d_model,
            "n_heads": cfg.n_heads,
            "d_head": cfg.d_model // cfg.n_heads,
            "d_ff": cfg.d_ff,
            "vocab_size": cfg.vocab_size,
            "max_positions": cfg.max_positions,
            "pre_norm": cfg.pre_norm,
            "activation": cfg.activation,
            "positional_layout": cfg.positional_layout,
            "tie_embeddings": cfg.tie_embeddings,
            "scale_embeddings": cfg.scale_embeddings,
            "final_logits_bias": cfg.final_logits_bias,
        },
        "special_ids": {
            "pad": specials.pad_id,
            "unk": specials.unk_id,
            "bos": specials.bos_id,
            "eos": specials.eos_id,
        },
        "vocabulary": {
            "vocab": "vocab.json",
            "source_spm": tokenizer.source_spm_file,
            "target_spm": tokenizer.target_spm_file,
        },
        "max_source_pieces": cfg.max_positions - 1,  # one position is the EOS appended to every source
        "graphs": {role: tensor_specs(bundle / GRAPH_FILES[role]) for role in GRAPHS},
        "export": export_options,
        "scores": scores,
    }


def _scores_arg(value: str | None) -> dict[str, Any]:
    if not value:
        return {}
    path = Path(value)
    try:
        text = path.read_text(encoding="utf-8") if path.is_file() else value
        scores = json.loads(text)
    except json.JSONDecodeError as err:
        raise ExportError(f"--scores {value!r} is neither a JSON file nor a JSON object: {err}") from err
    if not isinstance(scores, dict):
        raise ExportError(f"--scores must be a JSON object such as '{{\"bleu\": 27.1}}', got {value!r}")
    return scores


def _run(args: argparse.Namespace) -> int:
    manifest = export_bundle(
        args.checkpoint,
        args.out_dir,
        name=args.name,
        version=args.version,
        source_language=args.source_lang,
        target_language=args.target_lang,
        dtype=args.dtype,
        quantize=args.quantize,
        opset=args.opset,
        attention_layer=args.attention_layer,
        gpu_dtype=args.gpu_dtype,
        scores=_scores_arg(args.scores),
        test_file=args.test_file,
        tolerance=args.tolerance,
        overwrite=args.overwrite,
    )
    summary = {
        "bundle": str(args.out_dir),
        "name": manifest["name"],
        "version": manifest["version"],
        "files": {name: entry["bytes"] for name, entry in manifest["files"].items()},
        "parity": manifest["export"]["parity"],
    }
    print(json.dumps(summary, indent=2))
    return 0


def register(subparsers: Any) -> None:
    """Add ``export`` to ``python -m training``."""
    p = subparsers.add_parser(
        "export",
        help="export a checkpoint to a model bundle (ONNX graphs + vocabulary + manifest)",
        description="Trace the encoder and the one-step decoder to ONNX, check them against PyTorch "
        "(random inputs, and real ones with --test-file) and write OUT_DIR with manifest.json, "
        "encoder.onnx, decoder.onnx and the vocabulary. The format is described in docs/bundle.md.",
    )
    p.add_argument("checkpoint", help="checkpoint file (.pt), averaged or not")
    p.add_argument("out_dir", help="bundle directory to create")
    p.add_argument("--name", help="model name (default: the checkpoint's file name)")
    p.add_argument("--version", default="0.1.0", help="model version, reported by the server")
    p.add_argument("--source-lang", default="en", help="ISO 639-1 code of the source language (in the manifest)")
    p.add_argument("--target-lang", default="de", help="ISO 639-1 code of the target language (in the manifest)")
    p.add_argument(
        "--dtype", choices=DTYPES, default="fp32", help="fp16 halves the graphs for GPUs; LayerNorm/softmax stay fp32"
    )
    p.add_argument(
        "--quantize",
        choices=QUANTIZATIONS,
        default="none",
        help="int8: dynamic quantization of the MatMul weights, for CPUs (int8-channel: one scale per output "
        "column instead of one per matrix)",
    )
    p.add_argument(
        "--gpu-dtype",
        choices=("none", *DTYPES),
        default="none",
        help="also write a second set of graphs in this dtype under cuda/, which the engine loads on the CUDA "
        "provider (the main graphs stay for the CPU; e.g. --quantize int8-channel --gpu-dtype fp16). "
        "Default: none",
    )
    p.add_argument("--opset", type=int, default=DEFAULT_OPSET, help="ONNX opset of the graphs")
    p.add_argument(
        "--attention-layer",
        type=int,
        default=-1,
        help="decoder layer whose cross-attention the bundle reports (default: last)",
    )
    p.add_argument("--scores", help="evaluation scores to record: a JSON object or a JSON file")
    p.add_argument("--test-file", help="TSV of real sentence pairs for the parity check")
    p.add_argument(
        "--tolerance",
        type=float,
        help="largest accepted |ONNX - PyTorch| (default: "
        + ", ".join(f"{k} {v:g}" for k, v in TOLERANCES.items())
        + ")",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing bundle in OUT_DIR")
    p.set_defaults(func=_run)
