"""Office documents (core/office.py): Word, PowerPoint, Excel and OpenDocument files translated in place.

Inputs are written, and outputs read back, with the formats' own independent libraries (python-docx, python-pptx,
openpyxl, odfpy) where they can; what they cannot write (hyperlinks, fields, text boxes, footnotes) is written as
Word writes it. The "translation" reverses the words and links each target word to its source word, so that
formatting which follows the alignment lands somewhere else than where it started.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable

import pytest

docx = pytest.importorskip("docx")
pptx = pytest.importorskip("pptx")
openpyxl = pytest.importorskip("openpyxl")
odf_opendocument = pytest.importorskip("odf.opendocument")
from lxml import etree  # noqa: E402

from core import office  # noqa: E402
from core.documents import DocumentError, media_type, read_document  # noqa: E402

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
Translator = Callable[[str], tuple[str, list[tuple[int, int]]]]


def reverse(text: str) -> tuple[str, list[tuple[int, int]]]:
    words = text.split()
    return " ".join(reversed(words)).upper(), [(i, len(words) - 1 - i) for i in range(len(words))]


def identity(text: str) -> tuple[str, list[tuple[int, int]]]:
    words = text.split()
    return " ".join(words), [(i, i) for i in range(len(words))]


def translate(name: str, data: bytes, how: Translator = reverse) -> bytes:
    document = read_document(name, data)
    return document.rebuild([how(s.text) for s in document.segments])


def texts(name: str, data: bytes) -> list[str]:
    return [s.text for s in read_document(name, data).segments]


# --- Word ---

BODY = f"""<w:body xmlns:w="{W}" xmlns:r="{R}" xmlns:v="urn:schemas-microsoft-com:vml">
<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Quarterly report</w:t></w:r></w:p>
<w:p><w:bookmarkStart w:id="0" w:name="intro"/><w:r><w:t xml:space="preserve">Click the </w:t></w:r>
<w:proofErr w:type="spellStart"/><w:r><w:rPr><w:b/></w:rPr><w:t>Save</w:t></w:r><w:proofErr w:type="spellEnd"/>
<w:r><w:t xml:space="preserve"> button now</w:t></w:r><w:bookmarkEnd w:id="0"/>
<w:r><w:rPr><w:rStyle w:val="FootnoteReference"/></w:rPr><w:footnoteReference w:id="1"/></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">Visit </w:t></w:r><w:hyperlink r:id="rId99" w:history="1"><w:r><w:rPr>
<w:rStyle w:val="Hyperlink"/></w:rPr><w:t>our website</w:t></w:r></w:hyperlink><w:r><w:t xml:space="preserve"> today
</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">Page </w:t></w:r><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r>
<w:instrText xml:space="preserve"> PAGE </w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r>
<w:r><w:t>3</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r><w:r><w:t xml:space="preserve"> of the report</w:t>
</w:r></w:p>
<w:p><w:r><w:t>Name:</w:t><w:tab/><w:t>John Smith</w:t></w:r></w:p>
<w:p><w:r><w:t>2024 - 2025</w:t></w:r></w:p>
<w:p><w:ins w:id="5" w:author="A"><w:r><w:t xml:space="preserve">new words </w:t></w:r></w:ins>
<w:del w:id="6" w:author="A"><w:r><w:delText>old</w:delText></w:r></w:del><w:r><w:t>stay here</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">See the box </w:t></w:r><w:r><w:pict><v:shape><v:textbox><w:txbxContent><w:p><w:r>
<w:t>Inner box text</w:t></w:r></w:p></w:txbxContent></v:textbox></v:shape></w:pict></w:r></w:p>
<w:sectPr/></w:body>"""
FOOTNOTES = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:footnotes xmlns:w="{W}"><w:footnote w:id="1"><w:p><w:r><w:t>A short note</w:t></w:r></w:p></w:footnote>
</w:footnotes>"""


def word_file() -> bytes:
    """python-docx's own template (styles, settings, a header), its body replaced by BODY, and a footnotes part."""
    document = docx.Document()
    document.sections[0].header.paragraphs[0].text = "Company header"
    document.add_picture(io.BytesIO(_png()))
    saved = io.BytesIO()
    document.save(saved)
    source = zipfile.ZipFile(saved)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for entry in source.infolist():
            data = source.read(entry)
            if entry.filename == "word/document.xml":  # the section's properties (its header) kept
                section = re.search(rb"<w:sectPr.*</w:sectPr>", data, flags=re.S)
                assert section is not None
                new_body = BODY.encode().replace(b"<w:sectPr/>", section.group(0))
                data = re.sub(rb"<w:body>.*</w:body>", new_body, data, flags=re.S)
            archive.writestr(entry, data)
        archive.writestr("word/footnotes.xml", FOOTNOTES)
    return out.getvalue()


def _png() -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0\0")) + chunk(b"IEND", b"")


def body(data: bytes) -> etree._Element:
    return etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml"))


def paragraph_text(p: etree._Element) -> str:
    return "".join(t.text or "" for t in p.iter(f"{{{W}}}t"))


def test_word_segments_are_paragraphs_with_placeholders_for_what_is_not_text() -> None:
    assert texts("r.docx", word_file()) == [
        "Quarterly report",
        "Click the Save button now{1}",
        "Visit our website today",
        "Page {1} of the report",
        "Name: {1} John Smith",
        "new words stay here",
        "See the box {1}",
        "Inner box text",
        "Company header",
        "A short note",
    ]


def test_word_formatting_follows_the_alignment_and_nothing_is_lost() -> None:
    source = word_file()
    out = translate("r.docx", source)
    document = docx.Document(io.BytesIO(out))  # python-docx opens it
    paragraphs = document.paragraphs
    assert paragraphs[0].text == "REPORT QUARTERLY" and paragraphs[0].style.name == "Heading 1"
    # the bold run is on the word aligned to "Save", which moved
    runs = [(r.text, r.bold) for r in paragraphs[1].runs]
    assert ("SAVE", True) in runs and all(not bold for text, bold in runs if text != "SAVE")
    assert paragraphs[1].text.split() == ["NOW", "BUTTON", "SAVE", "THE", "CLICK"]
    ps = body(out).find(f"{{{W}}}body").findall(f"{{{W}}}p")
    # the footnote mark, the bookmark (widened to the paragraph), the hyperlink and its relationship id are kept
    assert len(ps[1].findall(f".//{{{W}}}footnoteReference")) == 1
    assert [etree.QName(c).localname for c in ps[1]][:1] == ["bookmarkStart"] and ps[1].find(
        f"{{{W}}}bookmarkEnd"
    ) is not None
    assert ps[1].find(f".//{{{W}}}proofErr") is None
    link = ps[2].find(f"{{{W}}}hyperlink")
    assert link is not None and link.get(f"{{{R}}}id") == "rId99" and paragraph_text(link) == "WEBSITE OUR"
    # the field is kept whole, its result included
    assert [f.get(f"{{{W}}}fldCharType") for f in ps[3].iter(f"{{{W}}}fldChar")] == ["begin", "separate", "end"]
    assert "PAGE" in "".join(ps[3].itertext()) and paragraph_text(ps[3]).split() == ["REPORT", "THE", "OF", "3", "PAGE"]
    # the tab stays a tab, between the words the translation put around it
    assert paragraph_text(ps[4]) == "SMITH JOHN" + "NAME:" and len(ps[4].findall(f".//{{{W}}}tab")) == 1
    assert etree.tostring(ps[5]) == etree.tostring(body(source).find(f"{{{W}}}body").findall(f"{{{W}}}p")[5])
    # a tracked insertion stays one, the deletion is kept
    assert ps[6].find(f"{{{W}}}ins") is not None and "".join(ps[6].find(f"{{{W}}}del").itertext()).strip() == "old"
    # the text box is kept in its paragraph and its own paragraph translated
    inner = ps[7].find(f".//{{{W}}}txbxContent")
    assert inner is not None and paragraph_text(inner) == "TEXT BOX INNER"
    assert document.sections[0].header.paragraphs[0].text == "HEADER COMPANY"
    archive, original = zipfile.ZipFile(io.BytesIO(out)), zipfile.ZipFile(io.BytesIO(source))
    assert b"NOTE SHORT A" in archive.read("word/footnotes.xml")
    assert archive.namelist() == original.namelist()  # every part, in order
    for name in archive.namelist():
        if not name.endswith(("document.xml", "header1.xml", "footnotes.xml")):
            assert archive.read(name) == original.read(name), name
    assert archive.read("word/document.xml").startswith(b"<?xml version='1.0' encoding='UTF-8' standalone='yes'?>")


def test_every_word_run_is_whole_even_around_a_linked_picture() -> None:
    """A hyperlink around a picture only (no text of its own) that the translation puts words into: those words
    are written in a run of the paragraph's formatting, never as bare text (Word refuses a <w:t> outside a run)."""
    linked = (
        f'<w:body xmlns:w="{W}" xmlns:r="{R}"><w:p><w:r><w:t>See</w:t></w:r><w:hyperlink r:id="rId7"><w:r>'
        '<w:drawing/></w:r></w:hyperlink><w:r><w:t xml:space="preserve"> the picture</w:t></w:r></w:p>'
        "<w:sectPr/></w:body>"
    )
    data = _replace(
        word_file(), "word/document.xml", lambda x: re.sub(rb"<w:body[ >].*</w:body>", linked.encode(), x, flags=re.S)
    )
    assert texts("p.docx", data)[0] == "See{1} the picture"
    out = body(translate("p.docx", data))
    assert all(etree.QName(t.getparent()).localname == "r" for t in out.iter(f"{{{W}}}t"))
    link = out.find(f".//{{{W}}}hyperlink")
    assert link is not None and link.find(f".//{{{W}}}drawing") is not None
    assert paragraph_text(out.find(f".//{{{W}}}p")).split() == ["PICTURE", "THE", "SEE"]


def runs_of(document: object) -> list[list[tuple[str, bool | None, bool | None]]]:
    """Each paragraph's text in stretches of one formatting (adjacent runs formatted alike merged)."""
    out = []
    for paragraph in document.paragraphs:  # type: ignore[attr-defined]
        merged: list[tuple[str, bool | None, bool | None]] = []
        for run in paragraph.runs:
            if merged and merged[-1][1:] == (run.bold, run.italic):
                merged[-1] = (merged[-1][0] + run.text, run.bold, run.italic)
            elif run.text:
                merged.append((run.text, run.bold, run.italic))
        out.append([(text.strip(), bold, italic) for text, bold, italic in merged if text.strip()])
    return out


def test_a_word_file_translated_word_for_word_keeps_its_formatting_stretch_for_stretch() -> None:
    document = docx.Document()
    p = document.add_paragraph("Plain start, ")
    p.add_run("bold words").bold = True
    p.add_run(" then ")
    p.add_run("italic and").italic = True
    run = p.add_run(" both")
    run.bold = run.italic = True
    p.add_run(" and the end.")
    document.add_paragraph().add_run("All bold here").bold = True
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Left cell", "Right cell"
    saved = io.BytesIO()
    document.save(saved)
    out = docx.Document(io.BytesIO(translate("w.docx", saved.getvalue(), identity)))
    assert runs_of(out) == runs_of(document)
    assert [c.text for c in out.tables[0].rows[0].cells] == ["Left cell", "Right cell"]


# --- PowerPoint, Excel ---


def test_slides_and_notes_keep_run_formatting_line_breaks_and_fields() -> None:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Quarterly results"
    frame = slide.placeholders[1].text_frame
    frame.text = "Sales grew "
    run = frame.paragraphs[0].add_run()
    run.text, run.font.italic = "very fast", True
    frame.paragraphs[0].add_run().text = " this year"
    frame.add_paragraph().text = "First line\vsecond line"  # \v: python-pptx's line break (<a:br/>)
    slide.notes_slide.notes_text_frame.text = "Say hello first"
    saved = io.BytesIO()
    deck.save(saved)
    assert texts("s.pptx", saved.getvalue()) == [
        "Quarterly results",
        "Sales grew very fast this year",
        "First line {1} second line",
        "Say hello first",
    ]
    out = pptx.Presentation(io.BytesIO(translate("s.pptx", saved.getvalue())))
    shapes = out.slides[0].shapes
    assert shapes.title.text == "RESULTS QUARTERLY"
    body = shapes[1].text_frame.paragraphs
    assert [(r.text.strip(), r.font.italic) for r in body[0].runs] == [
        ("YEAR THIS", None),
        ("FAST VERY", True),
        ("GREW SALES", None),
    ]
    assert body[1].text == "LINE SECOND\vLINE FIRST"
    assert out.slides[0].notes_slide.notes_text_frame.text == "FIRST HELLO SAY"
    xml = etree.fromstring(
        zipfile.ZipFile(io.BytesIO(translate("s.pptx", saved.getvalue()))).read("ppt/slides/slide1.xml")
    )
    for p in xml.iter("{http://schemas.openxmlformats.org/drawingml/2006/main}p"):
        names = [etree.QName(c).localname for c in p]
        assert "endParaRPr" not in names[:-1], names  # it stays last, as the schema wants


def test_a_charts_title_is_translated_and_its_data_is_not() -> None:
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    data = CategoryChartData()
    data.categories = ["North", "South"]
    data.add_series("Sales", (1.5, 2.5))
    chart = slide.shapes.add_chart(
        XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(1), Inches(4), Inches(3), data
    ).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Sales by region"
    saved = io.BytesIO()
    deck.save(saved)
    assert "Sales by region" in texts("c.pptx", saved.getvalue())
    out = pptx.Presentation(io.BytesIO(translate("c.pptx", saved.getvalue())))
    chart = next(shape for shape in out.slides[0].shapes if shape.has_chart).chart
    assert chart.chart_title.text_frame.text == "REGION BY SALES"
    assert list(chart.plots[0].categories) == ["North", "South"]  # the data's labels are the workbook's


def test_workbook_strings_are_translated_and_numbers_and_formulas_are_not() -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet["A1"], sheet["B1"], sheet["A2"], sheet["B2"], sheet["C2"] = "Total amount", 42, "Open file", "=SUM(B1)", "x1"
    saved = io.BytesIO()
    book.save(saved)
    out = openpyxl.load_workbook(io.BytesIO(translate("t.xlsx", saved.getvalue())))
    assert [[c.value for c in row] for row in out.active.iter_rows()] == [
        ["AMOUNT TOTAL", 42, None],
        ["FILE OPEN", "=SUM(B1)", "X1"],
    ]


def test_rich_text_in_a_cell_keeps_its_runs() -> None:
    book = openpyxl.Workbook()
    book.active["A1"] = "placeholder"
    saved = io.BytesIO()
    book.save(saved)
    rich = (
        '<is><r><t xml:space="preserve">Very </t></r><r><rPr><b/></rPr><t>important</t></r>'
        '<r><t xml:space="preserve"> value</t></r></is>'
    )
    data = _replace(saved.getvalue(), "xl/worksheets/sheet1.xml", lambda x: re.sub(rb"<is>.*</is>", rich.encode(), x))
    out = translate("t.xlsx", data)
    assert re.search(
        rb"<r><rPr><b/></rPr><t[^>]*>IMPORTANT</t></r>",
        zipfile.ZipFile(io.BytesIO(out)).read("xl/worksheets/sheet1.xml"),
    )
    assert openpyxl.load_workbook(io.BytesIO(out)).active["A1"].value == "VALUE IMPORTANT VERY"


def test_shared_strings_as_excel_writes_them() -> None:
    strings = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><sst xmlns="http://schemas.openxmlformats.org/'
        'spreadsheetml/2006/main" count="3" uniqueCount="3"><si><t>Monthly sales</t></si><si><t>Q1</t></si>'
        '<si><r><rPr><i/></rPr><t>Net</t></r><r><t xml:space="preserve"> profit</t></r></si></sst>'
    )
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("xl/sharedStrings.xml", strings)
    assert texts("b.xlsx", package.getvalue()) == ["Monthly sales", "Q1", "Net profit"]
    out = zipfile.ZipFile(io.BytesIO(translate("b.xlsx", package.getvalue()))).read("xl/sharedStrings.xml")
    assert b'<si><t xml:space="preserve">SALES MONTHLY</t></si>' in out
    assert re.search(rb"<r><t[^>]*>PROFIT </t></r><r><rPr><i/></rPr><t[^>]*>NET</t></r>", out), out


def _replace(package: bytes, part: str, change: Callable[[bytes], bytes]) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(package))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for entry in source.infolist():
            data = source.read(entry)
            archive.writestr(entry, change(data) if entry.filename == part else data)
    return out.getvalue()


# --- OpenDocument ---


def odf_file(kind: str) -> bytes:
    from odf import draw, style, text

    if kind == "odt":
        document = odf_opendocument.OpenDocumentText()
        holder = document.text
    else:
        document = odf_opendocument.OpenDocumentPresentation()
        layout = style.PageLayout(name="L")
        document.automaticstyles.addElement(layout)
        master = style.MasterPage(name="M", pagelayoutname=layout)
        document.masterstyles.addElement(master)
        page = draw.Page(masterpagename=master)
        document.presentation.addElement(page)
        frame = draw.Frame(width="10cm", height="4cm", x="1cm", y="1cm")
        page.addElement(frame)
        holder = draw.TextBox()
        frame.addElement(holder)
    bold = style.Style(name="B", family="text")
    bold.addElement(style.TextProperties(fontweight="bold"))
    document.automaticstyles.addElement(bold)
    p = text.P(text="Press the ")
    p.addElement(text.Span(stylename=bold, text="red button"))
    p.addText(" to stop it")
    holder.addElement(p)
    p = text.P(text="Key:")
    p.addElement(text.Tab())
    p.addText("value  here ")
    link = text.A(href="https://example.org/", text="more help")
    p.addElement(link)
    holder.addElement(p)
    p = text.P(text="A note follows")
    note = text.Note(id="n1", noteclass="footnote")
    note.addElement(text.NoteCitation(text="1"))
    body = text.NoteBody()
    body.addElement(text.P(text="The note text"))
    note.addElement(body)
    p.addElement(note)
    holder.addElement(p)
    holder.addElement(text.P(text="12.5 %"))
    saved = io.BytesIO()
    document.write(saved)
    return saved.getvalue()


@pytest.mark.parametrize("kind", ["odt", "odp"])
def test_opendocument_spans_links_tabs_spaces_and_notes(kind: str) -> None:
    from odf import teletype, text

    source = odf_file(kind)
    assert texts(f"d.{kind}", source) == [
        "Press the red button to stop it",
        "Key: {1} value here more help",
        "A note follows{1}",
        "The note text",
    ]
    out = translate(f"d.{kind}", source)
    document = odf_opendocument.load(io.BytesIO(out))  # odfpy opens it
    paragraphs = [teletype.extractText(p) for p in document.getElementsByType(text.P)]
    assert "IT STOP TO BUTTON RED THE PRESS" in paragraphs
    spans = [teletype.extractText(s) for s in document.getElementsByType(text.Span)]
    links = document.getElementsByType(text.A)
    assert spans == ["BUTTON RED"] and [teletype.extractText(a) for a in links] == ["HELP MORE"]
    assert links[0].getAttribute("href") == "https://example.org/"
    assert "HELP MORE HERE VALUE\tKEY:" in paragraphs
    assert "TEXT NOTE THE" in paragraphs  # the note's own paragraph, inside the translated one
    archive = zipfile.ZipFile(io.BytesIO(out))
    first = archive.infolist()[0]
    assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)  # as OpenDocument requires
    assert b"12.5 %" in archive.read("content.xml")


def test_an_opendocument_spreadsheet_translates_its_strings_not_its_values() -> None:
    from odf import table, teletype, text

    document = odf_opendocument.OpenDocumentSpreadsheet()
    sheet = table.Table(name="Sheet1")
    row = table.TableRow()
    cells = [
        table.TableCell(valuetype="string"),
        table.TableCell(valuetype="float", value="42"),
        table.TableCell(valuetype="date", datevalue="2026-05-01"),
        table.TableCell(),  # no type: text
    ]
    for cell, shown in zip(cells, ["Total amount", "42", "Friday, May 1", "Open items"], strict=True):
        cell.addElement(text.P(text=shown))
        row.addElement(cell)
    sheet.addElement(row)
    document.spreadsheet.addElement(sheet)
    saved = io.BytesIO()
    document.write(saved)
    assert texts("t.ods", saved.getvalue()) == ["Total amount", "Open items"]
    out = odf_opendocument.load(io.BytesIO(translate("t.ods", saved.getvalue())))
    shown = [teletype.extractText(c) for c in out.getElementsByType(table.TableCell)]
    assert shown == ["AMOUNT TOTAL", "42", "Friday, May 1", "ITEMS OPEN"]


def test_spaces_come_back_as_opendocument_writes_them() -> None:
    root = etree.fromstring(f'<text:p xmlns:text="{office._TEXT}">x</text:p>')
    office._odf_text(root, "a   b c  d")
    assert etree.tostring(root).decode().split(">", 1)[1] == ('xa <text:s text:c="2"/>b c <text:s/>d</text:p>')


# --- what is refused, and safety ---


def test_entities_are_not_expanded_and_bombs_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    hostile = (
        b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY e SYSTEM "file:///etc/hostname">]>'
        + f'<w:document xmlns:w="{W}"><w:body><w:p><w:r><w:t>Read &e; now</w:t></w:r></w:p></w:body>'.encode()
        + b"</w:document>"
    )
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("word/document.xml", hostile)
    out = translate("x.docx", package.getvalue())
    if open("/etc/hostname", "rb").read().strip():
        assert open("/etc/hostname", "rb").read().strip() not in zipfile.ZipFile(io.BytesIO(out)).read(
            "word/document.xml"
        )
    monkeypatch.setattr(office, "MAX_UNPACKED", 100)
    with pytest.raises(DocumentError, match="unpacks to more than"):
        read_document("x.docx", word_file())


def test_media_types() -> None:
    assert media_type("a.DOCX") == office.KINDS[".docx"]
    assert media_type("a.txt") == "text/plain; charset=utf-8"
    assert media_type("a.bin") == "application/octet-stream"
