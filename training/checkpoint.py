"""Checkpoint files: a model's config, weights and vocabulary in one self-contained file.

Layout of the dict saved with ``torch.save``:
  ``config``       Config.to_dict()
  ``model``        state_dict of training.model.Transformer
  ``vocab_files``  {file name: bytes} of the vocabulary directory (vocab.json + sentencepiece models)
  ``train_state``  (training checkpoints only) optimizer, step, data position, RNG states, history
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from core.tokenizer import VOCAB_FILE, Tokenizer
from training.config import Config
from training.model import Transformer


class CheckpointError(ValueError):
    pass


def read_vocab_files(vocab_dir: str | Path) -> dict[str, bytes]:
    tokenizer = Tokenizer(vocab_dir)  # validates the directory
    names = {VOCAB_FILE, tokenizer.source_spm_file, tokenizer.target_spm_file}
    return {name: (Path(vocab_dir) / name).read_bytes() for name in sorted(names)}


def same_vocabulary(a: dict[str, bytes], b: dict[str, bytes]) -> bool:
    """Whether two vocabularies map ids to the same pieces with the same segmentation models (the id table
    is compared parsed, not byte by byte)."""

    def parsed(files: dict[str, bytes]) -> dict[str, Any]:
        return {name: json.loads(data) if name == VOCAB_FILE else data for name, data in files.items()}

    return parsed(a) == parsed(b)


def write_vocab_files(files: dict[str, bytes], directory: str | Path) -> Path:
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out / name).write_bytes(data)
    return out


def save(path: str | Path, payload: dict[str, Any]) -> None:
    """Atomic: write beside, then rename, so a kill never leaves half a checkpoint."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    torch.save(payload, tmp)
    os.replace(tmp, path)


def load(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # torch raises many kinds for a damaged file
        raise CheckpointError(f"checkpoint {path} cannot be read: {err}") from err
    for key in ("config", "model", "vocab_files"):
        if key not in payload:
            raise CheckpointError(f"checkpoint {path} has no {key!r} entry: not one of ours?")
    return payload


def load_model(path: str | Path) -> tuple[Transformer, Config, dict[str, bytes]]:
    payload = load(path)
    config = Config.from_dict(payload["config"])
    model = Transformer(config.model)
    model.load_state_dict(payload["model"])
    model.eval()
    return model, config, payload["vocab_files"]


def load_tokenizer(vocab_files: dict[str, bytes], directory: str | Path) -> Tokenizer:
    return Tokenizer(write_vocab_files(vocab_files, directory))
