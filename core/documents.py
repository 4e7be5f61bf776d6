"""Whole files to translate: plain text, HTML, Markdown, gettext catalogs, XLIFF (core/xliff.py), app string
resources (core/resources.py), subtitles (core/subtitles.py), office documents (core/office.py), e-books
(core/epub.py), PDF (core/pdf.py) and any other XML (DocBook, DITA, a program's own: core/markup.py's
``parse_xml``, DeepL's ``tag_handling: xml`` reading), as segments and back.

``read_document(name, data)`` gives a ``DocumentFile``: the segments to translate (core/markup.py's, so inline
markup goes back by the word alignment) and ``rebuild(translations, target_lang)``, which writes the file again
with each segment's translation in place. For a ``.po`` catalog every entry without a translation is a segment
(both forms of a plural entry), its placeholders, accelerator and outer whitespace kept (core/strings.py;
placeholders in the source's order in ``c-format``/``python-format`` entries). Filled entries are marked
``fuzzy``, so that a translator reviews them.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core import epub, office, pdf
from core.markdown import parse_markdown
from core.markup import Document, Links, MarkupError, Segment, Tags, parse_html, parse_xml, render, with_language
from core.resources import ResourceError, read_android, read_apple_strings, read_json, read_properties
from core.strings import Protected, protect, restore
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
RESOURCE_KINDS = {
    ".json": "application/json",
    ".arb": "application/json",
    ".xml": "application/xml",
    ".strings": "text/plain",
    ".properties": "text/x-java-properties",
}
"""App string resources (core/resources.py): their own encodings, no charset claimed."""
XML_KINDS = {".dbk": "application/docbook+xml", ".dita": "application/dita+xml"}
"""XML read as XML, whatever its vocabulary (as is a ``.xml`` file whose root is not Android's ``<resources>``)."""
CODE_ELEMENTS = {
    "docbook": Tags.of(
        ignore=(
            "code command computeroutput classname constant email envar filename function literal literallayout "
            "markup methodname option parameter programlisting prompt screen sgmltag symbol systemitem tag token "
            "type uri userinput varname"
        ).split()
    ),
    "dita": Tags.of(
        ignore=(
            "apiname cmdname codeblock codeph filepath msgblock msgnum msgph option parmname screen synph systemoutput "
            "userinput varname"
        ).split()
    ),
}
"""What DocBook and DITA mark as code, names of files, commands, options and what a user types or a program
prints: kept as it is, as ``<code>`` is in HTML."""
DOCBOOK_ROOTS = frozenset("appendix article book chapter part preface refentry reference section set".split())
DITA_ROOTS = frozenset("concept glossentry map reference task topic troubleshooting".split())
KINDS = {
    **TEXT_KINDS,
    **RESOURCE_KINDS,
    **XML_KINDS,
    **office.KINDS,
    ".epub": epub.MEDIA_TYPE,
    ".pdf": pdf.MEDIA_TYPE,
}
_ORDERED_FLAGS = ("c-format", "python-format", "php-format", "sh-format", "objc-format")


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
    if suffix == ".pdf":
        try:
            read = pdf.read_pdf(data)
        except pdf.PdfError as err:
            raise DocumentError(f"{name}: {err}") from None

        def rebuild(done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
            try:
                return read.rebuild(done, target_lang)
            except pdf.PdfError as err:
                raise DocumentError(f"{name}: {err}") from None

        return DocumentFile(read.segments, rebuild, media_type(name))
    if suffix in office.KINDS or suffix == ".epub":
        try:
            package = epub.read_epub(name, data) if suffix == ".epub" else office.read_package(name, suffix, data)
        except office.PackageError as err:
            raise DocumentError(str(err)) from None
        return DocumentFile(package.segments, package.rebuild, media_type(name))
    root = _root(data) if suffix in XML_KINDS or suffix == ".xml" else None
    if suffix in XML_KINDS or (suffix == ".xml" and root != "resources"):
        return _xml(name, data, _vocabulary(suffix, root))
    if suffix in RESOURCE_KINDS:
        readers = {".xml": read_android, ".strings": read_apple_strings, ".properties": read_properties}
        try:
            if suffix in (".json", ".arb"):
                resource = read_json(data.decode("utf-8-sig"))
            else:
                resource = readers[suffix](data)
        except UnicodeDecodeError as err:
            raise DocumentError(f"{name} is not UTF-8 (byte {err.start}): convert it first") from None
        except ResourceError as err:
            raise DocumentError(f"{name}: {err}") from None
        return DocumentFile(resource.segments, resource.rebuild, media_type(name))
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

    def write(done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
        if target_lang and suffix in (".html", ".htm"):  # <html lang>: what a screen reader speaks it as
            return _join(with_language(document, target_lang, "html"), done)
        return _join(document, done)

    return DocumentFile(document.segments, write, media_type(name))


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


def _root(data: bytes) -> str | None:
    """The name of an XML file's root element; None where it is no XML (its reader says why)."""
    from lxml import etree

    try:
        for _, element in etree.iterparse(io.BytesIO(data), events=("start",), resolve_entities=False, no_network=True):
            return str(element.tag)
    except etree.XMLSyntaxError:
        return None
    return None


def _vocabulary(suffix: str, root: str | None) -> Tags:
    """DocBook's or DITA's code elements, for a file of theirs (by its suffix, or its root element and namespace)."""
    local = (root or "").rpartition("}")[2]
    if suffix == ".dbk" or "docbook.org" in (root or "") or (suffix == ".xml" and local in DOCBOOK_ROOTS):
        return CODE_ELEMENTS["docbook"]
    if suffix == ".dita" or (suffix == ".xml" and local in DITA_ROOTS):
        return CODE_ELEMENTS["dita"]
    return Tags()


def _xml(name: str, data: bytes, tags: Tags) -> DocumentFile:
    """Any XML: its text translated where ``parse_xml`` finds it (elements holding text are where sentences are, the
    others their outline; ``tags``' ignored elements kept), every tag, comment, declaration and entity of its own
    kept, in the file's own encoding (characters it cannot hold written as character references)."""
    from lxml import etree

    try:
        tree = etree.parse(io.BytesIO(data), office.xml_parser())
    except etree.XMLSyntaxError as err:
        raise DocumentError(f"{name}: not XML: {err}") from None
    encoding = (tree.docinfo.encoding or "utf-8").lower()
    try:
        text = data.decode("utf-8-sig" if encoding == "utf-8" else encoding)
        document = parse_xml(text, tags)
    except (LookupError, UnicodeDecodeError) as err:
        raise DocumentError(f"{name}: cannot be read as {encoding}, the encoding it declares: {err}") from None
    except MarkupError as err:
        raise DocumentError(f"{name}: {err}") from None
    bom = "\ufeff" if data.startswith(b"\xef\xbb\xbf") else ""

    def rebuild(done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
        labelled = with_language(document, target_lang) if target_lang else document  # the root's xml:lang
        written = _join(labelled, done).decode("utf-8")
        return (bom + written).encode(encoding, "xmlcharrefreplace")

    return DocumentFile(document.segments, rebuild, media_type(name))


def _join(document: Document, done: list[tuple[str, Links]]) -> bytes:
    rendered = [render(segment, text, links) for segment, (text, links) in zip(document.segments, done, strict=True)]
    return "".join(p if isinstance(p, str) else rendered[p] for p in document.parts).encode("utf-8")


def _catalog(text: str) -> DocumentFile:
    import polib

    try:
        catalog = polib.pofile(text)
    except (OSError, ValueError) as err:
        raise DocumentError(f"not a gettext catalog: {err}") from None
    plural_forms = catalog.metadata.get("Plural-Forms", "")
    match = re.search(r"nplurals\s*=\s*(\d+)", plural_forms)
    forms = int(match.group(1)) if match else 2
    units: list[tuple[Any, int | None, Protected]] = []  # (entry, None for msgstr or k for msgstr_plural[k], ...)
    for entry in catalog:
        if entry.obsolete or not entry.msgid or entry.translated():
            continue
        sources: list[tuple[int | None, str]]
        if entry.msgid_plural:
            sources = [(k, entry.msgid if k == 0 else entry.msgid_plural) for k in range(forms)]
        else:
            sources = [(None, entry.msgid)]
        ordered = any(flag in entry.flags for flag in _ORDERED_FLAGS)
        units += [(entry, form, protect(source, ordered)) for form, source in sources]

    def rebuild(done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
        if target_lang and not catalog.metadata.get("Language", "").strip():
            catalog.metadata["Language"] = target_lang
        for (entry, form, protected), (translated, _) in zip(units, done, strict=True):
            value = restore(protected, translated)
            if form is None:
                entry.msgstr = value
            else:
                entry.msgstr_plural[form] = value
            if "fuzzy" not in entry.flags:
                entry.flags.append("fuzzy")
        return str(catalog).encode("utf-8")

    return DocumentFile([p.segment for *_, p in units], rebuild, media_type(".po"))
