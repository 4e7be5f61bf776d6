"""The default model's recipe: it loads, and its committed vocabulary is the shipped bundle's."""

from __future__ import annotations

import json
from pathlib import Path

from training.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def test_recipe_loads_and_names_the_committed_vocabulary_of_the_shipped_bundle() -> None:
    cfg = load_config("small", ROOT / "recipes/en-de-small.toml")
    vocab = ROOT / cfg.data.vocab
    assert (vocab / "spm.model").read_bytes() == (ROOT / "models/en-de/spm.model").read_bytes()
    assert json.loads((vocab / "vocab.json").read_text()) == json.loads((ROOT / "models/en-de/vocab.json").read_text())
    assert cfg.data.pad_multiple == 8 and cfg.train.max_minutes == 120


def test_the_reverse_recipe_is_the_default_models_on_the_reversed_corpus() -> None:
    """de-en trains the same architecture with the same vocabulary (so it can start from the en-de weights)."""
    forward = load_config("small", ROOT / "recipes/en-de-small.toml")
    reverse = load_config("small", ROOT / "recipes/de-en-small.toml")
    assert reverse.model == forward.model and reverse.data.vocab == forward.data.vocab
    assert (reverse.data.train, reverse.data.dev) == ("data/de-en/train.tsv", "data/de-en/dev.tsv")
