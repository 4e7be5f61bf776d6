"""How the server reads a sentence and answers it, in one place so that every caller reads alike (the server's
routes, ``python -m training evaluate-bundle``): literals as placeholders (core/protect.py), a sentence in capitals
folded by the engine's ``tokenize`` (core/casing.py), and on the way back the capitals restored, then the literals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from core.casing import restored, shouting
from core.protect import Protected, protect, with_literals
from core.translation import Translation


class Reader(Protocol):
    """What reading needs of an engine (inference's, the engine process's front, or a fake one)."""

    def tokenize(self, text: str) -> list[int]: ...

    def unknown_spans(self, text: str) -> list[tuple[int, int]]: ...


@dataclass(frozen=True)
class Reading:
    """A sentence as the model reads it: its source ids, and the text they came from with what goes back."""

    ids: list[int]
    protected: Protected


def read(engine: Reader, sentence: str) -> Reading:
    """``sentence`` as the model reads it."""
    protected = protect(sentence, engine.unknown_spans)
    return Reading(engine.tokenize(protected.text), protected)


def answer(reading: Reading, translation: Translation) -> Translation:
    """The model's ``translation`` of ``reading.ids`` as the client gets it."""
    protected = reading.protected
    return with_literals(restored(translation) if shouting(protected.text) else translation, protected)
