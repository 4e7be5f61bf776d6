"""The shipped models with a glossary, as the server reads and answers a sentence: every term reaches the
translation, in place of the words aligned to it, and the rest of the sentence stays the model's.
`python -m bench glossary` measures it on held-out text (docs/service.md#glossaries)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE, DecodeOptions

ROOT = Path(__file__).resolve().parents[2]
CASES = {
    "en-de": [
        ("Enter your password to continue.", {"password": "Kennwort"}),
        ("Click the button to save your changes.", {"button": "Schaltfläche"}),
        ("The printer is not connected to the computer.", {"computer": "Rechner"}),
        ("Show hidden files in the folder.", {"folder": "Verzeichnis"}),
        ("Where is the train station?", {"train station": "Bahnhof"}),
    ],
    "de-en": [
        ("Geben Sie Ihr Passwort ein, um fortzufahren.", {"Passwort": "passphrase"}),
        ("Wo ist der Bahnhof?", {"Bahnhof": "train station"}),
        ("Versteckte Dateien im Ordner anzeigen.", {"Ordner": "directory"}),
    ],
}


@pytest.mark.parametrize("pair", sorted(CASES))
def test_terms_reach_the_translation_and_the_rest_stays(pair: str) -> None:
    from core.reading import answer, read
    from inference.engine import Engine
    from inference.glossary import Glossary, apply

    engine = Engine.load(ROOT / "models" / pair, provider="cpu", threads=1)
    options = DecodeOptions(
        length_penalty=DEFAULT_LENGTH_PENALTY, no_repeat_ngram_size=DEFAULT_NO_REPEAT_NGRAM_SIZE, return_attention=True
    )
    lacked = 0
    for sentence, entries in CASES[pair]:
        reading = read(engine, sentence)
        terms = Glossary(entries).find(reading.protected.text)
        assert len(terms) == 1, sentence
        translation = engine.translate_ids([reading.ids], options)[0]
        plain = answer(reading, translation).best.text
        done, outcome = apply(translation, reading.protected.text, terms)
        text = answer(reading, done).best.text
        (target,) = entries.values()
        assert target.casefold() in text.casefold(), (sentence, plain, text)
        lacked += target.casefold() not in plain.casefold()
        assert outcome.replaced == (target.casefold() not in plain.casefold())
        # one run of words changed, no more: the words before and after it are the model's
        before, after = plain.split(), text.split()
        head = next(
            (i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), min(len(before), len(after))
        )
        tail = next((i for i, (a, b) in enumerate(zip(before[::-1], after[::-1], strict=False)) if a != b), 0)
        assert len(before) - head - tail <= 2 and len(after) - head - tail <= len(target.split()), (plain, text)
        model, kept = translation.best, done.best  # pieces, ids and scores stay the model's
        assert (kept.pieces, kept.token_ids, kept.score) == (model.pieces, model.token_ids, model.score)
    assert lacked >= 2, "the models already write every term: the cases no longer test the glossary"
