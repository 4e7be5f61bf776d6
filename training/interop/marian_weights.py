"""Weights of a Hugging Face ``MarianMTModel`` and ours: the name map, the two exact permutations, file I/O.

The layouts are the same architecture, so the map is a renaming (one spec, like CTranslate2's converters):

    ours                                        MarianMTModel
    embed_tokens.weight                         model.shared.weight (= encoder/decoder embed_tokens)
    {enc,dec}oder_layers.i.self_attn.X_proj     model.{enc,dec}oder.layers.i.self_attn.X_proj
    {enc,dec}oder_layers.i.self_attn_norm.norm  model.{enc,dec}oder.layers.i.self_attn_layer_norm
    decoder_layers.i.cross_attn.X_proj          model.decoder.layers.i.encoder_attn.X_proj
    decoder_layers.i.cross_attn_norm.norm       model.decoder.layers.i.encoder_attn_layer_norm
    {enc,dec}oder_layers.i.ffn.fc{1,2}          model.{enc,dec}oder.layers.i.fc{1,2}
    {enc,dec}oder_layers.i.ffn_norm.norm        model.{enc,dec}oder.layers.i.final_layer_norm
    output_proj.weight (untied only)            lm_head.weight
    final_logits_bias (V,)                      final_logits_bias (1, V)

Two relabellings change no output and are applied on export (and undone on import):

* ``residual_permutation``: Marian's sinusoids are all sines then all cosines; ours may interleave them.
  Permuting the d_model channels of the residual stream everywhere (embedding columns, inputs of every
  projection reading the stream, outputs of every projection writing it, LayerNorm gains and biases, which
  are permutation-equivariant) turns one layout into the other exactly.
* ``swap_ids``: a vocabulary permutation (rows of the embedding, output projection and logits bias).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor

from training.config import ModelConfig

SAFETENSORS_FILE = "model.safetensors"
TORCH_FILE = "pytorch_model.bin"
INDEX_SUFFIX = ".index.json"  # sharded checkpoints: model.safetensors.index.json, pytorch_model.bin.index.json

_ATTENTION = ("q_proj", "k_proj", "v_proj", "out_proj")


class WeightsError(ValueError):
    """A weights file is missing, unreadable or lacks a tensor the model needs."""


def name_pairs(config: ModelConfig) -> list[tuple[str, str]]:
    """(our parameter, Marian tensor) for every weight but the shared embedding and lm_head."""
    pairs = [("final_logits_bias", "final_logits_bias")] if config.final_logits_bias else []
    for side, count in (("encoder", config.encoder_layers), ("decoder", config.decoder_layers)):
        for i in range(count):
            ours, theirs = f"{side}_layers.{i}", f"model.{side}.layers.{i}"
            blocks = [("self_attn", "self_attn", "self_attn_norm.norm", "self_attn_layer_norm")]
            if side == "decoder":
                blocks.append(("cross_attn", "encoder_attn", "cross_attn_norm.norm", "encoder_attn_layer_norm"))
            for attn, their_attn, norm, their_norm in blocks:
                for proj in _ATTENTION:
                    for kind in ("weight", "bias"):
                        pairs.append((f"{ours}.{attn}.{proj}.{kind}", f"{theirs}.{their_attn}.{proj}.{kind}"))
                pairs += [(f"{ours}.{norm}.{k}", f"{theirs}.{their_norm}.{k}") for k in ("weight", "bias")]
            for fc in ("fc1", "fc2"):
                pairs += [(f"{ours}.ffn.{fc}.{k}", f"{theirs}.{fc}.{k}") for k in ("weight", "bias")]
            pairs += [(f"{ours}.ffn_norm.norm.{k}", f"{theirs}.final_layer_norm.{k}") for k in ("weight", "bias")]
    return pairs


def residual_axis(name: str) -> int | None:
    """The axis of our parameter ``name`` that runs along the residual stream's d_model channels."""
    if name in ("embed_tokens.weight", "output_proj.weight"):
        return 1  # (V, d_model)
    if name == "final_logits_bias":
        return None
    module, kind = name.rsplit(".", 1)
    if module.endswith(("norm", "out_proj", "fc2")):
        return 0  # LayerNorm gains/biases and the projections that write to the stream
    if module.endswith(("q_proj", "k_proj", "v_proj", "fc1")):
        return 1 if kind == "weight" else None  # they read the stream; their outputs live elsewhere
    raise WeightsError(f"no residual-stream axis is known for parameter {name!r}")


def concat_permutation(d_model: int) -> Tensor:
    """Channel order that turns the interleaved sinusoid table into Marian's (sines, then cosines)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def permute_residual(params: dict[str, Tensor], order: Tensor) -> dict[str, Tensor]:
    """New stream channel j is old channel ``order[j]``, in every parameter that touches the stream."""
    out = {}
    for name, tensor in params.items():
        axis = residual_axis(name)
        out[name] = tensor if axis is None else tensor.index_select(axis, order)
    return out


def swap_ids(params: dict[str, Tensor], a: int, b: int) -> dict[str, Tensor]:
    """Exchange token ids ``a`` and ``b`` in the embedding, output projection and logits bias."""
    out = dict(params)
    for name in ("embed_tokens.weight", "output_proj.weight", "final_logits_bias"):
        if name in out:
            tensor = out[name].clone()
            tensor[[a, b]] = tensor[[b, a]]
            out[name] = tensor
    return out


def read_weights(directory: Path) -> dict[str, Tensor]:
    """Every tensor of a Hugging Face weights file (safetensors preferred), sharded or not."""
    for name in (SAFETENSORS_FILE, TORCH_FILE):
        if (directory / name).is_file():
            return _read_file(directory / name)
        index = directory / (name + INDEX_SUFFIX)
        if index.is_file():
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
            tensors: dict[str, Tensor] = {}
            for shard in shards:
                tensors.update(_read_file(directory / shard))
            return tensors
    present = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
    raise WeightsError(
        f"{directory} holds no {SAFETENSORS_FILE} or {TORCH_FILE} (nor a sharded index of them); found {present}. "
        "TensorFlow/Flax-only checkpoints must be saved as PyTorch first"
    )


def _read_file(path: Path) -> dict[str, Tensor]:
    if not path.is_file():
        raise WeightsError(f"weights file {path} is missing")
    if path.name.endswith(".safetensors"):
        try:
            from safetensors.torch import load_file
        except ModuleNotFoundError as err:
            raise WeightsError(
                f"reading {path} needs the safetensors package: pip install safetensors (or .[interop])"
            ) from err
        return dict(load_file(str(path)))
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds for a damaged or foreign file
        raise WeightsError(f"{path} cannot be read by torch.load: {err}") from err
    return {k: v for k, v in state.items() if isinstance(v, Tensor)}


def write_weights(directory: Path, tensors: dict[str, Tensor], fmt: str = "safetensors") -> Path:
    """``model.safetensors`` (with the metadata transformers checks) or ``pytorch_model.bin``."""
    tensors = {k: v.detach().contiguous().clone() for k, v in tensors.items()}  # no shared storage
    if fmt == "bin":
        path = directory / TORCH_FILE
        torch.save(tensors, path)
        return path
    try:
        from safetensors.torch import save_file
    except ModuleNotFoundError as err:
        raise WeightsError(
            "writing model.safetensors needs the safetensors package: pip install safetensors (or .[interop]), "
            "or pass --weights bin for pytorch_model.bin"
        ) from err
    path = directory / SAFETENSORS_FILE
    save_file(tensors, str(path), metadata={"format": "pt"})
    return path
