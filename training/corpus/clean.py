"""Cleaning: strip markup and ``& _ ~`` accelerators, normalize whitespace, drop empty, identical,
placeholder-only, over-long and badly length-mismatched pairs."""

from __future__ import annotations

import html
import re

MAX_WORDS = 150
MAX_LENGTH_RATIO = 3.0
# Character-length ratio is computed as (long + SLACK) / (short + SLACK) so that short UI
# strings ("Cut" -> "Ausschneiden") are not dropped for being 4x longer.
LENGTH_RATIO_SLACK = 10


ACCELERATOR_PATTERNS = (
    re.compile(r"~(?=[^\W_])"),  # LibreOffice: ~File
    re.compile(r"(?<!_)_(?=[^\W_])"),  # GTK: _File, Ö_ffnen
    re.compile(r"(?<!&)&(?=[^\W_])(?!#?\w+;)"),  # Qt/KDE: &File (not &amp;)
)
ACCELERATOR_CHARS_RE = re.compile(r"[~_&]")
# HTML, Pango and KDE KUIT tags.  Anything else in angle brackets ("<file>", "<number>" in
# usage messages) is text and stays.
MARKUP_TAGS = frozenset(
    "a abbr b big blockquote body br center cite code dd div dl dt em font h1 h2 h3 h4 h5 h6 "
    "head hr html i img kbd li nobr ol p pre q qt s small span strike strong sub sup table "
    "tbody td th thead tr tt u ul var "
    "application bcode command email emphasis envar filename icode interface link message "
    "nl note numid para resource shortcut subtitle title warning".split()
)
BLOCK_TAGS = frozenset(
    "blockquote body br center dd div dl dt h1 h2 h3 h4 h5 h6 head hr html li ol p pre table "
    "tbody td th thead tr ul nl note para warning".split()
)
# Wesnoth help markup: <ref>dst='x' text='Shown text'</ref>, <header>text='Title'</header>
WESNOTH_MARKUP_RE = re.compile(r"<(ref|bold|italic|header|format|jump|img)>([^<]*)</\1>")
WESNOTH_TEXT_RE = re.compile(r"\btext='([^']*)'")
# Declarations, comments and style/script bodies vanish with their content.
NON_TEXT_RE = re.compile(r"<!DOCTYPE[^>]*>|<!--.*?-->|<(style|script|head)\b[^>]*>.*?</\1\s*>", re.DOTALL | re.I)
TAG_RE = re.compile(r"</?([A-Za-z][A-Za-z0-9]*)\b[^<>]*?/?>")
INVISIBLE_RE = re.compile("[\u00ad\u200b\u200c\u200d\u2060\ufeff]")
PLACEHOLDER_RE = re.compile(
    r"""
      %(?:\([^)]*\))?[-+\ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?   # printf flags, width, precision
        (?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGcrsaApS@%]        # length, conversion
    | %\d+\$?[a-zA-Z]?          # %1, %1$s
    | %[A-Z][A-Z_]+%?           # %PRODUCTNAME
    | \{[^{}]*\}                # {0}, {name}
    | \$\{?[A-Za-z_]\w*\}?      # $name, ${name}
    | \$\d+                     # $1
    """,
    re.VERBOSE,
)
LETTER_RE = re.compile(r"[^\W\d_]")
WORD_RE = re.compile(r"\w+")


def _is_identifier(en: str, index: int, de: str) -> bool:
    """Is the marker at ``en[index]`` part of a name the translation copies verbatim?

    ``file_name``, ``perl_func.pl`` or the format directive ``~a`` occur unchanged in the
    German text; ``_Writer`` or ``_x`` (accelerator on the first letter) are no names.
    """
    start, end = index, index + 1
    while start > 0 and (en[start - 1].isalnum() or en[start - 1] == "_"):
        start -= 1
    while end < len(en) and (en[end].isalnum() or en[end] == "_"):
        end += 1
    word = en[start:end]
    inside_word = start < index or (en[index] == "~" and len(word) <= 2)
    return inside_word and re.search(rf"(?<!\w){re.escape(word)}(?!\w)", de) is not None


def strip_accelerators(en: str, de: str) -> tuple[str, str]:
    """Remove one ``~``/``_``/``&`` keyboard accelerator per side.

    A marker counts as an accelerator only when each side has at most one of it and it is
    not part of an identifier copied into the translation (see :func:`_is_identifier`).
    """
    if not ACCELERATOR_CHARS_RE.search(en) and not ACCELERATOR_CHARS_RE.search(de):
        return en, de
    for pattern in ACCELERATOR_PATTERNS:
        en_hits = [m.start() for m in pattern.finditer(en)]
        de_hits = [m.start() for m in pattern.finditer(de)]
        if len(en_hits) > 1 or len(de_hits) > 1 or not (en_hits or de_hits):
            continue
        if en_hits and _is_identifier(en, en_hits[0], de):
            continue
        en, de = pattern.sub("", en, count=1), pattern.sub("", de, count=1)
    return en, de


def _wesnoth_text(match: re.Match[str]) -> str:
    shown = WESNOTH_TEXT_RE.search(match.group(2))
    return shown.group(1) if shown else ""


def _replace_tag(match: re.Match[str]) -> str:
    name = match.group(1).lower()
    if name not in MARKUP_TAGS:
        return match.group(0)  # "<file>" in a compiler message is text, not markup
    return " " if name in BLOCK_TAGS else ""


def normalize_whitespace(text: str) -> str:
    """Collapse all whitespace (tabs, newlines, NBSP) to single spaces."""
    return " ".join(text.split())


def clean_text(text: str) -> str:
    """Unescape entities, strip HTML/Pango tags and invisible characters, fix spacing."""
    if "&" in text:
        text = html.unescape(text)
    if "<" in text:
        text = NON_TEXT_RE.sub(" ", text)
        text = WESNOTH_MARKUP_RE.sub(_wesnoth_text, text)
        text = TAG_RE.sub(_replace_tag, text)
    return normalize_whitespace(INVISIBLE_RE.sub("", text))


def has_letters_beyond_placeholders(text: str) -> bool:
    """False for ``%s``, ``{0}: {1}``, ``...`` and the like."""
    return bool(LETTER_RE.search(PLACEHOLDER_RE.sub(" ", text)))


def drop_reason(en: str, de: str) -> str | None:
    """Why a cleaned pair is unusable, or None to keep it."""
    if not en or not de:
        return "empty"
    if not has_letters_beyond_placeholders(en) or not has_letters_beyond_placeholders(de):
        return "placeholder-only"
    if en.casefold() == de.casefold():
        return "identical"
    if len(en.split()) > MAX_WORDS or len(de.split()) > MAX_WORDS:
        return "too-long"
    short, long_ = sorted((len(en), len(de)))
    if (long_ + LENGTH_RATIO_SLACK) / (short + LENGTH_RATIO_SLACK) > MAX_LENGTH_RATIO:
        return "length-ratio"
    return None


def clean_pair(en: str, de: str) -> tuple[str, str, str | None]:
    """Cleaned English, cleaned German and the drop reason (None = keep)."""
    en, de = strip_accelerators(en, de)
    en, de = clean_text(en), clean_text(de)
    return en, de, drop_reason(en, de)


def english_key(text: str) -> str:
    """Case- and punctuation-insensitive form of an English sentence, for leak checks."""
    return " ".join(WORD_RE.findall(text.casefold()))
