"""FreeDict's English-German dictionary (Debian ``dict-freedict-eng-deu``, made from TU Chemnitz's Ding): its
usage examples and the entries that are whole sentences, as sentence pairs.

The corpus's other sources are software, documentation and the Bible; none of them is the language people type
into a translator first ("It was very nice of you to drive me home."). Ding's entries carry thousands of such
examples, each with its German, and sentence-long entries ("I don't have it with me."). Word and term entries
("cotton gin" / "Baumwollentkörnungsmaschine") are left out: 250k of them would drown the sentences.

The dictd files: ``freedict-eng-deu.index`` lines ``headword TAB offset TAB length`` (base64 numbers) into the
gzip-compressed ``.dict.dz``. An entry's first line is the headword with its pronunciation (``word /wɜːd/
<pos>``), the second its translations, then notes, examples (``   "English"  - German``) and references.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from pathlib import Path

from training.corpus.sources import CorpusError, Pair

_BASE64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_EXAMPLE = re.compile(r'^\s+"(?P<en>.+)"  - (?P<de>.+)$')
_PRONUNCIATION = re.compile(r"\s+/[^/]*/.*$")
_ANNOTATION = re.compile(r"\s*(<[^>]*>|\[[^\]]*\])\s*")  # <adj>, <v, trans>, [ugs.], [Am.]
# Alternatives are joined by ", ": after a sentence's end mark in sentences, anywhere in phrases.
_SENTENCE_ALTERNATIVES = re.compile(r"(?<=[.!?])\s*,\s+")
_SENTENCE_END = re.compile(r"[.!?]$")
# The dictionary's slots and choices: "sth.", "sb.", "jdm.", "etw.", "a line/curve", "(sich)", "…".
_SLOTS = re.compile(r"\b(sth|sb|sbd|etw|jd|jdm|jdn|jds|so)\.|/|\(|\)|\{|\}|…|\.\.\.|\betc\.|\busw\.")


def base64_number(text: str) -> int:
    """dictd's offsets and lengths: base64 digits, most significant first."""
    value = 0
    for char in text:
        value = value * 64 + _BASE64[char]
    return value


def read_entries(index: Path, dictionary: Path) -> Iterator[str]:
    """Every entry's text once (several headwords may point at one entry), in index order."""
    data = gzip.open(dictionary).read()
    seen: set[tuple[str, str]] = set()
    for line in index.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or parts[0].startswith("00-database") or parts[0].startswith("00database"):
            continue
        if (parts[1], parts[2]) in seen:
            continue
        seen.add((parts[1], parts[2]))
        start = base64_number(parts[1])
        yield data[start : start + base64_number(parts[2])].decode("utf-8")


def first_alternative(german: str, sentence: bool) -> str:
    """The first of a translation's alternatives, its annotations removed."""
    german = _ANNOTATION.sub(" ", german).strip()
    first = _SENTENCE_ALTERNATIVES.split(german)[0] if sentence else german.split(", ")[0]
    return re.sub(r"\s+", " ", first).strip()


def entry_headword(line: str) -> str:
    """An entry's first line without its pronunciation and annotations: "apron belt /ˈeɪpɹən bˈɛlt/" -> "apron
    belt"."""
    return _ANNOTATION.sub(" ", _PRONUNCIATION.sub("", line)).strip()


def entry_pairs(text: str) -> Iterator[tuple[str, str, str]]:
    """(unit, English, German) of one entry: its examples, and the entry itself when it is a sentence. The unit
    is the headword, lowercased: examples of one word are held out together."""
    lines = text.split("\n")
    if len(lines) < 2:
        return
    headword = entry_headword(lines[0])
    unit = headword.lower()
    if _SENTENCE_END.search(headword) and len(headword.split()) >= 3:
        yield unit, headword, first_alternative(lines[1], sentence=True)
    for line in lines[2:]:
        match = _EXAMPLE.match(line)
        if match:
            english = match["en"].strip()
            yield unit, english, first_alternative(match["de"], sentence=bool(_SENTENCE_END.search(english)))


def usable(english: str, german: str) -> bool:
    """Both sides plain text of at least two words, without the dictionary's slots and choices."""
    return len(english.split()) >= 2 and bool(german) and not _SLOTS.search(english) and not _SLOTS.search(german)


def extract_freedict_pairs(source: str, package_root: Path) -> list[Pair]:
    """Sentence and phrase pairs of the dictionary, one per distinct (English, German)."""
    base = package_root / "usr/share/dictd"
    index, dictionary = base / "freedict-eng-deu.index", base / "freedict-eng-deu.dict.dz"
    if not index.is_file() or not dictionary.is_file():
        raise CorpusError(f"source {source}: {index} or {dictionary} is missing")
    pairs: list[Pair] = []
    seen: set[tuple[str, str]] = set()
    for text in read_entries(index, dictionary):
        for unit, english, german in entry_pairs(text):
            if usable(english, german) and (english, german) not in seen:
                seen.add((english, german))
                pairs.append(Pair(source, unit, english, german))
    return pairs
