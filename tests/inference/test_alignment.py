"""inference/alignment.py: word alignments from attention, weighed by the bundle's lexicon.

The synthetic task's target is the source's words reversed and in capitals, so every target word's right source
word is known: the one it spells. The engine's alignment must find it at least as often with the lexicon (the
bundle's shortlist table, added as a user would) as with the attention alone, and must be what word_alignment
makes of the attention and Lexicon.links, computed here apart from the engine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.translation import DecodeOptions
from inference.alignment import Lexicon, lexical, piece_attention, word_alignment
from inference.engine import Engine
from testkit.synthetic import make_pairs

TEXTS = [s for s, _ in make_pairs(40, seed=33, min_len=2, max_len=6)]


def _right(translations: list) -> float:
    """The share of target words linked to the source word they spell."""
    right = total = 0
    for t in translations:
        a = t.alignment
        for word, links in zip(a.target_words, a.links, strict=True):
            total += 1
            right += a.source_words[links[0]].upper() == word
    return right / total


def test_the_lexicon_links_target_words_to_the_words_they_translate(listed_bundle: Path) -> None:
    engine = Engine.load(listed_bundle, provider="cpu", threads=1)
    assert engine.lexicon is not None
    options = DecodeOptions(beam_size=4, return_attention=True)
    weighed = engine.translate(TEXTS, options)
    engine.lexical_boost = 0.0
    plain = engine.translate(TEXTS, options)
    assert [t.best.text for t in weighed] == [t.best.text for t in plain]  # the alignment changes, not the text
    assert _right(weighed) >= _right(plain)  # (the tiny model's attention alone is right already)
    assert _right(weighed) >= 0.9, _right(weighed)
    assert any(w.alignment.weights != p.alignment.weights for w, p in zip(weighed, plain, strict=True))
    # the engine's alignment is word_alignment of the best hypothesis' attention and the lexicon's links
    lexicon = Lexicon.load(listed_bundle, engine.manifest)
    assert lexicon is not None
    for text, t in zip(TEXTS, weighed, strict=True):
        ids = engine.tokenizer.encode_source(text)
        links = lexicon.links(ids, t.best.token_ids)
        expected = word_alignment(t.source_pieces, t.best.pieces, t.best.attention, links)
        assert expected.links == t.alignment.links and expected.weights == t.alignment.weights


def test_a_bundle_without_a_shortlist_aligns_by_attention(tiny_bundle: Path) -> None:
    engine = Engine.load(tiny_bundle, provider="cpu", threads=1)
    assert engine.lexicon is None
    [t] = engine.translate(TEXTS[:1], DecodeOptions(return_attention=True))
    assert t.alignment == word_alignment(t.source_pieces, t.best.pieces, t.best.attention)


def test_lexicon_links_and_weighing() -> None:
    lexicon = Lexicon(np.array([[-1, -1], [5, 6], [7, -1]]))
    links = lexicon.links([1, 2, 99], [6, 7, 3])  # an id past the table reads as piece 0 (no translations)
    assert links.tolist() == [[True, False, False], [False, True, False], [False, False, False]]
    attention = np.array([[0.5, 0.5, 0.0], [0.6, 0.2, 0.2], [0.2, 0.3, 0.5]])
    weighed = lexical(attention, links, boost=3.0)
    assert np.allclose(weighed.sum(axis=1), 1.0)
    assert np.allclose(weighed[0], [0.8, 0.2, 0.0]) and np.allclose(weighed[2], attention[2])
    assert lexical(attention, None) is attention and lexical(attention, links, boost=0.0) is attention


def test_a_target_word_is_weighed_by_its_pieces_with_letters() -> None:
    """A punctuation piece attends where the punctuation comes from: "Speichern," is aligned by "Speichern"."""
    source = ["▁Click", "▁Save", "."]
    target = ["▁Klicken", "▁Speichern", ",", "▁fertig", "."]
    rows = [np.array(r + [0.0]) for r in ([0.8, 0.1, 0.1], [0.3, 0.6, 0.1], [0.0, 0.0, 1.0], [0.2, 0.2, 0.6])]
    rows.append(np.array([0.0, 0.0, 1.0, 0.0]))
    attention = piece_attention(rows, len(target), len(source))
    a = word_alignment(source, target, attention)
    assert a.target_words == ["Klicken", "Speichern,", "fertig."]
    assert a.weights[1] == pytest.approx([0.3, 0.6 + 0.1])  # "Save." sums its two pieces; the comma's row is not in
    assert a.links == [[0], [1], [1]]
    # a word of punctuation alone is weighed by all its pieces
    only = word_alignment(source, ["▁", "...", "▁Ja"], piece_attention(rows[:3], 3, 3))
    assert only.target_words[0] == "..." and only.weights[0] == pytest.approx([(0.8 + 0.3) / 2, (0.2 + 0.7) / 2])
