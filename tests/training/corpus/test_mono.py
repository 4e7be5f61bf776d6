"""``python -m training build-monolingual``: German or English text for back-translation, with nothing held out let
back in."""

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

    def man(cache: Path, lang: str) -> Iterator[tuple[str, str]]:
        yield "man1/ls.1", f"{NEW[0]} {TRAINED}"
        yield "man1/secret.1", HELD_OUT
        yield "man1/ls.1", "The option writes the output to a file instead of the terminal."  # left in English
        yield "man1/ls.1", "ls -l"  # too short
        yield "man1/cp.1", NEW[0]  # a duplicate

    def manual(name: str, cache: Path, lang: str) -> Iterator[tuple[str, str]]:
        yield "page.html", NEW[1]

    monkeypatch.setattr(monolingual, "man_blocks", man)
    monkeypatch.setattr(monolingual, "manual_blocks", manual)
    out = tmp_path / "mono"
    report_out = build_monolingual(corpus, out, tmp_path / "cache", sources=["manpages", "gimp-help"])
    assert sorted((out / "de.txt").read_text(encoding="utf-8").splitlines()) == sorted(NEW)
    assert report_out["per_source"]["manpages"] == {"blocks": 5, "held_out": 1, "sentences": 5, "kept": 1}  # type: ignore[index]
    assert "GFDL" in (out / "LICENSES.md").read_text(encoding="utf-8")


def test_english_text_keeps_english_sentences_the_corpus_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "en-de"
    trained = "The file could not be opened because it is missing."
    write_tsv([(trained, TRAINED)], corpus / "train.tsv")
    report = {"heldout_units": {"dev": {"command-line": ["manpages:man1/secret.1"]}}}
    (corpus / "report.json").write_text(json.dumps(report), encoding="utf-8")
    new = "This option writes the output to a file instead of the terminal."
    asked: list[str] = []

    def man(cache: Path, lang: str) -> Iterator[tuple[str, str]]:
        asked.append(lang)
        yield "man1/ls.1", f"{new} {trained}"
        yield "man1/ls.1", NEW[0]  # German left in an English page
        yield "man1/secret.1", "This sentence sits on a page held out for the dev set."

    monkeypatch.setattr(monolingual, "man_blocks", man)
    out = tmp_path / "mono-en"
    build_monolingual(corpus, out, tmp_path / "cache", sources=["manpages"], lang="en")
    assert asked == ["en"]
    assert (out / "en.txt").read_text(encoding="utf-8").splitlines() == [new]
    assert "MAN_PAGE_PACKAGES" in (out / "LICENSES.md").read_text(encoding="utf-8")
    with pytest.raises(Exception, match="unknown sources"):
        build_monolingual(corpus, out, tmp_path / "cache", sources=["man"], lang="en")


def test_english_pages_of_a_manual_are_read_from_its_english_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unpacked: list[str] = []

    def fetch(package: str, cache: Path) -> str:
        return package

    def unpack(package: str, cache: Path) -> Path:
        unpacked.append(package)
        return tmp_path / package

    page = tmp_path / "debian-reference-en/usr/share/debian-reference/ch01.en.html"
    page.parent.mkdir(parents=True)
    page.write_text("<html><body><p>Debian is a free operating system for your computer.</p></body></html>")
    (page.parent / "ch01.de.html").write_text("<html><body><p>Debian ist ein freies Betriebssystem.</p></body></html>")
    monkeypatch.setattr(monolingual, "fetch_deb", fetch)
    monkeypatch.setattr(monolingual, "unpack_deb", unpack)
    blocks = list(monolingual.manual_blocks("debian-reference", tmp_path, "en"))
    assert unpacked == ["debian-reference-en"]
    assert blocks == [("ch01.html", "Debian is a free operating system for your computer.")]


def test_a_sentence_needs_words_and_letters() -> None:
    assert plausible("Das ist ein ganz normaler Satz.")
    assert not plausible("ls -l -a")
    assert not plausible("1200k 500k 350k 914704 -2 2000k 900k 600k")
    assert not plausible(" ".join(["Wort"] * 61))


def test_the_parallel_corpus_must_exist(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="build the parallel corpus first"):
        build_monolingual(tmp_path, tmp_path / "out", tmp_path / "cache")


def test_fortunes_are_read_whole_without_their_attribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "fortunes-de/usr/share/games/fortunes/de"
    root.mkdir(parents=True)
    (root / "sprichworte").write_text(
        "Alter macht immer weiß,\naber nicht immer weise.\n\t\t-- Sprichwort\n%\nDie Zeit ist der beste Lehrer.\n",
        encoding="utf-8",
    )
    (root / "sprichworte.dat").write_bytes(b"\x00\x02index")
    (root / "sprichworte.u8").symlink_to("sprichworte")
    (root / "asciiart").write_text("  /\\_/\\\n ( o.o )\n%\n", encoding="utf-8")
    monkeypatch.setattr(monolingual, "fetch_deb", lambda package, cache: package)
    monkeypatch.setattr(monolingual, "unpack_deb", lambda package, cache: tmp_path / package)
    assert list(monolingual.fortune_blocks(tmp_path)) == [
        ("sprichworte#0", "Alter macht immer weiß, aber nicht immer weise."),
        ("sprichworte#1", "Die Zeit ist der beste Lehrer."),
    ]
    english = tmp_path / "fortunes/usr/share/games/fortunes"
    english.mkdir(parents=True)
    (english / "work").write_text(
        "<boss> Where is the report?\n<me> It is on its way.\n%\nHard work never killed anybody.\n\t\t-- Anon\n",
        encoding="utf-8",
    )
    (english / "knghtbrd").write_text("<nick> lol\n%\n", encoding="utf-8")
    (english / "ascii-art").write_text("  /\\_/\\\n%\n", encoding="utf-8")
    assert list(monolingual.fortune_blocks(tmp_path, "en")) == [
        ("work#0", "Where is the report? It is on its way."),
        ("work#1", "Hard work never killed anybody."),
    ]


def test_old_spelling_follows_the_form_modern_text_uses_more() -> None:
    counts = {"dass": 5, "daß": 1, "groß": 3, "muss": 2}
    assert monolingual.modern_spelling("Daß er groß ist, muß man wissen, daß weiß ich.", counts) == (
        "Dass er groß ist, muss man wissen, dass weiß ich."
    )


def test_fortunes_are_opt_in_and_spelled_as_the_corpus_spells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "en-de"
    write_tsv([("You know that it must work.", "Du weißt, dass es funktionieren muss.")], corpus / "train.tsv")
    (corpus / "report.json").write_text(json.dumps({"heldout_units": {}}), encoding="utf-8")
    asked: list[str] = []

    def fortunes(cache: Path, lang: str) -> Iterator[tuple[str, str]]:
        asked.append(lang)
        yield "sprichworte#0", "Ich weiß genau, daß man nicht alles wissen muß."

    def man(cache: Path, lang: str) -> Iterator[tuple[str, str]]:
        yield "man1/ls.1", NEW[0]

    monkeypatch.setattr(monolingual, "fortune_blocks", fortunes)
    monkeypatch.setattr(monolingual, "man_blocks", man)
    build_monolingual(corpus, tmp_path / "default", tmp_path / "cache", sources=["manpages"])
    assert asked == []  # not among the default sources
    out = tmp_path / "mono"
    build_monolingual(corpus, out, tmp_path / "cache", sources=["fortunes"])
    assert (out / "de.txt").read_text(encoding="utf-8").splitlines() == [
        "Ich weiß genau, dass man nicht alles wissen muss."
    ]
    assert "fortunes-de" in (out / "LICENSES.md").read_text(encoding="utf-8")
