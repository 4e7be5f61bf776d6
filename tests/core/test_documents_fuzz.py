"""Damaged files of every kind the document route takes: read and written again, each either works or is refused
with a DocumentError (which the route answers 415 or 422), never another exception (a 500).

Each kind's file (bench/documents.py's, made with the formats' own writers, or a small one written here) is
damaged at random (bytes changed, cut out, put in) with a fixed seed, so a failure reproduces.
"""

from __future__ import annotations

import random

import pytest

from bench import documents
from core.documents import KINDS, DocumentError, read_document

PARAGRAPHS = ["Open the file menu.", "Choose a new <name> & go.", "Click Save now."]
SMALL = {
    "xlf": b'<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body><trans-unit id="a">'
    b'<source>Hi <g id="1">there</g> <x id="2"/></source></trans-unit></body></file></xliff>',
    "xml": b'<resources><string name="a">Hi <b>there</b> %1$s \\\'s</string><plurals name="p"><item quantity="one">'
    b"%d file</item></plurals></resources>",
    "strings": b'/* c */\n"a" = "Hello \\"there\\"";\n',
    "properties": b"a = Hello there \\\n  again\nb: caf\\u00e9\n",
    "vtt": b"WEBVTT\n\n00:01.000 --> 00:02.000\n<v A>Hi <i>there</i> &amp; you\n",
    "md": b"# Hi\n\nSome **bold** text and `code`.\n",
    "txt": b"Hello\nthere\n",
    "arb": b'{"@@locale": "en", "a": "Hello {name}", "@a": {"description": "x"}}',
    "dbk": b'<?xml version="1.0"?>\n<!DOCTYPE book SYSTEM "d.dtd">\n<book><title>Hi &product;</title><!-- c -->'
    b"<para>Click <guibutton>Save</guibutton> &amp; <xref linkend='a'/> go<![CDATA[ x < y ]]></para></book>",
}
MUTATIONS = 60


def reverse(text: str) -> tuple[str, list[tuple[int, int]]]:
    words = text.split()
    return " ".join(reversed(words)), [(i, len(words) - 1 - i) for i in range(len(words))]


def damaged(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not out:
            break
        at = rng.randrange(len(out))
        roll = rng.random()
        if roll < 0.5:
            out[at] = rng.randrange(256)
        elif roll < 0.75:
            del out[at : at + rng.randint(1, 20)]
        else:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 5)))
    return bytes(out)


def sample(kind: str) -> bytes:
    if kind in documents.KINDS:
        module = {"docx": "docx", "pptx": "pptx", "xlsx": "openpyxl", "odt": "odf", "epub": "ebooklib"}.get(kind)
        if module:
            pytest.importorskip(module)
        return documents.KINDS[kind](PARAGRAPHS)
    return SMALL[kind]


@pytest.mark.parametrize("kind", sorted(set(documents.KINDS) | set(SMALL)))
def test_a_damaged_file_is_translated_or_refused_never_a_crash(kind: str) -> None:
    original = sample(kind)
    document = read_document(f"x.{kind}", original)  # the undamaged file works
    assert document.segments
    document.rebuild([reverse(s.text) for s in document.segments], "de")
    rng = random.Random(f"{kind}-61")
    for _ in range(MUTATIONS):
        data = damaged(original, rng)
        try:
            document = read_document(f"x.{kind}", data)
            document.rebuild([reverse(s.text) for s in document.segments], "de")
        except DocumentError:
            pass


def test_every_kind_is_fuzzed() -> None:
    """A kind the route takes is fuzzed here, or read by the same code as one that is (a new kind fails this)."""
    fuzzed = {f".{k}" for k in set(documents.KINDS) | set(SMALL)}
    assert KINDS.keys() - fuzzed == {".htm", ".pot", ".xliff", ".odp", ".ods", ".dita"}
