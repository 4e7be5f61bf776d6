"""The shipped models read a sentence in capitals about as they read it written as usual (core/casing.py): the
translation of the capitals, against that of the sentence as written, scores far above the capitals read as they
are. `python -m bench casing` measures it on held-out text (docs/casing.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE, DecodeOptions

ROOT = Path(__file__).resolve().parents[2]
SENTENCES = {
    "en-de": [
        "The file could not be opened.",
        "Click the button to save your changes.",
        "Do you want to delete this folder?",
        "The printer is not connected to the computer.",
        "Enter your password to continue.",
        "Show hidden files in the folder.",
    ],
    "de-en": [
        "Die Datei konnte nicht geöffnet werden.",
        "Klicken Sie auf die Schaltfläche, um Ihre Änderungen zu speichern.",
        "Möchten Sie diesen Ordner löschen?",
        "Der Drucker ist nicht mit dem Rechner verbunden.",
        "Geben Sie Ihr Passwort ein, um fortzufahren.",
        "Versteckte Dateien im Ordner anzeigen.",
    ],
}


@pytest.mark.parametrize("pair", sorted(SENTENCES))
def test_capitals_translate_like_the_sentence_as_written(pair: str) -> None:
    import sacrebleu

    from inference.engine import Engine

    engine = Engine.load(ROOT / "models" / pair, provider="cpu", threads=1)
    assert engine.casing.table, f"models/{pair} has no truecase table"
    options = DecodeOptions(length_penalty=DEFAULT_LENGTH_PENALTY, no_repeat_ngram_size=DEFAULT_NO_REPEAT_NGRAM_SIZE)
    sentences = SENTENCES[pair]
    capitals = [s.upper() for s in sentences]
    written = [t.best.text.upper() for t in engine.translate(sentences, options)]
    folded = [t.best.text for t in engine.translate(capitals, options)]
    as_they_are = [
        t.best.text.upper()
        for t in engine.translate_ids([engine.tokenizer.encode_source(s) for s in capitals], options)
    ]
    assert all(t == t.upper() for t in folded)
    near = sacrebleu.corpus_chrf(folded, [written]).score
    far = sacrebleu.corpus_chrf(as_they_are, [written]).score
    assert near > 80 and near > far + 20, (near, far, folded, as_they_are)
