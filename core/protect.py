"""Literals a translation must carry unchanged: URLs, e-mail addresses, paths, file names, command-line options.

The model reads each as a placeholder ``{n}``, which the models learned to copy from the software catalogs
(training/literals.py), and the literal is put back in its place in the translation. A placeholder the translation
lost gets its literal at the end; a repeated one is dropped. Left to themselves en-de 0.9.0 kept 163 of the 242 such
literals of the held-out sets verbatim ("00-screensaver" became "00-screensave"); docs/literals.md has the
measures.

Numbers are not protected: a translation may rightly write them another way (German 2,5 for 2.5). The placeholders
are numbered above any ``{n}`` already in the text (the markup and document routes put their own there), so only
ours are put back here.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from core.translation import Translation

KINDS = {
    "url": r"https?://[^\s\"'<>()»«]+[^\s\"'<>().,;:!?»«]",
    "email": r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+",
    # each part ends with a letter, digit, _ or -, so "in /etc/a/b." leaves the full stop to the sentence; a final
    # slash belongs to the path
    "path": r"(?<![\w/])(?:~|\.{1,2})?/[\w.-]*[\w-](?:/[\w.-]*[\w-])+/?",
    "file": r"\b[\w-]+\.(?:txt|conf|cfg|ini|yaml|yml|json|xml|html?|png|jpe?g|svg|gif|pdf|odt|ods|csv|log|py|sh|c|h"
    r"|deb|tar|gz|zip|desktop|po|mo)\b",
    # after a space, the start, "[", "=", "|", ",", a "(" that opens a word, or "--" after "/" ("-o/--output"): a
    # dash after a word, a quote or a bracket joins a German compound ("»Siehe auch«-Verweise", "Seitenkopf/-fuß")
    "option": r"(?:(?<![^\s\[=|,])|(?<=[\s\[]\()|(?<=^\()|(?<=/)(?=--))--?[a-zA-Z][\w-]*",
}
"""What a literal looks like, by kind (bench/literals.py scores how many a translation keeps)."""
LITERAL = re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, pattern in KINDS.items()))
_NUMBERED = re.compile(r"\{(\d+)\}")
_SPACES = re.compile(r"(?<=\S)  +(?=\S)")
"""Where a repeated placeholder was dropped between two words."""


@dataclass(frozen=True)
class Protected:
    """A sentence as the model reads it, and what goes back in its translation."""

    text: str
    literals: tuple[tuple[str, str], ...] = ()
    """(placeholder, literal), in the order of the sentence"""


def protect(sentence: str, unknown: Callable[[str], list[tuple[int, int]]] | None = None) -> Protected:
    """``sentence`` with each literal as a placeholder ``{n}`` (unchanged when it holds none). ``unknown``: the spans
    of characters the model's vocabulary lacks (``Tokenizer.unknown_spans``: an emoji, a rare symbol, another
    script), which are kept the same way instead of being read as unk and written as " ⁇ "; a word with such a letter
    is kept whole."""
    spans = [m.span() for m in LITERAL.finditer(sentence)]
    if unknown is not None:
        found = {whole_word(sentence, *span) for span in unknown(sentence)}
        spans += [s for s in found if not any(a <= s[0] and s[1] <= b for a, b in spans)]
    if not spans:
        return Protected(sentence)
    first = max((int(n) for n in _NUMBERED.findall(sentence)), default=0) + 1
    literals: list[tuple[str, str]] = []
    parts, at = [], 0
    for start, end in sorted(spans):
        if start < at:  # overlapping: the earlier one holds it
            continue
        placeholder = "{" + str(first + len(literals)) + "}"
        literals.append((placeholder, sentence[start:end]))
        parts += [sentence[at:start], placeholder]
        at = end
    return Protected("".join([*parts, sentence[at:]]), tuple(literals))


def _word_char(char: str) -> bool:
    return char.isalnum() or unicodedata.category(char).startswith("M")


def whole_word(sentence: str, start: int, end: int) -> tuple[int, int]:
    """The word around an unknown run of letters ("naïve" when the vocabulary lacks "ï"), so that a word is either
    translated or kept, never cut in two around a placeholder; a run of symbols (an emoji) stays alone."""
    if not all(_word_char(c) for c in sentence[start:end]):
        return start, end
    while start > 0 and _word_char(sentence[start - 1]):
        start -= 1
    while end < len(sentence) and _word_char(sentence[end]):
        end += 1
    return start, end


def put_back(text: str, protected: Protected) -> str:
    """A translation of ``protected.text`` with its literals in place of their placeholders (in one pass, so a
    literal is never read again as a placeholder; other ``{n}`` are left for their owners)."""
    if not protected.literals:
        return text
    ours, placed, dropped = dict(protected.literals), set(), []

    def place(match: re.Match[str]) -> str:
        placeholder = match.group(0)
        if placeholder not in ours:
            return placeholder
        if placeholder in placed:
            dropped.append(placeholder)
            return ""
        placed.add(placeholder)
        return ours[placeholder]

    text = _NUMBERED.sub(place, text)
    if dropped:
        text = _SPACES.sub(" ", text)
    lost = [literal for placeholder, literal in protected.literals if placeholder not in placed]
    return " ".join([text, *lost]) if text else " ".join(lost)


def with_literals(translation: Translation, protected: Protected) -> Translation:
    """``translation`` with every hypothesis' text given its literals back (its pieces stay the model's)."""
    if not protected.literals:
        return translation
    hypotheses = [dataclasses.replace(h, text=put_back(h.text, protected)) for h in translation.hypotheses]
    return dataclasses.replace(translation, hypotheses=hypotheses)
