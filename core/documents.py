"""Whole files to translate: plain text, HTML, Markdown, gettext catalogs, XLIFF (core/xliff.py), subtitles
(core/subtitles.py), office documents (core/office.py) and e-books (core/epub.py), as segments and back.

``read_document(name, data)`` gives a ``DocumentFile``: the segments to translate (core/markup.py's, so inline
markup goes back by the word alignment) and ``rebuild(translations)``, which writes the file again with each
segment's translation in place. For a ``.po`` catalog every entry without a translation is a segment (both
forms of a plural entry); its placeholders (``%s``, ``%d``, ``%(name)s``, ``%1$s``, ``{name}``, ``%1``) become
literals that come back verbatim and, in ``c-format``/``python-format`` entries, in the source's order; an
accelerator (``_File``, ``&Open``, ``~Save``) is taken out before translating and put before the first letter of
the translation; leading and trailing whitespace and line breaks are kept as the source has them. Filled entries
are marked ``fuzzy``, so that a translator reviews them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from core import epub, office
from core.markdown import parse_markdown
from core.markup import Document, Links, Segment, parse_html, render
from core.subtitles import read_subtitles
from core.xliff import XliffError, read_xliff

TEXT_KINDS = {
    ".txt": "text/plain",
    ".html": "text/html",
    ".htm": "text/html",
    ".md": "text/markdown",
    ".po": "text/x-gettext-translation",
    ".pot": "text/x-gettext-translation",
    ".srt": "application/x-subrip",
    ".xlf": "application/xliff+xml",
    ".xliff": "application/xliff+xml",
    ".vtt": "text/vtt",
}
KINDS = {**TEXT_KINDS, **office.KINDS, ".epub": epub.MEDIA_TYPE}
_PRINTF = r"%(?:\d+\$|\([^)\s]+\))?[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGcrsaAp%]"
_PLACEHOLDERS = re.compile(rf"{_PRINTF}|%\d+|\{{[^{{}}\s]*\}}|\$\{{[^{{}}]+\}}")
_POSITIONAL = re.compile(
    r"%(?![(%]|\d+\$)[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGcrsaAp]"
)
"""printf directives that take their argument by position in the list: their order must stay."""
_ACCELERATOR = re.compile(r"(?<![\w&_~])([_&~])(?=[^\W\d_])")
_ORDERED_FLAGS = ("c-format", "python-format", "php-format", "sh-format")


class DocumentError(ValueError):
    """The file cannot be read as the kind its name says."""


Rebuild = Callable[[list[tuple[str, Links]], str | None], bytes]
"""Takes each segment's (translation, word links) in order and the target language; returns the translated file."""


@dataclass
class DocumentFile:
    segments: list[Segment]
    write: Rebuild
    media_type: str

    def rebuild(self, done: list[tuple[str, Links]], target_lang: str | None = None) -> bytes:
        """The file with each segment's (translation, word links) in place; ``target_lang`` (a code) goes where the
        format names the language of its translations and the file does not yet (a catalog's ``Language``,
        XLIFF's target language)."""
        return self.write(done, target_lang)


def media_type(name: str) -> str:
    """The media type of a file this server translates, by its name (a text kind's with its charset)."""
    suffix = _suffix(name)
    if suffix in TEXT_KINDS:
        return TEXT_KINDS[suffix] + "; charset=utf-8"
    return KINDS.get(suffix, "application/octet-stream")


def _suffix(name: str) -> str:
    return "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""


def read_document(name: str, data: bytes) -> DocumentFile:
    suffix = _suffix(name)
    if suffix not in KINDS:
        raise DocumentError(f"{name}: not a kind this server translates ({', '.join(sorted(KINDS))})")
    if suffix in office.KINDS or suffix == ".epub":
        try:
            package = epub.read_epub(name, data) if suffix == ".epub" else office.read_package(name, suffix, data)
        except office.PackageError as err:
            raise DocumentError(str(err)) from None
        return DocumentFile(package.segments, package.rebuild, media_type(name))
    if suffix in (".xlf", ".xliff"):  # XML says its own encoding
        try:
            xliff = read_xliff(data)
        except XliffError as err:
            raise DocumentError(f"{name}: {err}") from None
        return DocumentFile(xliff.segments, xliff.rebuild, media_type(name))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DocumentError(f"{name} is not UTF-8 (byte {err.start}): convert it first") from None
    if suffix in (".po", ".pot"):
        return _catalog(text)
    if suffix in (".srt", ".vtt"):
        subtitles = read_subtitles(text, webvtt=suffix == ".vtt")
        return DocumentFile(subtitles.segments, lambda done, _: subtitles.rebuild(done), media_type(name))
    document = (
        parse_html(text) if suffix in (".html", ".htm") else parse_markdown(text) if suffix == ".md" else _lines(text)
    )
    return DocumentFile(document.segments, lambda done, _: _join(document, done), media_type(name))


def _lines(text: str) -> Document:
    """Plain text: a segment per paragraph line, whitespace around it kept."""
    parts: list[str | int] = []
    segments: list[Segment] = []
    for line in text.splitlines(keepends=True):
        body = line.strip()
        if not body:
            parts.append(line)
            continue
        start = line.index(body)
        parts.append(line[:start])
        segments.append(Segment(body, escape=False))
        parts.append(len(segments) - 1)
        parts.append(line[start + len(body) :])
    return Document(parts, segments)


def _join(document: Document, done: list[tuple[str, Links]]) -> bytes:
    rendered = [render(segment, text, links) for segment, (text, links) in zip(document.segments, done, strict=True)]
    return "".join(p if isinstance(p, str) else rendered[p] for p in document.parts).encode("utf-8")


@dataclass
class _Unit:
    entry: object
    form: int | None
    """None: msgstr; k: msgstr_plural[k] (the singular for 0, the plural for the others)."""
    lead: str
    trail: str
    accelerator: str
    ordered: list[str]
    """The placeholders in source order, where the format needs them in that order."""


def _catalog(text: str) -> DocumentFile:
    import polib

    try:
        catalog = polib.pofile(text)
    except (OSError, ValueError) as err:
        raise DocumentError(f"not a gettext catalog: {err}") from None
    plural_forms = catalog.metadata.get("Plural-Forms", "")
    match = re.search(r"nplurals\s*=\s*(\d+)", plural_forms)
    forms = int(match.group(1)) if match else 2
    units: list[_Unit] = []
    segments: list[Segment] = []
    for entry in catalog:
        if entry.obsolete or not entry.msgid or entry.translated():
            continue
        sources: list[tuple[int | None, str]]
        if entry.msgid_plural:
            sources = [(k, entry.msgid if k == 0 else entry.msgid_plural) for k in range(forms)]
        else:
            sources = [(None, entry.msgid)]
        for form, source in sources:
            segment, unit = _protect(entry, form, source)
            units.append(unit)
            segments.append(segment)

    def rebuild(done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
        if target_lang and not catalog.metadata.get("Language", "").strip():
            catalog.metadata["Language"] = target_lang
        for segment, unit, (translated, _) in zip(segments, units, done, strict=True):
            value = unit.lead + _restore(segment, translated, unit) + unit.trail
            entry = unit.entry
            if unit.form is None:
                entry.msgstr = value  # type: ignore[attr-defined]
            else:
                entry.msgstr_plural[unit.form] = value  # type: ignore[attr-defined]
            if "fuzzy" not in entry.flags:  # type: ignore[attr-defined]
                entry.flags.append("fuzzy")  # type: ignore[attr-defined]
        return str(catalog).encode("utf-8")

    return DocumentFile(segments, rebuild, media_type(".po"))


def _protect(entry: object, form: int | None, source: str) -> tuple[Segment, _Unit]:
    body = source.strip()
    start = source.index(body) if body else len(source)
    lead, trail = source[:start], source[start + len(body) :]
    accelerators = _ACCELERATOR.findall(body)
    accelerator = accelerators[0] if len(accelerators) == 1 else ""
    if accelerator:
        body = _ACCELERATOR.sub("", body, count=1)
    literals: dict[str, str] = {}

    def keep(match: re.Match[str]) -> str:
        key = "{" + str(len(literals) + 1) + "}"
        literals[key] = match.group(0)
        return key

    protected = _PLACEHOLDERS.sub(keep, body)
    flags = getattr(entry, "flags", [])
    ordered = (
        [p for p in literals.values() if _POSITIONAL.fullmatch(p)] if any(f in flags for f in _ORDERED_FLAGS) else []
    )
    unit = _Unit(entry, form, lead, trail, accelerator, ordered)
    return Segment(protected, literals=literals, escape=False), unit


def _restore(segment: Segment, translated: str, unit: _Unit) -> str:
    text = render(segment, translated, [])
    if unit.ordered:  # printf-style formats take their arguments in order: the source's order it is
        found = list(_POSITIONAL.finditer(text))
        if [m.group(0) for m in found] != unit.ordered and len(found) == len(unit.ordered):
            pieces, position = [], 0
            for match, placeholder in zip(found, unit.ordered, strict=True):
                pieces += [text[position : match.start()], placeholder]
                position = match.end()
            text = "".join(pieces) + text[position:]
    if unit.accelerator:
        letter = re.search(r"[^\W\d_]", text)
        if letter is not None:
            text = text[: letter.start()] + unit.accelerator + text[letter.start() :]
    return text
