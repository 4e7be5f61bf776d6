"""Text typed in capitals: translated as if written in the usual case, and given back in capitals.

Models learn from text in the usual case; a sentence in capitals ("THE FILE COULD NOT BE OPENED.") is almost
unseen and comes out as a copy or nonsense (BLEU 4.0 for 1,000 en-de test and dev sentences put in capitals,
against 25.5 as written; docs/casing.md has the measures). So a sentence with no lower-case letter and at
least one word of capitals is *folded* before the model reads it: lower-cased, each word given the case it has most
often inside sentences of the training text (``truecase.json`` in the bundle: "paris" -> "Paris", "usb" -> "USB";
German nouns keep their capital), the sentence's first word capitalised. Its translation is then *restored*: put in
capitals (German "ß" becomes "SS", as ``str.upper`` has it). Its pieces, ids and attention stay those the model
read and wrote.

Text with any lower-case letter is left alone: a line written all in lower case is most often meant so (man page
fragments, verse continuations), and changing it costs BLEU on real text (docs/casing.md).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from core.bundle import BundleError
from core.translation import Translation

TRUECASE_FILE = "truecase.json"
WORDS = re.compile(r"[^\W\d_]+")
"""A run of letters: what the truecase table maps."""
_EDGES = "\"'()[]{}<>«»„“”‘’.,:;!?…*"
"""What may surround a word and still leave it a word of letters (quotes, brackets, punctuation)."""
_BETWEEN = re.compile(r"[\s\-‐–—/]+")
"""What separates words: white space, hyphens and dashes, slashes ("USB-STICK" is two words)."""


def shouting(text: str) -> bool:
    """No lower-case letter, and at least one word (between spaces, hyphens or slashes) of two capitals or more and
    nothing else besides the punctuation around it: "NO WARRANTY", "HELP!", "USB-STICK", "ПРИВЕТ", but not
    "=SUM(A1:A5)", "3 A", nor text in a script without case ("你好")."""
    if any(c.islower() for c in text):
        return False
    words = (w.strip(_EDGES) for w in _BETWEEN.split(text))
    return any(word.isalpha() and sum(c.isupper() for c in word) >= 2 for word in words)


def restored(translation: Translation) -> Translation:
    """A folded sentence's translation with every hypothesis' text back in capitals (its pieces, ids and attention
    stay the model's own)."""
    hypotheses = [dataclasses.replace(h, text=h.text.upper()) for h in translation.hypotheses]
    return dataclasses.replace(translation, hypotheses=hypotheses)


class Casing:
    """The fold of one model's source language: ``table`` maps a lower-case word to the case it usually has
    (words whose usual case is lower case are not in it)."""

    def __init__(self, table: dict[str, str] | None = None):
        self.table = table or {}

    @classmethod
    def load(cls, bundle: str | Path, manifest: dict[str, Any]) -> Casing:
        """The bundle's table (``vocabulary.truecase``), or none: then a folded sentence is only lower-cased and
        capitalised."""
        name = manifest.get("vocabulary", {}).get("truecase")
        if not name:
            return cls()
        path = Path(bundle) / name
        try:
            table = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise BundleError(
                f"{path}: the bundle's truecase table cannot be read ({err}); add it again with "
                "`python -m training truecase BUNDLE TRAINING_TSV`"
            ) from err
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise BundleError(f"{path} must hold one JSON object, lower-case word -> cased word; add it again")
        return cls(table)

    def fold(self, text: str) -> str:
        """``text`` as the model should read it: ``truecased`` if it is ``shouting``, else unchanged."""
        return self.truecased(text) if shouting(text) else text

    def truecased(self, text: str) -> str:
        """``text`` lower-cased, each word of the table in its usual case, the first word capitalised."""
        table = self.table
        folded = WORDS.sub(lambda m: table.get(m.group(), m.group()), text.lower())
        for i, c in enumerate(folded):  # the sentence's first word, unless it starts with a digit ("3 new messages")
            if c.isalnum():
                return folded[:i] + c.upper() + folded[i + 1 :] if c.isalpha() else folded
        return folded
