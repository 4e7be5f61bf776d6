"""core/markup.py: HTML comes back valid, with the same tags, around the words they enclosed.

Documents are generated (hypothesis) from block and inline elements over unique words; a "translation" reorders
the words of each segment and says which target word came from which source word, as the engine's alignment
does. Whatever the order, the output must be well nested, hold the same start tags (attributes verbatim), leave
no inline element empty, and keep literals and opaque elements byte for byte; with the words reversed, every
inline element must enclose exactly the words it enclosed in the input.
"""

from __future__ import annotations

import html
from collections import Counter
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.markup import INLINE, MAX_DEPTH, VOID, MarkupError, parse_html, render
from tests.core.reorder import reordered

INLINE_TAGS = [
    "<b>",
    "<i>",
    "<em>",
    '<a href="https://example.org/a?b=1&amp;c=2" title="x &quot;y&quot;">',
    '<span class="k">',
]


class Inspector(HTMLParser):
    """Start tags as written, nesting errors, inline elements left without words, and the words in each."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.start_tags: Counter[str] = Counter()
        self.errors: list[str] = []
        self.stack: list[tuple[str, list[str]]] = []
        self.enclosed: list[tuple[str, tuple[str, ...]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.start_tags[self.get_starttag_text() or tag] += 1
        if tag not in VOID:
            self.stack.append((tag, []))

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1][0] if self.stack else 'nothing'}")
            return
        name, words = self.stack.pop()
        if name in INLINE and not words:
            self.errors.append(f"<{name}> is empty")
        self.enclosed.append((name, tuple(sorted(words))))

    def handle_data(self, data: str) -> None:
        for _, words in self.stack:
            words.extend(data.split())


def inspect(markup: str) -> Inspector:
    inspector = Inspector()
    inspector.feed(markup)
    inspector.close()
    return inspector


@st.composite
def documents(draw: st.DrawFn) -> str:
    counter = iter(range(10_000))

    def inline(depth: int) -> str:
        parts = []
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["word", "word", "word", "tag", "code", "entity"] if depth < 3 else ["word"]))
            if kind == "tag":
                tag = draw(st.sampled_from(INLINE_TAGS))
                name = tag[1:].split()[0].rstrip(">")
                parts.append(f"{tag}{inline(depth + 1)}</{name}>")
            elif kind == "code":
                parts.append(f"<code>c{next(counter)} --x</code>")
            elif kind == "entity":
                parts.append(f"w{next(counter)}&amp;")
            else:
                parts.append(f"w{next(counter)}")
        return " ".join(parts)

    blocks = []
    for _ in range(draw(st.integers(1, 3))):
        block = draw(st.sampled_from(["p", "li", "div", "h2"]))
        blocks.append(f"<{block}>{inline(0)}</{block}>")
    if draw(st.booleans()):
        blocks.append("<pre>keep  <b>this</b> &lt;as is&gt;</pre>")
    return "".join(blocks)


def translate(markup: str, order: str, seed: int = 0) -> str:
    """Every segment's words reordered (reversed or shuffled), with exact word links, then rendered back."""
    return reordered(parse_html(markup), order, seed)


@settings(max_examples=150, deadline=None)
@given(documents(), st.sampled_from(["same", "reverse", "shuffle"]), st.integers(0, 1000))
def test_output_is_valid_and_keeps_every_tag(markup: str, order: str, seed: int) -> None:
    output = translate(markup, order, seed)
    before, after = inspect(markup), inspect(output)
    assert after.errors == [], output
    assert after.start_tags == before.start_tags, output
    words = lambda text: Counter(html.unescape(text).split())  # noqa: E731
    assert words(_strip(output)) == words(_strip(markup))
    if order == "same":
        assert output == markup
    if order == "reverse":  # contiguous stays contiguous: every element around exactly its words
        assert Counter(after.enclosed) == Counter(before.enclosed), output


def _strip(markup: str) -> str:
    text: list[str] = []
    parser = HTMLParser(convert_charrefs=False)
    parser.handle_data = lambda data: text.append(" " + data + " ")  # type: ignore[method-assign]
    parser.handle_entityref = lambda name: text.append(f"&{name};")  # type: ignore[method-assign]
    parser.feed(markup)
    parser.close()
    return "".join(text)


def test_a_bold_word_stays_bold_where_the_translation_puts_it() -> None:
    segment = parse_html("<p>Click <b>Save</b> to store your changes.</p>").segments[0]
    target = "Klicken Sie auf Speichern, um Ihre Änderungen zu speichern."
    links = [(0, 0), (1, 0), (2, 0), (3, 1), (4, 2), (5, 4), (6, 5), (7, 2), (8, 3)]
    assert render(segment, target, links) == "Klicken Sie auf <b>Speichern</b>, um Ihre Änderungen zu speichern."


def test_urls_attributes_code_and_opaque_elements_are_not_touched() -> None:
    markup = (
        '<p title="Do not translate">See <a href="https://x.org/?q=a&amp;b">the site</a> or run '
        '<code>ls &amp;&amp; pwd</code>.</p><script>if (a < b) { x = "<b>"; }</script>'
        '<div translate="no">Keep me</div><p>Name: <span translate="no">Bob Smith</span></p>'
    )
    output = translate(markup, "reverse")
    for kept in (
        '<p title="Do not translate">',
        '<a href="https://x.org/?q=a&amp;b">',
        "<code>ls &amp;&amp; pwd</code>",
        '<script>if (a < b) { x = "<b>"; }</script>',
        '<div translate="no">Keep me</div>',
        '<span translate="no">Bob Smith</span>',
    ):
        assert kept in output


def test_a_tag_leaves_the_punctuation_after_its_last_word_outside_unless_its_source_held_some() -> None:
    segment = parse_html("<p><b>Warning:</b> the <i>disk</i> is full (<em>again</em>).</p>").segments[0]
    target = "Warnung: die Festplatte, ist voll (schon wieder)."
    links = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 5)]
    assert render(segment, target, links) == (
        "<b>Warnung:</b> die <i>Festplatte</i>, ist voll (<em>schon wieder</em>)."
    )


def test_a_lost_literal_is_put_back_at_the_end_of_its_segment() -> None:
    segment = parse_html("<p>Run <code>make</code> now</p>").segments[0]
    assert segment.text == "Run {1} now"
    assert render(segment, "Jetzt ausführen", [(0, 2), (1, 0)]) == "Jetzt ausführen <code>make</code>"


def test_hostile_markup() -> None:
    with pytest.raises(MarkupError, match="nests more than"):
        parse_html("<div>" * 10_000 + "x")
    deep_inline = "<b>" * (MAX_DEPTH + 1) + "x"
    with pytest.raises(MarkupError):
        parse_html(deep_inline)
    unclosed = translate("<p>unclosed <b>bold <i>text", "reverse")
    assert inspect(unclosed).start_tags == inspect("<p>unclosed <b>bold <i>text").start_tags
    huge = f'<p><a href="{"x" * 100_000}">link</a> text</p>'
    assert translate(huge, "reverse").count("x" * 100_000) == 1
    assert translate("<p>a &lt;b&gt; &amp; c</p>", "same") == "<p>a &lt;b&gt; &amp; c</p>"
    assert translate("<<<>>>&&&", "same") == "&lt;&lt;&lt;&gt;&gt;&gt;&amp;&amp;&amp;"  # stray brackets: escaped text


def test_with_weights_a_source_word_keeps_its_strongest_target_word() -> None:
    segment = parse_html("<p>Click <b>Save</b> to store your changes.</p>").segments[0]
    target = "Klicken Sie auf Speichern, um Ihre Änderungen zu speichern."
    # "Sie" and "auf" attend to "Save" too, less than "Speichern," does
    links = [(0, 0, 0.9), (1, 1, 0.3), (2, 1, 0.35), (3, 1, 0.6), (4, 2, 0.5), (5, 4, 0.8), (6, 5, 0.9), (7, 2, 0.4)]
    assert render(segment, target, links) == "Klicken Sie auf <b>Speichern</b>, um Ihre Änderungen zu speichern."
    unweighted = [(t, s) for t, s, _ in links]
    assert render(segment, target, unweighted, copies=False).startswith("Klicken <b>Sie auf Speichern</b>,")


def test_a_url_in_the_text_is_not_translated() -> None:
    segment = parse_html("<p>See https://example.org/a_b?x=1 for the manual.</p>").segments[0]
    assert segment.text == "See {1} for the manual." and segment.literals == {"{1}": "https://example.org/a_b?x=1"}
    assert render(segment, "Siehe {1} für das Handbuch.", []) == "Siehe https://example.org/a_b?x=1 für das Handbuch."
