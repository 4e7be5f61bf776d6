"""Checkpoint -> model bundle: encoder.onnx, decoder.onnx, vocabulary and manifest.json.

``python -m training export CKPT OUT_DIR``. The graphs are traced with PyTorch's TorchScript-based
exporter (``dynamo=False``): it keeps every axis dynamic and takes ``k`` of top-k as a tensor input. fp16
is a conversion of the fp32 graphs that leaves LayerNorm, softmax and the log-softmax/top-k head in fp32;
int8 is onnxruntime's dynamic quantization of the fp32 graphs' MatMuls. Before the bundle is written,
ONNX Runtime is compared with PyTorch on random and (with ``--test-file``) real inputs, and the export
fails when they differ by more than the tolerance. The bundle format is documented in docs/bundle.md.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import onnx
import torch

from core.bundle import GRAPH_FILES, MANIFEST_FILE, write_manifest
from core.casing import TRUECASE_FILE
from core.graphs import GRAPHS, MASKED_MOVE, MASKED_STEP, STATIC_EXTRAS, STATIC_GRAPHS
from core.tokenizer import Tokenizer
from training.checkpoint import load_model, write_vocab_files
from training.export import static_int8
from training.export.common import (
    ATTENTION_KINDS,
    CALIBRATION_SENTENCES,
    DEFAULT_OPSET,
    DTYPES,
    GPU_DTYPES,
    GPU_VARIANT,
    QUANTIZATIONS,
    STATIC_ATTENTION,
    TOLERANCES,
    ExportError,
)
from training.export.lean import add_lean_step
from training.export.parity import check_parity
from training.export.trace import pack_static_io, trace_graphs, write_graphs
from training.export.writer import check_target, tensor_specs
from training.export.writer import manifest as build_manifest
from training.model import Transformer
from training.truecase import build_table, source_lines, write_table

log = logging.getLogger(__name__)


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
    static_step: bool = False,
    pack_static_step: bool = True,
    masked_step: bool = False,
    attention: str = "plain",
    gpu_attention: str = "fused",
    static_attention: str = "multihead",
    scores: dict[str, Any] | None = None,
    calibration: str | Path | None = None,
    calibration_sentences: int = CALIBRATION_SENTENCES,
    test_file: str | Path | None = None,
    tolerance: float | None = None,
    truecase: str | Path | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write a bundle for ``checkpoint`` into ``out_dir`` and return its manifest.

    The bundle is assembled in a sibling temporary directory and moved into place only once the parity
    check has passed, so ``out_dir`` never holds half a bundle. ``static_step`` adds the static-shape graphs
    (static_decoder, place) to the GPU set, for the engine's ``static_step`` mode (docs/inference-core.md); its
    step inputs and top-k packed (core/graphs.py ``PACKED_STEP_IDS``) unless ``pack_static_step`` is off (the layout
    of exports before session 25, which the engine still serves). ``masked_step`` adds the decoder step whose caches
    never move (core/graphs.py ``MASKED_STEP``) to every set, for the engine's ``masked_step`` mode.
    ``attention`` / ``gpu_attention``: how the main graphs / the GPU set compute attention, ``plain`` ONNX
    operators or ``fused`` onnxruntime kernels (training/fused.py); ``static_attention``: the fused static step's
    self-attention as ``multihead`` (onnxruntime's MultiHeadAttention) or ``decoder-masked`` (its
    DecoderMaskedMultiHeadAttention: one kernel; training/incremental.py ``DecoderStep.static_masked``).
    ``int8-static`` quantizations calibrate on ``calibration_sentences`` sentences of ``calibration`` (a TSV or one
    sentence a line; default: the file the checkpoint was trained on), translated by the fp32 graphs
    (training/export/static_int8.py).
    """
    if masked_step and quantize.startswith("int8-static"):
        raise ExportError("--masked-step has no calibrated ranges for int8-static yet: use --quantize int8-channel")
    if static_step and gpu_dtype == "none":
        raise ExportError("--static-step adds graphs to the GPU set: name its dtype with --gpu-dtype too")
    if dtype not in DTYPES:
        raise ExportError(f"dtype={dtype!r}: use one of {', '.join(DTYPES)}")
    if quantize not in QUANTIZATIONS:
        raise ExportError(f"quantize={quantize!r}: use one of {', '.join(QUANTIZATIONS)}")
    if gpu_dtype not in ("none", *GPU_DTYPES):
        raise ExportError(f"gpu_dtype={gpu_dtype!r}: use none, {', '.join(GPU_DTYPES)}")
    if dtype == "fp16" and quantize != "none":
        raise ExportError("--dtype fp16 and --quantize int8 exclude each other: int8 quantizes fp32 graphs")
    for option, kind in (("--attention", attention), ("--gpu-attention", gpu_attention)):
        if kind not in ATTENTION_KINDS:
            raise ExportError(f"{option} {kind!r}: use one of {', '.join(ATTENTION_KINDS)}")
    if static_attention not in STATIC_ATTENTION:
        raise ExportError(f"--static-attention {static_attention!r}: use one of {', '.join(STATIC_ATTENTION)}")
    if static_attention != "multihead" and not (static_step and gpu_attention == "fused"):
        raise ExportError(f"--static-attention {static_attention} is the fused static step's: give --static-step too")
    if opset < DEFAULT_OPSET:
        raise ExportError(f"opset={opset}: the graphs need opset {DEFAULT_OPSET} or later (LayerNormalization)")
    out = Path(out_dir)
    check_target(out, overwrite)
    model, config, vocab_files = load_model(checkpoint)
    layers = config.model.decoder_layers
    if not -layers <= attention_layer < layers:
        raise ExportError(
            f"attention_layer={attention_layer}: the model has {layers} decoder layers (use -{layers}..{layers - 1})"
        )
    mode = "int8" if quantize.startswith("int8") else dtype
    sentences: list[str] = []
    if quantize.startswith("int8-static"):
        if not calibration:
            trained_on = config.data.train
            if not trained_on or not Path(trained_on).is_file():
                raise ExportError(
                    f"--quantize {quantize} calibrates on real sentences, by default those of the file the checkpoint "
                    f"was trained on ({trained_on or 'none recorded'}), which is not here: give them with "
                    "--calibration FILE"
                )
            calibration = trained_on
        sentences = static_int8.read_sentences(calibration, calibration_sentences)
    elif calibration:
        raise ExportError(f"--calibration is for --quantize int8-static*, not {quantize}")
    tolerance = TOLERANCES[mode] if tolerance is None else tolerance
    if truecase is None:  # the checkpoint's training text, when it is here
        trained_on = config.data.train
        truecase = trained_on if trained_on and Path(trained_on).is_file() else "none"
        if truecase == "none":
            log.info("no truecase table: the training file %s is not here (--truecase FILE adds one)", trained_on)
    elif str(truecase) != "none" and not Path(truecase).is_file():
        raise ExportError(f"--truecase {truecase}: no such file (the model's training text, or none)")

    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        started = time.perf_counter()
        fp32_dir = work / "fp32"
        fp32_dir.mkdir()
        trace_graphs(
            model, fp32_dir, opset, attention_layer, static=static_step, attention=attention, masked=masked_step
        )
        ranges = (
            calibrate(model, fp32_dir, vocab_files, work / "calibration", sentences, attention) if sentences else None
        )
        bundle = work / "bundle"
        write_graphs(model, fp32_dir, bundle, mode, quantize, ranges=ranges, masked=masked_step)
        if gpu_dtype != "none":  # traced again: its encoder keeps the padding (EncoderGraph.pack)
            gpu_fp32_dir = work / "fp32-gpu"
            gpu_fp32_dir.mkdir()
            trace_graphs(
                model,
                gpu_fp32_dir,
                opset,
                attention_layer,
                static=static_step,
                attention=gpu_attention,
                pack_encoder=False,
                masked=masked_step,
                static_masked=static_attention == "decoder-masked",
            )
            write_graphs(
                model, gpu_fp32_dir, bundle / GPU_VARIANT, gpu_dtype, "none", static=static_step, masked=masked_step
            )
            if static_step and pack_static_step:  # after the dtype conversion: the ids never pass through fp16
                pack_static_io(bundle / GPU_VARIANT / GRAPH_FILES["static_decoder"])
            shutil.rmtree(gpu_fp32_dir)
        shutil.rmtree(fp32_dir, ignore_errors=True)
        write_vocab_files(vocab_files, bundle)
        tokenizer = Tokenizer(bundle)
        if len(tokenizer) != config.model.vocab_size:
            raise ExportError(
                f"{checkpoint}: vocabulary has {len(tokenizer)} pieces but the model "
                f"{config.model.vocab_size} embeddings; the checkpoint is inconsistent"
            )
        parity = check_parity(model, bundle, tokenizer, test_file, attention_layer, mode, tolerance)
        table = build_table(source_lines(truecase)) if str(truecase) != "none" else {}
        if table:
            write_table(bundle, table)
        variants = {}
        if gpu_dtype != "none":
            gpu_parity = check_parity(
                model, bundle / GPU_VARIANT, tokenizer, test_file, attention_layer, gpu_dtype, TOLERANCES[gpu_dtype]
            )
            variants[GPU_VARIANT] = {
                "dtype": gpu_dtype,
                "attention": gpu_attention,
                **({"static_attention": static_attention} if static_attention != "multihead" else {}),
                "encoder": "padded",  # EncoderGraph.pack off: no NonZero, gathers or scatters on the GPU
                "provider": "CUDAExecutionProvider",
                "graphs": {
                    role: tensor_specs(bundle / GPU_VARIANT / GRAPH_FILES[role], bundle)
                    for role in (
                        *GRAPHS,
                        *(STATIC_GRAPHS + STATIC_EXTRAS if static_step else ()),
                        *((MASKED_STEP, MASKED_MOVE) if masked_step else ()),
                    )
                },
                "parity": gpu_parity,
            }
        manifest = build_manifest(
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
                "attention": attention,
                "attention_layer": attention_layer % layers,
                "exporter": f"torch.onnx TorchScript (torch {torch.__version__}, onnx {onnx.__version__})",
                "checkpoint": Path(checkpoint).name,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "parity": parity,
                **(
                    {"calibration": {"file": Path(calibration).name, "sentences": len(sentences)}}
                    if calibration
                    else {}
                ),
                **({"truecase": {"file": Path(truecase).name, "words": len(table)}} if table else {}),
            },
            scores or {},
        )
        if table:
            manifest["vocabulary"]["truecase"] = TRUECASE_FILE
        if masked_step:
            for role in (MASKED_STEP, MASKED_MOVE):
                manifest["graphs"][role] = tensor_specs(bundle / GRAPH_FILES[role])
        if variants:
            manifest["variants"] = variants
            if gpu_attention == "fused":  # the step without attention rows (training/export/lean.py)
                add_lean_step(bundle, GPU_VARIANT, manifest=manifest)
        write_manifest(bundle, manifest)
        if out.exists():
            shutil.rmtree(out)
        os.replace(bundle, out)
        log.info("exported %s to %s in %.1f s", checkpoint, out, time.perf_counter() - started)
        manifest["files"] = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))["files"]
        return manifest
    finally:
        shutil.rmtree(work, ignore_errors=True)


def calibrate(
    model: Transformer,
    fp32_dir: Path,
    vocab_files: dict[str, bytes],
    directory: Path,
    sentences: list[str],
    attention: str,
) -> dict[str, dict[str, tuple[float, float]]]:
    """The traced fp32 graphs assembled into a bundle of their own in ``directory`` (removed afterwards), whose
    engine translates ``sentences``: the ranges int8-static quantizes with."""
    write_graphs(model, fp32_dir, directory, "fp32", "none")
    write_vocab_files(vocab_files, directory)
    tokenizer = Tokenizer(directory)
    options = {"dtype": "fp32", "quantize": "none", "attention": attention}
    write_manifest(directory, build_manifest(model, tokenizer, directory, "calibration", "0", "en", "de", options, {}))
    try:
        return static_int8.calibrate(directory, sentences)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
