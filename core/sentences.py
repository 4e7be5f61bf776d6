"""Split a text into sentences (pysbd) and join their translations back with the original layout.

Every character of the input is either inside a sentence or in a separator, so
``separators[0] + s[0] + separators[1] + ... + s[-1] + separators[-1] == text``: translating the
sentences and joining them with the same separators keeps spaces, line and paragraph breaks where
the client had them. A line break always ends a sentence (lists, headings, addresses are not prose).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pysbd
import pysbd.languages

_WINDOW = 1000  # pysbd slows down more than linearly with length: it sees this many chars at once
_LINES = re.compile(r"[^\r\n]+")


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


def split_sentences(text: str, language: str = "en") -> Split:
    """Sentences of ``text`` (without surrounding whitespace) and the exact text between them."""
    language = supported_language(language)
    spans: list[tuple[int, int]] = []
    for line in _LINES.finditer(text):
        offset = line.start()
        spans += [(offset + s, offset + e) for s, e in _line_spans(line.group(), language)]
    return _from_spans(text, spans)


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


def _from_spans(text: str, spans: list[tuple[int, int]]) -> Split:
    separators: list[str] = []
    previous = 0
    for start, end in spans:
        separators.append(text[previous:start])
        previous = end
    separators.append(text[previous:])
    return Split([text[s:e] for s, e in spans], separators, spans)
