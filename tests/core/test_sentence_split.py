from __future__ import annotations

import time

import pytest

from core.sentences import split_sentences, supported_language, whole_text

LAYOUTS = [
    "Hello world. How are you?  I'm fine!\n\nNew paragraph. Dr. Smith went to Washington D.C.",
    "  leading and trailing spaces.   ",
    "",
    "   \n\n  ",
    "no punctuation at all",
    "Line one\r\nLine two. Still line two.\nLine three\n",
    "Ends without a full stop. Like this",
    "\tTabbed. Text.\t",
    "x" * 2500 + ". Short one. " + "y" * 10,
]


@pytest.mark.parametrize("text", LAYOUTS)
def test_sentences_and_separators_rebuild_the_text_exactly(text: str) -> None:
    split = split_sentences(text)
    assert split.join(split.sentences) == text
    assert len(split.separators) == len(split.sentences) + 1
    for sentence, (start, end) in zip(split.sentences, split.spans, strict=True):
        assert text[start:end] == sentence
        assert sentence == sentence.strip() and sentence


def test_splits_at_sentence_ends_and_line_breaks_not_abbreviations() -> None:
    split = split_sentences("Dr. Smith arrived. He was late.\nNext line")
    assert split.sentences == ["Dr. Smith arrived.", "He was late.", "Next line"]
    assert split.separators == ["", " ", "\n", ""]


def test_join_puts_translations_between_the_original_separators() -> None:
    split = split_sentences("One.  Two.\n\nThree.")
    assert split.join(["Eins.", "Zwei.", "Drei."]) == "Eins.  Zwei.\n\nDrei."
    with pytest.raises(ValueError, match="needs 3 parts"):
        split.join(["Eins."])


def test_whole_text_keeps_one_sentence_and_outer_whitespace() -> None:
    split = whole_text("  One. Two.\n")
    assert split.sentences == ["One. Two."]
    assert split.join(["Eins. Zwei."]) == "  Eins. Zwei.\n"
    assert whole_text("  ").sentences == []


def test_long_text_splits_in_linear_time() -> None:
    text = "This is a sentence about something. " * 600
    started = time.perf_counter()
    split = split_sentences(text)
    assert len(split.sentences) == 600
    assert split.join(split.sentences) == text
    assert time.perf_counter() - started < 5  # pysbd on the whole string at once takes ~3x longer


def test_language_codes_fall_back_to_english_rules() -> None:
    assert supported_language("de-AT") == "de"
    assert supported_language("xx") == "en"
