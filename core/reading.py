"""How the server reads a sentence and answers it, in one place so that every caller reads alike (the server's
routes, ``python -m training evaluate-bundle``): literals as placeholders (core/protect.py), a sentence in capitals
folded by the engine's ``tokenize`` (core/casing.py), and on the way back the capitals restored, then the literals.
"""

from __future__ import annotations

from typing import Protocol

from core.casing import restored, shouting
from core.protect import protect, with_literals
from core.translation import Translation


class Reader(Protocol):
    """What reading needs of an engine (inference's, the engine process's front, or a fake one)."""

    def tokenize(self, text: str) -> list[int]: ...

    def unknown_spans(self, text: str) -> list[tuple[int, int]]: ...


def read(engine: Reader, sentence: str) -> list[int]:
    """The source ids of ``sentence`` as the model reads it."""
    return engine.tokenize(protect(sentence, engine.unknown_spans).text)


def answer(engine: Reader, sentence: str, translation: Translation) -> Translation:
    """The model's ``translation`` of ``read(engine, sentence)`` as the client gets it."""
    protected = protect(sentence, engine.unknown_spans)
    return with_literals(restored(translation) if shouting(protected.text) else translation, protected)
