"""Split a text into sentences (pysbd) and join their translations back with the original layout.

Every character of the input is either inside a sentence or in a separator, so
``separators[0] + s[0] + separators[1] + ... + s[-1] + separators[-1] == text``: translating the
sentences and joining them with the same separators keeps spaces, line and paragraph breaks where
the client had them. A line break ends a sentence (lists, headings, addresses are not prose), except in
hard-wrapped prose (``_wrapped``): a line of at least ``WRAPPED_LINE`` characters that ends inside a sentence,
followed by one that starts with a lower-case letter, goes on there. The sentence then holds that line break, and
its translation comes back on one line.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

import pysbd
import pysbd.languages

_WINDOW = 1000  # pysbd slows down more than linearly with length: it sees this many chars at once
_LINES = re.compile(r"[^\r\n]+")
_INSIDE = set(" \t,;:'‘’-–—/%&+@#$€£")
"""Besides letters, digits and marks: what a line's text may hold before its last word and still be one sentence
without asking pysbd. No sentence-ending mark, no bracket (pysbd reads "a) ... b)" as a list), no double quote
(pysbd may end a sentence at a closing one), no bullet. Greek's question mark is ";": Greek lines always go to
pysbd."""
_END = set(".!?…")
"""What may close the line's only sentence: one of these after its last letter or digit. pysbd splits a closing
quote or bracket after one, or the last mark of a run after a number ("3,5..."), off as a sentence of its own, so
such lines go to pysbd."""


@dataclass(frozen=True)
class Split:
    """A text cut into sentences; ``separators`` has one more entry than ``sentences``."""

    sentences: list[str]
    separators: list[str]
    spans: list[tuple[int, int]]
    """Character offsets [start, end) of each sentence in the original text."""

    def join(self, parts: list[str]) -> str:
        """Put one string per sentence (e.g. its translation) between the original separators."""
        if len(parts) != len(self.sentences):
            raise ValueError(f"join needs {len(self.sentences)} parts, got {len(parts)}")
        out = [self.separators[0]]
        for part, separator in zip(parts, self.separators[1:], strict=True):
            out += [part, separator]
        return "".join(out)


def supported_language(language: str) -> str:
    """pysbd's code for ``language`` ("de-AT" -> "de"), English rules where pysbd has none."""
    code = language.split("-")[0].split("_")[0].lower()
    return code if code in pysbd.languages.LANGUAGE_CODES else "en"


WRAPPED_LINE = 40
"""The shortest line that hard-wrapped prose is taken to have (docs/service.md, "Hard-wrapped text")."""
_NOUN_CAPITALS = {"de"}
"""Languages (pysbd's codes) whose nouns start with a capital anywhere in a sentence."""
_GOES_ON = re.compile(r"[\w,\-–—(/]$")
"""How a line that a sentence goes on past ends: a word, a comma, a dash, an opening bracket, a slash."""


def _lines(text: str, language: str) -> list[tuple[int, str]]:
    """(offset, text) of each line, or of each run of hard-wrapped lines with their line breaks as spaces (the same
    length, so offsets into it are offsets into ``text``)."""
    out: list[tuple[int, str]] = []
    last: tuple[int, str] | None = None  # the previous line
    for match in _LINES.finditer(text):
        offset, words = match.start(), match.group()
        if last is not None and _wrapped(last[1], text[last[0] + len(last[1]) : offset], words, language):
            start, run = out[-1]
            out[-1] = (start, run + " " * (offset - start - len(run)) + words)
        else:
            out.append((offset, words))
        last = (offset, words)
    return out


def _wrapped(line: str, between: str, following: str, language: str) -> bool:
    """Whether the sentence at the end of ``line`` goes on in ``following``, one line break (``between``) later: the
    next line starts with a lower-case letter (any letter in German, whose nouns have capitals)."""
    tail, head = line.strip(), following.lstrip()
    return (
        between in ("\n", "\r\n", "\r")
        and len(tail) >= WRAPPED_LINE
        and bool(_GOES_ON.search(tail))
        and (head[:1].islower() or (language in _NOUN_CAPITALS and head[:1].isalpha()))
    )


def split_sentences(text: str, language: str = "en") -> Split:
    """Sentences of ``text`` (without surrounding whitespace) and the exact text between them."""
    language = supported_language(language)
    spans: list[tuple[int, int]] = []
    for offset, words in _lines(text, language):
        core = words.strip()
        if not core:
            continue
        if language != "el" and _one_sentence(core):  # most requests: pysbd is a fifth of a server's Python
            start = offset + words.find(core)
            spans.append((start, start + len(core)))
        else:
            spans += [(offset + s, offset + e) for s, e in _line_spans(words, language)]
    return _from_spans(text, spans)


def _one_sentence(core: str) -> bool:
    """Whether pysbd would keep ``core`` (a stripped line) whole: nothing but letters, digits, marks and
    ``_INSIDE``, and at its very end at most one ``_END`` (tests/core/test_sentence_split.py holds it to pysbd; 66 %
    of the en-de test sentences take this path)."""
    end = len(core) - (core[-1] in _END)
    return all(c.isalnum() or c in _INSIDE or unicodedata.category(c).startswith("M") for c in core[:end])


def whole_text(text: str) -> Split:
    """No splitting: the text is one sentence; leading and trailing whitespace are separators."""
    core = text.strip()
    if not core:
        return _from_spans(text, [])
    start = text.find(core)
    return _from_spans(text, [(start, start + len(core))])


def _line_spans(line: str, language: str) -> list[tuple[int, int]]:
    """pysbd over one line, a window at a time so that a huge line costs linear time."""
    segmenter = pysbd.Segmenter(language=language, clean=False)  # cheap, and not thread-safe
    spans: list[tuple[int, int]] = []
    start, window = 0, _WINDOW
    while start < len(line):
        end = min(len(line), start + window)
        found = _locate(line[start:end], segmenter.segment(line[start:end]))
        if end < len(line):
            found = found[:-1]  # the window's last sentence may go on beyond it
            if not found:
                window *= 2  # one sentence longer than the window: look further
                continue
        spans += [(start + s, start + e) for s, e in found]
        start = start + found[-1][1] if end < len(line) else end
        window = _WINDOW
    return spans


def _locate(chunk: str, pieces: list[str]) -> list[tuple[int, int]]:
    """Offsets of pysbd's sentences in ``chunk``, whitespace trimmed, whatever pysbd changed."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for piece in pieces:
        core = piece.strip()
        found = chunk.find(core, cursor) if core else -1
        if found >= 0:
            spans.append((found, found + len(core)))
            cursor = found + len(core)
    rest = chunk[cursor:]
    if rest.strip():  # text pysbd lost or changed is still translated, as one more sentence
        spans.append((cursor + len(rest) - len(rest.lstrip()), cursor + len(rest.rstrip())))
    return spans


PART_PIECES = 48
"""A sentence of more source pieces than this is translated in parts (``fit``): the shipped models drop content from
longer ones (docs/long-sentences.md: en-de test sentences of more than 32 pieces, 21.6 BLEU whole, 23.2 in parts of
at most 48)."""
_CUTS = (re.compile(r"(?<=[;:])\s+"), re.compile(r"(?<=[,)\]])\s+"), re.compile(r"\s+"))
"""Where a sentence too long for the model is cut, best first: after a semicolon or colon, after a comma or a closing
bracket, at any space."""


def fit(split: Split, pieces: Callable[[str], int], limit: int) -> Split:
    """``split`` with each sentence of more than ``limit`` pieces (``pieces(sentence)``) cut into parts of at most
    ``limit``, so that nothing is cut off. A sentence is halved, then each half that is still too long: the cut
    falls at the best kind of place ``_CUTS`` finds in the middle half of the sentence, nearest its middle (else at
    the space nearest the middle, else at the middle character), and the white space there becomes a separator.
    The parts are sentences of their own; joined with their separators they give the text back exactly."""
    if all(pieces(s) <= limit for s in split.sentences):
        return split
    text = split.join(split.sentences)
    spans: list[tuple[int, int]] = []
    for start, end in split.spans:
        spans += _fit(text, start, end, pieces, limit)
    return _from_spans(text, spans)


def _fit(text: str, start: int, end: int, pieces: Callable[[str], int], limit: int) -> list[tuple[int, int]]:
    if end - start < 2 or pieces(text[start:end]) <= limit:
        return [(start, end)]
    middle, quarter = (start + end) / 2, (end - start) / 4
    for cut, near in [(cut, quarter) for cut in _CUTS] + [(_CUTS[-1], middle)]:
        found = [m for m in cut.finditer(text, start, end) if start < m.start() and m.end() < end]
        found = [m for m in found if abs((m.start() + m.end()) / 2 - middle) <= near]
        if found:
            best = min(found, key=lambda m: abs((m.start() + m.end()) / 2 - middle))
            left, right = (start, best.start()), (best.end(), end)
            break
    else:
        left, right = (start, int(middle)), (int(middle), end)
    return _fit(text, *left, pieces, limit) + _fit(text, *right, pieces, limit)


def _from_spans(text: str, spans: list[tuple[int, int]]) -> Split:
    separators: list[str] = []
    previous = 0
    for start, end in spans:
        separators.append(text[previous:start])
        previous = end
    separators.append(text[previous:])
    return Split([text[s:e] for s, e in spans], separators, spans)
