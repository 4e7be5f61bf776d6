"""``python -m training export``, ``import-bundle``, ``graft``, ``shortlist``, ``lean-step`` and ``place-graph``:
their arguments, and handlers that load the export machinery (torch, onnx, onnxruntime) only when they run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from training.export.common import (
    ATTENTION_KINDS,
    CALIBRATION_SENTENCES,
    DEFAULT_OPSET,
    DTYPES,
    GPU_DTYPES,
    QUANTIZATIONS,
    STATIC_ATTENTION,
    TOLERANCES,
    ExportError,
)


def scores_arg(value: str | None) -> dict[str, Any]:
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
    from training.export.bundle import export_bundle

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
        static_step=args.static_step,
        masked_step=args.masked_step,
        attention=args.attention,
        gpu_attention=args.gpu_attention,
        static_attention=args.static_attention,
        scores=scores_arg(args.scores),
        calibration=args.calibration,
        calibration_sentences=args.calibration_sentences,
        test_file=args.test_file,
        tolerance=args.tolerance,
        truecase=args.truecase,
        overwrite=args.overwrite,
    )
    summary = {
        "bundle": str(args.out_dir),
        "name": manifest["name"],
        "version": manifest["version"],
        "files": {name: entry["bytes"] for name, entry in manifest["files"].items()},
        "parity": manifest["export"]["parity"],
        **({"calibration": manifest["export"]["calibration"]} if "calibration" in manifest["export"] else {}),
    }
    print(json.dumps(summary, indent=2))
    return 0


def register(subparsers: Any) -> None:
    """Add ``export`` and ``import-bundle`` to ``python -m training``."""
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
        "column instead of one per matrix; int8-static: per-column weight scales and input scales calibrated on "
        "real sentences, so that a sentence translates the same alone and batched; *-fp32-logits: the output "
        "projection stays fp32; measured in docs/bundle.md)",
    )
    p.add_argument(
        "--calibration",
        metavar="FILE",
        help="int8-static: source sentences to calibrate on, a TSV (first column) or one a line (default: the "
        "training file recorded in the checkpoint)",
    )
    p.add_argument(
        "--calibration-sentences",
        type=int,
        default=CALIBRATION_SENTENCES,
        help="int8-static: how many sentences of --calibration to translate (drawn at random, seeded)",
    )
    p.add_argument(
        "--gpu-dtype",
        choices=("none", *GPU_DTYPES),
        default="none",
        help="also write a second set of graphs in this dtype under cuda/, which the engine loads on the CUDA "
        "provider (the main graphs stay for the CPU; e.g. --quantize int8-channel --gpu-dtype fp16w). fp16w: "
        "fp32 arithmetic, weights stored as fp16 (the size of fp16 graphs; faster than fp16 on an H100, "
        "docs/inference-core.md). Default: none",
    )
    p.add_argument(
        "--static-step",
        action="store_true",
        help="also write the static-shape decoder step and the place graph into the GPU set (with --gpu-dtype): "
        "what the engine's static_step mode runs, and replays as CUDA graphs on a GPU (docs/inference-core.md)",
    )
    p.add_argument(
        "--masked-step",
        action="store_true",
        help="also write the decoder step whose caches never move (each self-attention one onnxruntime "
        "DecoderMaskedMultiHeadAttention, the cache read through a beam index) into every set: what the engine's "
        "masked_step mode runs (docs/inference-core.md, 'The cache without moves')",
    )
    p.add_argument(
        "--attention",
        choices=ATTENTION_KINDS,
        default="plain",
        help="plain: attention and layer norms in standard ONNX operators; fused: each attention as one onnxruntime "
        "MultiHeadAttention kernel and each residual addition fused with its layer norm (SkipLayerNormalization), "
        "about a quarter fewer nodes a step, onnxruntime only. Not faster on a CPU (docs/inference-core.md). "
        "Default: plain",
    )
    p.add_argument(
        "--gpu-attention",
        choices=ATTENTION_KINDS,
        default="fused",
        help="the same for the GPU set (with --gpu-dtype), where fewer nodes mean fewer kernel launches a step: "
        "1.10x plain graphs at batch 1 on an H200 (docs/inference-core.md, session 36). Default: fused",
    )
    p.add_argument(
        "--static-attention",
        choices=STATIC_ATTENTION,
        default="multihead",
        help="the fused static step's self-attention (with --static-step): multihead, onnxruntime's MultiHeadAttention "
        "after the cache's gather; decoder-masked, its DecoderMaskedMultiHeadAttention, one kernel that writes the new "
        "column and attends; CPU only so far (CUDA's kernel keeps keys in a layout the step's cache moves do not "
        "follow yet: the engine refuses it there; docs/inference-core.md, session 45). Default: multihead",
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
    p.add_argument(
        "--truecase",
        metavar="FILE",
        help="the model's training text (a TSV, source first), to count each word's usual case in: the bundle's "
        "truecase.json, with which the engine reads a sentence typed in capitals (docs/casing.md). Default: the "
        "training file recorded in the checkpoint, when it is here; none: no table",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing bundle in OUT_DIR")
    p.set_defaults(func=_run)
    _register_import(subparsers)
    _register_graft(subparsers)
    _register_shortlist(subparsers)
    _register_lean(subparsers)
    _register_place(subparsers)


def _run_import(args: argparse.Namespace) -> int:
    from training.export.import_bundle import import_bundle

    print(json.dumps(import_bundle(args.bundle, args.out, check=not args.no_check, graphs=args.graphs), indent=2))
    return 0


def _register_import(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "import-bundle",
        help="turn a model bundle back into a checkpoint (to continue training it with train --set train.init=CKPT)",
        description="Read the weights out of a bundle's ONNX graphs (int8 bundles are dequantized, fp16 ones "
        "widened) and write a weights-only checkpoint with the bundle's vocabulary, checked against the bundle.",
    )
    p.add_argument("bundle", help="bundle directory (manifest.json, encoder.onnx, decoder.onnx, vocabulary)")
    p.add_argument("out", help="checkpoint file to write (.pt)")
    p.add_argument("--no-check", action="store_true", help="skip the parity check against the bundle")
    p.add_argument(
        "--graphs",
        default="main",
        help="the graph set to read: main (default) or a variant such as cuda, whose fp16 weights are closer to the "
        "float model than int8 main graphs (the shipped models: import with --graphs cuda to re-export their GPU set)",
    )
    p.set_defaults(func=_run_import)


def _run_graft(args: argparse.Namespace) -> int:
    from training.export.graft import graft

    variant = graft(args.source, args.target, args.set)
    print(json.dumps({"grafted": args.set, "into": args.target, "variant": variant}, indent=2))
    return 0


def _register_graft(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "graft",
        help="replace a bundle's graph set (cuda) with another bundle's, e.g. a shipped model's GPU set re-exported",
        description="Copy SOURCE's graph set into TARGET in place of TARGET's own, and rewrite TARGET's manifest "
        "(variants and checksums). Both must be the same model (architecture, special ids, vocabulary); TARGET's "
        "other graphs are not touched. How to re-export a shipped GPU set: docs/bundle.md.",
    )
    p.add_argument("source", help="bundle holding the new graph set (python -m training export ... --gpu-dtype)")
    p.add_argument("target", help="bundle to change in place")
    p.add_argument("--set", default="cuda", help="the graph set to replace (default: cuda)")
    p.set_defaults(func=_run_graft)


def _bundle_and_set(p: argparse.ArgumentParser) -> None:
    """The arguments of a command that changes one graph set of a bundle in place."""
    p.add_argument("bundle", help="bundle directory to change in place")
    p.add_argument("--set", default="cuda", help="the graph set: cuda (default), another variant, or main")


def _run_lean(args: argparse.Namespace) -> int:
    from core.graphs import LEAN_STEP, STATIC_LEAN
    from training.export.lean import add_lean_step

    entries = add_lean_step(args.bundle, args.set)
    keys = (("lean_step", LEAN_STEP), ("static_lean_step", STATIC_LEAN))
    written = {key: entries[role]["file"] for key, role in keys if role in entries}
    print(json.dumps({**written, "set": args.set, "outputs": sorted(entries[LEAN_STEP]["outputs"])}, indent=2))
    return 0


def _register_lean(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "lean-step",
        help="add the decoder steps without attention rows (decoder_lean, static_decoder_lean) to a bundle's GPU set "
        "exported before them",
        description="Write the graph set's decoder step without its attention output (the engine runs it for the "
        "steps no sentence asked attention rows for; it reads the set's weights file, so the bundle gains no "
        "weights), and its static step's the same way where the set has static steps, check each against the full "
        "step on random inputs, and rewrite the manifest. Exports write them into a GPU set with fused attention by "
        "themselves (docs/bundle.md).",
    )
    _bundle_and_set(p)
    p.set_defaults(func=_run_lean)


def _run_place(args: argparse.Namespace) -> int:
    from training.export.place import rewrite_place

    print(json.dumps(rewrite_place(args.bundle, args.set), indent=2))
    return 0


def _register_place(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "place-graph",
        help="rebuild a static bundle's place graph as today's export writes it (fast on CUDA)",
        description="Rebuild the graph set's place graph (it writes new sentences into a static running set's "
        "buffers) from the bundle's own encoder and architecture, as exports write it since session 42: its "
        "ScatterNDs index every position of every head, where older ones indexed slots only and onnxruntime's CUDA "
        "kernel copied a slot's values in one thread. Checks that it writes what the old graph wrote on random "
        "inputs, then replaces the file and its manifest entry (docs/bundle.md).",
    )
    _bundle_and_set(p)
    p.set_defaults(func=_run_place)


def _run_shortlist(args: argparse.Namespace) -> int:
    from training.export.shortlist import add_to_bundle

    added = add_to_bundle(
        Path(args.bundle),
        [Path(p) for p in args.data],
        args.per_piece,
        args.frequent,
        limit=args.limit,
        copy_source=not args.no_copy_source,
        reverse=args.reverse,
    )
    print(json.dumps({"bundle": args.bundle, "shortlist": added}, indent=2))
    return 0


def _register_shortlist(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "shortlist",
        help="add a vocabulary shortlist to a bundle (faster CPU decoding; the engine uses it when asked)",
        description="Learn which target pieces translate which source pieces (IBM Model 1 over parallel text, "
        "a few minutes for 400k pairs), and write into BUNDLE "
        "the table (shortlist.npz) and a decoder step that scores only a sentence's listed pieces "
        "(decoder_shortlist.onnx); the manifest records both. The engine uses them with Engine.load(shortlist=True) "
        "/ MT_SHORTLIST=1 on the CPU; `python -m bench shortlist` measures speed and BLEU with and without.",
    )
    p.add_argument("bundle", help="bundle to change in place (its main decoder must have float logits: int8cl, fp32)")
    p.add_argument("--data", nargs="+", required=True, help="parallel TSVs (source<TAB>target), e.g. the training data")
    p.add_argument("--per-piece", type=int, default=100, help="likeliest target pieces kept per source piece")
    p.add_argument("--frequent", type=int, default=600, help="most frequent target pieces every sentence may use")
    p.add_argument("--limit", type=int, default=0, help="read at most this many pairs (0: all)")
    p.add_argument(
        "--reverse", action="store_true", help="the TSVs are target<TAB>source (e.g. the en-de data for a de-en model)"
    )
    p.add_argument(
        "--no-copy-source",
        action="store_true",
        help="do not let a sentence produce its own source pieces unless the table lists them",
    )
    p.set_defaults(func=_run_shortlist)
