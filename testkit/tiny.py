"""The tiny model: a 2+2-layer d64 Transformer trained on the synthetic reversal task (testkit.synthetic) until
it is nearly perfect. Tests build it once per session (tests/conftest.py); benchmarks build it on first use when
no real model is there."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from testkit.synthetic import write_corpus

TINY_STEPS = 1000


def tiny_config(train: Path, dev: Path, vocab: Path, steps: int = TINY_STEPS, **train_overrides: object) -> Any:
    """The ``tiny`` preset on these files, ``steps`` steps, one thread, float32, no evaluation; ``train_overrides``
    last. float32, not ``train.amp``'s default: that probes whether bf16 pays with a timing, so two sessions on one
    machine could train different tiny models, and a test could pass with one and fail with the other."""
    from training.config import load_config

    overrides = [
        f"data.train={train}",
        f"data.dev={dev}",
        f"data.vocab={vocab}",
        f"train.max_steps={steps}",
        "train.eval_every=100000",
        "train.log_every=100",
        "train.threads=1",
        "train.amp=false",
    ]
    overrides += [f"train.{k}={v!r}" for k, v in train_overrides.items()]
    return load_config("tiny", overrides=overrides)


def build_tiny_bundle(out: Path) -> Path:
    """Train the tiny model and export it to ``out`` (fp32; about a minute on 2 cores, needs torch)."""
    from training.export import export_bundle
    from training.train import train
    from training.vocab import train_vocab

    print(f"building the tiny test bundle in {out} (about a minute) ...", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        train_tsv, dev_tsv = write_corpus(work / "corpus")
        train_vocab(train_tsv, work / "vocab", vocab_size=96)
        train(tiny_config(train_tsv, dev_tsv, work / "vocab"), work / "run")
        export_bundle(
            work / "run" / "last.pt",
            out,
            name="tiny-reverse",
            version="1",
            source_language="en",
            target_language="de",
        )
    return out


WIDE_HEADS_STEPS = 400
"""Training steps of ``wide_heads_checkpoint``'s model (about 8 s on the 2-core CPU)."""


def wide_heads_checkpoint(
    train_tsv: Path, dev_tsv: Path, vocab: Path, run: Path, steps: int = WIDE_HEADS_STEPS
) -> Path:
    """The tiny model with heads of 32 values (two, where the tiny model has four of 16), trained ``steps`` steps
    into ``run``; returns its checkpoint. onnxruntime's CUDA ``DecoderMaskedMultiHeadAttention`` takes heads of 32,
    64 or 128 values only. Trained, not random: a random model's near ties flip under reduced precision (CUDA's TF32
    products), a trained one's do not (bench/gpu_session/tf32_proxy.py)."""
    from training.train import train

    config = tiny_config(train_tsv, dev_tsv, vocab, steps=steps)
    config.model.n_heads = 2
    config.validate()
    train(config, run)
    return run / "last.pt"
