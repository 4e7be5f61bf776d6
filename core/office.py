"""Office documents: Word, PowerPoint and Excel files (.docx, .pptx, .xlsx) and OpenDocument text, presentations and
spreadsheets (.odt, .odp, .ods), translated in place with their formatting.

A document is a zip of XML parts. Each paragraph of the parts that hold text (a Word document's body, headers,
footers, footnotes and endnotes; slides and their notes; a workbook's strings, not its numbers, dates or formulas;
charts' titles and SmartArt text in all three; an OpenDocument's content and its master pages) becomes one segment:
its text without markup, with each differently formatted stretch (a bold word, a hyperlink, an OpenDocument
``text:span``) as a span over that text (core/markup.py's), so that the formatting goes back on the target words the
engine aligned to the source words it covered, as HTML's inline tags do. What is not text inside a sentence (a tab,
a line break, a field such as a page number, a footnote mark, an inline picture or text box, a formula) becomes a
placeholder (``{1}``) that the models copy, and the element itself is put back where the translation has it: nothing
of the file is lost. Bookmarks and comment ranges are kept and widened to the whole paragraph; tracked deletions are
kept at the paragraph's end. Paragraphs nested in an object (a text box's, a footnote's) are segments of their own.
Paragraphs without a letter are left as they are. Every other part of the package (pictures, styles, relationships)
is copied as it is, in the same order; the XML declaration and namespace prefixes are kept.

Limits: files are read with a parser that expands no entities and loads nothing; a package whose entries would
unpack to more than ``MAX_UNPACKED`` bytes, or that holds more than ``MAX_ENTRIES`` entries, is refused.
"""

from __future__ import annotations

import copy
import functools
import io
import re
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.inline import (
    CONTAINER,
    DROP,
    FIRST,
    LAST,
    LITERAL,
    SPACED,
    Format,
    Paragraph,
    append_text,
    local,
    namespace,
    read_mixed,
    shallow,
    tokens,
    write_mixed,
)
from core.markup import Links, Segment, render

MAX_UNPACKED = 256 * 1024 * 1024
"""Bytes a package may unpack to (a zip bomb is refused before anything is inflated)."""
MAX_ENTRIES = 20_000

KINDS = {
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".odp": "application/vnd.oasis.opendocument.presentation",
    ".ods": "application/vnd.oasis.opendocument.spreadsheet",
}

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"


class PackageError(ValueError):
    """The file is not the package its name says, or is too large unpacked."""


# --- Office Open XML: paragraphs of runs (Word, PowerPoint, Excel) ---


@dataclass(frozen=True)
class _Runs:
    """One Office Open XML dialect's names (local names in namespace ``ns``)."""

    ns: str
    paragraph: str
    run: str
    text: str
    props: str
    kept: frozenset[str]
    """Paragraph properties: stay in place, first."""
    containers: frozenset[str] = frozenset()
    first: frozenset[str] = frozenset()
    last: frozenset[str] = frozenset()
    dropped: frozenset[str] = frozenset()
    chars: tuple[tuple[str, str], ...] = ()
    """Run children that are a character (Word's non-breaking hyphen)."""
    spaces: frozenset[str] = frozenset({"tab", "br", "cr", "ptab"})
    """Run or paragraph children that are whitespace."""


_WORD = _Runs(
    _W,
    "p",
    "r",
    "t",
    "rPr",
    frozenset({"pPr"}),
    containers=frozenset({"hyperlink", "ins", "smartTag", "customXml", "moveTo", "dir", "bdo"}),
    first=frozenset(
        {"bookmarkStart", "commentRangeStart", "permStart", "moveFromRangeStart", "moveToRangeStart"}
        | {"customXmlInsRangeStart", "customXmlDelRangeStart", "customXmlMoveFromRangeStart"}
        | {"customXmlMoveToRangeStart"}
    ),
    last=frozenset(
        {"bookmarkEnd", "commentRangeEnd", "permEnd", "moveFromRangeEnd", "moveToRangeEnd", "del", "moveFrom"}
        | {"customXmlInsRangeEnd", "customXmlDelRangeEnd", "customXmlMoveFromRangeEnd", "customXmlMoveToRangeEnd"}
    ),
    dropped=frozenset({"proofErr", "lastRenderedPageBreak", "softHyphen"}),
    chars=(("noBreakHyphen", "\u2011"),),
)
_SLIDES = _Runs(_A, "p", "r", "t", "rPr", frozenset({"pPr"}), last=frozenset({"endParaRPr"}))
_CELLS = _Runs(_S, "si", "r", "t", "rPr", frozenset(), last=frozenset({"rPh", "phoneticPr"}))
_INLINE_CELLS = _Runs(_S, "is", "r", "t", "rPr", frozenset(), last=frozenset({"rPh", "phoneticPr"}))


class _RunReader:
    """A paragraph of runs read into a Paragraph: text, spans over differently formatted runs and containers,
    and literals for everything else."""

    def __init__(self, grammar: _Runs, paragraph: Any):
        self.g = grammar
        self.p = Paragraph(paragraph)
        self.pieces: list[tuple[int, int, Any, tuple[int, ...]]] = []
        """(start, end, run, enclosing container spans) of each stretch of run text."""
        self.field: list[Any] | None = None
        self.field_depth = 0

    def name(self, element: Any) -> str:
        return local(element) if namespace(element) == self.g.ns else ""

    def read(self) -> Paragraph:
        self.children(list(self.p.element), ())
        self.end_field()
        self.formats()
        return self.p

    def children(self, elements: list[Any], chain: tuple[int, ...]) -> None:
        for child in elements:
            name = self.name(child)
            if name in self.g.kept:
                continue
            if self.field is not None:
                self.in_field(child)
            elif name == self.g.run:
                self.run(child, chain)
            elif name == self.g.text:  # Excel's plain string (<si><t>): the paragraph is its one run
                self.text(child.text or "", child, chain)
            elif name in self.g.containers:
                span = self.p.open(Format(child, container=True), len(chain))
                self.children(list(child), (*chain, span))
                self.p.close(span)
            elif name in self.g.first:
                self.p.first.append(child)
            elif name in self.g.last:
                self.p.last.append(child)
            elif name in self.g.dropped or not isinstance(child.tag, str):
                continue
            else:
                self.p.add_literal([child], spaced=name in self.g.spaces)

    def text(self, text: str, run: Any, chain: tuple[int, ...]) -> None:
        if not text:
            return
        start = self.p.length
        self.p.add_text(text)
        self.pieces.append((start, self.p.length, run, chain))

    def run(self, run: Any, chain: tuple[int, ...]) -> None:
        if any(self.name(c) == "fldChar" for c in run):
            self.field, self.field_depth = [], 0
            self.in_field(run)
            return
        props = [c for c in run if self.name(c) == self.g.props]
        for child in run:
            name = self.name(child)
            if name == self.g.props or name in self.g.dropped or not isinstance(child.tag, str):
                continue
            char = dict(self.g.chars).get(name)
            if name == self.g.text:
                self.text(child.text or "", run, chain)
            elif char is not None:
                self.text(char, run, chain)
            else:  # a tab, a break, a picture, a footnote mark: in a run of its own, where the translation puts it
                self.p.add_literal([_Alone(run, props, child)], spaced=name in self.g.spaces)

    def in_field(self, element: Any) -> None:
        """A complex field (begin ... separate ... end), its result included, is one literal."""
        assert self.field is not None
        self.field.append(element)
        for mark in element.iter(f"{{{self.g.ns}}}fldChar"):
            kind = mark.get(f"{{{self.g.ns}}}fldCharType")
            self.field_depth += 1 if kind == "begin" else -1 if kind == "end" else 0
        if self.field_depth <= 0:
            self.end_field()

    def end_field(self) -> None:
        if self.field:
            self.p.add_literal(self.field)
        self.field = None

    def formats(self) -> None:
        """Runs formatted otherwise than most of their container's text become spans."""
        props = {id(run): self.props_key(run) for _, _, run, _ in self.pieces}
        bases: dict[tuple[int, ...], Any] = {}
        for chain in {c for *_, c in self.pieces}:
            weights: dict[bytes, int] = {}
            first: dict[bytes, Any] = {}
            for start, end, run, c in self.pieces:
                if c == chain:
                    weights[props[id(run)]] = weights.get(props[id(run)], 0) + end - start
                    first.setdefault(props[id(run)], run)
            bases[chain] = first[max(weights, key=lambda k: weights[k])]
        for chain, run in bases.items():
            if chain:
                self.p.format_of(chain[-1]).base = run
            else:
                self.p.base = run
        current: tuple[bytes, tuple[int, ...]] | None = None
        span = -1
        for start, end, run, chain in self.pieces:
            key = (props[id(run)], chain)
            if key == current:
                self.p.spans[span].end = end
                continue
            current = key
            if props[id(run)] == props[id(bases[chain])]:
                current, span = None, -1
                continue
            span = self.p.add_span(Format(run, container=False), start, end, len(chain))

    def props_key(self, run: Any) -> bytes:
        from lxml import etree

        return b"".join(etree.tostring(c) for c in run if self.name(c) == self.g.props)


@dataclass
class _Alone:
    """A run's child that is not text, to be written in a run of its own with the run's properties. Built only when
    the paragraph is written: reading moves nothing, so a paragraph left as it is stays whole."""

    run: Any
    props: list[Any]
    child: Any

    def element(self) -> Any:
        alone = shallow(self.run)
        alone.extend(copy.deepcopy(p) for p in self.props)
        alone.append(self.child)
        return alone


def _write_runs(grammar: _Runs, p: Paragraph, rendered: str) -> None:
    paragraph = p.element
    for child in list(paragraph):
        if local(child) not in grammar.kept or namespace(child) != grammar.ns:
            paragraph.remove(child)
    paragraph.text = None
    paragraph.extend(p.first)
    parents: list[tuple[Any, Any]] = [(paragraph, p.base)]  # (element written into, run template there)
    runs: list[Any] = []  # the run template of each open run span
    stack: list[bool] = []  # each open span: a container?
    for kind, value in tokens(rendered, p.spaced):
        if kind == "open":
            format = p.formats[value]
            stack.append(format.container)
            if format.container:
                element = shallow(format.element)
                parents[-1][0].append(element)
                parents.append((element, format.base))
            else:
                runs.append(format.element)
        elif kind == "close":
            if stack and stack.pop():
                parents.pop()
            elif runs:
                runs.pop()
        elif kind == "literal":
            parents[-1][0].extend(e.element() if isinstance(e, _Alone) else e for e in p.literals[value])
        else:
            template = runs[-1] if runs else parents[-1][1] if parents[-1][1] is not None else p.base
            parents[-1][0].append(_new_run(grammar, template, value))
    paragraph.extend(p.last)


def _new_run(grammar: _Runs, template: Any, text: str) -> Any:
    from lxml import etree

    t = etree.Element(f"{{{grammar.ns}}}{grammar.text}")
    t.text = text
    if grammar.ns != _A:
        t.set(_XML_SPACE, "preserve")
    if template is not None and local(template) == grammar.text:  # Excel's plain string: its <t> alone
        return t
    if template is None:  # words in a container that had no text of its own: a run without properties
        run = etree.Element(f"{{{grammar.ns}}}{grammar.run}")
    else:
        run = shallow(template)
        run.extend(copy.deepcopy(c) for c in template if local(c) == grammar.props and namespace(c) == grammar.ns)
    run.append(t)
    return run


# --- OpenDocument: mixed content with nested spans ---

_ODF_CONTAINERS = frozenset({"span", "a", "meta", "ruby-base"})
_ODF_FIRST = frozenset({"bookmark-start", "bookmark", "reference-mark-start", "reference-mark", "annotation"})
_ODF_LAST = frozenset({"bookmark-end", "reference-mark-end", "annotation-end"})
_ODF_DROPPED = frozenset({"soft-page-break"})
_ODF_SPACE = re.compile(r"[ \t\r\n]+")


def _odf_kind(child: Any) -> str:
    space = namespace(child)
    name = local(child) if space in (_TEXT, _OFFICE) else ""
    if space == _TEXT and name in _ODF_CONTAINERS:
        return CONTAINER
    if space == _TEXT and name == "s":
        count = child.get(f"{{{_TEXT}}}c", "1")
        return " " * (int(count) if count.isdigit() else 1)
    if name in _ODF_FIRST:
        return FIRST
    if name in _ODF_LAST:
        return LAST
    if name in _ODF_DROPPED:
        return DROP
    return SPACED if name in ("tab", "line-break") else LITERAL


def _read_odf(paragraph: Any) -> Paragraph:
    return read_mixed(paragraph, _odf_kind, lambda text: _ODF_SPACE.sub(" ", text))


def _write_odf(p: Paragraph, rendered: str) -> None:
    paragraph = p.element
    for child in list(paragraph):
        paragraph.remove(child)
    paragraph.text = None
    for element in p.first:
        element.tail = None
        paragraph.append(element)
    write_mixed(paragraph, p, rendered, _odf_text)
    for element in p.last:
        element.tail = None
        paragraph.append(element)


def _odf_text(parent: Any, text: str) -> None:
    """Append ``text`` to ``parent``, runs of spaces as ``text:s`` (OpenDocument collapses them otherwise)."""
    from lxml import etree

    pieces = re.split(r"( {2,})", text)
    for index, piece in enumerate(pieces):
        if not piece:
            continue
        if index % 2:
            append_text(parent, " ")
            space = etree.SubElement(parent, f"{{{_TEXT}}}s")
            if len(piece) > 2:
                space.set(f"{{{_TEXT}}}c", str(len(piece) - 1))
        else:
            append_text(parent, piece)


# --- packages ---


_Writer = Callable[[Paragraph, str], None]
"""Writes a paragraph again from render()'s output."""
_Found = list[tuple[_Writer, Paragraph]]


@dataclass(frozen=True)
class _Kind:
    parts: re.Pattern[str]
    """Which entries hold text to translate."""
    paragraphs: Callable[[Any], _Found]


def _ooxml(*grammars: _Runs) -> Callable[[Any], _Found]:
    def paragraphs(root: Any) -> _Found:
        found: _Found = []
        for grammar in grammars:
            write = functools.partial(_write_runs, grammar)
            for element in list(root.iter(f"{{{grammar.ns}}}{grammar.paragraph}")):
                found.append((write, _RunReader(grammar, element).read()))
        return found

    return paragraphs


def _odf(root: Any) -> _Found:
    found: _Found = []
    for element in list(root.iter(f"{{{_TEXT}}}p", f"{{{_TEXT}}}h")):
        found.append((_write_odf, _read_odf(element)))
    return found


def _ods(root: Any) -> _Found:
    """A spreadsheet's paragraphs, but not those of cells whose value is a number, date, time or the like (their
    text is the value as displayed) or is held apart from their text (``office:string-value``)."""
    found: _Found = []
    for element in list(root.iter(f"{{{_TEXT}}}p", f"{{{_TEXT}}}h")):
        cell = next(element.iterancestors(f"{{{_TABLE}}}table-cell", f"{{{_TABLE}}}covered-table-cell"), None)
        if cell is not None and (
            cell.get(f"{{{_OFFICE}}}value-type", "string") != "string" or cell.get(f"{{{_OFFICE}}}string-value")
        ):
            continue
        found.append((_write_odf, _read_odf(element)))
    return found


_ODF_PARTS = re.compile(r"content\.xml|styles\.xml")
"""An OpenDocument's text: its content, and its master pages' headers and footers."""
_GRAPHICS = r"|charts/chart\d+|diagrams/(?:data|drawing)\d+"
"""Charts' titles and SmartArt's text (DrawingML paragraphs), in any of the three."""
_PACKAGES = {
    ".docx": _Kind(
        re.compile(rf"word/(?:document|header\d*|footer\d*|footnotes|endnotes{_GRAPHICS})\.xml"), _ooxml(_WORD, _SLIDES)
    ),
    ".pptx": _Kind(re.compile(rf"ppt/(?:slides/slide\d+|notesSlides/notesSlide\d+{_GRAPHICS})\.xml"), _ooxml(_SLIDES)),
    ".xlsx": _Kind(
        re.compile(rf"xl/(?:sharedStrings|worksheets/sheet\d+|drawings/drawing\d+{_GRAPHICS})\.xml"),
        _ooxml(_CELLS, _INLINE_CELLS, _SLIDES),
    ),
    ".odt": _Kind(_ODF_PARTS, _odf),
    ".odp": _Kind(_ODF_PARTS, _odf),
    ".ods": _Kind(_ODF_PARTS, _ods),
}


@dataclass
class Package:
    segments: list[Segment]
    rebuild: Callable[[list[tuple[str, Links]], str | None], bytes]
    """Takes each segment's (translation, word links) and the target language; returns the file."""


def open_package(name: str, suffix: str, data: bytes) -> tuple[list[zipfile.ZipInfo], dict[str, bytes]]:
    """The zip package ``data``: its entries and each one's bytes, all read at once so that a damaged entry
    anywhere is refused (PackageError) before anything is translated, as is a package that would unpack to more
    than MAX_UNPACKED bytes or MAX_ENTRIES entries."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        entries = archive.infolist()
        if len(entries) > MAX_ENTRIES or sum(e.file_size for e in entries) > MAX_UNPACKED:
            raise PackageError(f"{name} unpacks to more than {MAX_UNPACKED} bytes or {MAX_ENTRIES} entries")
        return entries, {entry.filename: archive.read(entry) for entry in entries}
    except PackageError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError, OSError) as err:
        # damaged, encrypted, or packed with a method zipfile lacks
        raise PackageError(f"{name} is not a {suffix} file that can be read ({type(err).__name__}: {err})") from None


def write_package(entries: list[zipfile.ZipInfo], contents: dict[str, bytes], replaced: dict[str, bytes]) -> bytes:
    """The package again, entry for entry in the same order and compression (an OpenDocument's or an EPUB's
    ``mimetype`` stays first and stored), with the ``replaced`` entries' new bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as written:
        for entry in entries:
            body = replaced.get(entry.filename, contents[entry.filename])
            written.writestr(entry, body, compress_type=entry.compress_type)
    return out.getvalue()


def xml_parser() -> Any:
    """lxml's parser for parts of a package: no entity is expanded, nothing is loaded from outside."""
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


def xml_bytes(root: Any) -> bytes:
    """A part written again: UTF-8, with its XML declaration (``standalone`` as it was)."""
    from lxml import etree

    info = root.getroottree().docinfo
    return bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=info.standalone))


def read_package(name: str, suffix: str, data: bytes) -> Package:
    """The segments of the office document ``data`` (its kind by ``suffix``) and how to write it translated."""
    from lxml import etree

    kind = _PACKAGES[suffix]
    entries, contents = open_package(name, suffix, data)
    parser = xml_parser()
    trees: dict[str, Any] = {}
    found: list[tuple[_Writer, Paragraph, Segment]] = []
    try:
        for entry in entries:
            if not kind.parts.fullmatch(entry.filename):
                continue
            root = etree.fromstring(contents[entry.filename], parser)
            trees[entry.filename] = root
            for write, paragraph in kind.paragraphs(root):
                segment = paragraph.segment()
                if segment is not None:
                    found.append((write, paragraph, segment))
    except (etree.XMLSyntaxError, ValueError) as err:
        raise PackageError(f"{name}: a part cannot be read ({err})") from None
    if not trees:
        raise PackageError(f"{name} is not a {suffix} file (none of its parts holds {suffix} text)")

    def rebuild(done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
        for (write, paragraph, segment), (translated, links) in zip(found, done, strict=True):
            write(paragraph, render(segment, translated, links))
        return write_package(entries, contents, {name: xml_bytes(root) for name, root in trees.items()})

    return Package([s for *_, s in found], rebuild)
