"""What a bundle says about itself: the manifest and the tensor specs of its graphs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx

from core.bundle import GRAPH_FILES, MANIFEST_FILE
from core.graphs import GRAPHS
from core.tokenizer import Tokenizer
from training.export.common import ExportError
from training.model import Transformer


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


def manifest(
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


def check_target(out: Path, overwrite: bool) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory; choose another OUT_DIR")
    if any(out.iterdir()):
        if not (out / MANIFEST_FILE).is_file():
            raise ExportError(f"{out} is a non-empty directory that is not a bundle; refusing to replace it")
        if not overwrite:
            raise ExportError(f"{out} already holds a bundle; pass --overwrite to replace it")
