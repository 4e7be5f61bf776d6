"""Aligners: the unpacked files of each kind of source turned into :class:`Pair` objects: gettext catalogs
msgid -> msgstr, LibreOffice help by (page, paragraph id), GNOME Mallard pages by block order, Bibles by
(book, chapter, verse). Manual pages and DocBook manuals have their own modules (``man``, ``docbook``)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

import lxml.html
import polib
from lxml import etree

from training.corpus.sources import CorpusError, Pair

# --- gettext catalogs -----------------------------------------------------------------

GERMAN_LOCALES = frozenset({"de", "de_DE", "de-DE"})
TRANSLATOR_CREDITS = frozenset({"NAME OF TRANSLATORS", "EMAIL OF TRANSLATORS"})
"""KDE catalogs' contexts of "Your names" / "Your emails", whose German side is the translators' names."""


def is_german_catalog(path: Path) -> bool:
    """True for ``.../de/LC_MESSAGES/x.mo`` style paths and ``po/de.po`` files."""
    if path.suffix not in (".po", ".mo"):
        return False
    if path.parent.name == "LC_MESSAGES":
        return path.parent.parent.name in GERMAN_LOCALES
    return path.suffix == ".po" and path.stem in GERMAN_LOCALES


def find_german_catalogs(root: Path) -> list[Path]:
    """German gettext catalogs under ``root``; where x.po and x.mo both exist, x.po wins."""
    chosen: dict[tuple[Path, str], Path] = {}
    for path in sorted(root.rglob("*.[mp]o")):
        if not path.is_file() or not is_german_catalog(path):
            continue
        key = (path.parent, path.stem)
        if key not in chosen or path.suffix == ".po":
            chosen[key] = path
    return sorted(chosen.values())


def read_catalog(path: Path) -> polib.POFile | polib.MOFile:
    """Parse a .po or .mo file, raising :class:`CorpusError` naming the file on failure."""
    try:
        if path.suffix == ".mo":
            return polib.mofile(str(path))
        return polib.pofile(str(path))
    except (OSError, ValueError, UnicodeError) as exc:
        raise CorpusError(f"cannot read gettext catalog {path}: {exc}") from exc


def iter_catalog_pairs(path: Path) -> Iterator[tuple[str, str]]:
    """msgid -> msgstr for every translated entry; fuzzy and obsolete entries are skipped.

    Plural entries give two pairs (singular -> form 0, plural -> form 1).  Untranslated
    entries come out with an empty German side and are dropped (and counted) by cleaning.
    """
    for entry in read_catalog(path):
        if not entry.msgid or entry.obsolete or "fuzzy" in entry.flags or entry.msgctxt in TRANSLATOR_CREDITS:
            continue
        if entry.msgid_plural:
            forms = entry.msgstr_plural
            yield entry.msgid, str(forms.get(0, forms.get("0", "")))  # type: ignore[call-overload]
            yield entry.msgid_plural, str(forms.get(1, forms.get("1", "")))  # type: ignore[call-overload]
        else:
            yield entry.msgid, entry.msgstr


def extract_gettext_pairs(source: str, package_roots: dict[str, Path]) -> list[Pair]:
    """All German catalogs of the given unpacked packages; one unit per catalog file."""
    pairs: list[Pair] = []
    for package, root in package_roots.items():
        for catalog in find_german_catalogs(root):
            unit = f"{package}:{catalog.relative_to(root).as_posix()}"
            pairs.extend(Pair(source, unit, en, de) for en, de in iter_catalog_pairs(catalog))
    return pairs


# --- LibreOffice help -----------------------------------------------------------------

HELP_ID = re.compile(r"^(?:par|hd)_id")


def read_help_paragraphs(path: Path) -> dict[str, str]:
    """Paragraph/heading texts of one help page keyed by ``id#n`` (n-th use of that id).

    Inline OS switches (``<span class="switchinline">`` with MAC/WIN/default variants) keep
    only the default variant, so "Command/Ctrl" does not come out as "CommandCtrl".
    """
    try:
        parser = lxml.html.HTMLParser(encoding="utf-8")
        doc = lxml.html.fromstring(path.read_bytes(), parser=parser)
    except (OSError, etree.ParserError) as exc:
        raise CorpusError(f"cannot parse help page {path}: {exc}") from exc
    for switch in doc.find_class("switchinline"):
        for variant in list(switch):
            if not (variant.get("id") or "").startswith("default"):
                variant.drop_tree()
    for br in doc.iter("br"):
        br.tail = " " + (br.tail or "")
    paragraphs: dict[str, str] = {}
    for element in doc.iter():
        par_id = element.get("id") if isinstance(element.tag, str) else None
        if not par_id or not HELP_ID.match(par_id):
            continue
        n = 0
        while f"{par_id}#{n}" in paragraphs:
            n += 1
        paragraphs[f"{par_id}#{n}"] = element.text_content()
    return paragraphs


def find_help_root(package_root: Path, language: str) -> Path:
    """``usr/share/libreoffice/help/<language>`` inside an unpacked help package."""
    root = package_root / "usr/share/libreoffice/help" / language
    if not root.is_dir():
        raise CorpusError(f"no LibreOffice help for {language!r} in {package_root}")
    return root


def extract_help_pairs(source: str, en_root: Path, de_root: Path) -> list[Pair]:
    """Align help pages present in both languages by (page path, paragraph id)."""
    pairs: list[Pair] = []
    for en_page in sorted(en_root.rglob("*.html")):
        page = en_page.relative_to(en_root).as_posix()
        de_page = de_root / page
        if not de_page.is_file():
            continue
        en_paras = read_help_paragraphs(en_page)
        de_paras = read_help_paragraphs(de_page)
        pairs.extend(Pair(source, page, en, de_paras[key]) for key, en in en_paras.items() if key in de_paras)
    return pairs


# --- GNOME Mallard help pages ---------------------------------------------------------

MALLARD_NS = "{http://projectmallard.org/1.0/}"
MALLARD_BLOCKS = frozenset(MALLARD_NS + tag for tag in ("p", "title", "desc", "subtitle"))
MALLARD_SKIP = frozenset({MALLARD_NS + "comment"})
ITS_TRANSLATE = "{http://www.w3.org/2005/11/its}translate"


def read_mallard_blocks(path: Path) -> list[tuple[str, str]]:
    """(tag, text) of the translatable blocks of a Mallard page, in document order.

    Editor comments and ``its:translate="no"`` parts are skipped; translator credits in
    the German pages are not blocks, so both languages give the same block sequence.
    """
    try:
        parser = etree.XMLParser(resolve_entities=False, no_network=True)
        root = etree.parse(str(path), parser).getroot()
    except (OSError, etree.XMLSyntaxError) as exc:
        raise CorpusError(f"cannot parse Mallard page {path}: {exc}") from exc
    blocks: list[tuple[str, str]] = []

    def walk(element: etree._Element) -> None:
        for child in element:
            if not isinstance(child.tag, str) or child.tag in MALLARD_SKIP:
                continue
            if child.get(ITS_TRANSLATE) == "no":
                continue
            if child.tag in MALLARD_BLOCKS:
                blocks.append((etree.QName(child).localname, "".join(child.itertext())))
            else:
                walk(child)

    walk(root)
    return blocks


def extract_mallard_pairs(source: str, help_root: Path, notes: list[str]) -> list[Pair]:
    """Align ``help/C/<doc>/*.page`` with ``help/de/<doc>/*.page`` block by block.

    A page whose block structure differs between the languages is skipped (noted).
    """
    pairs: list[Pair] = []
    en_dir, de_dir = help_root / "C", help_root / "de"
    for en_page in sorted(en_dir.glob("*/*.page")):
        rel = en_page.relative_to(en_dir).as_posix()
        de_page = de_dir / rel
        if not de_page.is_file():
            continue
        en_blocks, de_blocks = read_mallard_blocks(en_page), read_mallard_blocks(de_page)
        if [tag for tag, _ in en_blocks] != [tag for tag, _ in de_blocks]:
            notes.append(f"skipped {rel}: block structure differs between C and de")
            continue
        pairs.extend(Pair(source, rel, en, de) for (_, en), (_, de) in zip(en_blocks, de_blocks, strict=True))
    return pairs


# --- Bible ----------------------------------------------------------------------------

# (English version, German version); the first pairing is the primary one (dev/test/eval).
BIBLE_PAIRINGS: tuple[tuple[str, str], ...] = (("4", "s"), ("k", "e"))
BIBLE_VERSION_NAMES = {
    "4": "World English Bible",
    "k": "King James Version",
    "s": "Schlachter 1951",
    "e": "Elberfelder 1905",
}
ACTS_BOOK = 44
BOOK_NAMES = (
    "Genesis Exodus Leviticus Numbers Deuteronomy Joshua Judges Ruth 1-Samuel 2-Samuel "
    "1-Kings 2-Kings 1-Chronicles 2-Chronicles Ezra Nehemiah Esther Job Psalms Proverbs "
    "Ecclesiastes Song-of-Solomon Isaiah Jeremiah Lamentations Ezekiel Daniel Hosea Joel "
    "Amos Obadiah Jonah Micah Nahum Habakkuk Zephaniah Haggai Zechariah Malachi Matthew "
    "Mark Luke John Acts Romans 1-Corinthians 2-Corinthians Galatians Ephesians "
    "Philippians Colossians 1-Thessalonians 2-Thessalonians 1-Timothy 2-Timothy Titus "
    "Philemon Hebrews James 1-Peter 2-Peter 1-John 2-John 3-John Jude Revelation"
).split()


def bible_unit(book: int) -> str:
    """Unit name of a Bible book, e.g. ``44-Acts``."""
    name = BOOK_NAMES[book - 1] if 1 <= book <= len(BOOK_NAMES) else "book"
    return f"{book:02d}-{name}"


ACTS_UNIT = bible_unit(ACTS_BOOK)

_BIBLE_NOISE = re.compile(r"\(\d+:\d+\)|(?:^|\s)\*(?:\s*\*)*(?=\s|$)")
_BIBLE_MARKS = str.maketrans({"`": "'", "[": None, "]": None})


def normalize_bible_text(text: str) -> str:
    """Undo version-specific typography: WEB's backtick apostrophes, editorial brackets
    ("[der Sohn des]"), Schlachter's own verse numbers ("(32:1)") where its versification
    differs, and Elberfelder's ``* * *`` section marks."""
    return _BIBLE_NOISE.sub(" ", text.translate(_BIBLE_MARKS))


def extract_bible_pairs(source: str, db_path: Path, pairings: Iterable[tuple[str, str]] = BIBLE_PAIRINGS) -> list[Pair]:
    """Join verses of English and German versions on (book, chapter, verse)."""
    query = (
        "SELECT e.bNumber, e.vText, g.vText FROM bible e JOIN bible g "
        "ON g.bNumber = e.bNumber AND g.cNumber = e.cNumber AND g.vNumber = e.vNumber "
        "WHERE e.bbName = ? AND g.bbName = ? ORDER BY e.bNumber, e.cNumber, e.vNumber"
    )
    pairs: list[Pair] = []
    try:
        con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            for index, (en_version, de_version) in enumerate(pairings):
                rows = con.execute(query, (en_version, de_version)).fetchall()
                if not rows:
                    raise CorpusError(f"{db_path}: no verses for versions {en_version!r} x {de_version!r}")
                pairs.extend(
                    Pair(
                        source,
                        bible_unit(book),
                        normalize_bible_text(en),
                        normalize_bible_text(de),
                        index == 0,
                    )
                    for book, en, de in rows
                )
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise CorpusError(f"cannot read Bible database {db_path}: {exc}") from exc
    return pairs


def find_file(root: Path, name: str) -> Path:
    """The single file called ``name`` under ``root`` (error naming both if absent)."""
    matches = sorted(root.rglob(name))
    if not matches:
        raise CorpusError(f"{name} not found under {root}")
    return matches[0]
