"""core.tokenizer's text normalisation against its rules, character by character."""

from __future__ import annotations

import unicodedata

import numpy as np

from core.tokenizer import Tokenizer

KINDS = [
    "abc XYZ 123 .,;:!?-'\"()",  # printable ASCII
    "äöüßéñçø€£©°±µ",  # printable Latin-1 and beyond
    "\u0301\u0308\u0327",  # combining marks: NFC composes them with the letter before
    "日本語中文한국어",  # CJK
    "\U0001f600\U0001f44d",  # emoji (astral)
    "\t\n\r\x00\x1b\x7f\x85",  # controls (Cc)
    "\u00a0\u2009\u3000",  # spaces other than the ASCII one (Zs: not printable, kept)
    "\u2028\u2029",  # line and paragraph separators (Zl, Zp)
    "\u200b\u200d\u200e\u2060\ufeff\u00ad",  # format characters (Cf), the zero-width joiner among them
    "\ue000\uf8ff\U000f0000",  # private use (Co)
    "\u0378\U000e0000",  # unassigned (Cn)
]


def rules(text: str) -> str:
    """The per-character rules, as they were written before the printable fast path."""
    text = unicodedata.normalize("NFC", text)
    return "".join(
        " " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c
        for c in text
        if unicodedata.category(c) not in ("Cs", "Cf", "Co") or c == "\u200d"
    ).strip()


def test_normalize_follows_its_rules_on_mixed_text() -> None:
    rng = np.random.default_rng(0)
    printable = 0
    for _ in range(3000):
        kinds = rng.choice(len(KINDS), size=int(rng.integers(1, 4)), replace=False)
        pool = "".join(KINDS[k] for k in kinds)
        text = "".join(pool[int(i)] for i in rng.integers(0, len(pool), size=int(rng.integers(0, 30))))
        if rng.random() < 0.3:
            text = " " + text + "  "
        assert Tokenizer.normalize(text) == rules(text), ascii(text)
        printable += unicodedata.normalize("NFC", text).isprintable()
    assert 300 < printable < 2700, printable  # both ways through the function taken often


def test_normalize_replaces_controls_and_separators_and_drops_invisible_characters() -> None:
    assert Tokenizer.normalize(" Save\tthe\u2028file\x00 ") == "Save the file"
    assert Tokenizer.normalize("re\u00adboot\u200b now\ue000") == "reboot now"
    assert Tokenizer.normalize("\U0001f469\u200d\U0001f4bb") == "\U0001f469\u200d\U0001f4bb"  # the joiner stays
    assert Tokenizer.normalize("Cafe\u0301") == "Caf\u00e9"
