"""Hyper-parameters: dataclasses, presets, TOML files and ``--set section.key=value`` overrides."""

from __future__ import annotations

import ast
import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration value is missing, unknown or out of range."""


@dataclass
class ModelConfig:
    vocab_size: int = 8000
    d_model: int = 256
    n_heads: int = 4
    d_ff: int = 1024
    encoder_layers: int = 3
    decoder_layers: int = 3
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation: str = "relu"  # relu | gelu | swish
    pre_norm: bool = False  # the paper is post-LN
    max_positions: int = 512
    positional_layout: str = "interleaved"  # paper: sin/cos interleaved; Marian: all sin then all cos
    tie_embeddings: bool = True
    scale_embeddings: bool = True
    final_logits_bias: bool = False  # Marian checkpoints carry one
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2  # the decoder's start token
    eos_id: int = 3

    def validate(self) -> None:
        if self.d_model % self.n_heads:
            raise ConfigError(f"model.d_model={self.d_model} must be divisible by model.n_heads={self.n_heads}")
        if self.activation not in ("relu", "gelu", "swish"):
            raise ConfigError(f"model.activation={self.activation!r}: use relu, gelu or swish")
        if self.positional_layout not in ("interleaved", "concat"):
            raise ConfigError(f"model.positional_layout={self.positional_layout!r}: use interleaved or concat")
        for name in ("vocab_size", "d_model", "d_ff", "encoder_layers", "decoder_layers"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"model.{name} must be positive, got {getattr(self, name)}")


@dataclass
class DataConfig:
    train: str = "data/train.tsv"
    dev: str = "data/dev.tsv"
    vocab: str = "runs/vocab"  # directory holding spm.model and vocab.json
    max_source_pieces: int = 128
    max_target_pieces: int = 128
    dev_bleu_sentences: int = 500
    placeholder_fills: int = 0
    """Filled copies added per training pair whose sides hold the same placeholders (%s, %d, {name}, %1):
    each placeholder replaced by a random number, file name, URL, ... the same on both sides, so the model
    learns to copy literals (training/literals.py). 0: off."""
    placeholder_copies: float = 0.0
    """Share of the pairs holding a token found once, unchanged, on both sides (a number, a literal, a name like
    GIMP, a symbol) that get a copy with such tokens as ``{1}``, ``{2}``, ...: what the server's reading gives the
    model for a literal (training/literals.py). Real and synthetic pairs alike. 0: off."""
    pad_multiple: int = 8  # pad batch widths to a multiple of this: few distinct shapes for oneDNN (and GPU kernels)
    synthetic: str = ""
    """Back-translated pairs (``python -m training back-translate``) trained on beside ``train``; "" = none.
    Kept in a file of their own so that a run can tag them."""
    extra: list[str] = field(default_factory=list)
    """Files of real pairs trained on ``extra_copies`` times more beside ``train``: a small part of the corpus
    weighted up, such as the everyday-language groups' ``train.dictionary.tsv`` and ``train.games.tsv`` that
    ``build-corpus`` writes (their pairs are in ``train.tsv`` once already). [] = none."""
    extra_copies: int = 1
    tag_synthetic: bool = False
    """Start every synthetic source with the BOS id, a token no real source holds (Caswell et al. 2019, "Tagged
    Back-Translation"): the model can tell synthetic sources from real ones. Translation never adds it."""


@dataclass
class TrainConfig:
    batch_tokens: int = 4096  # target tokens per optimizer step per device (before accumulation)
    accumulate: int = 1
    lr: float = 2.0  # multiplier of the inverse-sqrt schedule (paper: d_model^-0.5 * step^-0.5 ...)
    warmup_steps: int = 4000
    max_steps: int = 100_000
    max_minutes: float = 0.0  # wall-clock budget, 0 = none
    max_epochs: float = 0.0  # passes over the training data, 0 = none (1.5 = one and a half)
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    eval_every: int = 1000
    save_every: int = 500
    keep_last: int = 5
    log_every: int = 100
    seed: int = 1
    amp: bool = True  # mixed precision: fp16/bf16 on GPU; bf16 on CPUs with native bf16 (AMX / AVX512-BF16) where a
    # probe at the run's start times a step faster with it (training.train.Trainer._bf16_pays)
    threads: int = 0  # torch intra-op threads on CPU, 0 = torch's default
    init: str = ""  # start a new run from this checkpoint's weights (e.g. from import-bundle), not at random
    lr_offset: int = 0  # evaluate the schedule this many steps on (the init's steps), warming up to it again
    trace: bool = False  # each rank writes trace-rank<R>.jsonl: its batches per step and a checksum of its weights


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        self.model.validate()
        if self.data.pad_multiple < 1:
            raise ConfigError(f"data.pad_multiple must be at least 1, got {self.data.pad_multiple}")
        if not 0.0 <= self.data.placeholder_copies <= 1.0:
            raise ConfigError(
                f"data.placeholder_copies is a share of the pairs, 0 to 1, got {self.data.placeholder_copies}"
            )
        if self.data.extra_copies < 0:
            raise ConfigError(f"data.extra_copies must be 0 or more, got {self.data.extra_copies}")
        if not all(isinstance(path, str) and path for path in self.data.extra):
            raise ConfigError(f"data.extra is a list of TSV files, got {self.data.extra!r}")
        if self.data.tag_synthetic and not self.data.synthetic:
            raise ConfigError("data.tag_synthetic tags the pairs of data.synthetic: name that file too")

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Config:
        config = cls()
        for section, values in raw.items():
            for key, value in values.items():
                _assign(config, section, key, value)
        config.validate()
        return config


PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "model": {
            "d_model": 64,
            "n_heads": 4,
            "d_ff": 128,
            "encoder_layers": 2,
            "decoder_layers": 2,
            "dropout": 0.0,
            "vocab_size": 64,
            "max_positions": 128,
        },
        "train": {
            "batch_tokens": 512,
            "warmup_steps": 100,
            "eval_every": 100,
            "save_every": 100,
            "log_every": 20,
            "lr": 0.5,
        },
    },
    "small": {
        "model": {
            "d_model": 256,
            "n_heads": 4,
            "d_ff": 1024,
            "encoder_layers": 3,
            "decoder_layers": 3,
            "vocab_size": 8000,
        },
        "train": {"batch_tokens": 4096, "warmup_steps": 2000},
    },
    "base": {
        "model": {
            "d_model": 512,
            "n_heads": 8,
            "d_ff": 2048,
            "encoder_layers": 6,
            "decoder_layers": 6,
            "vocab_size": 16000,
        },
        "train": {"batch_tokens": 8192, "warmup_steps": 4000, "lr": 1.0},
    },
}


def _assign(config: Config, section: str, key: str, value: Any) -> None:
    part = getattr(config, section, None)
    if part is None or not dataclasses.is_dataclass(part):
        raise ConfigError(f"unknown config section [{section}]: use model, data or train")
    fields = {f.name: f for f in dataclasses.fields(part)}
    if key not in fields:
        raise ConfigError(f"unknown setting {section}.{key}; known: {', '.join(sorted(fields))}")
    current = getattr(part, key)
    if isinstance(current, tuple):
        value = tuple(value)
    elif isinstance(current, bool) and not isinstance(value, bool):
        raise ConfigError(f"{section}.{key} must be true or false, got {value!r}")
    elif isinstance(current, float) and isinstance(value, int):
        value = float(value)
    elif not isinstance(value, type(current)):
        raise ConfigError(f"{section}.{key} must be {type(current).__name__}, got {value!r} ({type(value).__name__})")
    setattr(part, key, value)


def parse_override(text: str) -> tuple[str, str, Any]:
    """``train.lr=0.5`` -> ("train", "lr", 0.5); values are Python/TOML-like literals or bare strings."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise ConfigError(f"override {text!r} must look like section.key=value, e.g. train.lr=0.5")
    path, raw = text.split("=", 1)
    section, key = path.strip().split(".", 1)
    lowered = raw.strip().lower()
    value: Any
    if lowered in ("true", "false"):
        value = lowered == "true"
    else:
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = raw.strip()
    return section, key, value


def load_config(
    preset: str | None = None, path: str | Path | None = None, overrides: list[str] | None = None
) -> Config:
    """Preset, then file, then overrides: each later layer wins."""
    config = Config()
    if preset:
        if preset not in PRESETS:
            raise ConfigError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
        for section, values in PRESETS[preset].items():
            for key, value in values.items():
                _assign(config, section, key, value)
    if path:
        try:
            raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError as err:
            raise ConfigError(f"config file {path} does not exist") from err
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"config file {path} is not valid TOML: {err}") from err
        for section, values in raw.items():
            if not isinstance(values, dict):
                raise ConfigError(f"{path}: top-level key {section!r} must be a [section]")
            for key, value in values.items():
                _assign(config, section, key, value)
    for text in overrides or []:
        _assign(config, *parse_override(text))
    config.validate()
    return config


def dump_toml(config: Config) -> str:
    lines: list[str] = []
    for section, values in config.to_dict().items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            if isinstance(value, bool):
                rendered = "true" if value else "false"
            elif isinstance(value, str):
                rendered = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
            elif isinstance(value, (tuple, list)):
                rendered = "[" + ", ".join(repr(v) for v in value) + "]"
            else:
                rendered = repr(value)
            lines.append(f"{key} = {rendered}")
        lines.append("")
    return "\n".join(lines)
