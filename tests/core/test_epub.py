"""E-books (core/epub.py): chapters, contents and title translated; the book stays a valid EPUB.

The book is written, and read back, with EbookLib (an independent EPUB library); every content document of the
output must still parse as XML. The "translation" reverses the words, so inline elements that follow the
alignment move.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from lxml import etree

from core.documents import DocumentError, read_document

ebooklib = pytest.importorskip("ebooklib")
from ebooklib import epub  # noqa: E402

XHTML = "http://www.w3.org/1999/xhtml"
SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><defs><clipPath id="c"><rect width="5" '
    'height="5"/></clipPath></defs><rect width="10" height="10" clip-path="url(#c)"/></svg>'
)


def reverse(text: str) -> tuple[str, list[tuple[int, int]]]:
    words = text.split()
    return " ".join(reversed(words)).upper(), [(i, len(words) - 1 - i) for i in range(len(words))]


def book(tmp_path: Path) -> bytes:
    b = epub.EpubBook()
    b.set_identifier("id-1")
    b.set_title("The small book")
    b.set_language("en")
    one = epub.EpubHtml(title="The first chapter", file_name="one.xhtml", lang="en")
    one.content = (
        "<h1>The first chapter</h1><p>It was a <b>dark</b> night &amp; cold.</p>"
        f"<p>Look at this picture: {SVG}</p><p>1984</p>"
    )
    two = epub.EpubHtml(title="The second chapter", file_name="two.xhtml", lang="en")
    two.content = "<h1>The second chapter</h1><p>She opened <i>the old door</i> slowly.</p>"
    for chapter in (one, two):
        b.add_item(chapter)
    b.toc = [epub.Link("one.xhtml", "The first chapter", "one"), epub.Link("two.xhtml", "The second chapter", "two")]
    b.add_item(epub.EpubNcx())
    b.add_item(epub.EpubNav())
    b.spine = ["nav", one, two]
    path = tmp_path / "book.epub"
    epub.write_epub(str(path), b)
    # EbookLib lowercases the SVG's element names as it writes; XHTML keeps them as written
    written = zipfile.ZipFile(path)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for entry in written.infolist():
            data = written.read(entry)
            if entry.filename.endswith("one.xhtml"):
                data = data.replace(b"clippath", b"clipPath")
            archive.writestr(entry, data, compress_type=entry.compress_type)
    return out.getvalue()


def test_chapters_contents_and_title_are_translated_and_the_book_stays_valid(tmp_path: Path) -> None:
    source = book(tmp_path)
    document = read_document("book.epub", source)
    texts = [s.text for s in document.segments]
    assert "It was a dark night & cold." in texts and "She opened the old door slowly." in texts
    assert "The small book" in texts
    out = document.rebuild([reverse(t) for t in texts], "de")
    path = tmp_path / "out.epub"
    path.write_bytes(out)
    translated = epub.read_epub(str(path))
    assert translated.get_metadata("DC", "title")[0][0] == "BOOK SMALL THE"
    assert translated.get_metadata("DC", "language")[0][0] == "de"
    assert {item.file_name for item in translated.get_items_of_type(ebooklib.ITEM_DOCUMENT)} >= {"one.xhtml"}
    archive = zipfile.ZipFile(io.BytesIO(out))
    chapters = {n.rsplit("/", 1)[-1]: archive.read(n) for n in archive.namelist() if n.endswith(".xhtml")}
    one = etree.fromstring(chapters["one.xhtml"])  # still well-formed XML, SVG's clipPath included
    assert one.get("lang") == "de" and one.get("{http://www.w3.org/XML/1998/namespace}lang") == "de"
    paragraphs = ["".join(p.itertext()) for p in one.iter(f"{{{XHTML}}}p")]
    assert paragraphs[0] == "COLD. & NIGHT DARK A WAS IT" and paragraphs[-1] == "1984"
    assert [b.text for b in one.iter(f"{{{XHTML}}}b")] == ["DARK"]
    assert one.find(".//{http://www.w3.org/2000/svg}clipPath") is not None
    two = etree.fromstring(chapters["two.xhtml"])
    assert [i.text for i in two.iter(f"{{{XHTML}}}i")] == ["DOOR OLD THE"]
    ncx = next(n for n in archive.namelist() if n.endswith(".ncx"))
    labels = [t.text for t in etree.fromstring(archive.read(ncx)).iter("{http://www.daisy.org/z3986/2005/ncx/}text")]
    assert "CHAPTER FIRST THE" in labels
    first = archive.infolist()[0]
    assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)


def test_a_zip_without_a_package_document_is_not_an_ebook() -> None:
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
        archive.writestr("a.xhtml", "<p>x</p>")
    with pytest.raises(DocumentError, match="not an e-book"):
        read_document("x.epub", package.getvalue())
