"""Sentences in capitals: which ones the engine folds, how, and how their translations come back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.bundle import BundleError
from core.casing import Casing, restored, shouting
from core.translation import Hypothesis, Translation


@pytest.mark.parametrize(
    "text",
    [
        "NO WARRANTY",
        "HELP!",
        "THE FILE COULD NOT BE OPENED.",
        "ERROR 404: NOT FOUND",
        "«ACHTUNG»",
        "GRÖSSE ÄNDERN",
        "RGB",
        "ПРИВЕТ МИР",
        "HARDWARE-UNTERSTÜTZUNG",
    ],
)
def test_text_in_capitals_is_folded(text: str) -> None:
    assert shouting(text)


@pytest.mark.parametrize(
    "text",
    [
        "=SUM(A1:A5)",
        "3 A",
        "Hello WORLD",
        "",
        "I",
        "123 456",
        "A1:B2",
        "the FILE",
        "ß ß",
        "你好世界",
        "مرحبا بالعالم",
        "I/O",
    ],
)
def test_text_with_lower_case_or_no_word_is_left_alone(text: str) -> None:
    assert not shouting(text)
    assert Casing({"file": "File"}).fold(text) == text


def test_fold_without_a_table_lower_cases_and_capitalises_the_first_letter() -> None:
    assert Casing().fold("THE FILE IS OPEN.") == "The file is open."
    assert Casing().fold("«HELLO, I SAID»") == "«Hello, i said»"
    assert Casing().fold("3 NEW MESSAGES") == "3 new messages"


def test_fold_gives_each_word_of_the_table_its_usual_case() -> None:
    casing = Casing({"i": "I", "paris": "Paris", "usb": "USB", "datei": "Datei"})
    assert casing.fold("I LIVE IN PARIS, WITH A USB-STICK.") == "I live in Paris, with a USB-stick."
    assert casing.fold("DIE DATEI") == "Die Datei"
    assert casing.fold("PARISIAN") == "Parisian"  # whole words only


def test_restored_puts_every_hypothesis_text_in_capitals_and_keeps_the_models_pieces() -> None:
    hypotheses = [
        Hypothesis(
            text="Die Straße ist offen.", pieces=["▁Die", "▁Straße"], token_ids=[5, 6], score=-1.0, token_logprobs=[]
        ),
        Hypothesis(text="Die Straße", pieces=["▁Die"], token_ids=[5], score=-2.0, token_logprobs=[]),
    ]
    translation = Translation(source_pieces=["▁The"], hypotheses=hypotheses, truncated_source=True)
    back = restored(translation)
    assert [h.text for h in back.hypotheses] == ["DIE STRASSE IST OFFEN.", "DIE STRASSE"]
    assert [h.pieces for h in back.hypotheses] == [h.pieces for h in hypotheses]
    assert [h.token_ids for h in back.hypotheses] == [[5, 6], [5]]
    assert back.source_pieces == ["▁The"] and back.truncated_source
    assert translation.hypotheses[0].text == "Die Straße ist offen."  # the engine's own is not changed


def test_a_bundle_names_its_table_in_the_manifest(tmp_path: Path) -> None:
    assert Casing.load(tmp_path, {"vocabulary": {"vocab": "vocab.json"}}).table == {}
    (tmp_path / "truecase.json").write_text(json.dumps({"usb": "USB"}), encoding="utf-8")
    assert Casing.load(tmp_path, {"vocabulary": {"truecase": "truecase.json"}}).table == {"usb": "USB"}


@pytest.mark.parametrize("content", ["{not json", '["usb", "USB"]', '{"usb": 3}', None])
def test_a_broken_or_missing_table_is_a_bundle_error_that_says_how_to_fix_it(
    tmp_path: Path, content: str | None
) -> None:
    if content is not None:
        (tmp_path / "truecase.json").write_text(content, encoding="utf-8")
    with pytest.raises(BundleError, match="truecase"):
        Casing.load(tmp_path, {"vocabulary": {"truecase": "truecase.json"}})
