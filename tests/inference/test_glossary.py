"""inference/glossary.py: terms found as whole words, and put in place of the words aligned to them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from core.tokenizer import WORD_START
from core.translation import Hypothesis, Translation, WordAlignment
from inference.glossary import MAX_TERMS, Glossary, GlossaryError, Term, apply, read_glossaries


def test_terms_are_whole_words_any_case_the_longest_first() -> None:
    glossary = Glossary({"save": "sichern", "Save as": "Speichern unter", "file": "Datei"})
    text = "SAVE AS a profile, then save  as before; saved files stay."
    found = [(text[t.start : t.end], t.target) for t in glossary.find(text)]
    # "profile" and "files" hold "file", "saved" holds "save": not whole words
    assert found == [("SAVE AS", "Speichern unter"), ("save  as", "Speichern unter")]
    assert glossary.find("Save {1} and save.") == [Term(0, 4, "sichern"), Term(13, 17, "sichern")]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"": "x"}, "need a word"),
        ({"password": " "}, "need a word"),
        ({"...": "x"}, "need a word"),
        ({"Password": "Kennwort", "password": "Passwort"}, "listed twice"),
        ({"x" * 201: "y"}, "at most 200"),
        ({f"term{i}": "x" for i in range(MAX_TERMS + 1)}, "limit is"),
    ],
)
def test_unusable_glossaries_are_refused_naming_the_entry(entries: dict[str, str], message: str) -> None:
    with pytest.raises(GlossaryError, match=message):
        Glossary(entries)


def translation(source: str, target: str, links: list[int], n_best: int = 1) -> Translation:
    """A translation whose target word t attends wholly to source word links[t] (-1: to none)."""
    src, tgt = source.split(), target.split()
    weights = np.zeros((len(tgt), len(src)))
    for t, s in enumerate(links):
        if s >= 0:
            weights[t, s] = 1.0
    hypotheses = [
        Hypothesis(
            text=target,
            pieces=[WORD_START + w for w in tgt],
            token_ids=list(range(len(tgt))),
            score=-1.0 - k,
            token_logprobs=[-0.1] * len(tgt),
            attention=weights,
        )
        for k in range(n_best)
    ]
    alignment = WordAlignment(src, tgt, weights.tolist(), [[s] if s >= 0 else [] for s in links])
    return Translation([WORD_START + w for w in src], hypotheses, alignment)


def test_the_aligned_word_takes_the_term_with_its_punctuation() -> None:
    source = 'Enter the "password" now.'
    done = translation(source, "Geben Sie das „Passwort“, jetzt ein.", [0, 0, 1, 2, 3, 0])
    terms = Glossary({"password": "Kennwort"}).find(source)
    out, outcome = apply(done, source, terms)
    assert out.best.text == "Geben Sie das „Kennwort“, jetzt ein."
    assert (outcome.found, outcome.replaced, outcome.unplaced) == (1, 1, 0)
    assert out.best.pieces == done.best.pieces  # the model's pieces, as with literals
    assert out.alignment is not None
    assert out.alignment.target_words[3] == "„Kennwort“," and out.alignment.links[3] == [2]


def test_a_term_of_one_word_takes_the_best_aligned_word_only() -> None:
    source = "Enter your password."
    done = translation(source, "Geben Sie Ihr Passwort ein.", [0, 0, 1, 2, 2])
    done.alignment.weights[4][2] = 0.4  # type: ignore[union-attr]  # "ein." attends to the password less
    done.best.attention[4, 2] = 0.4  # type: ignore[index]
    out, _ = apply(done, source, Glossary({"password": "Kennwort"}).find(source))
    assert out.best.text == "Geben Sie Ihr Kennwort ein."


def test_a_longer_term_replaces_its_words_and_capitalises_at_the_start() -> None:
    source = "Save as soon as possible."
    done = translation(source, "Sichern möglichst bald.", [0, 3, 4])
    out, _ = apply(
        done, source, Glossary({"save": "speichern", "as soon as possible": "so bald wie möglich"}).find(source)
    )
    assert out.best.text == "Speichern so bald wie möglich."
    assert out.alignment is not None
    assert out.alignment.target_words == ["Speichern", "so", "bald", "wie", "möglich."]
    assert out.alignment.links == [[0], [1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]]
    assert len(out.alignment.weights) == 5


def test_what_is_left_alone() -> None:
    source = "Open the file {1} in the window."
    # the translation already holds the term (inside a compound, any case): nothing changes
    done = translation(source, "Öffnen Sie die Datei {1} im Programmfenster.", [0, 0, 1, 2, 3, 5, 6])
    out, outcome = apply(done, source, Glossary({"window": "Fenster"}).find(source))
    assert out.best.text == done.best.text and (outcome.found, outcome.replaced, outcome.unplaced) == (1, 0, 0)
    # no target word is aligned to the term, or only a placeholder is: unplaced
    for links in ([0, 0, 1, 1, 4, 5, 5], [0, 0, 1, 1, 2, 5, 5]):
        done = translation(source, "Öffnen Sie die Akte {1} im Fenster.", links)
        out, outcome = apply(done, source, Glossary({"file": "Datei"}).find(source))
        assert out.best.text == "Öffnen Sie die Akte {1} im Fenster." and outcome.unplaced == 1
    # the text is not its pieces' words (an unknown piece decoded differently): left as it is
    done = translation(source, "Öffnen Sie die Akte {1} im Fenster.", [0, 0, 1, 2, 3, 5, 6])
    odd = dataclasses.replace(done.best, text="Öffnen Sie die  Akte {1} im Fenster.")
    changed = dataclasses.replace(done, hypotheses=[odd])
    out, outcome = apply(changed, source, Glossary({"file": "Datei"}).find(source))
    assert out.best.text == "Öffnen Sie die  Akte {1} im Fenster." and outcome.unplaced == 1


def test_where_the_engines_alignment_gives_a_term_no_word_the_attention_alone_does() -> None:
    """The lexicon can link the word the model wrote for a term to another source word ("ein Ende" for "a means to
    an end": "Ende" is a translation of "end"); the attention still says it stands for the term."""
    source = "a means to an end"
    done = translation(source, "ein Ende", [0, 1])  # the attention: "Ende" attends to "means"
    assert done.alignment is not None
    lexical = WordAlignment(
        done.alignment.source_words, done.alignment.target_words, [[1, 0, 0, 0, 0], [0, 0.4, 0, 0, 0.6]], [[0], [4]]
    )
    out, outcome = apply(
        dataclasses.replace(done, alignment=lexical), source, Glossary({"means": "Mittel"}).find(source)
    )
    assert out.best.text == "ein Mittel" and (outcome.replaced, outcome.unplaced) == (1, 0)
    # where the engine's alignment places the term, it decides
    lexical.links[0], lexical.links[1] = [1], [4]
    out, _ = apply(dataclasses.replace(done, alignment=lexical), source, Glossary({"means": "Mittel"}).find(source))
    assert out.best.text == "Mittel Ende"


def test_every_hypothesis_gets_the_term() -> None:
    source = "Enter your password."
    done = translation(source, "Geben Sie Ihr Passwort ein.", [0, 0, 1, 2, 0], n_best=3)
    out, _ = apply(done, source, Glossary({"password": "Kennwort"}).find(source))
    assert [h.text for h in out.hypotheses] == ["Geben Sie Ihr Kennwort ein."] * 3


def test_a_word_joined_from_parts_keeps_the_parts_before_the_last() -> None:
    source = "Ask the GIMP users."
    done = translation(source, "Fragen Sie die GIMP-Benutzer.", [0, 0, 1, 3])
    out, _ = apply(done, source, Glossary({"users": "Anwender"}).find(source))
    assert out.best.text == "Fragen Sie die GIMP-Anwender."
    # a term that is not one plain word takes the whole word
    out, _ = apply(done, source, Glossary({"users": "E-Mail-Nutzer"}).find(source))
    assert out.best.text == "Fragen Sie die E-Mail-Nutzer."


def test_a_request_adds_to_the_servers_glossary_and_wins_where_both_name_a_term() -> None:
    server = Glossary({"Password": "Kennwort", "file": "Datei"})
    mine = server.updated({"password": "Passwort", "window": "Fenster"})
    assert mine.targets == {"password": "Passwort", "file": "Datei", "window": "Fenster"}
    assert server.updated(None) is server and server.targets["password"] == "Kennwort"
    with pytest.raises(GlossaryError, match="need a word"):
        server.updated({"x": ""})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "Expecting"),
        ('["en-de"]', "not a JSON object of language pairs"),
        ('{"english-german": {}}', "not a language pair"),
        ('{"en-de": {"password": 1}}', "not an object of terms"),
        ('{"en-de": {"password": ""}}', "en-de: glossary entry 'password'"),
    ],
)
def test_a_servers_glossary_file_is_checked_whole(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "glossary.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GlossaryError, match=message) as caught:
        read_glossaries(path)
    assert str(path) in str(caught.value)


def test_a_servers_glossary_file_by_language_pair(tmp_path: Path) -> None:
    path = tmp_path / "glossary.json"
    path.write_text('{"en-de": {"password": "Kennwort"}, "de-en": {"Kennwort": "password"}}', encoding="utf-8")
    glossaries = read_glossaries(path)
    assert {pair: g.targets for pair, g in glossaries.items()} == {
        "en-de": {"password": "Kennwort"},
        "de-en": {"kennwort": "password"},
    }
    with pytest.raises(GlossaryError, match="No such file"):
        read_glossaries(tmp_path / "missing.json")
