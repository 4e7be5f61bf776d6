"""Manual pages: German translations (Debian ``manpages-de``) aligned with the English originals.

``manpages-de`` holds the German pages that the manpages-l10n project generates with po4a from the
English pages of the packages that own them: the same man(7) macros, paragraph for paragraph, with only the
text translated (po4a also rewrites one-line font macros such as ``.B ls`` as inline ``\\fBls\\fP``).
So both pages are read into blocks (section headings, ``.TP`` tags, paragraphs) with font macros and
escapes resolved, and blocks are paired by position inside each section (the German page's extra last
section, the translators' credits, is dropped first). A section is used only when both
pages have the same number and kinds of blocks there, and a pair only when both sides name the same
command-line options: a page whose translation was made for another version of the English page does not
line up, and yields nothing rather than wrong pairs. mdoc(7) pages (BSD macros), ``.so`` redirections,
no-fill blocks (examples, synopses) and tables are left out. A paragraph pair becomes sentence pairs when
both sides split into the same number of sentences (what the server translates is one sentence at a time).
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from core.sentences import split_sentences
from training.corpus.sources import Pair

# Requests that end the current block. Anything else that is not a font macro or a link macro is ignored.
BREAKS = frozenset(
    "SH SS PP P LP TP TQ IP HP RS RE br sp nf fi EX EE TS TE in ti ne bp PD TH SY YS OP de ig Vb Ve".split()
)
FONT_MACROS = frozenset("B I R SM SB BR RB IR RI BI IB".split())
ALTERNATING = frozenset("BR RB IR RI BI IB".split())  # arguments joined without spaces
SKIP_UNTIL = {"nf": "fi", "EX": "EE", "TS": "TE", "de": "..", "ig": "..", "Vb": "Ve"}
MDOC_MARKERS = frozenset({"Dd", "Sh", "Nm"})

NAMED_CHARS = {
    "em": "—", "en": "–", "hy": "-", "aq": "'", "dq": '"', "lq": "“", "rq": "”", "oq": "‘", "cq": "’",
    "Fo": "«", "Fc": "»", "fo": "‹", "fc": "›", "Bq": "„", "bq": "‚", "bu": "•", "co": "©", "rg": "®",
    "tm": "™", "mu": "×", "di": "÷", "de": "°", "+-": "±", ">=": "≥", "<=": "≤", "!=": "≠", "->": "→",
    "<-": "←", "ha": "^", "ti": "~", "rs": "\\", "sl": "/", "ul": "_", "ga": "`", "ss": "ß", "a\"": "ä",
    "o\"": "ö", "u\"": "ü", "A\"": "Ä", "O\"": "Ö", "U\"": "Ü", "dg": "†", "sc": "§", "ps": "¶", "Eu": "€",
    "eu": "€", "at": "@", "sh": "#", "Do": "$", "lB": "[", "rB": "]", "lC": "{", "rC": "}", "ba": "|",
    "or": "|", "fm": "′", "aa": "´", "ap": "~", "pc": "·", "ct": "¢", "Po": "£", "Ye": "¥", "es": "∅",
}  # fmt: skip
STRINGS = {"lq": "“", "rq": "”", "R": "®", "Tm": "™", "S": "", "Lq": "„", "Rq": "“"}

_ESCAPE = re.compile(
    r"""\\(?:
        f(?:\[[^\]]*\]|\(..|.)          # font change
      | s[-+]?(?:\d|\(\d\d|\[[^\]]*\])  # size change
      | \*(?:\[(?P<sl>[^\]]*)\]|\((?P<s2>..)|(?P<s1>.))   # string
      | \[(?P<cl>[^\]]*)\]              # named character, long form
      | \((?P<c2>..)                    # named character, two letters
      | [nkgVY](?:\[[^\]]*\]|\(..|.)    # registers and friends: dropped
      | [hvwlLoxbDXZ]'[^']*'            # motions and measurements: dropped
      | (?P<one>.)                      # everything else, one character
    )""",
    re.VERBOSE,
)
_ONE_CHAR = {"-": "-", "e": "\\", "\\": "\\", " ": " ", "~": " ", "0": " ", "t": " ", ".": ".", "'": "'", "`": "`"}
_INNER_STOP = re.compile(r"[.!?]\s+\S")
_OPTION = re.compile(r"(?<![\w\-/])--?[A-Za-z][\w\-]*")


TRANSLATORS_HEADING = "ÜBERSETZUNG"


class Block(NamedTuple):
    kind: str  # "heading" | "tag" | "text"
    text: str


def _escape(match: re.Match[str]) -> str:
    groups = match.groupdict()
    for name in ("sl", "s2", "s1"):
        if groups[name] is not None:
            return STRINGS.get(groups[name], "")
    for name in ("cl", "c2"):
        if groups[name] is not None:
            return NAMED_CHARS.get(groups[name], "")
    one = groups["one"]
    if one is None:
        return ""
    return _ONE_CHAR.get(one, "")  # \& \/ \, \| \^ \% \: \c and unknown ones vanish


def render_inline(text: str) -> str:
    """Plain text of one roff text line: escapes resolved, comments cut."""
    comment = re.search(r'\\"|\\#', text)
    if comment:
        text = text[: comment.start()]
    return _ESCAPE.sub(_escape, text)


def _macro_args(rest: str) -> list[str]:
    return [a[1:-1] if len(a) > 1 and a.startswith('"') else a for a in re.findall(r'"[^"]*"?|\S+', rest)]


def read_page(text: str) -> list[Block] | None:
    """Blocks of a man(7) page, or None for pages this reader does not handle (mdoc, ``.so``)."""
    blocks: list[Block] = []
    lines: list[str] = []
    kind = "text"
    skip_until: str | None = None
    tag_pending = False

    def flush() -> None:
        nonlocal lines, kind
        joined = " ".join(" ".join(lines).split())
        if joined:
            blocks.append(Block(kind, joined))
        lines, kind = [], "text"

    def add(line: str) -> None:
        nonlocal tag_pending
        lines.append(line)
        if tag_pending:  # the line after .TP / a bare .SH is the tag / heading itself
            flush()
            tag_pending = False

    for raw in text.splitlines():
        if skip_until is not None:
            if raw.strip() == ".." if skip_until == ".." else raw[1:].strip().split()[:1] == [skip_until]:
                skip_until = None
            continue
        if not raw.startswith((".", "'")):
            add(render_inline(raw))
            continue
        request, _, rest = raw[1:].strip().partition(" ")
        if not request or request.startswith('\\"'):
            continue
        if request in MDOC_MARKERS or request == "so":
            return None
        if request in FONT_MACROS:
            add(render_inline(("" if request in ALTERNATING else " ").join(_macro_args(rest))))
        elif request in ("UE", "ME") and rest.strip() and lines:  # .UE .: punctuation right after the link
            lines[-1] += render_inline(" ".join(_macro_args(rest)))
        elif request in BREAKS:
            flush()
            tag_pending = False
            if request in SKIP_UNTIL:
                skip_until = SKIP_UNTIL[request]
            elif request in ("SH", "SS") and rest.strip():
                blocks.append(Block("heading", " ".join(render_inline(" ".join(_macro_args(rest))).split())))
            elif request in ("SH", "SS", "TP", "TQ"):
                kind = "heading" if request in ("SH", "SS") else "tag"
                tag_pending = True
    flush()
    return blocks


def options_of(text: str) -> set[str]:
    return set(_OPTION.findall(text))


def _sections(blocks: list[Block]) -> list[list[Block]]:
    sections: list[list[Block]] = [[]]
    for block in blocks:
        if block.kind == "heading":
            sections.append([])
        sections[-1].append(block)
    return sections


def align_pages(en: list[Block], de: list[Block]) -> Iterator[tuple[str, str]]:
    """(English, German) block pairs of the sections that line up, where both name the same options."""
    en_sections, de_sections = _sections(en), _sections(de)
    if de_sections[-1] and de_sections[-1][0] == Block("heading", TRANSLATORS_HEADING):
        de_sections.pop()  # manpages-l10n's credits, not in the English page
    if len(en_sections) != len(de_sections):
        return
    for en_blocks, de_blocks in zip(en_sections, de_sections, strict=True):
        if [b.kind for b in en_blocks] != [b.kind for b in de_blocks]:
            continue
        for e, d in zip(en_blocks, de_blocks, strict=True):
            if options_of(e.text) == options_of(d.text):
                yield e.text, d.text


def read_man_file(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def english_pages(roots: list[Path]) -> dict[str, Path]:
    """Page name (``man1/ls.1``) -> file (compressed or not) in the first unpacked package that has it."""
    pages: dict[str, Path] = {}
    for root in roots:
        for path in sorted((root / "usr/share/man").glob("man*/*")):
            if path.is_file():
                pages.setdefault(path.relative_to(root / "usr/share/man").as_posix().removesuffix(".gz"), path)
    return pages


def split_pair(en: str, de: str) -> list[tuple[str, str]]:
    """Sentence pairs when both paragraphs have the same number of sentences, else the paragraph pair."""
    if not _INNER_STOP.search(en):
        return [(en, de)]  # one sentence: no need to ask the (slow) sentence splitter
    en_split, de_split = split_sentences(en, "en"), split_sentences(de, "de")
    pairs = list(zip(en_split.sentences, de_split.sentences, strict=False))
    if 1 < len(en_split.sentences) == len(de_split.sentences) and all(map(_similar_length, pairs)):
        return pairs
    return [(en, de)]


def _similar_length(pair: tuple[str, str]) -> bool:
    """Whether a sentence pair is plausible: German runs about 1.1x English; a split that cuts the two sides
    in different places gives pairs far outside that (both counts can agree by chance)."""
    en, de = (len(side) + 10 for side in pair)
    return 0.6 <= de / en <= 2.0


def extract_man_pairs(source: str, german_root: Path, english_roots: list[Path], notes: list[str]) -> list[Pair]:
    """Pairs of every German page under ``german_root`` (``usr/share/man/de``) whose English page is found
    in ``english_roots`` (unpacked packages); one unit per page. ``notes`` gets what was skipped."""
    pairs: list[Pair] = []
    missing, unreadable, unaligned = [], [], []
    english = english_pages(english_roots)
    for de_path in sorted(german_root.glob("man*/*")):
        relative = de_path.relative_to(german_root).as_posix().removesuffix(".gz")
        en_path = english.get(relative)
        if en_path is None:
            missing.append(relative)
            continue
        en_blocks, de_blocks = read_page(read_man_file(en_path)), read_page(read_man_file(de_path))
        if en_blocks is None or de_blocks is None:
            unreadable.append(relative)
            continue
        found = [p for e, d in align_pages(en_blocks, de_blocks) for p in split_pair(e, d)]
        if not found:
            unaligned.append(relative)
        pairs.extend(Pair(source, relative, en, de) for en, de in found)
    for what, pages in (
        ("no English page in the listed packages", missing),
        ("mdoc or .so pages, not read", unreadable),
        ("no section lined up", unaligned),
    ):
        if pages:
            notes.append(f"{len(pages)} pages: {what} ({', '.join(pages[:5])}{', ...' if len(pages) > 5 else ''})")
    return pairs
