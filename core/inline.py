"""Paragraphs of XML mixed content as segments and back: what office documents (core/office.py) and XLIFF files
(core/xliff.py) share.

A ``Paragraph`` is read from an element: its text, a span for each formatted stretch (a container element such as
a hyperlink or a styled span, copied around the target words aligned to the words it enclosed; or a run whose
properties the words take), a placeholder (``{1}``) for each element that is not text (a tab, a field, a
picture), which the models copy, and the elements kept at its start or end (bookmarks). ``segment()`` gives
core/markup.py's Segment; ``render()`` of it writes characters of the private use area for spans and
placeholders, which ``tokens()`` reads back for the format's writer. ``read_mixed``/``write_mixed`` do both for
formats whose paragraphs are mixed content (text and elements, OpenDocument's and XLIFF's).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.markup import Segment, Span
from core.strings import has_words

# What render() writes for spans and literals, read back by _TOKENS: characters of the private use area, which
# neither the input (they are taken out of it) nor a model's output holds.
_OPEN, _CLOSE, _LITERAL, _END = "\ue000", "\ue001", "\ue002", "\ue003"
_TOKENS = re.compile("\ue000(\\d+)\ue003|(\ue001)|\ue002(\\d+)\ue003|([^\ue000-\ue003]+)")
_PRIVATE = re.compile("[\ue000-\ue003]")


@dataclass
class Format:
    """A span's element: a container copied around its words (a hyperlink, an OpenDocument span), or a run whose
    properties the words inside it take (Word's, PowerPoint's, Excel's)."""

    element: Any
    container: bool
    base: Any = None
    """For a container and the paragraph: the run whose properties its words take when no run span covers them."""


@dataclass
class Paragraph:
    element: Any
    text: list[str] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    formats: list[Format] = field(default_factory=list)
    literals: list[list[Any]] = field(default_factory=list)
    first: list[Any] = field(default_factory=list)
    """Kept at the start of the paragraph (bookmark and comment starts)."""
    last: list[Any] = field(default_factory=list)
    """Kept at its end (bookmark and comment ends, tracked deletions, PowerPoint's end-of-paragraph properties)."""
    base: Any = None
    spaced: set[int] = field(default_factory=set)
    """Literals that are whitespace (tabs, line breaks)."""

    length: int = 0
    """Characters of text so far."""

    def add_text(self, text: str) -> None:
        text = _PRIVATE.sub("", text)
        self.text.append(text)
        self.length += len(text)

    def add_literal(self, elements: list[Any], spaced: bool = False) -> None:
        """A placeholder for ``elements``; ``spaced`` when they are whitespace themselves (a tab, a line break):
        the placeholder is then a word of its own, and the spaces around it go when it is written back."""
        self.literals.append(elements)
        placeholder = "{" + str(len(self.literals)) + "}"
        if spaced:
            self.spaced.add(len(self.literals) - 1)
            placeholder = f" {placeholder} "
        self.text.append(placeholder)
        self.length += len(placeholder)

    def add_span(self, format: Format, start: int, end: int, depth: int) -> int:
        """A span of ``format`` over ``text[start:end]``; returns its index."""
        self.formats.append(format)
        marker = f"{_OPEN}{len(self.formats) - 1}{_END}"
        self.spans.append(Span(start, end, marker, "x", depth, True, _CLOSE))
        return len(self.spans) - 1

    def format_of(self, span: int) -> Format:
        return self.formats[int(self.spans[span].start_tag[1:-1])]

    def open(self, format: Format, depth: int) -> int:
        """A span of ``format`` from here; ``close`` ends it."""
        return self.add_span(format, self.length, self.length, depth)

    def close(self, index: int) -> None:
        self.spans[index].end = self.length

    def segment(self) -> Segment | None:
        """The paragraph as a segment, its outer whitespace cut; None when it has no letter to translate."""
        whole = "".join(self.text)
        if not has_words(whole):
            return None
        lead = len(whole) - len(whole.lstrip())
        text = whole.strip()
        spans = []
        for span in self.spans:
            start, end = max(0, span.start - lead), min(len(text), span.end - lead)
            if end > start:
                spans.append(copy.copy(span))
                spans[-1].start, spans[-1].end = start, end
        literals = {"{" + str(n + 1) + "}": f"{_LITERAL}{n}{_END}" for n in range(len(self.literals))}
        return Segment(text, spans, literals, escape=False)


def tokens(rendered: str, spaced: set[int]) -> list[tuple[str, Any]]:
    """render()'s output as ("open", format index), ("close", None), ("literal", index) and ("text", str), without
    the spaces next to a ``spaced`` literal."""
    found: list[tuple[str, Any]] = []
    for match in _TOKENS.finditer(rendered):
        opened, closed, literal, text = match.groups()
        if opened is not None:
            found.append(("open", int(opened)))
        elif closed is not None:
            found.append(("close", None))
        elif literal is not None:
            found.append(("literal", int(literal)))
        else:
            found.append(("text", text))
    for index, (kind, value) in enumerate(found):
        if kind != "literal" or value not in spaced:
            continue
        for step, strip in ((-1, str.rstrip), (1, str.lstrip)):
            near = index + step
            while 0 <= near < len(found) and found[near][0] in ("open", "close"):
                near += step
            if 0 <= near < len(found) and found[near][0] == "text":
                found[near] = ("text", strip(found[near][1]))
    return [(kind, value) for kind, value in found if kind != "text" or value]


def local(element: Any) -> str:
    tag = element.tag
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def namespace(element: Any) -> str:
    tag = element.tag
    return tag[1:].split("}", 1)[0] if isinstance(tag, str) and tag.startswith("{") else ""


def shallow(element: Any) -> Any:
    """A copy of ``element`` without its children and text: tag, attributes and namespace map."""
    from lxml import etree

    return etree.Element(element.tag, dict(element.attrib), nsmap=element.nsmap)


CONTAINER, FIRST, LAST, DROP, LITERAL, SPACED = "container", "first", "last", "drop", "literal", "spaced"
"""What a child of mixed content is (``read_mixed``'s ``kind``), unless it is text (a string: what it stands for)."""


def read_mixed(element: Any, kind: Callable[[Any], str], normalize: Callable[[str], str] = str) -> Paragraph:
    """``element``'s mixed content as a Paragraph: text (through ``normalize``), containers as spans, the other
    children as ``kind`` says. Reading moves nothing."""
    p = Paragraph(element)

    def text(value: str | None) -> None:
        if value:
            p.add_text(normalize(value))

    def walk(parent: Any, depth: int) -> None:
        text(parent.text)
        for child in parent:
            what = kind(child) if isinstance(child.tag, str) else DROP
            if what == CONTAINER:
                span = p.open(Format(child, container=True), depth)
                walk(child, depth + 1)
                p.close(span)
            elif what == FIRST:
                p.first.append(child)
            elif what == LAST:
                p.last.append(child)
            elif what in (LITERAL, SPACED):
                p.add_literal([child], spaced=what == SPACED)
            elif what != DROP:
                p.add_text(what)
            text(child.tail)

    walk(element, 0)
    return p


def write_mixed(
    into: Any, p: Paragraph, rendered: str, add_text: Callable[[Any, str], None], copies: bool = False
) -> None:
    """``rendered`` (render() of ``p.segment()``) written into the empty element ``into``: containers copied
    around their words, literals put back (copies of them with ``copies``, else the elements themselves)."""
    parents = [into]
    for what, value in tokens(rendered, p.spaced):
        if what == "open":
            element = shallow(p.formats[value].element)
            parents[-1].append(element)
            parents.append(element)
        elif what == "close":
            if len(parents) > 1:
                parents.pop()
        elif what == "literal":
            for element in p.literals[value]:
                element = copy.deepcopy(element) if copies else element
                element.tail = None
                parents[-1].append(element)
        else:
            add_text(parents[-1], value)


def append_text(parent: Any, text: str) -> None:
    """``text`` after ``parent``'s last child (or as its text when it has none)."""
    if len(parent):
        parent[-1].tail = (parent[-1].tail or "") + text
    else:
        parent.text = (parent.text or "") + text


class TaggedText:
    """A segment built from text written with its tags in line (a subtitle cue, an Android string): text, tag pairs
    as spans over the words they enclose (the tags as written; one never closed is left open on output too) and
    literals (``{n}`` placeholders for what is copied verbatim)."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.length = 0
        self.spans: list[Span] = []
        self.open_spans: list[Span] = []
        self.literals: dict[str, str] = {}

    def add(self, text: str) -> None:
        self.pieces.append(text)
        self.length += len(text)

    def literal(self, markup: str, spaced: bool = False) -> None:
        """``markup`` copied verbatim where the translation puts its placeholder; ``spaced``: the placeholder is
        a word of its own (the writer drops the spaces around it)."""
        key = "{" + str(len(self.literals) + 1) + "}"
        self.literals[key] = markup
        self.add(f" {key} " if spaced else key)

    def open(self, tag: str, name: str) -> None:
        span = Span(self.length, self.length, tag, name, len(self.open_spans), closed=False)
        self.open_spans.append(span)
        self.spans.append(span)

    def close(self, tag: str, name: str) -> None:
        """The innermost open span named ``name`` ends here (and those opened inside it); a stray end tag is
        dropped."""
        for at in range(len(self.open_spans) - 1, -1, -1):
            if self.open_spans[at].name == name:
                for span in self.open_spans[at:]:
                    span.end = self.length
                self.open_spans[at].closed, self.open_spans[at].end_tag = True, tag
                del self.open_spans[at:]
                return

    def segment(self, escape: bool) -> Segment:
        for span in self.open_spans:
            span.end = self.length
        return Segment("".join(self.pieces), self.spans, self.literals, escape=escape)
