"""Manuals published as HTML in both languages from one source (DocBook, AsciiDoc): GIMP, Debian Reference, ...

Such a manual is translated through gettext catalogs of its source and rendered by the same stylesheets
for every language, so the English and German page of the same name have the same blocks in the same order
with only the text translated. Both pages are read into leaf blocks (paragraphs, list items, terms,
headings, table cells; navigation bars and preformatted text left out) and paired by position. Where the
block sequences differ (a translators' section, a paragraph one version has and the other not), the pages
are cut into sections at their headings and only sections with the same block sequence are paired, and
only when both pages have the same number of sections and numbered headings agree; otherwise the page
yields nothing. Section numbers ("5.3. Color Picker" /
"5.3. Farbpipette", "Figure 16.2. ..." / "Abbildung 16.2. ...") are stripped when both sides carry the same
one, blocks the translators left in English are dropped, and a paragraph pair becomes sentence pairs when
both sides split into the same number of sentences (``training.corpus.man.split_pair``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import lxml.html
from lxml import etree

from training.corpus.man import split_pair
from training.corpus.sources import CorpusError, Pair

BLOCKS = frozenset({"p", "li", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "td", "th", "caption"})
CONTAINERS = BLOCKS | {"ul", "ol", "dl", "table", "div", "pre", "blockquote"}
SKIPPED = frozenset({"pre", "script", "style"})
NAVIGATION = (
    "navheader",
    "navfooter",  # DocBook XSL
    "related",
    "sphinxsidebar",
    "footer",
    "headerlink",  # Sphinx (Developer's Reference): navigation bars, sidebar, footer, the "¶" permalinks
    "navCenter",  # KDE's stylesheets: the navigation tables over and under every page
)
# "5.3. ", "Figure 16.253. ", "Abbildung 16.253. ", "Part II. ", "Anhang D. ": a label word, then the number.
_NUMBER = re.compile(r"^(?:[^\W\d_]+\s+)?((?:\d+|[IVXLC]+|[A-Z])(?:\.\d+)*)\.\s+")
_WORD = re.compile(r"[^\W\d_]+")
UNTRANSLATED_SHARE = 0.5
"""A German block whose words are more than this share English words of its source was left untranslated."""


class Page(NamedTuple):
    """A page that is not a file of its own (KDE handbooks keep theirs in one cache file)."""

    name: str
    html: bytes


def read_docbook_blocks(page: Path | Page) -> list[tuple[str, str]]:
    """(tag, text) of the leaf blocks of an HTML page rendered from DocBook, in document order."""
    name = str(page) if isinstance(page, Path) else page.name
    try:
        data = page.read_bytes() if isinstance(page, Path) else page.html
        doc = lxml.html.fromstring(data, parser=lxml.html.HTMLParser(encoding="utf-8"))
    except (OSError, etree.ParserError) as exc:
        raise CorpusError(f"cannot parse manual page {name}: {exc}") from exc
    for element in list(doc.iter(*SKIPPED)):
        element.drop_tree()
    for class_name in NAVIGATION:
        for element in doc.find_class(class_name):
            element.drop_tree()
    blocks = []
    for element in doc.iter(*BLOCKS):
        if any(isinstance(d.tag, str) and d.tag in CONTAINERS for d in element.iterdescendants()):
            continue  # not a leaf: its inner blocks are read on their own
        text = " ".join(element.text_content().split())
        if text:
            blocks.append((element.tag, text))
    return blocks


def strip_numbers(en: str, de: str) -> tuple[str, str]:
    """Drop a leading section/figure number that both sides carry ("5.3. Color Picker"): the same number,
    and a capital letter after it on both sides (a title, not "use 2. and 3.")."""
    en_match, de_match = _NUMBER.match(en), _NUMBER.match(de)
    if not (en_match and de_match and en_match.group(1) == de_match.group(1)):
        return en, de
    en_rest, de_rest = en[en_match.end() :], de[de_match.end() :]
    if en_rest[:1].isupper() and de_rest[:1].isupper():
        return en_rest, de_rest
    return en, de


def untranslated(en: str, de: str) -> bool:
    """Whether the German side is (mostly) the English text: translators leave some blocks in English."""
    english = {w.casefold() for w in _WORD.findall(en)}
    german = [w.casefold() for w in _WORD.findall(de)]
    return len(german) >= 3 and sum(w in english for w in german) > UNTRANSLATED_SHARE * len(german)


HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})


def _sections(blocks: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Blocks cut before every heading; the first section holds what precedes the first heading."""
    sections: list[list[tuple[str, str]]] = [[]]
    for block in blocks:
        if block[0] in HEADINGS:
            sections.append([])
        sections[-1].append(block)
    return sections


def _same_number(en: list[tuple[str, str]], de: list[tuple[str, str]]) -> bool:
    """Sections whose headings both carry a number ("3.2. ...") must carry the same one."""
    if not en or en[0][0] not in HEADINGS:
        return True
    en_match, de_match = _NUMBER.match(en[0][1]), _NUMBER.match(de[0][1])
    return not (en_match and de_match) or en_match.group(1) == de_match.group(1)


def align_blocks(
    en_blocks: list[tuple[str, str]], de_blocks: list[tuple[str, str]]
) -> tuple[list[tuple[str, str]], int]:
    """Block text pairs of two pages, and how many sections were left out because they do not line up."""
    en_sections, de_sections = _sections(en_blocks), _sections(de_blocks)
    if len(en_sections) != len(de_sections):
        return [], len(en_sections)
    pairs: list[tuple[str, str]] = []
    skipped = 0
    for en, de in zip(en_sections, de_sections, strict=True):
        if [tag for tag, _ in en] != [tag for tag, _ in de] or not _same_number(en, de):
            skipped += 1
            continue
        pairs += [(e, d) for (_, e), (_, d) in zip(en, de, strict=True)]
    return pairs, skipped


def _check_roots(en_root: Path, de_root: Path) -> None:
    if not en_root.is_dir() or not de_root.is_dir():
        raise CorpusError(f"manual directories missing: {en_root} or {de_root}")


def pages_in_directories(en_root: Path, de_root: Path) -> list[tuple[str, Path, Path]]:
    """(unit, English page, German page) for pages of the same relative path under both roots (GIMP)."""
    _check_roots(en_root, de_root)
    pages = []
    for en_page in sorted(en_root.rglob("*.html")):
        unit = en_page.relative_to(en_root).as_posix()
        if (de_root / unit).is_file():
            pages.append((unit, en_page, de_root / unit))
    return pages


def pages_by_suffix(en_root: Path, de_root: Path) -> list[tuple[str, Path, Path]]:
    """(unit, English page, German page) for ``name.en.html`` beside ``name.de.html`` (Debian Reference)."""
    _check_roots(en_root, de_root)
    pages = []
    for en_page in sorted(en_root.glob("*.en.html")):
        name = en_page.name.removesuffix(".en.html")
        if (de_root / f"{name}.de.html").is_file():
            pages.append((f"{name}.html", en_page, de_root / f"{name}.de.html"))
    return pages


def extract_docbook_pairs(
    source: str, pages: list[tuple[str, Path, Path]] | list[tuple[str, Page, Page]], notes: list[str]
) -> list[Pair]:
    """Pairs of every (unit, English page, German page); one unit per page. ``notes`` gets what was skipped."""
    pairs: list[Pair] = []
    unaligned: list[str] = []
    partly: list[tuple[str, int]] = []
    left_in_english = 0
    for unit, en_page, de_page in pages:
        blocks, skipped = align_blocks(read_docbook_blocks(en_page), read_docbook_blocks(de_page))
        if not blocks and skipped:
            unaligned.append(unit)
            continue
        if skipped:
            partly.append((unit, skipped))
        for en_text, de_text in blocks:
            en, de = strip_numbers(en_text, de_text)
            if en == de:
                continue  # names, numbers, commands: nothing translated
            if untranslated(en, de):
                left_in_english += 1
                continue
            pairs.extend(Pair(source, unit, e, d) for e, d in split_pair(en, de))
    if unaligned:
        shown = ", ".join(unaligned[:5]) + (", ..." if len(unaligned) > 5 else "")
        notes.append(f"{len(unaligned)} pages: no section lines up between the languages ({shown})")
    if partly:
        shown = ", ".join(f"{unit} {n}" for unit, n in partly[:5]) + (", ..." if len(partly) > 5 else "")
        notes.append(f"{len(partly)} pages: some sections do not line up and were left out ({shown})")
    if left_in_english:
        notes.append(f"{left_in_english} blocks left in English in the German pages, dropped")
    return pairs
