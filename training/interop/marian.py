"""Marian / OPUS-MT interop: Hugging Face ``MarianMTModel`` directories to our checkpoints and back.

``python -m training import-marian DIR OUT.pt`` reads config.json, model.safetensors (or
pytorch_model.bin), source.spm, target.spm and vocab.json without needing ``transformers``;
``python -m training export-marian CKPT DIR`` writes such a directory, which ``MarianMTModel`` /
``MarianTokenizer`` load and ``ct2-transformers-converter`` converts. Every difference between the two
conventions, and what each direction does about it, is in docs/interop.md; weight names and the two exact
relabellings (hidden channels, token ids) are in training/interop/marian_weights.py.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from core.tokenizer import Specials, write_vocab
from training.checkpoint import load_model, load_tokenizer, read_vocab_files, save
from training.config import Config, ModelConfig
from training.interop.marian_weights import (
    concat_permutation,
    name_pairs,
    permute_residual,
    read_weights,
    swap_ids,
    write_weights,
)
from training.model import Transformer, sinusoidal_table

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
GENERATION_FILE = "generation_config.json"
TOKENIZER_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
VOCAB_FILE = "vocab.json"  # Marian's: {piece: id}; ours (core/tokenizer.py) has the same name
SOURCE_SPM = "source.spm"
TARGET_SPM = "target.spm"
# Our key in config.json: how export relabelled the model, so that import can undo it exactly.
MARKER = "transformer_mt"
# MarianConfig's defaults (transformers 5): what a key missing from config.json means to transformers.
HF_DEFAULTS: dict[str, Any] = {
    "vocab_size": 58101,
    "max_position_embeddings": 1024,
    "encoder_layers": 12,
    "encoder_ffn_dim": 4096,
    "encoder_attention_heads": 16,
    "decoder_layers": 12,
    "decoder_ffn_dim": 4096,
    "decoder_attention_heads": 16,
    "activation_function": "gelu",
    "d_model": 1024,
    "dropout": 0.1,
    "attention_dropout": 0.0,
    "decoder_start_token_id": 58100,
    "scale_embedding": False,
    "pad_token_id": 58100,
    "eos_token_id": 0,
    "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True,
}
ACTIVATIONS = {"swish": "swish", "silu": "swish", "gelu": "gelu", "relu": "relu"}  # transformers -> ours
# Keys of older (BART-derived) Marian configs that transformers ignores: the values its model hard-codes.
IGNORED_BY_TRANSFORMERS = {
    "normalize_before": False,
    "normalize_embedding": False,
    "add_final_layer_norm": False,
    "static_position_embeddings": True,
}
POSITIONS_TOLERANCE = 1e-3  # float32 sinusoids vs transformers' float64-then-float32 ones
EMBEDDINGS = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")


class MarianError(ValueError):
    """The directory or checkpoint cannot be converted as asked; the message names the file or option."""


# ----------------------------------------------------------------------------------------------- import


def import_marian(directory: str | Path, out: str | Path) -> dict[str, Any]:
    """Convert a Hugging Face MarianMTModel directory into our checkpoint ``out``; returns a summary."""
    src = Path(directory)
    if not src.is_dir():
        raise MarianError(f"{src} is not a directory: pass a Hugging Face MarianMTModel directory")
    hf = _read_json(src / CONFIG_FILE, required=True)
    generation = _read_json(src / GENERATION_FILE, required=False)
    tokenizer_config = _read_json(src / TOKENIZER_FILE, required=False)
    if hf.get("model_type") != "marian":
        raise MarianError(f"{src / CONFIG_FILE}: model_type={hf.get('model_type')!r}, expected 'marian'")
    if tokenizer_config.get("separate_vocabs") or (src / "target_vocab.json").exists():
        raise MarianError(
            f"{src}: separate_vocabs (target_vocab.json) means two id tables; our models share one vocab.json"
        )
    for name in (SOURCE_SPM, TARGET_SPM, VOCAB_FILE):
        if not (src / name).is_file():
            raise MarianError(
                f"{src / name} is missing: a Marian directory needs {SOURCE_SPM}, {TARGET_SPM}, {VOCAB_FILE}"
            )
    marian_vocab = _read_json(src / VOCAB_FILE, required=True)
    marker: dict[str, Any] = hf.get(MARKER) or {}

    cfg = _model_config(hf, generation, src)
    pieces = _pieces(marian_vocab, cfg.vocab_size, src / VOCAB_FILE)
    cfg.unk_id = _special_id(marian_vocab, tokenizer_config, "unk_token", "<unk>", src)
    for key, default, expected in (("pad_token", "<pad>", cfg.pad_id), ("eos_token", "</s>", cfg.eos_id)):
        name = _token_name(tokenizer_config.get(key, default))
        if name in marian_vocab and marian_vocab[name] != expected:
            raise MarianError(
                f"{src}: {key} {name!r} has id {marian_vocab[name]} in {VOCAB_FILE} but config.json says "
                f"{expected}; the tokenizer and the model disagree"
            )
    params = _params_from_marian(read_weights(src), cfg, hf, src)
    cfg.final_logits_bias = "final_logits_bias" in params and (
        bool(params["final_logits_bias"].any()) or marker.get("final_logits_bias", True)
    )
    if not cfg.final_logits_bias:
        params.pop("final_logits_bias", None)
    cfg.positional_layout = "concat"

    # Undo what export-marian did to one of our models (nothing for a native Marian directory).
    swapped = marker.get("swapped_ids")
    if swapped:
        a, b = int(swapped[0]), int(swapped[1])
        params = swap_ids(params, a, b)
        pieces[a], pieces[b] = pieces[b], pieces[a]
        for field in ("pad_id", "unk_id", "bos_id", "eos_id"):
            value = getattr(cfg, field)
            setattr(cfg, field, b if value == a else a if value == b else value)
    if marker.get("positional_layout", "concat") == "interleaved":
        params = permute_residual(params, torch.argsort(concat_permutation(cfg.d_model)))
        cfg.positional_layout = "interleaved"

    model = Transformer(cfg)
    _load_params(model, params)
    with tempfile.TemporaryDirectory(prefix="marian-vocab-") as tmp:
        for name in (SOURCE_SPM, TARGET_SPM):
            shutil.copyfile(src / name, Path(tmp) / name)
        specials = Specials(cfg.pad_id, cfg.unk_id, cfg.bos_id, cfg.eos_id)
        write_vocab(tmp, pieces, specials, source_spm=SOURCE_SPM, target_spm=TARGET_SPM)
        vocab_files = read_vocab_files(tmp)  # validates: both spm models load, vocab.json parses
    save(out, {"config": Config(model=cfg).to_dict(), "model": model.state_dict(), "vocab_files": vocab_files})
    summary = {
        "checkpoint": str(out),
        "source": str(src),
        "source_language": tokenizer_config.get("source_lang"),
        "target_language": tokenizer_config.get("target_lang"),
        "model": {k: v for k, v in vars(cfg).items() if k not in ("dropout", "attention_dropout")},
    }
    log.info("imported %s into %s", src, out)
    return summary


def _read_json(path: Path, required: bool) -> dict[str, Any]:
    if not path.is_file():
        if required:
            raise MarianError(f"{path} is missing: a Hugging Face MarianMTModel directory needs it")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise MarianError(f"{path} is not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise MarianError(f"{path} must hold a JSON object, not {type(data).__name__}")
    return data


def _model_config(hf: dict[str, Any], generation: dict[str, Any], src: Path) -> ModelConfig:
    """ModelConfig for the directory's config.json (keys absent there mean MarianConfig's defaults)."""

    def get(key: str) -> Any:
        return hf.get(key, HF_DEFAULTS.get(key))

    where = src / CONFIG_FILE
    for key, value in IGNORED_BY_TRANSFORMERS.items():
        if key in hf and bool(hf[key]) != value:
            raise MarianError(
                f"{where}: {key}={hf[key]!r} is not supported: transformers' MarianMTModel ignores it and always "
                f"computes {key}={value}, so this directory contradicts itself about what its weights expect"
            )
    for ours, theirs in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        if get(ours) != get(theirs):
            raise MarianError(f"{where}: {ours}={get(ours)} != {theirs}={get(theirs)}; our layers share one value")
    vocab_size = get("vocab_size")
    if hf.get("decoder_vocab_size") not in (None, vocab_size):
        raise MarianError(
            f"{where}: decoder_vocab_size={hf['decoder_vocab_size']} != vocab_size={vocab_size}; "
            "separate target vocabularies are not supported"
        )
    activation = get("activation_function")
    if activation not in ACTIVATIONS:
        raise MarianError(f"{where}: activation_function={activation!r} is not supported; use {sorted(ACTIVATIONS)}")
    d_model = get("d_model")
    if d_model % 2:
        raise MarianError(f"{where}: d_model={d_model} is odd; sinusoidal positions need an even d_model")
    eos = get("eos_token_id")
    if isinstance(eos, list):
        if len(set(eos)) != 1:
            raise MarianError(f"{where}: eos_token_id={eos}: our decoder stops on one end-of-sentence id")
        eos = eos[0]
    start = generation.get("decoder_start_token_id")
    start = get("decoder_start_token_id") if start is None else start
    return ModelConfig(
        vocab_size=vocab_size,
        d_model=d_model,
        n_heads=get("encoder_attention_heads"),
        d_ff=get("encoder_ffn_dim"),
        encoder_layers=get("encoder_layers"),
        decoder_layers=get("decoder_layers"),
        dropout=float(get("dropout")),
        attention_dropout=float(get("attention_dropout")),
        activation=ACTIVATIONS[activation],
        pre_norm=False,
        max_positions=get("max_position_embeddings"),
        positional_layout="concat",
        tie_embeddings=bool(get("tie_word_embeddings")),
        scale_embeddings=bool(get("scale_embedding")),
        final_logits_bias=True,
        pad_id=get("pad_token_id"),
        unk_id=0,  # set from vocab.json by the caller
        bos_id=start,
        eos_id=eos,
    )


def _pieces(vocab: dict[str, Any], size: int, path: Path) -> list[str]:
    """Marian's {piece: id} as our list ordered by id; the ids must be exactly 0..size-1."""
    pieces: list[str | None] = [None] * size
    for piece, index in vocab.items():
        if not isinstance(index, int) or not 0 <= index < size:
            raise MarianError(f"{path}: {piece!r} has id {index!r}, outside 0..{size - 1} (config.json vocab_size)")
        if pieces[index] is not None:
            raise MarianError(f"{path}: id {index} is given to both {pieces[index]!r} and {piece!r}")
        pieces[index] = piece
    missing = [i for i, p in enumerate(pieces) if p is None]
    if missing:
        raise MarianError(f"{path}: {len(missing)} ids have no piece (first: {missing[:5]}); vocab_size={size}")
    return [p for p in pieces if p is not None]


def _token_name(value: Any) -> str:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken dict."""
    return str(value["content"]) if isinstance(value, dict) else str(value)


def _special_id(vocab: dict[str, Any], tokenizer_config: dict[str, Any], key: str, default: str, src: Path) -> int:
    name = _token_name(tokenizer_config.get(key, default))
    if name not in vocab:
        raise MarianError(f"{src / VOCAB_FILE} has no entry for the {key} {name!r}")
    return int(vocab[name])


def _params_from_marian(
    weights: dict[str, Tensor], cfg: ModelConfig, hf: dict[str, Any], src: Path
) -> dict[str, Tensor]:
    """Our parameter names -> tensors, still in Marian's conventions (concat layout, the directory's ids)."""
    if not any(k.startswith("model.") for k in weights):  # saved from MarianModel: no "model." prefix
        weights = {k if k in ("lm_head.weight", "final_logits_bias") else f"model.{k}": v for k, v in weights.items()}
    used = {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight", *EMBEDDINGS}
    # What each side reads: its own tensor where the file has one (transformers 5 ties nothing when
    # tie_word_embeddings=false), else the shared one (the only one transformers 5 writes when tied).
    shared = weights.get(EMBEDDINGS[0])
    encoder, decoder = (weights.get(k, shared) for k in EMBEDDINGS[1:])
    if encoder is None or decoder is None:
        raise MarianError(f"{src}: the weights hold none of {list(EMBEDDINGS)}")
    if not torch.equal(encoder, decoder):
        raise MarianError(
            f"{src}: the encoder and decoder embeddings differ (share_encoder_decoder_embeddings="
            f"{hf.get('share_encoder_decoder_embeddings', True)}, tie_word_embeddings={cfg.tie_embeddings}); our model "
            "has one embedding matrix for both sides (and one vocab.json), so it cannot hold this model"
        )
    params = {"embed_tokens.weight": decoder}
    head = weights.get("lm_head.weight")
    used.add("lm_head.weight")
    if head is not None and not (cfg.tie_embeddings and torch.equal(head, decoder)):
        params["output_proj.weight"] = head  # transformers 5 keeps a differing lm_head even when told to tie
        cfg.tie_embeddings = False
    elif not cfg.tie_embeddings:
        raise MarianError(f"{src}: tie_word_embeddings=false but the weights hold no lm_head.weight")
    for ours, theirs in name_pairs(cfg):
        if theirs not in weights:
            if theirs == "final_logits_bias":
                continue  # transformers then starts from zeros; so do we (no bias)
            raise MarianError(f"{src}: the weights lack {theirs!r}, needed for our {ours!r}")
        params[ours] = weights[theirs].reshape(-1) if theirs == "final_logits_bias" else weights[theirs]
        used.add(theirs)
    unknown = sorted(set(weights) - used)
    if unknown:
        raise MarianError(
            f"{src}: the weights hold tensors this importer does not map, e.g. {unknown[:4]} "
            f"({len(unknown)} in all): an architecture variant (layernorm_embedding, pre-norm, ...) it does not support"
        )
    for key in ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"):
        if key in weights:
            table = weights[key].float()
            expected = sinusoidal_table(table.size(0), table.size(1), "concat")
            if table.shape != expected.shape or (table - expected).abs().max() > POSITIONS_TOLERANCE:
                raise MarianError(f"{src}: {key} is not Marian's sinusoid table (learned positions?); not supported")
    return {k: v.float() for k, v in params.items()}


def _load_params(model: Transformer, params: dict[str, Tensor]) -> None:
    own = dict(model.named_parameters())
    missing, unexpected = sorted(set(own) - set(params)), sorted(set(params) - set(own))
    if missing or unexpected:
        raise MarianError(f"internal mapping error: missing {missing[:4]}, unexpected {unexpected[:4]}")
    with torch.no_grad():
        for name, tensor in params.items():
            if own[name].shape != tensor.shape:
                raise MarianError(
                    f"tensor for {name} has shape {tuple(tensor.shape)}, expected {tuple(own[name].shape)}"
                )
            own[name].copy_(tensor)


# ----------------------------------------------------------------------------------------------- export


def export_marian(
    checkpoint: str | Path,
    out_dir: str | Path,
    *,
    source_language: str | None = None,
    target_language: str | None = None,
    weights_format: str = "safetensors",
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write ``checkpoint`` as a Hugging Face MarianMTModel directory; returns its config.json."""
    if weights_format not in ("safetensors", "bin"):
        raise MarianError(f"weights_format={weights_format!r}: use safetensors or bin")
    out = Path(out_dir)
    _check_target(out, overwrite)
    model, config, vocab_files = load_model(checkpoint)
    cfg = config.model
    if cfg.pre_norm:
        raise MarianError(
            f"{checkpoint}: model.pre_norm=true cannot be exported: transformers' MarianMTModel is post-LN only "
            "(no normalize_before, no final encoder/decoder LayerNorm)"
        )
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    params.setdefault("final_logits_bias", torch.zeros(cfg.vocab_size))
    if cfg.positional_layout == "interleaved":  # exact: see training/interop/marian_weights.py
        params = permute_residual(params, concat_permutation(cfg.d_model))

    with tempfile.TemporaryDirectory(prefix="marian-vocab-") as tmp:
        tokenizer = load_tokenizer(vocab_files, tmp)
        spm_files = {
            SOURCE_SPM: (Path(tmp) / tokenizer.source_spm_file).read_bytes(),
            TARGET_SPM: (Path(tmp) / tokenizer.target_spm_file).read_bytes(),
        }
    pieces = list(tokenizer.pieces)
    if len(pieces) != cfg.vocab_size or len(set(pieces)) != len(pieces):
        raise MarianError(f"{checkpoint}: vocab.json must hold {cfg.vocab_size} distinct pieces, has {len(pieces)}")
    # Marian puts padding last (CTranslate2's converter drops the last row as padding): swap ours there.
    last = cfg.vocab_size - 1
    swapped = [cfg.pad_id, last] if cfg.pad_id != last else None
    if swapped:
        params = swap_ids(params, cfg.pad_id, last)
        pieces[cfg.pad_id], pieces[last] = pieces[last], pieces[cfg.pad_id]

    def new_id(i: int) -> int:
        return last if i == cfg.pad_id else cfg.pad_id if i == last else i

    pad, unk, bos, eos = (new_id(i) for i in (cfg.pad_id, cfg.unk_id, cfg.bos_id, cfg.eos_id))
    tensors = {"model.shared.weight": params["embed_tokens.weight"]}
    tensors["final_logits_bias"] = params["final_logits_bias"][None, :]
    if not cfg.tie_embeddings:
        # transformers 5 ties nothing when tie_word_embeddings=false: each side needs its own copy
        tensors["model.encoder.embed_tokens.weight"] = params["embed_tokens.weight"]
        tensors["model.decoder.embed_tokens.weight"] = params["embed_tokens.weight"]
        tensors["lm_head.weight"] = params["output_proj.weight"]
    for ours, theirs in name_pairs(cfg):
        tensors.setdefault(theirs, params[ours])

    hf = {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "vocab_size": cfg.vocab_size,
        "decoder_vocab_size": cfg.vocab_size,
        "max_position_embeddings": cfg.max_positions,
        "d_model": cfg.d_model,
        "encoder_layers": cfg.encoder_layers,
        "decoder_layers": cfg.decoder_layers,
        "encoder_attention_heads": cfg.n_heads,
        "decoder_attention_heads": cfg.n_heads,
        "encoder_ffn_dim": cfg.d_ff,
        "decoder_ffn_dim": cfg.d_ff,
        "activation_function": cfg.activation,
        "dropout": cfg.dropout,
        "attention_dropout": cfg.attention_dropout,
        "activation_dropout": cfg.dropout,  # ours applies model.dropout after the activation
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
        "scale_embedding": cfg.scale_embeddings,
        "share_encoder_decoder_embeddings": True,
        "tie_word_embeddings": cfg.tie_embeddings,
        "pad_token_id": pad,
        "eos_token_id": eos,
        "decoder_start_token_id": bos,
        "bos_token_id": None,
        "forced_eos_token_id": None,  # MarianConfig's default (0) would force an id at max_length
        "is_encoder_decoder": True,
        "use_cache": True,
        "dtype": "float32",
        MARKER: {
            "positional_layout": cfg.positional_layout,
            "swapped_ids": swapped,
            "final_logits_bias": cfg.final_logits_bias,
        },
    }
    banned = [[pad]] + ([[bos]] if bos != pad else [])  # our search never generates padding or BOS
    generation = {
        "decoder_start_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "bad_words_ids": banned,
        "max_length": cfg.max_positions,
        "num_beams": 4,
    }
    tokenizer_config: dict[str, Any] = {
        "tokenizer_class": "MarianTokenizer",
        "source_lang": source_language,
        "target_lang": target_language,
        "unk_token": pieces[unk],
        "eos_token": pieces[eos],
        "pad_token": pieces[pad],
        "additional_special_tokens": [pieces[bos]] if bos != pad else [],
        "model_max_length": cfg.max_positions,
        "separate_vocabs": False,
        "sp_model_kwargs": {},
    }
    special_tokens = {k: tokenizer_config[k] for k in ("unk_token", "eos_token", "pad_token")}

    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        for name, data in (
            (CONFIG_FILE, hf),
            (GENERATION_FILE, generation),
            (TOKENIZER_FILE, tokenizer_config),
            (SPECIAL_TOKENS_FILE, special_tokens),
            (VOCAB_FILE, {piece: i for i, piece in enumerate(pieces)}),
        ):
            (work / name).write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        for name, blob in spm_files.items():
            (work / name).write_bytes(blob)
        write_weights(work, tensors, weights_format)
        if out.exists():
            shutil.rmtree(out)
        os.replace(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("exported %s to %s", checkpoint, out)
    return hf


def _check_target(out: Path, overwrite: bool) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise MarianError(f"{out} exists and is not a directory; choose another DIR")
    if any(out.iterdir()):
        if not (out / CONFIG_FILE).is_file():
            raise MarianError(f"{out} is a non-empty directory without {CONFIG_FILE}; refusing to replace it")
        if not overwrite:
            raise MarianError(f"{out} already holds a model directory; pass --overwrite to replace it")
