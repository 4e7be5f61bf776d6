"""HTML in, HTML out: the text is translated without its tags, and each inline tag is put back around the target
words the engine aligned to the source words it enclosed.

``parse_html`` cuts a document into *segments*: the text between block boundaries (``<p>``, ``<li>``, ``<td>``,
``<br>``, ...), with its inline elements (``<b>``, ``<a href>``, ``<span>``, ...) as character spans over that
text. Markup outside segments is kept byte for byte, attributes included (start tags are copied as written).
Never translated: the content of ``<pre>``, ``<script>``, ``<style>``, ``<textarea>`` and of any element with
``translate="no"`` (or Google's ``class="notranslate"``) outside a sentence; inside a sentence, ``<code>`` and such
elements and URLs in the text become placeholders (``{1}``, which the models copy like the catalog placeholders
they were trained on) and come back verbatim. ``render`` puts a segment's translation back: tags around the
aligned words, nested as in the input, never empty; a placeholder the translation lost is put at the end of its
segment, so nothing is dropped.

``parse_xml`` reads XML the way DeepL's ``tag_handling: xml`` does, where no element's meaning is known: tag names
keep their case; entities other than XML's five are the document's own and stay as written (placeholders inside a
sentence); an element splits the text where its parent holds no text of its own (``<doc><title>..</title>
<para>..</para></doc>``: the outline), and is inline where its parent does (``<para>Click <b>Save</b></para>``); an
empty element (``<x id="1"/>``, ``<x id="1"></x>``) inside a sentence is a placeholder; elements a space apart on
one line are prose (their parent holds text), a line apart an outline. ``Tags`` carries DeepL's
options, for HTML and XML alike: elements whose content is never translated (``ignore_tags``), that always or never
split sentences (``splitting_tags``, ``non_splitting_tags``), and whether the outline is read at all
(``outline_detection``; without it only the splitting tags split).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser

INLINE = frozenset(
    "a abbr b bdi bdo cite data del dfn em font i ins kbd mark q s samp small span strong sub sup time u var".split()
)
LITERAL = frozenset({"code"})
"""Inline elements whose content is never translated (placeholders inside a sentence)."""
OPAQUE = frozenset({"pre", "script", "style", "textarea", "svg", "math", "template"})
"""Elements whose whole content is copied as it is."""
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
MAX_DEPTH = 512
"""Deeper nesting is refused (MarkupError): a document 10,000 elements deep is an attack, not a page."""
_PLACEHOLDER = re.compile(r"\{(\d+)\}")
_URL = re.compile(r"(?:https?|ftp)://[^\s<>\"']+[^\s<>\"'.,;:!?)\]]")
_TOKEN = re.compile(r"\S+")
TAG_NAME = re.compile(r"[A-Za-z_][\w.:-]{0,99}")
"""An element name as ``Tags`` takes it (XML's names, ASCII)."""


@dataclass(frozen=True)
class Tags:
    """How elements are read beyond what their names say (DeepL's tag options); names are matched ignoring case."""

    ignore: frozenset[str] = frozenset()
    """Elements whose content is never translated: placeholders inside a sentence, copied as they are outside."""
    splitting: frozenset[str] = frozenset()
    """Elements that always split the text (a block)."""
    non_splitting: frozenset[str] = frozenset()
    """Elements that never split it (inline), where they would."""
    outline: bool = True
    """XML: read which elements split from where the text is (see the module's docstring); False: only
    ``splitting`` does."""

    @classmethod
    def of(
        cls,
        ignore: Sequence[str] = (),
        splitting: Sequence[str] = (),
        non_splitting: Sequence[str] = (),
        outline: bool = True,
    ) -> Tags:
        """From lists of names; a name that is not one raises MarkupError."""
        sets = []
        for names in (ignore, splitting, non_splitting):
            for name in names:
                if not TAG_NAME.fullmatch(name):
                    raise MarkupError(f"{name!r} is not an element name")
            sets.append(frozenset(name.lower() for name in names))
        return cls(sets[0], sets[1], sets[2], outline)


NO_TAGS = Tags()
XML_ENTITIES = frozenset({"amp", "lt", "gt", "quot", "apos"})
"""The entities XML itself defines; XML's others are the document's own (its DTD's), kept as they are."""


Links = Sequence[tuple[int, int] | tuple[int, int, float]]
"""(target word, source word) pairs, optionally with the link's weight."""


class MarkupError(ValueError):
    """The markup cannot be translated safely (too deep); the message says why."""


@dataclass
class Span:
    """An inline element over ``text[start:end]`` of its segment."""

    start: int
    end: int
    start_tag: str
    """As written in the input, attributes and all."""
    name: str
    depth: int
    closed: bool = True
    """False when the input never closed it (the output then does not either)."""
    end_tag: str = ""
    """What closes it (Markdown's ``](url)``, ``**``); HTML's ``</name>`` when empty."""

    @property
    def closing(self) -> str:
        return (self.end_tag or f"</{self.name}>") if self.closed else ""


@dataclass
class Segment:
    text: str
    """What the model translates: the segment's text with entities decoded and literals as ``{n}``."""
    spans: list[Span] = field(default_factory=list)
    literals: dict[str, str] = field(default_factory=dict)
    """Placeholder -> the literal element's markup, verbatim."""
    escape: bool = True
    """HTML-escape the translated text (False for Markdown)."""


@dataclass
class Document:
    parts: list[str | int]
    """Markup copied as it is (str), or the index of a segment (int)."""
    segments: list[Segment]


class _Parser(HTMLParser):
    def __init__(self, tags: Tags = NO_TAGS, layout: _Layout | None = None, xml: bool = False) -> None:
        super().__init__(convert_charrefs=False)
        self.tags = tags
        self.layout = layout
        """Where the text is, element by element: XML's, and HTML's where ``tags`` ignores some by name."""
        self.xml = xml
        self._element = -1  # the index of the element last started, in document order (XML)
        self.parts: list[str | int] = []
        self.segments: list[Segment] = []
        self._text: list[str] = []  # the current segment's text pieces
        self._length = 0
        self._open: list[Span] = []  # inline elements open in the current segment
        self._spans: list[Span] = []
        self._literals: dict[str, str] = {}
        self._raw: list[str] | None = None  # inside an opaque or literal element: its markup, verbatim
        self._raw_name = ""
        self._raw_depth = 0
        self._raw_literal = False
        self._depth = 0
        self._end_text = ""

    # -- the current segment ------------------------------------------------------------------------

    def _add_text(self, text: str) -> None:
        self._text.append(text)
        self._length += len(text)

    def _flush(self) -> None:
        """End the current segment at a block boundary; whitespace-only text is markup, not a segment."""
        text = "".join(self._text)
        for span in self._open:  # unclosed at a block boundary: it ends here
            span.end, span.closed = self._length, False
        if text.strip() or self._literals:
            self.segments.append(
                Segment(text, sorted(self._spans, key=lambda s: (s.start, -s.end, s.depth)), self._literals)
            )
            self.parts.append(len(self.segments) - 1)
        elif text or self._spans:
            self.parts.append(_plain_markup(text, self._spans))
        self._text, self._length, self._open, self._spans, self._literals = [], 0, [], [], {}

    def _markup(self, raw: str) -> None:
        self._flush()
        self.parts.append(raw)

    # -- HTMLParser callbacks -------------------------------------------------------------------------

    def _ignored(self, tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        values = dict(attrs)
        return (
            tag in self.tags.ignore
            or values.get("translate") == "no"
            or values.get("its:translate") == "no"
            or "notranslate" in (values.get("class") or "").split()
        )

    def _kind(self, tag: str, attrs: list[tuple[str, str | None]]) -> str:
        """What a start tag begins: "opaque" (copied as it is), "literal" (a placeholder), "inline" (a span) or
        "block" (a segment boundary)."""
        tags, no, layout = self.tags, self._ignored(tag, attrs), self.layout
        if self.xml:
            assert layout is not None
            block = tag in tags.splitting or (
                tag not in tags.non_splitting and tags.outline and layout.splits(self._element)
            )
            if block:
                return "opaque" if no else "block"
            return "literal" if no or layout.empty(self._element) else "inline"
        if tag in OPAQUE:
            return "opaque"
        inline = (tag in INLINE or tag in LITERAL or tag in tags.non_splitting) and tag not in tags.splitting
        if tag in tags.ignore and tag not in tags.splitting and layout is not None:
            inline = inline or not layout.splits(self._element)  # a tag of the client's own, inside a sentence
        if no or tag in LITERAL:
            return "literal" if inline else "opaque"
        return "inline" if inline else "block"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or f"<{tag}>"
        self._element += 1
        if self._raw is not None:
            self._raw.append(raw)
            if tag == self._raw_name:
                self._raw_depth += 1
            return
        if tag in VOID and not self.xml:
            self._markup(raw)
            return
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise MarkupError(f"the markup nests more than {MAX_DEPTH} elements deep")
        kind = self._kind(tag, attrs)
        if kind == "opaque":
            self._markup("")
            self._start_raw(raw, tag, literal=False)
        elif kind == "literal":
            self._start_raw(raw, tag, literal=True)
        elif kind == "inline":
            span = Span(self._length, self._length, raw, tag, len(self._open))
            self._open.append(span)
            self._spans.append(span)
        else:
            self._markup(raw)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or f"<{tag}/>"
        self._element += 1
        if self._raw is not None:
            self._raw.append(raw)
        elif self.xml and self._kind(tag, attrs) != "block":
            self._literal(raw)  # an empty element inside a sentence keeps its place
        else:
            self._markup(raw)

    def parse_endtag(self, i: int) -> int:
        # HTMLParser hands handle_endtag the name lowercased: the end tag as written is kept for markup copied
        # verbatim (XHTML and SVG are case-sensitive: </clipPath> must stay so).
        end = self.rawdata.find(">", i + 2)
        self._end_text = self.rawdata[i : end + 1] if end >= 0 else ""
        try:
            return super().parse_endtag(i)
        finally:
            self._end_text = ""

    def handle_endtag(self, tag: str) -> None:
        raw = self._end_text if self._end_text.lower().startswith(f"</{tag}") else f"</{tag}>"
        if self._raw is not None:
            self._raw.append(raw)
            if tag == self._raw_name:
                self._raw_depth -= 1
                if self._raw_depth == 0:
                    self._end_raw()
            return
        if tag in VOID and not self.xml:
            self._markup(raw)
            return
        if any(span.name == tag for span in self._open):
            while self._open:
                span = self._open.pop()
                span.end = self._length
                span.closed = span.name == tag
                if span.name == tag:
                    if raw != f"</{tag}>":
                        span.end_tag = raw  # as written: XML's names keep their case
                    break
            self._depth -= 1
            return
        self._depth = max(0, self._depth - 1)
        self._markup(raw)

    def handle_data(self, data: str) -> None:
        if self._raw is not None:
            self._raw.append(data)
            return
        position = 0
        for url in _URL.finditer(data):  # a URL in the text is never translated: a literal, as code is
            self._add_text(data[position : url.start()])
            self._literal(url.group(0))
            position = url.end()
        self._add_text(data[position:])

    def handle_entityref(self, name: str) -> None:
        if self.xml and name not in XML_ENTITIES and self._raw is None:
            self._literal(f"&{name};")  # a document's own entity (DocBook's &product;): kept as it is, in its place
            return
        self._entity(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self._entity(f"&#{name};")

    def _entity(self, raw: str) -> None:
        if self._raw is not None:
            self._raw.append(raw)
        else:
            self._add_text(html.unescape(raw))

    def handle_comment(self, data: str) -> None:
        self._verbatim(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self._verbatim(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self._verbatim(f"<?{data}>")

    def unknown_decl(self, data: str) -> None:
        # HTMLParser hands over "CDATA[text" of "<![CDATA[text]]>", and "if !IE" of "<![if !IE]>"
        self._verbatim(f"<![{data}]]>" if data.startswith("CDATA[") else f"<![{data}]>")

    def _verbatim(self, raw: str) -> None:
        if self._raw is not None:
            self._raw.append(raw)
        else:
            self._markup(raw)

    # -- opaque and literal elements ------------------------------------------------------------------

    def _start_raw(self, raw: str, tag: str, literal: bool) -> None:
        self._raw, self._raw_name, self._raw_depth, self._raw_literal = [raw], tag, 1, literal

    def _end_raw(self) -> None:
        assert self._raw is not None
        markup = "".join(self._raw)
        literal = self._raw_literal
        self._raw = None
        self._depth = max(0, self._depth - 1)
        if literal:
            self._literal(markup)
        else:
            self.parts.append(markup)

    def _literal(self, markup: str) -> None:
        key = "{" + str(len(self._literals) + 1) + "}"
        self._literals[key] = markup
        self._add_text(key)

    def finish(self) -> Document:
        self.close()
        if self._raw is not None:  # never closed: the rest is copied as it is
            markup = "".join(self._raw)
            self._raw = None
            self._markup(markup)
        leftover = self.rawdata  # text HTMLParser kept back (an unfinished tag at the very end)
        self._flush()
        if leftover:
            self.parts.append(leftover)
        return Document(self.parts, self.segments)


def _plain_markup(text: str, spans: list[Span]) -> str:
    """Whitespace-only text with its (empty) inline elements, written back as it came."""
    out, position = [], 0
    for span in sorted(spans, key=lambda s: (s.start, s.depth)):
        out.append(html.escape(text[position : span.start], quote=False))
        out.append(span.start_tag + span.closing)
        position = span.start
    out.append(html.escape(text[position:], quote=False))
    return "".join(out)


_LANG = re.compile(r"""(\s(?:xml:)?lang\s*=\s*)(["'])[^"']*\2""")
_START = re.compile(r"<([A-Za-z_][\w.:-]*)")


def with_language(document: Document, language: str, element: str | None = None) -> Document:
    """``document`` with the ``lang`` and ``xml:lang`` of its first start tag named ``element`` (any first start
    tag: an XML document's root) saying ``language``; a document whose tag has neither is left as it is."""
    parts = list(document.parts)
    for i, part in enumerate(parts):
        start = _START.match(part) if isinstance(part, str) else None
        if isinstance(part, str) and start is not None and (element is None or start[1].lower() == element):
            parts[i] = relabel(part, language)
            break
    return Document(parts, document.segments)


def relabel(start_tag: str, language: str) -> str:
    """A start tag with its ``lang`` and ``xml:lang`` attributes saying ``language``."""
    return _LANG.sub(lambda a: f"{a[1]}{a[2]}{language}{a[2]}", start_tag)


def parse_html(markup: str, tags: Tags = NO_TAGS) -> Document:
    parser = _Parser(tags, _Layout.of(markup, VOID) if tags.ignore else None)
    parser.feed(markup)
    return parser.finish()


def parse_xml(markup: str, tags: Tags = NO_TAGS) -> Document:
    """XML (a document or a fragment) as DeepL's ``tag_handling: xml`` reads it (the module's docstring)."""
    parser = _Parser(tags, _Layout.of(markup), xml=True)
    parser.feed(markup)
    return parser.finish()


class _Layout(HTMLParser):
    """Where an XML document's text is: for each element, in document order, its parent and whether it holds text
    of its own or other elements. A space between two of its elements on one line counts as text
    (``<p><b>Warning:</b> <i>read this</i></p>`` is prose), a line break does not (``<row>`` and its ``<cell>``s
    written a line each are an outline)."""

    def __init__(self, void: frozenset[str] = frozenset()) -> None:
        super().__init__(convert_charrefs=False)
        self.void = void  # elements without content or end tag (HTML's)
        self.parent: list[int] = []
        self.text: list[bool] = []
        self.children: list[bool] = []
        self.top_text = False  # text outside every element (a fragment's)
        self._open: list[tuple[str, int]] = []
        self._after_child = False  # the last thing read closed an element
        self._gap = False  # ... and a space without a line break followed it

    @classmethod
    def of(cls, markup: str, void: frozenset[str] = frozenset()) -> _Layout:
        layout = cls(void)
        layout.feed(markup)
        layout.close()
        return layout

    def splits(self, element: int) -> bool:
        """The element's parent (or the fragment around it) holds no text of its own: the element is outline."""
        parent = self.parent[element] if element < len(self.parent) else -1
        return not (self.text[parent] if parent >= 0 else self.top_text)

    def empty(self, element: int) -> bool:
        return element < len(self.text) and not self.text[element] and not self.children[element]

    def _element(self) -> int:
        index = len(self.parent)
        parent = self._open[-1][1] if self._open else -1
        self.parent.append(parent)
        self.text.append(False)
        self.children.append(False)
        if parent >= 0:
            self.children[parent] = True
        return index

    def _sibling(self) -> None:
        """An element starts: after a sibling and a space on the same line, its parent holds prose."""
        if self._gap:
            self._mark_text()
        self._after_child = self._gap = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._sibling()
        element = self._element()
        if tag not in self.void:
            self._open.append((tag, element))
        else:
            self._after_child = True

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._sibling()
        self._element()
        self._after_child = True

    def handle_endtag(self, tag: str) -> None:
        self._after_child = self._gap = False
        for depth in range(len(self._open) - 1, -1, -1):
            if self._open[depth][0] == tag:
                del self._open[depth:]
                self._after_child = True
                return

    def handle_data(self, data: str) -> None:
        if data.strip():
            self._mark_text()
            self._after_child = self._gap = False
        else:
            self._gap = self._after_child and data != "" and "\n" not in data and "\r" not in data
            self._after_child = self._gap

    def handle_entityref(self, name: str) -> None:
        self._mark_text()

    def handle_charref(self, name: str) -> None:
        self._mark_text()

    def unknown_decl(self, data: str) -> None:  # CDATA: text
        self._mark_text()

    def _mark_text(self) -> None:
        if self._open:
            self.text[self._open[-1][1]] = True
        else:
            self.top_text = True


def word_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each word of ``text``: what a word alignment's indices count (whitespace-separated tokens)."""
    return [(m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _escape(text: str, literals: dict[str, str], used: set[str], escape: bool = True) -> str:
    """Translated text as markup: escaped (HTML), with each literal's placeholder (first occurrence) put back."""
    quote = (lambda t: html.escape(t, quote=False)) if escape else (lambda t: t)
    out, position = [], 0
    for match in _PLACEHOLDER.finditer(text):
        key = match.group(0)
        if key in literals and key not in used:
            used.add(key)
            out.append(quote(text[position : match.start()]))
            out.append(literals[key])
            position = match.end()
    out.append(quote(text[position:]))
    return "".join(out)


def _lost(literals: dict[str, str], used: set[str]) -> str:
    """Literals the translation dropped, at the end of the segment: nothing of the input is lost."""
    return "".join(" " + markup for key, markup in literals.items() if key not in used)


def render(
    segment: Segment, target: str, links: Sequence[tuple[int, int] | tuple[int, int, float]], copies: bool = True
) -> str:
    """The segment's translation ``target`` as HTML, with its inline elements around the target words aligned
    (``links``: (target word, source word[, weight]) triples, words being whitespace-separated tokens) to theirs.
    With weights, a source word that several target words link to keeps the strongest one only ("Klicken Sie auf
    <b>Speichern</b>", not "<b>Sie auf Speichern</b>"). Where the translation copied the enclosed words
    verbatim, the copies are taken instead (``copies``)."""
    source_tokens, target_tokens = word_spans(segment.text), word_spans(target)
    if not segment.spans or not target_tokens:
        used: set[str] = set()
        empty = "".join(s.start_tag + s.closing for s in segment.spans)
        return _escape(target, segment.literals, used, segment.escape) + _lost(segment.literals, used) + empty
    aligned: dict[int, set[int]] = {}
    best: dict[int, tuple[float, int]] = {}
    for link in links:
        t, s = link[0], link[1]
        if len(link) == 3:
            if link[2] > best.get(s, (-1.0, 0))[0]:  # type: ignore[misc]
                best[s] = (link[2], t)  # type: ignore[misc]
        else:
            aligned.setdefault(s, set()).add(t)
    for s, (_, t) in best.items():
        aligned[s] = {t}
    ranges: list[tuple[int, int]] = []  # each span's target token range [first, last], nested like the input
    for index, span in enumerate(segment.spans):
        covered = [i for i, (a, b) in enumerate(source_tokens) if a < span.end and b > span.start]
        copied = _copied(segment.text, source_tokens, covered, target, target_tokens) if copies else []
        targets = copied or sorted({t for s in covered for t in aligned.get(s, ())})
        if targets:
            first, last = targets[0], targets[-1]
        else:  # nothing aligned: the target word at the same relative place
            where = covered[0] if covered else _token_at(source_tokens, span.start)
            first = last = min(len(target_tokens) - 1, round(where * len(target_tokens) / max(1, len(source_tokens))))
        parent = next(
            (ranges[j] for j in range(index - 1, -1, -1) if _inside(segment.spans[index], segment.spans[j])), None
        )
        if parent is not None:  # stay inside the enclosing element's range
            first, last = max(first, parent[0]), min(last, parent[1])
            if first > last:
                first = last = parent[0]
        for j in range(index):  # do not cross an earlier sibling's range
            other = ranges[j]
            if _inside(segment.spans[index], segment.spans[j]) or not (first <= other[1] and last >= other[0]):
                continue
            if first >= other[0] and last <= other[1]:
                continue  # inside the sibling's words: nests within its tag below
            if first < other[0]:
                last = min(last, other[0] - 1) if last <= other[1] else last
            else:
                first = max(first, other[1] + 1) if first <= other[1] else first
            if first > last:
                first = last = min(other[1] + 1, len(target_tokens) - 1)
        ranges.append((first, last))
    return _assemble(segment, target, target_tokens, ranges)


_EDGE = "\"'.,;:!?()[]{}<>«»„“”‚‘’"


def _copied(
    source: str,
    source_tokens: list[tuple[int, int]],
    covered: list[int],
    target: str,
    target_tokens: list[tuple[int, int]],
) -> list[int]:
    """Where the translation copied every enclosed word verbatim (names, identifiers, numbers), each exactly once,
    those target words: a copy is a surer link than attention. Else nothing."""
    found = []
    for s in covered:
        word = source[source_tokens[s][0] : source_tokens[s][1]].strip(_EDGE)
        if len(word) < 2:
            return []
        matches = [t for t, (a, b) in enumerate(target_tokens) if target[a:b].strip(_EDGE) == word]
        if len(matches) != 1:
            return []
        found.append(matches[0])
    return sorted(found)


def _token_at(tokens: list[tuple[int, int]], position: int) -> int:
    return next((i for i, (_, end) in enumerate(tokens) if end > position), max(0, len(tokens) - 1))


def _inside(inner: Span, outer: Span) -> bool:
    return outer.depth < inner.depth and outer.start <= inner.start and inner.end <= outer.end


_TRAILING = re.compile(r"[.,;:!?)\]»«“”\"'’]+(?=\s|$)")
"""Punctuation ending a token, which an element closing there leaves outside unless its source text ended so."""
_LEADING = re.compile(r"[(\[«»„“‚‘\"'¿¡]+")
"""Punctuation starting a token, which an element opening there leaves outside unless its source text began so."""


def _punctuated(segment: Segment, index: int, start: bool = False) -> bool:
    """The span's source text begins (``start``) or ends with punctuation."""
    span = segment.spans[index]
    text = segment.text[span.start : span.end].strip()
    if not text:
        return False
    return bool(_LEADING.match(text)) if start else _TRAILING.search(text + " ", len(text) - 1) is not None


def _assemble(segment: Segment, target: str, tokens: list[tuple[int, int]], ranges: list[tuple[int, int]]) -> str:
    """Open each span before its first token and close it after its last (before the token's closing punctuation
    where the span's source ended without). The ranges nest or are disjoint (``render`` makes them so), so closing
    in reverse order of opening is always right."""
    opens: dict[int, list[int]] = {}
    for index, (first, _) in enumerate(ranges):
        opens.setdefault(first, []).append(index)
    out: list[str] = []
    stack: list[int] = []
    used: set[str] = set()
    escape = segment.escape
    position = 0
    for t, (start, end) in enumerate(tokens):
        out.append(_escape(target[position:start], {}, used, escape))
        opening = opens.get(t, [])
        lead = _LEADING.match(target, start, end) if opening else None
        if lead is not None and lead.end() < end and not any(_punctuated(segment, i, start=True) for i in opening):
            out.append(_escape(lead.group(0), {}, used, escape))  # "(<em>schon" where the source's had no "("
            start = lead.end()
        # wider ranges open first, so that narrower ones nest inside them
        for index in sorted(opening, key=lambda i: (-ranges[i][1], segment.spans[i].depth)):
            out.append(segment.spans[index].start_tag)
            stack.append(index)
        closing = [i for i in stack if ranges[i][1] == t]
        trail = _TRAILING.search(target, start, end) if closing else None
        if trail is not None and trail.start() > start and not any(_punctuated(segment, i) for i in closing):
            end = trail.start()  # "<b>Speichern</b>," where the source's element held no punctuation at its end
        out.append(_escape(target[start:end], segment.literals, used, escape))
        while stack and ranges[stack[-1]][1] == t:
            out.append(segment.spans[stack.pop()].closing)
        position = end
    while stack:  # not reached with nested ranges; kept so that the output always closes what it opened
        out.append(segment.spans[stack.pop()].closing)
    out.append(_escape(target[position:], {}, used, escape))
    return "".join(out) + _lost(segment.literals, used)
