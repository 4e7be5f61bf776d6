"""Literals read as placeholders and put back: which ones, how they are numbered, what happens when the model loses
or repeats one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.protect import Protected, protect, put_back, with_literals
from core.translation import Hypothesis, Translation


@pytest.mark.parametrize(
    ("sentence", "literal"),
    [
        ("See https://example.org/docs?a=1 for more.", "https://example.org/docs?a=1"),
        ("Write to ada@example.org today.", "ada@example.org"),
        ("Edit /etc/dconf/db/local.d/00-screensaver now.", "/etc/dconf/db/local.d/00-screensaver"),
        ("Open config.yaml and save.", "config.yaml"),
        ("Run it with --no-cache or -v.", "--no-cache"),
        ("-v prints more", "-v"),
    ],
)
def test_each_kind_of_literal_becomes_a_placeholder(sentence: str, literal: str) -> None:
    read = protect(sentence)
    assert literal not in read.text and "{1}" in read.text
    assert read.literals[0] == ("{1}", literal)
    assert put_back(read.text, read) == sentence  # a translation that copies the placeholders gets the literals


@pytest.mark.parametrize(
    "sentence",
    [
        "Version 2.5 costs 30 euros.",
        "and/or km/h I/O",
        "a - b",
        "e.g. this",
        "»Siehe auch«-Verweise am Ende",  # German compounds: a dash after a quote, a slash, a bracket
        "Seitenkopf/-fuß einfügen",
        "Klicken Sie auf das [+]-Symbol oder die `-Taste.",
        "Zwei <wallpaper>-Elemente und Fischaugen(-Objektive)",
    ],
)
def test_text_without_literals_is_read_as_it_is(sentence: str) -> None:
    assert protect(sentence) == Protected(sentence)


@pytest.mark.parametrize(
    ("sentence", "read_as"),
    [
        ("wipefs [--backup] -o offset", "wipefs [{1}] {2} offset"),  # options after brackets, slashes, "="
        ("[-o/--output=DIR|FILE]", "[{1}/{2}=DIR|FILE]"),
        ("(--verbose) or --listen=-n", "({1}) or {2}={3}"),
        ("These databases are found in /etc/dconf/db/.", "These databases are found in {1}."),
        ("It can be found in ~/.local/share/Trash.", "It can be found in {1}."),
        ("Edit /etc/a/b, then /usr/x/y; or ../c/d!", "Edit {1}, then {2}; or {3}!"),
    ],
)
def test_where_a_literal_starts_and_ends(sentence: str, read_as: str) -> None:
    """Options start after a space, a bracket, "=" or "/"; a path leaves the sentence its punctuation."""
    read = protect(sentence)
    assert read.text == read_as
    assert put_back(read.text, read) == sentence


def test_placeholders_are_numbered_above_those_already_in_the_text_and_only_ours_go_back() -> None:
    read = protect("Click {1} or {2} to open /tmp/a/b")  # {1} {2}: the markup route's own
    assert read.literals == (("{3}", "/tmp/a/b"),)
    assert (
        put_back("Klicken Sie {1} oder {2}, um {3} zu öffnen", read)
        == "Klicken Sie {1} oder {2}, um /tmp/a/b zu öffnen"
    )


def test_a_lost_placeholder_gets_its_literal_at_the_end_and_a_repeated_one_is_dropped() -> None:
    read = protect("Copy /etc/a/b to /etc/c/d with -r")
    assert [p for p, _ in read.literals] == ["{1}", "{2}", "{3}"]
    assert put_back("Kopieren Sie {2} {2} nach {1}", read) == "Kopieren Sie /etc/c/d nach /etc/a/b -r"
    assert put_back("", read) == "/etc/a/b /etc/c/d -r"


def test_a_literal_holding_a_placeholder_is_not_read_again() -> None:
    read = protect("Go to https://x.org/{3}/y please")
    assert read.literals == (("{4}", "https://x.org/{3}/y"),)
    assert put_back("Gehe zu {4} bitte {3}", read) == "Gehe zu https://x.org/{3}/y bitte {3}"


def test_with_literals_fills_every_hypothesis_and_keeps_the_pieces() -> None:
    read = protect("Open /a/b/c now")
    hypotheses = [
        Hypothesis(text="Öffnen Sie {1} jetzt", pieces=["▁{", "1", "}"], token_ids=[1], score=-1, token_logprobs=[]),
        Hypothesis(text="Jetzt {1} öffnen", pieces=["▁J"], token_ids=[2], score=-2, token_logprobs=[]),
    ]
    out = with_literals(Translation(source_pieces=[], hypotheses=hypotheses), read)
    assert [h.text for h in out.hypotheses] == ["Öffnen Sie /a/b/c jetzt", "Jetzt /a/b/c öffnen"]
    assert out.hypotheses[0].pieces == ["▁{", "1", "}"]


def test_characters_the_vocabulary_lacks_are_kept_as_literals_too() -> None:
    def unknown(text: str) -> list[tuple[int, int]]:  # runs, as Tokenizer.unknown_spans gives them
        return [m.span() for m in re.finditer("[😀東京]+", text)]

    read = protect("I love 😀 and 東京 in /a/東/b", unknown)
    assert read.text == "I love {1} and {2} in {3}"  # a run is one literal; inside a path, the path holds it
    assert read.literals == (("{1}", "😀"), ("{2}", "東京"), ("{3}", "/a/東/b"))
    assert put_back("Ich liebe {1} und {2} in {3}", read) == "Ich liebe 😀 und 東京 in /a/東/b"


def test_a_word_with_a_letter_the_vocabulary_lacks_is_kept_whole() -> None:
    def unknown(text: str) -> list[tuple[int, int]]:
        return [m.span() for m in re.finditer("[ïñ😀]+", text)]

    read = protect("A naïve señor from Añïnø said 😀hi and naïve-ish", unknown)
    assert read.text == "A {1} {2} from {3} said {4}hi and {5}-ish"  # a symbol stays alone, a hyphen ends a word
    assert [literal for _, literal in read.literals] == ["naïve", "señor", "Añïnø", "😀", "naïve"]
    assert protect("Kraków", lambda text: [(4, 5)]).literals == (("{1}", "Kraków"),)
    assert protect("x\u0301y", lambda text: [(1, 2)]).literals == (("{1}", "x\u0301y"),)  # a mark joins


def test_the_shipped_vocabulary_says_which_characters_it_lacks() -> None:
    from pathlib import Path

    from core.tokenizer import Tokenizer

    tokenizer = Tokenizer(Path(__file__).resolve().parents[2] / "models" / "en-de")
    text = "I love this 😀😀 so much, 東京 ∶ Größe"
    spans = tokenizer.unknown_spans(text)
    assert [text[a:b] for a, b in spans] == ["😀😀", "東京", "∶"]
    unk = tokenizer.specials.unk_id
    assert all(unk in tokenizer.encode_source(text[a:b]) for a, b in spans)
    assert unk not in tokenizer.encode_source(
        "".join(c for i, c in enumerate(text) if not any(a <= i < b for a, b in spans))
    )


def test_characters_the_shipped_vocabulary_has_only_as_rare_pieces_are_kept_too() -> None:
    import unicodedata
    from pathlib import Path

    from core.tokenizer import RARE_SCORE, Tokenizer

    tokenizer = Tokenizer(Path(__file__).resolve().parents[2] / "models" / "en-de")
    spm = tokenizer.source_spm
    text = "Press Super↓ or ⌘ and pay 20 € for Déjà Dup, „quoted‚ Größe café → x"
    spans = tokenizer.unknown_spans(text)
    assert [text[a:b] for a, b in spans] == ["↓", "⌘", "€", "à"]
    for i, char in enumerate(text):  # the rule, character by character, against the vocabulary's own scores
        piece = spm.piece_to_id(char)
        rare = piece != spm.unk_id() and spm.get_score(piece) < RARE_SCORE
        rare = rare and not char.isspace() and unicodedata.category(char)[0] not in "PZ"
        assert rare == any(a <= i < b for a, b in spans), char
    assert spm.get_score(spm.piece_to_id("‚")) < RARE_SCORE  # punctuation is translated, however rare
    read = protect(text, tokenizer.unknown_spans)
    assert read.text == "Press Super{1} or {2} and pay 20 {3} for {4} Dup, „quoted‚ Größe café → x"
    assert read.literals[3] == ("{4}", "Déjà")


def test_a_bpe_vocabulary_has_no_rare_characters(synthetic_corpus: tuple[Path, Path], tmp_path: Path) -> None:
    from training.vocab import train_vocab

    tokenizer = train_vocab(synthetic_corpus[0], tmp_path, vocab_size=96, model_type="bpe")
    scores = [tokenizer.source_spm.get_score(i) for i in range(len(tokenizer))]
    assert min(scores) < -12.5 and all(s.is_integer() for s in scores)  # merge ranks, not log-probabilities
    text = " ".join(tokenizer.pieces[4:]).replace("\u2581", "")
    assert tokenizer.unknown_spans(text) == []


def test_reading_protects_before_the_engine_reads_and_answers_in_the_reverse_order() -> None:
    from core.reading import answer, read

    class Words:
        seen: list[str] = []

        def tokenize(self, text: str) -> list[int]:
            self.seen.append(text)
            return list(range(len(text.split())))

        def unknown_spans(self, text: str) -> list[tuple[int, int]]:
            return []

    engine = Words()
    reading = read(engine, "SEE /etc/a/b NOW")
    assert reading.ids == [0, 1, 2] and engine.seen == ["SEE {1} NOW"]
    hypothesis = Hypothesis(text="siehe {1} jetzt", pieces=[], token_ids=[], score=0, token_logprobs=[])
    out = answer(reading, Translation(source_pieces=[], hypotheses=[hypothesis]))
    assert out.best.text == "SIEHE /etc/a/b JETZT"  # capitals restored first, the literal then put back as it was
