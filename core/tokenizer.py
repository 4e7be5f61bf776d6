"""The one tokenizer wrapper: sentencepiece models for segmentation, ``vocab.json`` for ids.

Segmentation and ids are kept apart on purpose: our own models use one joint sentencepiece model whose
ids are the model's ids, while imported Marian models have separate source/target sentencepiece models
and one shared id table. ``vocab.json`` is always the authority for ids.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm

VOCAB_FILE = "vocab.json"
RARE_SCORE = -12.5
"""A character whose own piece scores below this (a unigram log-probability: about 1 in 270,000 pieces) was seen
too rarely for the model to write it back: in en-de's vocabulary 144 letters and symbols ("€", "⌘", "↓", "α", "à",
"ñ"), while "é" (-11.9), "→" (-11.9) and "ä" (-7.3) are above it. Measured in docs/literals.md."""
WORD_START = "\u2581"  # sentencepiece's word-boundary marker


class TokenizerError(ValueError):
    """The vocabulary files are missing or inconsistent."""


@dataclass(frozen=True)
class Specials:
    pad_id: int
    unk_id: int
    bos_id: int
    eos_id: int


class Tokenizer:
    def __init__(self, directory: str | Path):
        directory = Path(directory)
        path = directory / VOCAB_FILE
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as err:
            raise TokenizerError(f"{path} is missing: a vocabulary directory needs it") from err
        except json.JSONDecodeError as err:
            raise TokenizerError(f"{path} is not valid JSON: {err}") from err
        self.pieces: list[str] = list(meta["pieces"])
        self.specials = Specials(meta["pad_id"], meta["unk_id"], meta["bos_id"], meta["eos_id"])
        self.source_spm_file: str = meta.get("source_spm", "spm.model")
        self.target_spm_file: str = meta.get("target_spm", self.source_spm_file)
        self.ids = {piece: i for i, piece in enumerate(self.pieces)}
        self.source_spm = self._load_spm(directory / self.source_spm_file)
        self.target_spm = self._load_spm(directory / self.target_spm_file)
        self._special_ids = {self.specials.pad_id, self.specials.bos_id, self.specials.eos_id}
        self._unknown_chars: dict[str, bool] = {}
        # a unigram model's scores are log-probabilities; a BPE model's are its merges' ranks (whole numbers)
        pieces = range(self.source_spm.get_piece_size())
        self._log_probs = any(not self.source_spm.get_score(i).is_integer() for i in pieces)

    @staticmethod
    def _load_spm(path: Path) -> spm.SentencePieceProcessor:
        if not path.is_file():
            raise TokenizerError(f"sentencepiece model {path} is missing")
        return spm.SentencePieceProcessor(model_file=str(path))

    def __len__(self) -> int:
        return len(self.pieces)

    @staticmethod
    def normalize(text: str) -> str:
        """NFC and no control characters: what the model saw in training, whatever a client sends."""
        text = unicodedata.normalize("NFC", text)
        if text.isprintable():  # nothing of Unicode's "Other" or separators but the space: the per-character rules
            return text.strip()  # below would keep every character (most text; ~40x faster than them)
        return "".join(
            " " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c
            for c in text
            if unicodedata.category(c) not in ("Cs", "Cf", "Co") or c == "\u200d"
        ).strip()

    def source_pieces(self, text: str) -> list[str]:
        text = self.normalize(text)
        return list(self.source_spm.encode(text, out_type=str)) if text else []

    def target_pieces(self, text: str) -> list[str]:
        text = self.normalize(text)
        return list(self.target_spm.encode(text, out_type=str)) if text else []

    def unknown_spans(self, text: str) -> list[tuple[int, int]]:
        """[start, end) of each run of characters (white space excluded) that the source vocabulary lacks, or has
        only as a rare piece of its own (``RARE_SCORE``; punctuation excepted, which a translation rightly changes):
        the model would read the first as the unk id and write " ⁇ ", and turn the second into something else ("Déjà
        Dup" into "Dzajgramps Dup", "Super↓" into "Super-Teil"). core/protect.py keeps them instead."""
        spans: list[tuple[int, int]] = []
        for i, c in enumerate(text):
            if c.isspace() or not self._unknown(c):
                continue
            if spans and spans[-1][1] == i:
                spans[-1] = (spans[-1][0], i + 1)
            else:
                spans.append((i, i + 1))
        return spans

    def _unknown(self, char: str) -> bool:
        found = self._unknown_chars.get(char)
        if found is None:
            found = self._unknown_chars[char] = self.specials.unk_id in self.encode_source(char) or self._rare(char)
        return found

    def _rare(self, char: str) -> bool:
        if not self._log_probs or unicodedata.category(char)[0] in "PZ":
            return False
        piece = self.source_spm.piece_to_id(char)
        return piece != self.source_spm.unk_id() and self.source_spm.get_score(piece) < RARE_SCORE

    def to_ids(self, pieces: list[str]) -> list[int]:
        """Pieces outside the id table become unk (e.g. characters never seen in training)."""
        unk = self.specials.unk_id
        return [self.ids.get(p, unk) for p in pieces]

    def encode_source(self, text: str) -> list[int]:
        return self.to_ids(self.source_pieces(text))

    def encode_target(self, text: str) -> list[int]:
        return self.to_ids(self.target_pieces(text))

    def id_to_piece(self, token: int) -> str:
        return self.pieces[token] if 0 <= token < len(self.pieces) else self.pieces[self.specials.unk_id]

    def to_pieces(self, ids: list[int]) -> list[str]:
        """``id_to_piece`` of each id, in one comprehension (the engine does this for every sentence it answers)."""
        table, size, unk = self.pieces, len(self.pieces), self.pieces[self.specials.unk_id]
        return [table[i] if 0 <= i < size else unk for i in ids]

    def decode(self, ids: list[int]) -> str:
        specials = self._special_ids
        return str(self.target_spm.decode_pieces(self.to_pieces([i for i in ids if i not in specials])))

    @staticmethod
    def word_starts(pieces: list[str]) -> list[int]:
        """Index of the word each piece belongs to (a word starts at a piece beginning with U+2581)."""
        word, out = -1, []
        for i, piece in enumerate(pieces):
            if piece.startswith(WORD_START) or i == 0:
                word += 1
            out.append(word)
        return out


def write_vocab(
    directory: str | Path,
    pieces: list[str],
    specials: Specials,
    source_spm: str = "spm.model",
    target_spm: str | None = None,
) -> Path:
    path = Path(directory) / VOCAB_FILE
    meta = {
        "pieces": pieces,
        "pad_id": specials.pad_id,
        "unk_id": specials.unk_id,
        "bos_id": specials.bos_id,
        "eos_id": specials.eos_id,
        "source_spm": source_spm,
        "target_spm": target_spm or source_spm,
    }
    path.write_text(json.dumps(meta, ensure_ascii=False, indent=0), encoding="utf-8")
    return path
