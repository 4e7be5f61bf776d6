"""Ding's German-English dictionary (Debian ``trans-de-en``, TU Chemnitz): its phrases, idioms and sentences.

FreeDict's eng-deu (the ``freedict`` source) is made from an older Ding, and carries its usage examples; the
current file holds more: collocations ("to make a statement" / "eine Erklärung abgeben"), idioms ("We're all in
the same boat." / "Wir sitzen alle im selben Boot.") and example sentences that FreeDict never had.

The file ``usr/share/trans/de-en`` has one entry a line, ``German :: English``; both sides list the same senses
separated by `` | `` (the noun, then its plural, then a phrase with it), each a ``;``-separated list of
alternatives with annotations: ``{m}`` grammar, ``[ugs.]`` register or field, ``(…)`` optional words or
explanations. A sense becomes a pair when both sides have it: the first alternative of each, annotations removed.
Terms with a single word on either side ("write access" / "Schreibzugriff", "to extract" / "entziehen": 200k of
them would drown the phrases) and senses with the dictionary's slots ("jdm. etw. geben" / "to give sb. sth.") or
choices ("a/the") are left out, and so are a verb's present participles ("getting the bird" / "ausgepfiffen
werdend"), which German hardly writes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from training.corpus.freedict import usable
from training.corpus.sources import CorpusError, Pair

DICTIONARY = "usr/share/trans/de-en"
_ANNOTATIONS = re.compile(r"\{[^{}]*\}|\[[^\]]*\]|\([^()]*\)")
_PARTICIPLES = re.compile(r"\w+ing\b.*\t.*\w+end$")  # "English<TAB>German" of a present participle


def first_alternative(sense: str) -> str:
    """A sense's first ``;``-separated alternative without its annotations, spaces normalized."""
    text = _ANNOTATIONS.sub(" ", sense).split(";")[0]
    return re.sub(r"\s+", " ", text).strip()


def line_pairs(line: str) -> Iterator[tuple[str, str, str]]:
    """(unit, German, English) for every sense of one entry line that both sides list; the unit is the entry's
    first German term, lowercased."""
    if line.startswith("#") or " :: " not in line:
        return
    german, english = line.split(" :: ", 1)
    german_senses, english_senses = german.split(" | "), english.split(" | ")
    if len(german_senses) != len(english_senses):
        return
    unit = first_alternative(german_senses[0]).lower()
    for de, en in zip(german_senses, english_senses, strict=True):
        yield unit, first_alternative(de), first_alternative(en)


def extract_ding_pairs(source: str, package_root: Path) -> list[Pair]:
    """Phrase and sentence pairs of the dictionary (at least two words a side), one per distinct (English,
    German)."""
    path = package_root / DICTIONARY
    if not path.is_file():
        raise CorpusError(f"source {source}: {path} is missing")
    pairs: list[Pair] = []
    seen: set[tuple[str, str]] = set()
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            for unit, german, english in line_pairs(line.rstrip("\n")):
                if len(german.split()) < 2 or not usable(english, german) or _PARTICIPLES.match(f"{english}\t{german}"):
                    continue
                if (english, german) not in seen:
                    seen.add((english, german))
                    pairs.append(Pair(source, unit, english, german))
    return pairs
