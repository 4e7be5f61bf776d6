"""``python -m training import-marian`` and ``export-marian``: their arguments; the conversion (torch) loads
when a command runs."""

from __future__ import annotations

import argparse
import json
from typing import Any


def _run_import(args: argparse.Namespace) -> int:
    from training.interop.marian import import_marian

    print(json.dumps(import_marian(args.directory, args.out), indent=2))
    return 0


def _run_export(args: argparse.Namespace) -> int:
    from training.interop.marian import export_marian

    export_marian(
        args.checkpoint,
        args.directory,
        source_language=args.source_lang,
        target_language=args.target_lang,
        weights_format=args.weights,
        overwrite=args.overwrite,
    )
    print(f"wrote {args.directory} (MarianMTModel: config.json, weights, source/target.spm, vocab.json)")
    return 0


def register(subparsers: Any) -> None:
    """Add ``import-marian`` and ``export-marian`` to ``python -m training``."""
    p = subparsers.add_parser(
        "import-marian",
        help="convert a Hugging Face Marian/OPUS-MT model directory into our checkpoint",
        description="Read config.json, model.safetensors or pytorch_model.bin, source.spm, target.spm and "
        "vocab.json (transformers is not needed) and write a checkpoint ready for `export`. The mapping of "
        "every option is in docs/interop.md.",
    )
    p.add_argument("directory", help="MarianMTModel directory (as written by save_pretrained)")
    p.add_argument("out", help="checkpoint file to write (.pt)")
    p.set_defaults(func=_run_import)

    p = subparsers.add_parser(
        "export-marian",
        help="write a checkpoint as a Hugging Face MarianMTModel directory",
        description="Write config.json, generation_config.json, tokenizer_config.json, vocab.json, "
        "source.spm, target.spm and the weights, loadable by transformers' MarianMTModel and "
        "MarianTokenizer and convertible with ct2-transformers-converter (see docs/interop.md).",
    )
    p.add_argument("checkpoint", help="checkpoint file (.pt)")
    p.add_argument("directory", help="directory to create")
    p.add_argument("--source-lang", help="source language code for tokenizer_config.json")
    p.add_argument("--target-lang", help="target language code for tokenizer_config.json")
    p.add_argument(
        "--weights",
        choices=["safetensors", "bin"],
        default="safetensors",
        help="model.safetensors (default; needs the safetensors package) or pytorch_model.bin",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing model directory")
    p.set_defaults(func=_run_export)
