"""A client's glossary: source terms that must come out as the client's own target terms.

The model translates the sentence as it would anyway; then, for each glossary term found in the source whose target
term the translation lacks, the target words the engine aligned to the term's source words (its cross-attention
weighed by the bundle's lexicon, ``inference/alignment.py``; where that gives the term no word, the attention alone)
are replaced by the client's term. The model's grammar around the term stays, and a
translation that already holds the term is left alone.

Reading the terms as placeholders instead (the way literals are kept, core/protect.py) puts every term in, but the
model then writes the words around a placeholder without knowing what it stands for ("Die Fenster", "anderen
Dokumente"): on held-out sentences with one dictionary term each, placeholders kept every term and cost five of seven
en->de test sets 1.3-3.8 BLEU; replacing the aligned words kept 83-94 % of the terms and every set gained
(docs/service.md#glossaries, ``python -m bench glossary``).

What it cannot do: inflect the term (a glossary's "Kennwort" goes in as given, also where the sentence wants
"Kennworts"), nor place a term whose source words no target word attends to most (counted as unplaced).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.translation import Hypothesis, Translation, WordAlignment
from inference.alignment import word_alignment

MAX_TERMS = 1000
"""Entries a glossary may hold."""
MAX_TERM_CHARS = 200

_PLACEHOLDER = re.compile(r"\{\d+\}")


class GlossaryError(ValueError):
    """A glossary the server cannot use; the message names the entry."""


@dataclass(frozen=True)
class Term:
    """One glossary term found in a sentence: its characters there, and what must come out."""

    start: int
    end: int
    target: str


@dataclass(frozen=True)
class Outcome:
    """What happened to a sentence's terms in its best translation."""

    found: int = 0
    """terms found in the source"""
    replaced: int = 0
    """terms put in place of the words aligned to them"""
    unplaced: int = 0
    """terms the translation lacked and no target word could take"""


class Glossary:
    """Source term -> target term, matched as whole words, ignoring case; the longest term wins where they overlap."""

    def __init__(self, entries: Mapping[str, str]):
        if len(entries) > MAX_TERMS:
            raise GlossaryError(f"the glossary has {len(entries)} entries; the limit is {MAX_TERMS}")
        self.targets: dict[str, str] = {}
        for source, target in entries.items():
            key, value = _key(source), " ".join(target.split())
            where = f"glossary entry {source!r}"
            if not re.search(r"\w", key) or not value:
                raise GlossaryError(f"{where}: both the term and its translation need a word")
            if len(source) > MAX_TERM_CHARS or len(target) > MAX_TERM_CHARS:
                raise GlossaryError(f"{where}: a term may hold at most {MAX_TERM_CHARS} characters")
            if key in self.targets and self.targets[key] != value:
                raise GlossaryError(f"{where}: the term is listed twice (ignoring case) with different translations")
            self.targets[key] = value

    @functools.cached_property
    def _pattern(self) -> re.Pattern[str] | None:
        """Every term as one expression, compiled on the first search: checking a glossary (a request's schema)
        or merging two (``updated``) never pays for it."""
        alternatives = sorted(self.targets, key=len, reverse=True)  # the longest first: it wins at a position
        body = "|".join(r"\s+".join(map(re.escape, key.split())) for key in alternatives)
        return re.compile(rf"(?<!\w)(?:{body})(?!\w)", re.IGNORECASE) if alternatives else None

    def __len__(self) -> int:
        return len(self.targets)

    def updated(self, entries: Mapping[str, str] | None) -> Glossary:
        """This glossary with ``entries`` added, theirs winning where both name a term (a request's over the
        server's); ``entries`` alone must be a usable glossary."""
        if not entries:
            return self
        extra = Glossary(entries)
        return Glossary({**self.targets, **extra.targets}) if self.targets else extra

    def find(self, text: str) -> list[Term]:
        """The terms of ``text`` (the sentence as the model reads it), left to right, none overlapping."""
        if self._pattern is None:
            return []
        return [Term(m.start(), m.end(), self.targets[_key(m.group(0))]) for m in self._pattern.finditer(text)]


def read_glossaries(path: str | Path) -> dict[str, Glossary]:
    """A file of glossaries by language pair, ``{"en-de": {"password": "Kennwort"}, "de-en": {...}}`` (the server's
    ``MT_GLOSSARY``); GlossaryError names what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise GlossaryError(f"{path}: {err}") from None
    if not isinstance(data, dict):
        raise GlossaryError(f'{path}: not a JSON object of language pairs ({{"en-de": {{"term": "translation"}}}})')
    glossaries = {}
    for pair, entries in data.items():
        if not re.fullmatch(r"[a-z]{2}-[a-z]{2}", pair):
            raise GlossaryError(f"{path}: {pair!r} is not a language pair such as 'en-de'")
        if not isinstance(entries, dict) or not all(isinstance(v, str) for v in entries.values()):
            raise GlossaryError(f"{path}: {pair} is not an object of terms and their translations (strings)")
        try:
            glossaries[pair] = Glossary(entries)
        except GlossaryError as err:
            raise GlossaryError(f"{path}: {pair}: {err}") from None
    return glossaries


def _key(term: str) -> str:
    return " ".join(term.casefold().split())


def apply(translation: Translation, text: str, terms: list[Term]) -> tuple[Translation, Outcome]:
    """``translation`` of ``text`` (decoded with attention) with its terms in place, in every hypothesis' text and
    in the best one's word alignment; pieces, attention and scores stay the model's. Sentences whose words cannot
    be matched to the model's pieces are left as they are (their terms counted unplaced)."""
    if not translation.hypotheses:
        return translation, Outcome(found=len(terms), unplaced=len(terms))
    if not terms:
        return translation, Outcome()
    spans = [m.span() for m in re.finditer(r"\S+", text)]  # the source's words, as sentencepiece's
    term_words = [[i for i, (a, b) in enumerate(spans) if a < term.end and b > term.start] for term in terms]
    hypotheses, alignment, outcome = [], translation.alignment, Outcome(found=len(terms))
    for rank, hypothesis in enumerate(translation.hypotheses):
        # the attention alone: where the engine's alignment (weighed by the lexicon) gives a term no word, the model's
        # own attention still says which word stands for it ("ein Ende" for "a means to an end": the lexicon links
        # "Ende" to "end", the attention to "means")
        attended = None
        if hypothesis.attention is not None:
            pieces, attention = hypothesis.pieces, hypothesis.attention
            attended = functools.partial(word_alignment, translation.source_pieces, pieces, attention)
        aligned = alignment if rank == 0 else (attended() if attended else None)
        if aligned is None or len(aligned.source_words) != len(spans):
            hypotheses.append(hypothesis)
            if rank == 0:
                outcome = dataclasses.replace(outcome, unplaced=sum(not _holds(hypothesis.text, t) for t in terms))
            continue
        # the best hypothesis' alignment is the lexicon's, the others' the attention's own: no fallback for those
        new, aligned, counts = _replace(hypothesis, aligned, terms, term_words, attended if rank == 0 else None)
        hypotheses.append(new)
        if rank == 0:
            alignment, outcome = aligned, dataclasses.replace(outcome, replaced=counts[0], unplaced=counts[1])
    return dataclasses.replace(translation, hypotheses=hypotheses, alignment=alignment), outcome


def _holds(text: str, term: Term) -> bool:
    return term.target.casefold() in text.casefold()


def _replace(
    hypothesis: Hypothesis,
    alignment: WordAlignment,
    terms: list[Term],
    term_words: list[list[int]],
    attended: Callable[[], WordAlignment] | None = None,
) -> tuple[Hypothesis, WordAlignment, tuple[int, int]]:
    """``attended``: the same hypothesis aligned by attention alone (made when first asked), asked where
    ``alignment`` places a term nowhere."""
    words = list(alignment.target_words)
    if " ".join(words) != hypothesis.text:  # the text is not its pieces' words (an unknown piece): leave it
        return hypothesis, alignment, (0, sum(not _holds(hypothesis.text, t) for t in terms))
    weights = np.asarray(alignment.weights, dtype=np.float64).reshape(len(words), len(alignment.source_words))
    links = [list(link) for link in alignment.links]
    replaced = unplaced = 0
    runs = []
    fallback: WordAlignment | None = None
    for term, sources in zip(terms, term_words, strict=True):
        if _holds(hypothesis.text, term):
            continue
        run = _run(links, weights, set(sources), words, len(term.target.split()))
        if run is None and attended is not None:
            if fallback is None:
                fallback = attended()
            plain = np.asarray(fallback.weights, dtype=np.float64).reshape(weights.shape)
            run = _run([list(link) for link in fallback.links], plain, set(sources), words, len(term.target.split()))
        if run is None:
            unplaced += 1
        else:
            runs.append((run, term, sources))
    taken: set[int] = set()
    # right to left, so that a replacement never moves the words of a run still to come
    for (lo, hi), term, sources in sorted(runs, key=lambda r: r[0][0], reverse=True):
        if taken & set(range(lo, hi + 1)):  # two terms took the same words: the first one placed keeps them
            unplaced += 1
            continue
        taken |= set(range(lo, hi + 1))
        new = _fit(term.target, words[lo : hi + 1], lo == 0)
        row = weights[lo : hi + 1].mean(axis=0, keepdims=True)
        words[lo : hi + 1] = new
        weights = np.concatenate([weights[:lo], np.repeat(row, len(new), axis=0), weights[hi + 1 :]])
        links[lo : hi + 1] = [list(sources) for _ in new]
        replaced += 1
    if not replaced:
        return hypothesis, alignment, (0, unplaced)
    text = " ".join(words)
    aligned = WordAlignment(
        source_words=alignment.source_words,
        target_words=words,
        weights=[[round(float(w), 6) for w in row] for row in weights],
        links=links,
    )
    return dataclasses.replace(hypothesis, text=text), aligned, (replaced, unplaced)


def _run(
    links: list[list[int]], weights: np.ndarray, sources: set[int], words: list[str], width: int
) -> tuple[int, int] | None:
    """The target words that take the term: of the contiguous runs of words linked to the term's source words, the
    one holding most of the term's attention, narrowed to at most ``width`` words (the term's own count) by the same
    measure, so that "Passwort ein." keeps its particle. None when no word links to the term's words, or the words
    hold a placeholder (a literal's place) or no letter at all."""
    linked = [t for t, link in enumerate(links) if sources & set(link)]
    if not linked:
        return None
    runs: list[list[int]] = []
    for t in linked:
        if runs and runs[-1][-1] == t - 1:
            runs[-1].append(t)
        else:
            runs.append([t])
    mass = weights[:, sorted(sources)].sum(axis=1)
    windows = [run[i : i + width] for run in runs for i in range(max(1, len(run) - width + 1))]
    best = max(windows, key=lambda window: float(mass[window].sum()))
    if any(_PLACEHOLDER.search(words[t]) for t in best) or not any(re.search(r"\w", words[t]) for t in best):
        return None
    return best[0], best[-1]


def _fit(target: str, replaced: list[str], starts_sentence: bool) -> list[str]:
    """The term's words with the punctuation the replaced words had around them ("„Passwort“," -> "„Kennwort“,"),
    capitalised if it replaces a capitalised first word of the sentence. A one-word term taking one word joined
    from parts keeps the parts before the last ("GIMP-Benutzer" -> "GIMP-Anwender")."""
    lead, head = _EDGES.fullmatch(replaced[0]).group(1, 2)  # type: ignore[union-attr]
    trail = _EDGES.fullmatch(replaced[-1]).group(3)  # type: ignore[union-attr]
    words = target.split()
    joined = _JOINED.fullmatch(head) if len(replaced) == 1 and re.fullmatch(r"\w+", target) else None
    if joined:
        lead += joined.group(1)
    elif starts_sentence and head[:1].isupper() and words[0][:1].islower():
        words[0] = words[0][:1].upper() + words[0][1:]
    words[0] = lead + words[0]
    words[-1] = words[-1] + trail
    return words


_JOINED = re.compile(r"(.*\W)\w+", re.DOTALL)
"""A word's parts before its last one, with what joins them ("GIMP-" of "GIMP-Benutzer")."""
_EDGES = re.compile(r"([^\w]*)(.*?)([^\w]*)", re.DOTALL)
"""A word's leading punctuation, its middle, its trailing punctuation (all of a word without letters leads)."""
