"""format "html" and "xml" on /translate: markup comes back whole, hostile markup gets a clear 4xx and never a 5xx."""

from __future__ import annotations

import pytest

from tests.core.test_markup import inspect
from tests.service.servers import ThreadServer


def test_html_comes_back_with_its_tags_around_the_same_words(shared_server: ThreadServer) -> None:
    text = '<h1>Saving</h1><p>Click <b>Save</b> or <a href="/help#save">read more</a>.</p><pre>no  change</pre>'
    r = shared_server.client.post("/translate", json={"text": [text, "plain & <i>simple</i>"], "format": "html"})
    assert r.status_code == 200, r.text
    first, second = (t["text"] for t in r.json()["translations"])
    # the fake engine reverses each sentence's words
    assert (
        first == '<h1>Saving</h1><p><a href="/help#save">more. read</a> or <b>Save</b> Click</p><pre>no  change</pre>'
    )
    assert second == "<i>simple</i> &amp; plain"
    assert inspect(first).errors == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"text": "<span>" * 600 + "deep", "format": "html"}, "nests more than"),
        ({"text": "<b>x</b>", "format": "html", "n_best": 2, "beam_size": 4}, "format html returns one translation"),
        ({"text": "<b>x</b>", "format": "html", "return_attention": True}, "format html returns one translation"),
        ({"text": "x", "format": "docx"}, "format"),
        ({"text": "<k>x</k>", "ignore_tags": ["k"]}, "ignore_tags needs format html or xml"),
        ({"text": "<k>x</k>", "format": "xml", "splitting_tags": ["<k>"]}, "not an element name"),
        ({"text": "<k>x</k>", "format": "xml", "non_splitting_tags": ["k"] * 101}, "at most 100"),
        ({"text": "<k>" * 600 + "deep", "format": "xml"}, "nests more than"),
    ],
)
def test_what_cannot_be_done_safely_is_a_422(
    shared_server: ThreadServer, body: dict[str, object], message: str
) -> None:
    r = shared_server.client.post("/translate", json=body)
    assert r.status_code == 422, r.text
    assert message in r.text


def test_xml_keeps_its_outline_and_what_the_client_names(shared_server: ThreadServer) -> None:
    text = '<Doc><Title>The news</Title><P>Press <Key>Ctrl</Key> and <x id="1"/> <Code>a b</Code></P></Doc>'
    body = {"text": text, "format": "xml", "ignore_tags": ["code"]}
    r = shared_server.client.post("/translate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["translations"][0]["text"] == (
        '<Doc><Title>news The</Title><P><Code>a b</Code> <x id="1"/> and <Key>Ctrl</Key> Press</P></Doc>'
    )
    flat = shared_server.client.post("/translate", json={**body, "outline_detection": False, "splitting_tags": ["P"]})
    assert flat.json()["translations"][0]["text"] == (
        '<Doc><Title>news The</Title><P><Code>a b</Code> <x id="1"/> and <Key>Ctrl</Key> Press</P></Doc>'
    )


@pytest.mark.parametrize("text_format", ["html", "xml"])
@pytest.mark.parametrize(
    "text",
    [
        "<p>unclosed <b>bold <i>and italic",
        "</b></i></p> stray ends <b>",
        "<script>alert('<b>')</script><style>p{}</style>",
        f'<a href="{"h" * 50_000}">x</a>',
        "<!-- comment --><!DOCTYPE html><?pi?><![CDATA[x]]>text",
        "&bogus; &#99999999; &#x110000; text",
        "<p>" + "<b>w</b> " * 300 + "</p>",
        "<>" * 500,
        "<div>" * 10_000 + "deep",  # over MT_MAX_CHARS: 413 before any parsing
    ],
)
def test_hostile_markup_never_breaks_the_server(shared_server: ThreadServer, text: str, text_format: str) -> None:
    r = shared_server.client.post("/translate", json={"text": text, "format": text_format, "ignore_tags": ["b"]})
    assert r.status_code in (200, 413, 422), r.text


def test_markdown_comes_back_as_markdown(shared_server: ThreadServer) -> None:
    text = "## Click **Save**\n\nSee [the manual](https://x.org/m_a) or run `make`.\n"
    r = shared_server.client.post("/translate", json={"text": text, "format": "markdown"})
    assert r.status_code == 200, r.text
    expected = "## **Save** Click\n\n`make`. run or [manual the](https://x.org/m_a) See\n"  # the fake engine reverses
    assert r.json()["translations"][0]["text"] == expected
