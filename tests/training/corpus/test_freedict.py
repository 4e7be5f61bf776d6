"""FreeDict's English-German dictionary: usage examples and sentence entries read out of the dictd files, an opt-in
source whose held-out pairs go to test.dictionary.tsv only, leaving dev, test.tsv and the other test sets as they
were."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from testkit.corpus import catalog_pairs, check_group_added, held_out_pairs, say_it_pairs
from training.corpus.collect import resolve_sources
from training.corpus.freedict import base64_number, extract_freedict_pairs, first_alternative
from training.corpus.sources import SOURCES, CorpusError, Pair
from training.corpus.split import assemble_corpus

# Entries in the layout of dict-freedict-eng-deu 2022.04.21 (a headword line, its translations, notes, examples).
ENTRIES = [
    (
        "nice",
        """nice /nˈaɪs/
nett, lieb, sympathisch <adj>
         Note: Person
      "It was very nice of you to drive me home."  - Es war sehr nett von dir, mich nach Hause zu fahren.
      "How nice of you!"  - Wie nett von dir!, Wie nett von Ihnen!
   Synonym: {canny}
""",
    ),
    (
        "weather",
        """weather /wˈɛðə/
Wetter <neut>, Witterung <fem> [meteo.]
      "in this weather"  - bei diesem Wetter
      "in all weathers"  - bei jeder Witterung, bei jedem Wetter
      "a line/curve"  - eine Linie/Kurve
      "be avid for sth."  - auf etw. erpicht sein
      "weather"  - Wetter
""",
    ),
    (
        "that's greek to me",
        """That's Greek to me. /ðat ˈɛs ɡɹˈiːk tə mˌiː/
 [fig.] Das kommt mir Spanisch vor. [übtr.]
""",
    ),
    ("cotton gin", "cotton gin /kˈɒtən dʒˈɪn/\nBaumwollentkörnungsmaschine <fem>\n"),
    ("nicely", 'nicely /nˈaɪsli/\nnett <adv>\n      "How nice of you!"  - Wie nett von dir!\n'),
]
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _b64(n: int) -> str:
    digits = ""
    while True:
        digits = B64[n % 64] + digits
        n //= 64
        if not n:
            return digits


def write_dictionary(root: Path) -> Path:
    """A dictd pair of files holding ENTRIES, with a header entry and a second headword for one entry."""
    base = root / "usr/share/dictd"
    base.mkdir(parents=True)
    header = "00-database-info\nEnglish - German\n"
    blob, index = header.encode(), [f"00-database-info\t{_b64(0)}\t{_b64(len(header.encode()))}"]
    for headword, text in ENTRIES:
        data = text.encode()
        index.append(f"{headword}\t{_b64(len(blob))}\t{_b64(len(data))}")
        if headword == "nice":  # another headword pointing at the same entry: read once
            index.append(f"nice one\t{_b64(len(blob))}\t{_b64(len(data))}")
        blob += data
    (base / "freedict-eng-deu.dict.dz").write_bytes(gzip.compress(blob))
    (base / "freedict-eng-deu.index").write_text("\n".join(index) + "\n", encoding="utf-8")
    return root


def test_dictd_numbers_are_base64_most_significant_first() -> None:
    expected = [0, 1, 64, 63, 5 * 64**3 + 21 * 64**2 + 43 * 64 + 43]
    assert [base64_number(s) for s in ("A", "B", "BA", "/", "FVrr")] == expected


def test_first_alternative_splits_sentences_only_after_their_end() -> None:
    assert first_alternative("Wie nett von dir!, Wie nett von Ihnen!", sentence=True) == "Wie nett von dir!"
    one = "Es war nett von dir, mich zu fahren."
    assert first_alternative(one, sentence=True) == one
    assert first_alternative("bei jeder Witterung, bei jedem Wetter", sentence=False) == "bei jeder Witterung"
    annotated = " [fig.] Das kommt mir Spanisch vor. [übtr.]"
    assert first_alternative(annotated, sentence=True) == "Das kommt mir Spanisch vor."


def test_examples_and_sentence_entries_become_pairs(tmp_path: Path) -> None:
    pairs = extract_freedict_pairs("freedict", write_dictionary(tmp_path))
    assert [(p.unit, p.en, p.de) for p in pairs] == [
        ("nice", "It was very nice of you to drive me home.", "Es war sehr nett von dir, mich nach Hause zu fahren."),
        ("nice", "How nice of you!", "Wie nett von dir!"),
        ("weather", "in this weather", "bei diesem Wetter"),
        ("weather", "in all weathers", "bei jeder Witterung"),
        ("that's greek to me.", "That's Greek to me.", "Das kommt mir Spanisch vor."),
    ]  # no slots (sth., a line/curve), no single words, no term entries, the repeated example once


def test_missing_files_name_the_culprit(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="freedict-eng-deu.index"):
        extract_freedict_pairs("freedict", tmp_path)


def test_dictionary_is_opt_in_and_leaves_the_other_sets_as_they_were(tmp_path: Path) -> None:
    assert "freedict" not in resolve_sources(None)
    assert "freedict" in resolve_sources(["all", "freedict"])
    assert SOURCES["freedict"].debs == ("dict-freedict-eng-deu",)
    ui = catalog_pairs()
    without = assemble_corpus(ui, seed=1)
    held = held_out_pairs(without)
    # the dictionary repeats some held-out strings in many units: they must stay held out, not turn "common"
    words = [Pair("freedict", f"word{u}", p.en, f"{p.de} (Wörterbuch)") for p in held[:20] for u in range(5)]
    words += say_it_pairs()
    with_dict = assemble_corpus(ui + words, seed=1)
    check_group_added(without, with_dict, "dictionary", "freedict", held, tmp_path)
