"""The manual-page aligner: roff read into blocks, blocks paired by position in sections that line up."""

from __future__ import annotations

import gzip
from pathlib import Path

from training.corpus.collect import resolve_sources
from training.corpus.man import Block, align_pages, extract_man_pairs, read_page, render_inline, split_pair
from training.corpus.sources import Pair
from training.corpus.split import assemble_corpus

ENGLISH = r""".\" comment line
.TH LS 1 "September 2022" "GNU coreutils 9.1" "User Commands"
.SH NAME
ls \- list directory contents
.SH SYNOPSIS
.B ls
[\fI\,OPTION\/\fR]... [\fI\,FILE\/\fR]...
.SH DESCRIPTION
.PP
List information about the FILEs (the current directory by default).
Sort entries alphabetically if none of \fB\-cftuvSUX\fR nor \fB\-\-sort\fR is specified.
.TP
.BR \-a ", " \-\-all
do not ignore entries starting with .
.TP
\fB\-\-author\fR
with \fB\-l\fR, print the author of each file
.nf
  ls -la /tmp
.fi
.SH "SEE ALSO"
Full documentation \(em see
.UR https://www.gnu.org/software/coreutils/ls
the manual
.UE .
"""

GERMAN = r""".\" -*- coding: UTF-8 -*-
.TH LS 1 "September 2022" "GNU coreutils 9.1" "Dienstprogramme für Benutzer"
.SH BEZEICHNUNG
ls \- Verzeichnisinhalte auflisten
.SH ÜBERSICHT
\fBls\fP [\fI\,OPTION\/\fP]… [\fI\,DATEI\/\fP]…
.SH BESCHREIBUNG
.PP
Auflistung von Informationen über die DATEIen (Standardvorgabe ist das aktuelle Verzeichnis). Die
Einträge werden alphabetisch sortiert, falls weder \fB\-cftuvSUX\fP noch \fB\-\-sort\fP angegeben wurden.
.TP
\fB\-a\fP, \fB\-\-all\fP
Einträge nicht ignorieren, die mit ».« beginnen
.TP
\fB\-\-author\fP
Mit \fB\-l\fP den Autor jeder Datei ausgeben
.nf
  ls -la /tmp
.fi
.SH "SIEHE AUCH"
Vollständige Dokumentation \(em siehe
.UR https://www.gnu.org/software/coreutils/ls
das Handbuch
.UE .
.SH ÜBERSETZUNG
Die deutsche Übersetzung dieser Handbuchseite wurde von ... erstellt.
"""


def test_roff_escapes_and_font_macros_become_plain_text() -> None:
    assert render_inline(r"\fB\-\-block\-size\fR=\fI\,SIZE\/\fR") == "--block-size=SIZE"
    assert render_inline(r"\(lqquoted\(rq \*(lqtoo\*(rq a\ b \e x\&.") == "“quoted” “too” a b \\ x."
    assert render_inline(r"\f[CW]code\f[] \s-1SMALL\s+1 text \" a comment") == "code SMALL text "
    blocks = read_page('.TP\n.BR \\-a ", " \\-\\-all\ntext\n.B "two words" after\n')
    assert blocks == [Block("tag", "-a, --all"), Block("text", "text two words after")]


def test_blocks_follow_sections_tags_and_paragraphs_and_skip_no_fill_text() -> None:
    blocks = read_page(ENGLISH)
    assert blocks is not None
    assert [b.kind for b in blocks] == ["heading", "text", "heading", "text", "heading", "text", "tag", "text"] + [
        "tag",
        "text",
        "heading",
        "text",
    ]
    assert blocks[3].text == "ls [OPTION]... [FILE]..."
    assert blocks[6].text == "-a, --all"
    assert not any("ls -la" in b.text for b in blocks)
    assert blocks[-1].text == "Full documentation — see the manual."
    assert read_page(".Dd May 1, 2020\n.Sh NAME\n") is None  # mdoc
    assert read_page(".so man1/other.1\n") is None


def test_pages_align_block_by_block_without_the_translators_section() -> None:
    en, de = read_page(ENGLISH), read_page(GERMAN)
    assert en is not None and de is not None
    pairs = dict(align_pages(en, de))
    assert pairs["ls - list directory contents"] == "ls - Verzeichnisinhalte auflisten"
    assert pairs["with -l, print the author of each file"] == "Mit -l den Autor jeder Datei ausgeben"
    assert pairs["ls [OPTION]... [FILE]..."] == "ls [OPTION]… [DATEI]…"
    assert len(pairs) == 12
    assert not any("Übersetzung" in d for d in pairs.values())


def test_sections_that_do_not_line_up_or_name_other_options_give_nothing() -> None:
    en, de = read_page(ENGLISH), read_page(GERMAN)
    assert en is not None and de is not None
    # The German DESCRIPTION lost a paragraph (a translation of another version): that section is skipped.
    shorter = [b for b in de if not b.text.startswith("Mit ")]
    pairs = dict(align_pages(en, shorter))
    assert "with -l, print the author of each file" not in pairs and "--author" not in pairs
    assert pairs["ls - list directory contents"] == "ls - Verzeichnisinhalte auflisten"
    # Same shape, but a block names another option: only that pair goes.
    swapped = [Block(b.kind, b.text.replace("-l ", "-x ")) for b in de]
    assert "with -l, print the author of each file" not in dict(align_pages(en, swapped))
    assert len(dict(align_pages(en, swapped))) == 11
    # A different number of sections: the page gives nothing.
    assert not list(align_pages(en, [*de[:2], *de[4:]]))


def test_paragraphs_split_into_sentences_only_when_both_sides_agree() -> None:
    two_en = "List information about the files. Sort entries alphabetically."
    two_de = "Informationen über die Dateien auflisten. Einträge alphabetisch sortieren."
    assert split_pair(two_en, two_de) == [
        ("List information about the files.", "Informationen über die Dateien auflisten."),
        ("Sort entries alphabetically.", "Einträge alphabetisch sortieren."),
    ]
    one_de = "Informationen über die Dateien auflisten und Einträge alphabetisch sortieren."
    assert split_pair(two_en, one_de) == [(two_en, one_de)]
    # Two sentences on each side, but cut in different places: the paragraph stays whole.
    cut_en = "Prints the kernel version and the machine hardware name and exits. See also uname."
    cut_de = "Gibt die Version aus. Der Name der Maschinen-Hardware wird auch ausgegeben, danach wird beendet."
    assert split_pair(cut_en, cut_de) == [(cut_en, cut_de)]


def test_extract_man_pairs_finds_english_pages_and_reports_what_it_skipped(tmp_path: Path) -> None:
    german = tmp_path / "manpages-de/usr/share/man/de"
    english = tmp_path / "coreutils"
    (german / "man1").mkdir(parents=True)
    (english / "usr/share/man/man1").mkdir(parents=True)
    (german / "man1/ls.1.gz").write_bytes(gzip.compress(GERMAN.encode()))
    (english / "usr/share/man/man1/ls.1.gz").write_bytes(gzip.compress(ENGLISH.encode()))
    (german / "man1/orphan.1.gz").write_bytes(gzip.compress(GERMAN.encode()))
    notes: list[str] = []
    pairs = extract_man_pairs("manpages", german, [tmp_path / "missing", english], notes)
    assert {p.unit for p in pairs} == {"man1/ls.1"}
    assert Pair("manpages", "man1/ls.1", "ls - list directory contents", "ls - Verzeichnisinhalte auflisten") in pairs
    assert notes == ["1 pages: no English page in the listed packages (man1/orphan.1)"]


def test_command_line_sources_give_test_pairs_but_no_dev_pairs() -> None:
    assert {"manpages", "cli-messages"} <= set(resolve_sources(None))
    assert set(resolve_sources(["command-line"])) == {"manpages", "cli-messages", "gnome-user-docs"}
    pairs = [
        Pair("manpages", f"man1/tool{u}.1", f"Print the {u} report number {i} now.", f"Gibt Bericht {i} von {u} aus.")
        for u in range(40)
        for i in range(60)
    ]
    splits = assemble_corpus(pairs, seed=1)
    assert splits.test["command-line"] and not splits.dev
    held = {p.unit for p in splits.test["command-line"]}
    assert held and not held & {p.unit for p in splits.train}
