"""E-books: EPUB 2 and 3 (.epub), their chapters translated as HTML, their table of contents and title too.

An EPUB is a zip of XHTML content documents, a package document (``.opf``: title, language, the reading order)
and, in EPUB 2, a ``toc.ncx``. Each content document (and EPUB 3's navigation document, itself XHTML) goes
through core/markup.py as ``format: html`` does: every paragraph, heading and list item a segment, inline
elements back on the aligned words, markup outside text copied byte for byte (end tags as written, so SVG's
camel-case elements stay well formed). Its ``<html>`` element's ``lang``/``xml:lang`` and the package's
``dc:language`` become the target language; the package's ``dc:title`` and the NCX's entry labels are
translated. Everything else (pictures, fonts, style sheets, the ``mimetype`` entry first and stored) is copied
as it is.
"""

from __future__ import annotations

import re
from typing import Any

from core.markup import Document, Links, MarkupError, Segment, parse_html, relabel, render
from core.office import Package, PackageError, open_package, write_package, xml_bytes, xml_parser

MEDIA_TYPE = "application/epub+zip"
_DC = "http://purl.org/dc/elements/1.1/"
_NCX = "http://www.daisy.org/z3986/2005/ncx/"
_CONTENT = (".xhtml", ".html", ".htm")
_HTML_TAG = re.compile(r"<html\b[^>]*>", re.IGNORECASE)


def read_epub(name: str, data: bytes) -> Package:
    from lxml import etree

    entries, contents = open_package(name, ".epub", data)
    parser = xml_parser()
    pages: dict[str, Document] = {}
    trees: dict[str, Any] = {}
    labels: list[Any] = []  # the XML elements whose text is a segment (NCX labels, titles)
    segments: list[Segment] = []
    try:
        for entry in entries:
            lower = entry.filename.lower()
            if lower.endswith(_CONTENT):
                page = parse_html(contents[entry.filename].decode("utf-8-sig"))
                pages[entry.filename] = page
                segments += page.segments
            elif lower.endswith((".opf", ".ncx")):
                root = etree.fromstring(contents[entry.filename], parser)
                trees[entry.filename] = root
                for element in root.iter(f"{{{_DC}}}title", f"{{{_NCX}}}text"):
                    if element.text and element.text.strip() and not len(element):
                        labels.append(element)
    except UnicodeDecodeError as err:
        raise PackageError(f"{name}: a chapter is not UTF-8 (byte {err.start})") from None
    except MarkupError as err:
        raise PackageError(f"{name}: a chapter cannot be translated ({err})") from None
    except (etree.XMLSyntaxError, ValueError) as err:
        raise PackageError(f"{name}: a part cannot be read ({err})") from None
    if not any(n.lower().endswith(".opf") for n in trees):
        raise PackageError(f"{name} is not an e-book (no .opf package document)")
    pages_end = len(segments)
    segments += [Segment(element.text.strip(), escape=False) for element in labels]

    def rebuild(done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
        replaced: dict[str, bytes] = {}
        at = 0
        for entry_name, page in pages.items():
            mine = done[at : at + len(page.segments)]
            at += len(page.segments)
            rendered = [render(s, text, links) for s, (text, links) in zip(page.segments, mine, strict=True)]
            out = "".join(p if isinstance(p, str) else rendered[p] for p in page.parts)
            if target_lang:
                out = _HTML_TAG.sub(lambda m: relabel(m[0], target_lang), out, 1)
            replaced[entry_name] = out.encode("utf-8")
        for element, (text, _) in zip(labels, done[pages_end:], strict=True):
            element.text = text
        for entry_name, root in trees.items():
            if target_lang:
                for language in root.iter(f"{{{_DC}}}language"):
                    language.text = target_lang
            replaced[entry_name] = xml_bytes(root)
        return write_package(entries, contents, replaced)

    return Package(segments, rebuild)
