from __future__ import annotations

import time

import pytest

from core.sentences import fit, split_sentences, supported_language, whole_text

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
    "A sentence wrapped the way e-mail and man pages are, going on\r\nafter the line break, and again on the next\n"
    "line. Then a new one.\n\nNext paragraph.",
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


def test_hard_wrapped_prose_is_read_across_its_line_breaks() -> None:
    text = (
        "The quick brown fox jumps over the lazy dog and then it\n"
        "runs away into the forest, where nobody can find it. Then\n"
        "It rains.\n"
        "Options\n"
        "install   install the package and everything that it needs\n"
        "now\n"
        "\n"
        "A long heading line that has no punctuation at the end\n"
        "but goes on here.\n"
        "A line of forty characters or more ends.\n"
        "next line starts in lower case."
    )
    split = split_sentences(text)
    assert split.sentences == [
        "The quick brown fox jumps over the lazy dog and then it\nruns away into the forest, where nobody can find it.",
        "Then",  # the next line starts with a capital: a line break ends it
        "It rains.",
        "Options",  # too short to be wrapped prose
        "install   install the package and everything that it needs\nnow",
        "A long heading line that has no punctuation at the end\nbut goes on here.",  # a blank line before: its own
        "A line of forty characters or more ends.",  # a full stop ends it
        "next line starts in lower case.",
    ]
    assert split.join(split.sentences) == text


def test_german_prose_goes_on_at_a_capital_too() -> None:
    text = "Die Datei wurde nicht gefunden, weil der angegebene Pfad nicht\nExistiert oder die Rechte fehlen."
    assert split_sentences(text, "de").sentences == [text]  # nouns have capitals: any letter goes on
    assert split_sentences(text, "en").sentences == text.split("\n")


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


@pytest.mark.parametrize("language", ["en", "de", "fr", "es", "el", "hi"])
def test_lines_kept_whole_without_pysbd_are_what_pysbd_keeps_whole(language: str) -> None:
    """The fast path (core/sentences.py, ``_one_sentence``) against pysbd itself, the independent reference:
    random lines of words, inside marks and closing runs split the same both ways, and the lines that take the
    fast path are most of the one-sentence ones (else the test tests nothing)."""
    import random

    import core.sentences as sentences

    rng = random.Random(language)
    words = ["Hello", "world", "Straße", "naïve", "café", "42", "3,5", "Dr", "U.S", "e.g", "i", "a", "b", "München"]
    words += ["über", "x1", "ok", "1)", "(see", "this)", "σπίτι", "नमस्ते", "“quoted”", "it’s", "CO2", "#tag", "50%"]
    inside = [" ", " ", " ", ", ", "; ", ": ", " - ", " – ", " / ", " & ", " 'q' ", ' "q" ', " «q» ", " . ", "? ", "! "]
    ends = ["", ".", "!", "?", "...", "…", '."', "?)", ".’", "!?", ". ", ".]", ")"]
    plain_words = [w for w in words if all(c.isalnum() or c in "’“”#%," for c in w)]
    plain_inside = [i for i in inside if not set(i) & set(".?!")]
    fast = 0
    for n in range(1000):
        w, i = (plain_words, plain_inside) if n % 2 else (words, inside)  # half the lines likely one sentence
        line = rng.choice(w) + "".join(rng.choice(i) + rng.choice(w) for _ in range(rng.randint(0, 12)))
        line += rng.choice(ends)
        expected = [line[s:e] for s, e in sentences._line_spans(line, sentences.supported_language(language))]
        assert split_sentences(line, language).sentences == expected, line
        fast += sentences._one_sentence(line.strip()) and language != "el"
    assert language == "el" or fast > 80, fast


def _words(text: str) -> int:
    return len(text.split())


@pytest.mark.parametrize("text", LAYOUTS)
@pytest.mark.parametrize("limit", [1, 2, 3, 50])
def test_fit_cuts_only_what_is_too_long_and_rebuilds_the_text_exactly(text: str, limit: int) -> None:
    split = split_sentences(text)
    fitted = fit(split, _words, limit)
    assert fitted.join(fitted.sentences) == text
    for sentence, (start, end) in zip(fitted.sentences, fitted.spans, strict=True):
        assert text[start:end] == sentence and sentence == sentence.strip() and sentence
        assert _words(sentence) <= limit
    kept = [s for s in split.sentences if _words(s) <= limit]
    assert all(s in fitted.sentences for s in kept)  # a sentence within the limit stays whole
    if all(_words(s) <= limit for s in split.sentences):
        assert fitted is split


def test_fit_cuts_at_punctuation_in_the_middle_before_a_space_and_a_word_in_its_middle() -> None:
    text = "one two three four five; six seven eight nine ten"
    assert fit(whole_text(text), _words, 6).sentences == ["one two three four five;", "six seven eight nine ten"]
    text = "one two, three four five six seven eight nine ten"  # the comma is not in the middle half: a space is
    assert fit(whole_text(text), _words, 6).sentences == ["one two, three four five", "six seven eight nine ten"]
    word = fit(whole_text("x" * 10), len, 3)
    assert word.sentences == ["xx", "xxx", "xx", "xxx"] and word.separators == [""] * 5
