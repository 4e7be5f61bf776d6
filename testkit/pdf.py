"""Small PDFs written operator by operator (pypdf's writer), for the tests and benches of core/pdf.py: what each page
draws is said exactly, so a test knows where every string was."""

from __future__ import annotations

import io
import textwrap

FONTS = {"/F1": "/Times-Roman", "/F2": "/Times-Bold", "/F3": "/Times-Italic", "/F4": "/Courier"}
"""The resource names a page's operators may use, and the standard font each names."""


def pdf_file(pages: list[str], forms: dict[str, str] | None = None, size: tuple[float, float] = (612, 792)) -> bytes:
    """A PDF of one page per string of content operators (Windows-1252, as the fonts are encoded), with FONTS as
    its fonts and ``forms`` (name -> operators) as form XObjects its pages may draw with ``/Name Do``."""
    from pypdf import PdfWriter
    from pypdf.generic import ArrayObject, DictionaryObject, FloatObject, NameObject, StreamObject

    def font(base: str) -> DictionaryObject:
        return DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject(base),
                NameObject("/Encoding"): NameObject("/WinAnsiEncoding"),
            }
        )

    writer = PdfWriter()
    fonts = DictionaryObject({NameObject(name): font(base) for name, base in FONTS.items()})
    xobjects = DictionaryObject()
    for name, ops in (forms or {}).items():
        form = StreamObject()
        form.set_data(ops.encode("cp1252", "replace"))
        form.update(
            {
                NameObject("/Type"): NameObject("/XObject"),
                NameObject("/Subtype"): NameObject("/Form"),
                NameObject("/BBox"): ArrayObject([FloatObject(v) for v in (0, 0, size[0], size[1])]),
                NameObject("/Resources"): DictionaryObject({NameObject("/Font"): fonts}),
            }
        )
        xobjects[NameObject(name)] = writer._add_object(form)
    for ops in pages:
        page = writer.add_blank_page(*size)
        resources = {NameObject("/Font"): fonts}
        if xobjects:
            resources[NameObject("/XObject")] = xobjects
        page[NameObject("/Resources")] = DictionaryObject(resources)
        stream = StreamObject()
        stream.set_data(ops.encode("cp1252", "replace"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def escape(text: str) -> str:
    """``text`` as a PDF string literal's inside."""
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def paragraphs_pdf(paragraphs: list[str], width: int = 95, lines_a_page: int = 50) -> bytes:
    """Paragraphs set in 10 pt Times, wrapped at ``width`` characters, a blank line between two, over pages."""
    pages: list[str] = []
    lines: list[str] = []
    for paragraph in paragraphs:
        lines += [*textwrap.wrap(paragraph, width), ""]
    for start in range(0, len(lines), lines_a_page):
        ops = ["BT /F1 10 Tf 13 TL 72 740 Td"]
        for line in lines[start : start + lines_a_page]:
            ops.append(f"({escape(line)}) Tj T*" if line else "T*")
        ops.append("ET")
        pages.append("\n".join(ops))
    return pdf_file(pages)
