"""Ding's German-English dictionary: phrases and sentences read out of ``trans-de-en``, an opt-in training-only
source that adds only what neither another source nor a held-out set has, on either side."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.corpus import catalog_pairs, held_out_pairs, say_it_pairs
from training.corpus.collect import resolve_sources
from training.corpus.ding import DICTIONARY, extract_ding_pairs, first_alternative
from training.corpus.report import write_splits
from training.corpus.sources import SOURCES, CorpusError, Pair
from training.corpus.split import assemble_corpus

# Lines in the layout of trans-de-en 1.9 (2023-01-30).
LINES = [
    "# Version :: devel 2023-01-30",
    "Aal {m} [zool.] | Aale {pl} | Aal in Aspik; Aal in Gelee :: eel | eels | jellied eel",
    "Boot {n} | Wir sitzen alle in einem Boot. :: boat | We’re all in the same boat.",
    "Erklärung {f} | eine Erklärung abgeben; eine Aussage machen :: statement | to make a statement (officially)",
    "jdm. etw. geben | auf eine/die Linie :: to give sb. sth. | on a/the line",
    "Schreibzugriff {m} | Zugriff (auf; für) verweigern :: write access | to deny access",
    "ausgepfiffen werden | ausgepfiffen werdend :: to get the bird | getting the bird",
    "Uhr {f} | zwei Zeilen :: clock",  # the sides list different numbers of senses: nothing from the line
    "Gift {n} | Weiche Betten sind Gift für meinen Rücken. :: poison | Soft beds are murder on my back.",
    "Gift {n} | Weiche Betten sind Gift für meinen Rücken. :: poison | Soft beds are murder on my back.",
]


def write_dictionary(root: Path) -> Path:
    path = root / DICTIONARY
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return root


def test_first_alternative_drops_annotations_before_choosing() -> None:
    assert first_alternative("Aal in Aspik; Aal in Gelee") == "Aal in Aspik"
    assert first_alternative("Zugriff (auf; für) verweigern") == "Zugriff verweigern"
    assert first_alternative(" Aal {m} [zool.] ") == "Aal"


def test_phrases_and_sentences_of_both_sides_become_pairs(tmp_path: Path) -> None:
    pairs = extract_ding_pairs("ding", write_dictionary(tmp_path))
    assert [(p.unit, p.en, p.de) for p in pairs] == [
        ("aal", "jellied eel", "Aal in Aspik"),
        ("boot", "We’re all in the same boat.", "Wir sitzen alle in einem Boot."),
        ("erklärung", "to make a statement", "eine Erklärung abgeben"),
        ("schreibzugriff", "to deny access", "Zugriff verweigern"),
        ("ausgepfiffen werden", "to get the bird", "ausgepfiffen werden"),
        ("gift", "Soft beds are murder on my back.", "Weiche Betten sind Gift für meinen Rücken."),
    ]  # no single-word side (eels / Aale), no slots or choices, no participle, no uneven line, no repeat


def test_missing_file_names_the_culprit(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="trans/de-en"):
        extract_ding_pairs("ding", tmp_path)


def test_ding_only_adds_training_pairs_that_are_new_on_both_sides(tmp_path: Path) -> None:
    assert "ding" not in resolve_sources(None)
    assert "ding" in resolve_sources(["all", "ding"])
    assert SOURCES["ding"].debs == ("trans-de-en",)
    ui = catalog_pairs()
    base = ui + say_it_pairs()
    without = assemble_corpus(base, seed=1)
    held = held_out_pairs(without)
    dictionary = without.test["dictionary"]
    in_train = without.train[0]
    ding = [
        Pair("ding", "a", dictionary[0].en.replace(" times", " times,"), "Ganz anders."),  # held-out English
        Pair("ding", "b", "Quite another thing.", dictionary[1].de.upper()),  # held-out German, another English
        Pair("ding", "c", "Yet another thing.", in_train.de),  # German already in training
        Pair("ding", "d", in_train.en, "Noch etwas anderes."),  # English already in training
        Pair("ding", "e", "Something new.", "Etwas Neues."),
        Pair("ding", "f", "Something new!", "Wieder etwas Neues."),  # its English is the one before's
    ]
    added = assemble_corpus(base + ding, seed=1)
    assert added.dev == without.dev and added.test == without.test and added.eval == without.eval
    assert {p for p in added.train if p.source != "ding"} == set(without.train)
    assert [(p.en, p.de) for p in added.train if p.source == "ding"] == [("Something new.", "Etwas Neues.")]
    assert added.stats["ding"]["dropped:heldout-overlap"] == 2 and added.stats["ding"]["dropped:duplicate"] == 3
    sizes = write_splits(tmp_path, added)
    assert sizes["train.phrases.tsv"] == 1 and "test.phrases.tsv" not in sizes
    assert not {p.en for p in held} & {p.en for p in added.train}
