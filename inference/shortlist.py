"""A bundle's vocabulary shortlist, as the engine reads it: which target pieces each sentence may produce.

``python -m training shortlist`` writes the table and the shortlisted decoder step into a bundle
(training/export/shortlist.py says how they are built); ``Engine.load(shortlist=True)`` opens them, and each
running set's decoder steps then score only the union of its sentences' lists, every hypothesis masked to its own
sentence's (so a sentence's translation does not depend on its batch mates' lists), as long as that union is a small
part of the vocabulary (``Engine.shortlist_most``); a set whose lists together hold more decodes with the whole
vocabulary, which costs less there. So a sentence may translate differently alone and in a large batch, as it may
with the CPU's int8 graphs (docs/bundle.md, "Batch mates").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from core.graphs import SHORTLIST_INPUTS

TABLE_FILE = "shortlist.npz"
GRAPH_FILE = "decoder_shortlist.onnx"


class Listed(NamedTuple):
    """What a running set's sentences may produce, as the shortlisted step takes it."""

    inputs: dict[str, np.ndarray]
    """the step's ``vocab``, ``weight`` and ``bias`` (core/graphs.py ``SHORTLIST_INPUTS``)"""
    allowed: np.ndarray
    """(sentences, N) bool: which of ``vocab`` each sentence may use (the step's ``mask``: 0 where allowed, -inf
    where not, each row repeated for each of the sentence's hypotheses)"""


class Shortlist:
    """The table of a bundle: the pieces every sentence may use, and each source piece's candidates."""

    def __init__(
        self,
        frequent: np.ndarray,
        candidates: np.ndarray,
        always: list[int],
        projection: tuple[np.ndarray, np.ndarray],
        copy_source: bool = True,
    ):
        self.copy_source = copy_source
        self.weight, self.bias = projection
        """The output projection, (vocab, d_model) and (vocab,), whose listed rows each running set gathers."""
        self.frequent = np.asarray(frequent, np.int64)
        self.candidates = np.asarray(candidates, np.int64)
        self.base = np.unique(np.concatenate([self.frequent, np.asarray(always, np.int64)]))

    @classmethod
    def load(cls, bundle: Path, manifest: dict[str, Any]) -> Shortlist:
        entry = manifest["shortlist"]
        with np.load(bundle / entry["table"]) as table:
            frequent, candidates, bias = table["frequent"], table["candidates"], table["bias"]
            weight = table["weight"] if "weight" in table else None
        if weight is None:  # where the decoder keeps it in the weights file: (d_model, vocab) float32
            where = entry["weight"]
            shape = tuple(where["shape"])
            stored = np.fromfile(bundle / where["file"], np.float32, int(np.prod(shape)), offset=where["offset"])
            weight = stored.reshape(shape).T
        projection = np.ascontiguousarray(weight, np.float32), np.ascontiguousarray(bias, np.float32)
        specials = manifest["special_ids"]
        copy = bool(manifest["shortlist"].get("copy_source", True))
        return cls(frequent, candidates, [specials["eos"], specials["unk"]], projection, copy)

    def sentence(self, source: list[int]) -> np.ndarray:
        """The sorted target pieces a sentence (source ids) may produce: the frequent ones, EOS and UNK, its source
        pieces' candidates and (``copy_source``) the source pieces themselves."""
        src = np.asarray(source, np.int64)
        src = src[(src >= 0) & (src < len(self.candidates))]
        found = self.candidates[src].reshape(-1)
        return np.unique(np.concatenate([self.base, src if self.copy_source else src[:0], found[found >= 0]]))

    def union(self, lists: list[np.ndarray], most: float = 1.0) -> Listed | None:
        """What a running set with these sentences' lists may produce; None when the lists together hold more than
        ``most`` of the vocabulary (counted before anything is gathered)."""
        if len(lists) == 1:
            vocab = lists[0]
        else:
            listed = np.zeros(len(self.weight), bool)
            for own in lists:
                listed[own] = True
            vocab = np.flatnonzero(listed)
        if len(vocab) > most * len(self.weight):
            return None
        allowed = np.zeros((len(lists), len(vocab)), bool)
        for row, own in zip(allowed, lists, strict=True):
            row[np.searchsorted(vocab, own)] = True
        vocab_input, weight_input, bias_input, _ = SHORTLIST_INPUTS
        return Listed({vocab_input: vocab, weight_input: self.weight[vocab], bias_input: self.bias[vocab]}, allowed)
