"""Train a joint sentencepiece vocabulary and save it with its explicit id table (vocab.json)."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import sentencepiece as spm

from core.tokenizer import Specials, Tokenizer, write_vocab
from training.data import read_pairs

SPECIALS = Specials(pad_id=0, unk_id=1, bos_id=2, eos_id=3)


def train_vocab(
    train_file: str | Path,
    out_dir: str | Path,
    vocab_size: int = 8000,
    model_type: str = "unigram",
    sample_sentences: int = 2_000_000,
    character_coverage: float = 1.0,
    seed: int = 1,
) -> Tokenizer:
    """Joint source+target sentencepiece model; ids 0-3 are pad/unk/bos/eos."""
    if model_type not in ("unigram", "bpe"):
        raise ValueError(f"model_type={model_type!r}: use unigram or bpe")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lines = [side for pair in read_pairs(train_file) for side in pair]
    if not lines:
        raise ValueError(f"{train_file} holds no sentence pairs to learn a vocabulary from")
    random.Random(seed).shuffle(lines)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as tmp:
        tmp.write("\n".join(lines[:sample_sentences]) + "\n")
    spm.SentencePieceTrainer.train(
        input=tmp.name,
        model_prefix=str(out / "spm"),
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        pad_id=SPECIALS.pad_id,
        unk_id=SPECIALS.unk_id,
        bos_id=SPECIALS.bos_id,
        eos_id=SPECIALS.eos_id,
        input_sentence_size=sample_sentences,
        shuffle_input_sentence=True,
        hard_vocab_limit=False,
        num_threads=2,
        minloglevel=2,
    )
    Path(tmp.name).unlink()
    proc = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    pieces = [proc.id_to_piece(i) for i in range(proc.get_piece_size())]
    write_vocab(out, pieces, SPECIALS)
    return Tokenizer(out)
