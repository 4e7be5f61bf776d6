"""``python -m training build-monolingual``: German text for back-translation, with nothing held out let back in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from training.corpus import monolingual
from training.corpus.monolingual import build_monolingual, plausible
from training.data import write_tsv

NEW = [
    "Mit dieser Option wird die Ausgabe in eine Datei geschrieben.",
    "Das Programm liest die Konfiguration beim Start aus dem Verzeichnis.",
]
TRAINED = "Die Datei konnte nicht geöffnet werden, weil sie fehlt."
HELD_OUT = "Dieser Satz steht auf einer Seite, die zum Testen zurückgehalten wird."


def test_only_new_german_sentences_of_pages_not_held_out_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "en-de"
    write_tsv([("The file could not be opened because it is missing.", TRAINED)], corpus / "train.tsv")
    report = {"heldout_units": {"test": {"command-line": ["manpages:man1/secret.1"]}, "dev": {}}}
    (corpus / "report.json").write_text(json.dumps(report), encoding="utf-8")

    def man(cache: Path) -> Iterator[tuple[str, str]]:
        yield "man1/ls.1", f"{NEW[0]} {TRAINED}"
        yield "man1/secret.1", HELD_OUT
        yield "man1/ls.1", "The option writes the output to a file instead of the terminal."  # left in English
        yield "man1/ls.1", "ls -l"  # too short
        yield "man1/cp.1", NEW[0]  # a duplicate

    def manual(name: str, cache: Path) -> Iterator[tuple[str, str]]:
        yield "page.html", NEW[1]

    monkeypatch.setattr(monolingual, "man_blocks", man)
    monkeypatch.setattr(monolingual, "manual_blocks", manual)
    out = tmp_path / "mono"
    report_out = build_monolingual(corpus, out, tmp_path / "cache", sources=["manpages", "gimp-help"])
    assert sorted((out / "de.txt").read_text(encoding="utf-8").splitlines()) == sorted(NEW)
    assert report_out["per_source"]["manpages"] == {"blocks": 5, "held_out": 1, "sentences": 5, "kept": 1}  # type: ignore[index]
    assert "GFDL" in (out / "LICENSES.md").read_text(encoding="utf-8")


def test_a_sentence_needs_words_and_letters() -> None:
    assert plausible("Das ist ein ganz normaler Satz.")
    assert not plausible("ls -l -a")
    assert not plausible("1200k 500k 350k 914704 -2 2000k 900k 600k")
    assert not plausible(" ".join(["Wort"] * 61))


def test_the_parallel_corpus_must_exist(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="build the parallel corpus first"):
        build_monolingual(tmp_path, tmp_path / "out", tmp_path / "cache")
