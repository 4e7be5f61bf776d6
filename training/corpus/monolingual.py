"""Monolingual text for back-translation: documentation prose from Debian packages, German or English.

    python -m training build-monolingual --corpus data/en-de --out data/mono-de [--cache cache/corpus]
    python -m training build-monolingual --lang en --corpus data/en-de --out data/mono-en   (for the de->en model)

Sources (the software-help and documentation domain the default models are weakest on; none of them reserved):
German (``--lang de``): every German manual page of ``manpages-de`` and every German page of the DocBook manuals
the corpus builder knows (GIMP's help, the Debian Reference, the Debian Edu manual, the installation guide).
English (``--lang en``): every English manual page of the packages that hold the originals of ``manpages-de``'s pages
(``MAN_PAGE_PACKAGES``: also the pages nobody translated) and every English page of the same manuals. All of their
text, not only the blocks that line up with a translation, which the parallel corpus already has. Blocks are cut
into sentences (pysbd), and a sentence is kept when it has 4 to 60 words, is mostly letters, is in the language
(lingua, choosing between German and English, confidence of at least 0.9: untranslated blocks go), and is not
that language's side of any pair of the parallel corpus (training, dev, test or reserved). Pages held out for dev
or test in the parallel corpus (its report.json) are left out whole, so no held-out text comes back as a
synthetic pair. Writes ``de.txt`` or ``en.txt`` (one sentence a line, shuffled with the seed), ``report.json``
with the count per source and ``LICENSES.md``.

Opt-in (``--sources fortunes``): everyday text from fortune cookies, quotes, proverbs and jokes, for each model's
weakest side. German from ``fortunes-de``; most of it is written in the spelling before 1996's reform ("daß", "muß"):
a word with "ß" is written with "ss" when the corpus's German has that form more often ("dass"), and kept otherwise
("groß", "Straße"). English from ``fortunes`` (BSD fortune's cookie files), without its ASCII art and its files of
IRC quotes; a line's leading ``<nick>`` is dropped.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from core.sentences import split_sentences
from training.corpus.docbook import read_docbook_blocks
from training.corpus.fetch import fetch_deb, unpack_deb
from training.corpus.man import TRANSLATORS_HEADING, english_pages, read_man_file, read_page
from training.corpus.sources import DOCBOOK_MANUALS, MAN_PAGE_PACKAGES, CorpusError

MIN_WORDS, MAX_WORDS = 4, 60
MIN_CONFIDENCE = 0.9
LICENSES = {
    "de": {
        "manpages": "manpages-de: GPL-3.0-or-later (the translations; each page's original keeps its own license)",
        "gimp-help": "gimp-help-de: GFDL-1.2-or-later",
        "debian-reference": "debian-reference-de: GPL-2.0-or-later",
        "debian-edu-doc": "debian-edu-doc-de: GPL-2.0-or-later",
        "installation-guide": "installation-guide-amd64: GPL-2.0-or-later",
        "fortunes": "fortunes-de: GPL-2.0-or-later (Andreas Tille's collection of German fortune cookies)",
    },
    "en": {
        "manpages": "the manual pages of MAN_PAGE_PACKAGES (training/corpus/sources.py): each page keeps its package's "
        "license (see /usr/share/doc/PACKAGE/copyright in it)",
        "gimp-help": "gimp-help-en: GFDL-1.2-or-later",
        "debian-reference": "debian-reference-en: GPL-2.0-or-later",
        "debian-edu-doc": "debian-edu-doc-en: GPL-2.0-or-later",
        "installation-guide": "installation-guide-amd64: GPL-2.0-or-later",
        "fortunes": "fortunes: BSD-3-Clause (the cookie files of BSD fortune, Ken Arnold and contributors)",
    },
}
SOURCES = ["manpages", "gimp-help", "debian-reference", "debian-edu-doc", "installation-guide"]
OPT_IN = ["fortunes"]  # only when named in --sources
FORTUNE_PACKAGES = {  # lang: (package, directory of its cookie files)
    "de": ("fortunes-de", "usr/share/games/fortunes/de"),
    "en": ("fortunes", "usr/share/games/fortunes"),
}
FORTUNE_SKIP = {"asciiart", "ascii-art", "knghtbrd"}  # pictures drawn in characters; IRC quotes
_LETTERS = re.compile(r"[^\W\d_]")
_WORD = re.compile(r"\w+")
_SHARP_S_WORD = re.compile(r"\w*ß\w*")
_ATTRIBUTION = re.compile(r"^\s*--\s")  # "\t\t-- Sprichwort", the fortune's source
_SPEAKER = re.compile(r"^<[^>\s]+>\s*")  # "<netgod> sel: dont send ...", a chat line's nick


def man_blocks(cache: Path, lang: str = "de") -> Iterator[tuple[str, str]]:
    """(unit, text) of every paragraph of every manual page in ``lang``, units as the parallel corpus names them."""
    if lang == "de":
        root = unpack_deb(fetch_deb("manpages-de", cache), cache) / "usr/share/man/de"
        pages = {path.relative_to(root).as_posix().removesuffix(".gz"): path for path in sorted(root.glob("man*/*"))}
    else:
        pages = english_pages([unpack_deb(fetch_deb(name, cache), cache) for name in MAN_PAGE_PACKAGES])
    for unit, path in sorted(pages.items()):
        blocks = read_page(read_man_file(path))
        if blocks is None:
            continue
        for block in blocks:
            if block.kind == "heading" and block.text.upper() == TRANSLATORS_HEADING:
                break  # the translators' names and the bug address
            if block.kind == "text":
                yield unit, block.text


def manual_blocks(name: str, cache: Path, lang: str = "de") -> Iterator[tuple[str, str]]:
    """(unit, text) of every leaf block of every page of a DocBook manual in ``lang``."""
    manual = DOCBOOK_MANUALS[name]
    package, directory = manual.german if lang == "de" else manual.english
    root = unpack_deb(fetch_deb(package, cache), cache) / directory
    if manual.layout == "suffix":
        pages = [(p.name.removesuffix(f".{lang}.html") + ".html", p) for p in sorted(root.glob(f"*.{lang}.html"))]
    else:
        pages = [(p.relative_to(root).as_posix(), p) for p in sorted(root.rglob("*.html"))]
    for unit, page in pages:
        for tag, text in read_docbook_blocks(page):
            if tag not in ("td", "th"):  # table cells: names, values, keys
                yield unit, text


def fortune_blocks(cache: Path, lang: str = "de") -> Iterator[tuple[str, str]]:
    """(unit, text) of every fortune in ``lang`` (``FORTUNE_PACKAGES``): its lines joined, its attribution dropped."""
    package, directory = FORTUNE_PACKAGES[lang]
    root = unpack_deb(fetch_deb(package, cache), cache) / directory
    for path in sorted(root.iterdir()):
        if path.is_symlink() or not path.is_file() or path.suffix in (".dat", ".u8") or path.name in FORTUNE_SKIP:
            continue
        fortunes = re.split(r"^%$", path.read_text(encoding="utf-8", errors="replace"), flags=re.MULTILINE)
        for number, fortune in enumerate(fortunes):
            lines = [
                _SPEAKER.sub("", line.strip())
                for line in fortune.splitlines()
                if line.strip() and not _ATTRIBUTION.match(line)
            ]
            if lines:
                yield f"{path.name}#{number}", " ".join(lines)


def modern_spelling(sentence: str, counts: Mapping[str, int]) -> str:
    """Each word with "ß" written with "ss" where ``counts`` (lower-cased words of modern text) has that more often."""

    def spell(match: re.Match[str]) -> str:
        word = match.group(0)
        modern = word.replace("ß", "ss")
        return modern if counts.get(modern.lower(), 0) > counts.get(word.lower(), 0) else word

    return _SHARP_S_WORD.sub(spell, sentence)


def word_counts(sentences: set[str]) -> Counter[str]:
    return Counter(word for sentence in sentences for word in _WORD.findall(sentence.lower()))


def _blocks(name: str, cache: Path, lang: str) -> Iterator[tuple[str, str]]:
    if name == "manpages":
        return man_blocks(cache, lang)
    if name == "fortunes":
        return fortune_blocks(cache, lang)
    return manual_blocks(name, cache, lang)


def held_out_units(report: dict[str, Any]) -> set[str]:
    """``source:unit`` of every page the parallel corpus holds out for dev or test."""
    units: set[str] = set()
    for split in ("dev", "test"):
        for names in report.get("heldout_units", {}).get(split, {}).values():
            units.update(names)
    return units


def corpus_sides(corpus: Path, lang: str = "de") -> set[str]:
    """One side of every pair of the parallel corpus (English first, German last on each line)."""
    column = -1 if lang == "de" else 0
    seen: set[str] = set()
    for path in sorted(corpus.glob("*.tsv")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                seen.add(line.rstrip("\n").split("\t")[column])
    return seen


def plausible(sentence: str) -> bool:
    words = sentence.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        return False
    return len(_LETTERS.findall(sentence)) >= 0.6 * len(sentence.replace(" ", ""))


def build_monolingual(
    corpus: Path, out: Path, cache: Path, seed: int = 1, sources: list[str] | None = None, lang: str = "de"
) -> dict[str, Any]:
    from lingua import Language, LanguageDetectorBuilder

    report_path = corpus / "report.json"
    if not report_path.is_file():
        raise CorpusError(
            f"{report_path} is missing: build the parallel corpus first (python -m training build-corpus)"
        )
    if lang not in LICENSES:
        raise CorpusError(f"lang {lang!r}: use de or en")
    unknown = [name for name in sources or () if name not in SOURCES + OPT_IN]
    if unknown:
        raise CorpusError(f"unknown sources {', '.join(unknown)}; known: {', '.join(SOURCES + OPT_IN)}")
    held = held_out_units(json.loads(report_path.read_text(encoding="utf-8")))
    known = corpus_sides(corpus, lang)
    detector = LanguageDetectorBuilder.from_languages(Language.GERMAN, Language.ENGLISH).build()
    language = Language.GERMAN if lang == "de" else Language.ENGLISH
    names = sources or SOURCES
    counts_of_words = word_counts(known) if "fortunes" in names and lang == "de" else Counter()
    kept: dict[str, str] = {}
    counts: dict[str, dict[str, int]] = {}
    for name in names:
        blocks = _blocks(name, cache, lang)
        count = counts.setdefault(name, dict.fromkeys(("blocks", "held_out", "sentences", "kept"), 0))
        for unit, text in blocks:
            count["blocks"] += 1
            if f"{name}:{unit}" in held:
                count["held_out"] += 1
                continue
            for sentence in split_sentences(text, lang).sentences:
                sentence = " ".join(sentence.split())
                if name == "fortunes" and lang == "de":
                    sentence = modern_spelling(sentence, counts_of_words)
                count["sentences"] += 1
                if sentence in kept or sentence in known or not plausible(sentence):
                    continue
                if detector.compute_language_confidence(sentence, language) < MIN_CONFIDENCE:
                    continue
                kept[sentence] = name
                count["kept"] += 1
    lines = sorted(kept)
    random.Random(seed).shuffle(lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{lang}.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    report = {"corpus": str(corpus), "lang": lang, "seed": seed, "sentences": len(lines), "per_source": counts}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / "LICENSES.md").write_text(
        f"# Licenses of the {'German' if lang == 'de' else 'English'} monolingual text\n\n"
        "Each line keeps the license of its package:\n\n" + "".join(f"- {LICENSES[lang][name]}\n" for name in names),
        encoding="utf-8",
    )
    return report
