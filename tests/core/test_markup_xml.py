"""core/markup.py's XML (DeepL's ``tag_handling: xml``) and the tag options HTML shares with it.

XML documents are generated (hypothesis): containers holding only elements (the outline), paragraphs holding text
with inline elements of any case, empty elements (``<x id="1"/>``, ``<x id="2"></x>``) and elements the client
asks to keep (``ignore_tags``). Whatever order a "translation" puts the words in, Python's own XML parser
(xml.etree, the independent reference) must read the output, with the same elements and attributes; each
paragraph's words stay in it; kept elements come back byte for byte; the words in their order give the input back
byte for byte; reversed, every inline element encloses exactly the words it enclosed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.markup import MarkupError, Tags, parse_html, parse_xml
from tests.core.reorder import reordered

INLINE = ["<B>", "<emphasis role='strong'>", '<Link href="a?b=1&amp;c=2">', "<ph>"]
EMPTY = ['<x id="{n}"/>', '<x id="{n}"></x>', "<Br/>"]
KEEP = Tags.of(ignore=["Keep"])


@st.composite
def documents(draw: st.DrawFn) -> str:
    counter = iter(range(10_000))

    def text(depth: int) -> str:
        parts = [f"w{next(counter)}"]  # a paragraph holds text of its own: its elements are inline
        for _ in range(draw(st.integers(0, 4))):
            kind = draw(st.sampled_from(["word", "word", "tag", "empty", "keep", "entity"] if depth < 3 else ["word"]))
            if kind == "tag":
                tag = draw(st.sampled_from(INLINE))
                name = tag[1:].split()[0].rstrip(">")
                parts.append(f"{tag}{text(depth + 1)}</{name}>")
            elif kind == "empty":
                parts.append(draw(st.sampled_from(EMPTY)).format(n=next(counter)))
            elif kind == "keep":
                parts.append(f"<Keep>k{next(counter)} &lt;as is&gt;</Keep>")
            elif kind == "entity":
                parts.append(f"w{next(counter)}&amp;")
            else:
                parts.append(f"w{next(counter)}")
        return " ".join(parts)

    def outline(depth: int) -> str:
        children = []
        for _ in range(draw(st.integers(1, 3))):
            if depth < 2 and draw(st.booleans()):
                children.append(f"<Section>\n{outline(depth + 1)}\n</Section>")
            else:
                name = draw(st.sampled_from(["Para", "title", "cell"]))
                children.append(f"<{name}>{text(0)}</{name}>")
        return "\n".join(children)

    return f'<?xml version="1.0" encoding="UTF-8"?>\n<Doc lang="en">\n{outline(0)}\n</Doc>'


def _elements(markup: str) -> Counter[tuple[str, tuple[tuple[str, str], ...]]]:
    root = ET.fromstring(markup.split("?>", 1)[1])
    return Counter((e.tag, tuple(sorted(e.attrib.items()))) for e in root.iter())


def _enclosed(markup: str) -> Counter[tuple[str, tuple[str, ...]]]:
    root = ET.fromstring(markup.split("?>", 1)[1])
    return Counter((e.tag, tuple(sorted("".join(e.itertext()).split()))) for e in root.iter() if e.tag != "Doc")


@settings(max_examples=150, deadline=None)
@given(documents(), st.sampled_from(["same", "reverse", "shuffle"]), st.integers(0, 1000))
def test_xml_comes_back_well_formed_with_every_element(markup: str, order: str, seed: int) -> None:
    document = parse_xml(markup, KEEP)
    assert all("\n" not in s.text for s in document.segments)  # the outline's whitespace is never a sentence
    output = reordered(document, order, seed)
    assert _elements(output) == _elements(markup), output
    for kept in {m for m in markup.split("<Keep>")[1:]}:
        assert "<Keep>" + kept.split("</Keep>")[0] + "</Keep>" in output
    if order == "same":
        assert output == markup
    if order == "reverse":
        assert _enclosed(output) == _enclosed(markup), output


def test_the_outline_splits_and_inline_elements_do_not() -> None:
    document = parse_xml("<Doc><Title>Big news</Title><Para>Click <B>Save</B> now<Br/> or <x id='1'></x></Para></Doc>")
    assert [s.text for s in document.segments] == ["Big news", "Click Save now{1} or {2}"]
    para = document.segments[1]
    assert [(s.start_tag, s.closing) for s in para.spans] == [("<B>", "</B>")]
    assert para.literals == {"{1}": "<Br/>", "{2}": "<x id='1'></x>"}
    # a fragment with text of its own (a tool's string with its placeholders): every element is inline
    fragment = parse_xml('Hello <b>dear</b> <x id="6"/>, bye')
    assert [s.text for s in fragment.segments] == ["Hello dear {1}, bye"]


def test_elements_a_space_apart_on_one_line_are_prose_a_line_apart_an_outline() -> None:
    prose = parse_xml("<doc><p><b>Warning:</b> <i>read this</i></p></doc>")
    assert [s.text for s in prose.segments] == ["Warning: read this"]
    assert [s.start_tag for s in prose.segments[0].spans] == ["<b>", "<i>"]
    table = parse_xml("<table>\n <row>\n  <cell>A b</cell>\n  <cell>C d</cell>\n </row>\n</table>")
    assert [s.text for s in table.segments] == ["A b", "C d"]
    assert [s.text for s in parse_xml("<row><cell>A b</cell><cell>C d</cell></row>").segments] == ["A b", "C d"]


def test_tag_options() -> None:
    markup = "<doc><p>One <k>two</k> three</p><p>Four <s>five</s> six</p></doc>"
    ignored = parse_xml(markup, Tags.of(ignore=["K"]))  # names match ignoring case
    assert [s.text for s in ignored.segments] == ["One {1} three", "Four five six"]
    split = parse_xml(markup, Tags.of(splitting=["s"]))
    assert [s.text for s in split.segments] == ["One two three", "Four ", "five", " six"]
    flat = parse_xml(markup, Tags.of(outline=False))
    assert [s.text for s in flat.segments] == ["One two threeFour five six"]
    by_tags = parse_xml(markup, Tags.of(outline=False, splitting=["p"], non_splitting=["doc"]))
    assert [s.text for s in by_tags.segments] == ["One two three", "Four five six"]
    its = parse_xml('<doc><p>Run <cmd its:translate="no">ls -l</cmd> now</p><p translate="no">Keep</p></doc>')
    assert [s.text for s in its.segments] == ["Run {1} now"] and '<p translate="no">Keep</p>' in "".join(
        p for p in its.parts if isinstance(p, str)
    )
    with pytest.raises(MarkupError, match="not an element name"):
        Tags.of(ignore=["a b"])


def test_html_keeps_what_the_client_names_and_googles_notranslate() -> None:
    markup = '<div><keep>Logo</keep><p>Say <keep>Foo Bar</keep> to <span class="x notranslate">ACME</span></p></div>'
    document = parse_html(markup, Tags.of(ignore=["keep"]))
    # outside a sentence a kept element is copied as it is; inside one it is a placeholder
    assert [s.text for s in document.segments] == ["Say {1} to {2}"]
    assert "<keep>Logo</keep>" in document.parts
    assert document.segments[0].literals == {
        "{1}": "<keep>Foo Bar</keep>",
        "{2}": '<span class="x notranslate">ACME</span>',
    }
    split = parse_html("<p>One <span>two</span> three</p>", Tags.of(splitting=["span"]))
    assert [s.text for s in split.segments] == ["One ", "two", " three"]
    joined = parse_html("<p>One</p><p>two</p>", Tags.of(non_splitting=["p"]))
    assert [s.text for s in joined.segments] == ["Onetwo"]
