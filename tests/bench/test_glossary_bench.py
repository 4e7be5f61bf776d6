"""bench/glossary.py's oracle terms: the longest dictionary terms of a source whose translation the reference uses."""

from __future__ import annotations

from bench.glossary import holds, oracle_terms

WORDS = {"train station": {"Bahnhof"}, "station": {"Station", "Sender"}, "ticket": {"Fahrkarte"}, "train": {"Zug"}}


def test_the_longest_term_the_reference_uses_and_none_overlapping() -> None:
    source, reference = "Buy a ticket at the train station.", "Kaufen Sie eine Fahrkarte am Bahnhof."
    assert oracle_terms(source, reference, WORDS, most=1) == {"train station": "Bahnhof"}
    assert oracle_terms(source, reference, WORDS, most=5) == {"train station": "Bahnhof", "ticket": "Fahrkarte"}
    # the reference does not use the longer term's translation: the shorter terms may be taken
    assert oracle_terms(source, "Am Zug, an der Station.", WORDS, most=5) == {"train": "Zug", "station": "Station"}
    assert oracle_terms(source, "Nichts davon.", WORDS, most=5) == {}


def test_terms_are_whole_words_in_any_case() -> None:
    assert holds("Am BAHNHOF.", "Bahnhof") and not holds("Am Hauptbahnhof.", "Bahnhof")
