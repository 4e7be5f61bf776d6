"""From the engine's per-sentence Translations back to one answer per client text."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.sentences import Split
from core.translation import Hypothesis, Translation
from service.schemas import Alternative, Attention, SentenceTranslation, TextTranslation, WordLink


@dataclass(frozen=True)
class Wanted:
    """What the client asked to get back besides the text."""

    scores: bool = False
    attention: bool = False
    n_best: int = 1


def text_translation(split: Split, translations: list[Translation], wanted: Wanted) -> TextTranslation:
    """Join a text's sentence translations with the text's own separators, plus what was asked."""
    best = [_best(t) for t in translations]
    out = TextTranslation(text=split.join([h.text for h in best]))
    if wanted.scores:
        out.score = _mean([h.score for h in best])
    if wanted.n_best > 1:
        out.alternatives = _text_alternatives(split, translations, out.text, wanted.n_best) or None
    if any(t.truncated_source for t in translations):
        out.truncated = True
    if wanted.attention:
        sentences = [_sentence(split, i, t, wanted) for i, t in enumerate(translations)]
        if len(sentences) > 1:  # one sentence: the text's own attention and alignment are all of it
            out.sentences = sentences
        out.attention = _concat_attention([s.attention for s in sentences])
        out.alignment = _concat_alignment(translations)
    return out


def _best(translation: Translation) -> Hypothesis:
    if translation.hypotheses:
        return translation.hypotheses[0]
    return Hypothesis(text="", pieces=[], token_ids=[], score=0.0, token_logprobs=[])


def _mean(values: list[float]) -> float:
    return round(float(np.mean(values)), 4) if values else 0.0


def _text_alternatives(split: Split, translations: list[Translation], best: str, n_best: int) -> list[Alternative]:
    """The k-th alternative joins each sentence's k-th best hypothesis (or its last one)."""
    seen, out = {best}, []
    for k in range(1, n_best):
        if not any(len(t.hypotheses) > k for t in translations):
            break
        picks = [t.hypotheses[min(k, len(t.hypotheses) - 1)] for t in translations]
        text = split.join([h.text for h in picks])
        if text not in seen:
            seen.add(text)
            out.append(Alternative(text=text, score=_mean([h.score for h in picks])))
    return out


def _sentence(split: Split, index: int, translation: Translation, wanted: Wanted) -> SentenceTranslation:
    best = _best(translation)
    out = SentenceTranslation(source=split.sentences[index], source_span=split.spans[index], text=best.text)
    if wanted.scores:
        out.score = round(best.score, 4)
    if wanted.n_best > 1:
        seen = {best.text}
        alternatives = []
        for h in translation.hypotheses[1:]:
            if h.text not in seen:
                seen.add(h.text)
                alternatives.append(Alternative(text=h.text, score=round(h.score, 4)))
        out.alternatives = alternatives or None
    if translation.truncated_source:
        out.truncated = True
    out.attention = _attention(translation.source_pieces, best)
    out.alignment = _alignment(translation, 0, 0)
    return out


def _attention(source_pieces: list[str], best: Hypothesis) -> Attention:
    rows, cols = len(best.pieces), len(source_pieces)
    weights = np.zeros((rows, cols), dtype=np.float64)
    if best.attention is not None:
        matrix = np.asarray(best.attention, dtype=np.float64)
        r, c = min(rows, matrix.shape[0]), min(cols, matrix.shape[1])
        weights[:r, :c] = matrix[:r, :c]
    return Attention.model_construct(
        source_tokens=list(source_pieces),
        target_tokens=list(best.pieces),
        weights=weights.round(4).tolist(),
    )


def _concat_attention(parts: list[Attention | None]) -> Attention:
    """One map for the whole text: sentences in order, each attending only to its own source."""
    blocks = [p for p in parts if p is not None]
    rows, cols = (
        sum(len(b.target_tokens) for b in blocks),
        sum(len(b.source_tokens) for b in blocks),
    )
    weights = np.zeros((rows, cols), dtype=np.float64)
    r = c = 0
    for b in blocks:
        h, w = len(b.target_tokens), len(b.source_tokens)
        if h and w:
            weights[r : r + h, c : c + w] = np.asarray(b.weights, dtype=np.float64).reshape(h, w)
        r, c = r + h, c + w
    return Attention.model_construct(
        source_tokens=[t for b in blocks for t in b.source_tokens],
        target_tokens=[t for b in blocks for t in b.target_tokens],
        weights=weights.round(4).tolist(),
    )


def _alignment(translation: Translation, target_offset: int, source_offset: int) -> list[WordLink]:
    a = translation.alignment
    if a is None:
        return []
    return [
        WordLink(
            target=t + target_offset,
            source=s + source_offset,
            target_word=a.target_words[t],
            source_word=a.source_words[s],
            weight=round(float(a.weights[t][s]), 4),
        )
        for t, sources in enumerate(a.links)
        for s in sources
    ]


def _concat_alignment(translations: list[Translation]) -> list[WordLink]:
    """Word links over the whole text: word indices count on across sentences."""
    links: list[WordLink] = []
    t_off = s_off = 0
    for translation in translations:
        links += _alignment(translation, t_off, s_off)
        if translation.alignment is not None:
            t_off += len(translation.alignment.target_words)
            s_off += len(translation.alignment.source_words)
    return links
