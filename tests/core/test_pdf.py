"""core/pdf.py: PDFs whose every string's place is known (testkit/pdf.py), read into paragraphs, written again with
stand-in translations, and read back with pypdf: the translations are where the text was, the text is gone, and
everything else on the page is as it was."""

from __future__ import annotations

import io
import random

import pytest
from pypdf import PdfReader
from pypdf.generic import ContentStream

from core.documents import DocumentError, read_document
from core.pdf import SMALLEST, read_pdf, text_width
from testkit.pdf import pdf_file

PAGE = """0.9 g 50 600 200 50 re f 0 g
BT /F2 24 Tf 214.656 740 Td (Saving your work) Tj ET
BT /F2 14 Tf 72 700 Td (Before you start) Tj ET
BT /F1 11 Tf 13 TL 72 680 Td (Click Save to store your changes. The file is written to the) Tj T*
(disk at once, and a copy is kept in the back-) Tj T* (up folder.) Tj ET
BT /F1 11 Tf 72 630 Td (Name) Tj ET
BT /F1 11 Tf 300 630 Td (Size of the file) Tj ET
BT /F1 11 Tf 72 600 Td (\\225 Open the file.) Tj ET
BT /F1 11 Tf 72 587 Td (\\225 Close the window.) Tj ET
BT /F1 11 Tf 0 1 -1 0 560 300 Tm (Draft copy) Tj ET
/Logo Do
BT /F1 9 Tf 300 40 Td (12) Tj ET
"""
FORM = "BT /F3 10 Tf 72 760 Td (Company handbook) Tj ET"
SECOND = "BT /F1 11 Tf 72 700 Td (The second page has one line.) Tj ET"


def _upper(texts: list[str]) -> list[tuple[str, list[tuple[int, int, float]]]]:
    return [(text.upper(), []) for text in texts]


def _sample() -> bytes:
    return pdf_file([PAGE, SECOND], forms={"/Logo": FORM})


def test_strings_are_read_into_paragraphs_in_drawing_order() -> None:
    document = read_pdf(_sample())
    assert [s.text for s in document.segments] == [
        "Saving your work",
        "Before you start",
        # three lines, one paragraph; "back-" and "up" joined again
        "Click Save to store your changes. The file is written to the disk at once, and a copy is kept in the backup "
        "folder.",
        "Name",  # two cells of one baseline, apart
        "Size of the file",
        "\u2022 Open the file.",  # each list item its own
        "\u2022 Close the window.",
        "Company handbook",  # drawn by a form
        "The second page has one line.",
    ]  # the page number has no letter and the turned "Draft copy" is drawn again as it was: neither is translated


def test_the_translations_replace_the_text_and_everything_else_stays() -> None:
    original = _sample()
    document = read_document("guide.pdf", original)
    written = document.rebuild(_upper([s.text for s in document.segments]), "de")
    before, after = PdfReader(io.BytesIO(original)), PdfReader(io.BytesIO(written))
    assert len(after.pages) == 2 and after.pages[0].mediabox == before.pages[0].mediabox
    assert after.trailer["/Root"]["/Lang"] == "de"
    text = after.pages[0].extract_text()
    for expected in ("SAVING YOUR WORK", "BEFORE YOU START", "NAME", "SIZE OF THE FILE", "COMPANY HANDBOOK", "12"):
        assert expected in text
    assert "Click" not in text and "Saving" not in text and "handbook" not in text  # the source is gone
    assert "Draft copy" in text  # turned text drawn again, untranslated
    assert "THE SECOND PAGE HAS ONE LINE." in after.pages[1].extract_text()
    contents = after.pages[0].get_contents().get_data()
    assert b"50 600 200 50 re" in contents and b"/Logo Do" in contents  # the drawing and the form are kept
    again = read_pdf(written)
    by_text = {" ".join(b.text.split()): b for b in again.blocks}
    assert by_text["SAVING YOUR WORK"].first.y == pytest.approx(740)
    assert by_text["SIZE OF THE FILE"].first.x == pytest.approx(300)  # the cell stays in its column
    turned = by_text["Draft copy"].first
    assert turned.direction == pytest.approx((0, 1)) and (turned.x, turned.y) == pytest.approx((560, 300))
    paragraph = next(b for t, b in by_text.items() if t.startswith("CLICK SAVE"))
    assert paragraph.first.x == pytest.approx(72) and paragraph.first.y == pytest.approx(680)
    assert paragraph.lines[-1].y > 630 + 11  # it stops above the table's row


def test_a_centred_title_stays_centred_and_a_long_translation_is_made_smaller_to_fit() -> None:
    document = read_pdf(_sample())
    title = document.blocks[0]
    assert title.centre is not None  # drawn centred on the page: 214.656 + its width / 2 is the middle of 612
    longer = ["Das Speichern Ihrer Arbeit"] + [s.text for s in document.segments[1:]]
    longer[2] = " ".join([longer[2]] * 3)  # a paragraph three times as long as the room below it allows
    written = document.rebuild([(t, []) for t in longer], "de")
    again = read_pdf(written)
    title_again = again.blocks[0]
    width = text_width(title_again.text, title_again.size, True)
    assert title_again.first.x + width / 2 == pytest.approx(title.centre, abs=0.5)
    paragraph = next(b for b in again.blocks if b.text.startswith("Click Save"))
    assert SMALLEST * 11 - 0.01 <= paragraph.size < 11


def test_a_pdf_without_text_comes_back_as_it_was_and_a_locked_or_broken_one_is_refused() -> None:
    empty = pdf_file(["0 0 1 rg 10 10 100 100 re f"])
    document = read_document("scan.pdf", empty)
    assert document.segments == [] and document.rebuild([], "de") == empty
    with pytest.raises(DocumentError, match="not a PDF"):
        read_document("x.pdf", b"%PDF-1.4 nothing else")
    from pypdf import PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_sample())))
    writer.encrypt("secret", algorithm="RC4-128")
    locked = io.BytesIO()
    writer.write(locked)
    with pytest.raises(DocumentError, match="encrypted with a password"):
        read_document("locked.pdf", locked.getvalue())


def test_characters_the_standard_fonts_lack_come_out_as_question_marks_not_errors() -> None:
    document = read_pdf(pdf_file(["BT /F1 11 Tf 72 700 Td (Open the file.) Tj ET"]))
    written = document.rebuild([("Öffnen Sie die Datei → jetzt ✓ «bitte»", [])], "de")
    text = PdfReader(io.BytesIO(written)).pages[0].extract_text()
    assert "Öffnen Sie die Datei ? jetzt ? «bitte»" in text


def test_each_paragraph_keeps_the_fill_colour_its_text_had() -> None:
    page = (
        "q 0 0 1 rg BT /F1 11 Tf 72 700 Td (A blue link line) Tj ET Q\n"
        "BT /F1 11 Tf 72 687 Td (then black text below it) Tj ET\n"
        "1 0 0 rg BT /F2 11 Tf 72 640 Td (Red bold) Tj 0 g ( and more) Tj ET\n"
        "0.1 0.2 0.3 0.4 k BT /F1 9 Tf 300 40 Td (12) Tj ET"
    )
    document = read_pdf(pdf_file([page]))
    assert [(b.text, b.lines[0].colour) for b in document.blocks] == [
        ("A blue link line", (b"rg", (0.0, 0.0, 1.0))),  # q/Q: the colour is the saved state's
        ("then black text below it", (b"g", (0.0,))),  # another colour, another paragraph
        ("Red bold and more", (b"rg", (1.0, 0.0, 0.0))),  # pypdf hands both strings over after "0 g": the first's
        ("12", (b"k", (0.1, 0.2, 0.3, 0.4))),
    ]
    written = document.rebuild([(s.text.upper(), []) for s in document.segments], "de")
    reader = PdfReader(io.BytesIO(written))
    operations = ContentStream(reader.pages[0].get_contents(), reader).operations
    last_restore = max(i for i, (_, op) in enumerate(operations) if op == b"Q")  # after it: what was drawn anew
    drawn = [
        (op, tuple(float(v) for v in args)) if op != b"Tj" else (op, str(args[0]))
        for args, op in operations[last_restore:]
        if op in (b"g", b"rg", b"k", b"Tj")
    ]
    assert drawn == [
        (b"rg", (0.0, 0.0, 1.0)),
        (b"Tj", "A BLUE LINK LINE"),
        (b"g", (0.0,)),
        (b"Tj", "THEN BLACK TEXT BELOW IT"),
        (b"rg", (1.0, 0.0, 0.0)),
        (b"Tj", "RED BOLD AND MORE"),
        (b"k", (0.1, 0.2, 0.3, 0.4)),
        (b"Tj", "12"),
    ]


def test_a_paragraph_over_a_page_break_is_translated_whole_and_shared_out() -> None:
    first = (
        "BT /F1 11 Tf 13 TL 72 100 Td (Click Save to store your changes. The file is written) Tj T* (to the) Tj ET\n"
        "BT /F1 9 Tf 300 40 Td (1) Tj ET"
    )
    second = (
        "BT /F3 9 Tf 72 760 Td (Chapter one) Tj ET\n"  # the running header is drawn first, in another size
        "BT /F1 11 Tf 13 TL 72 700 Td (disk at once.) Tj T* (Close the window when you are done.) Tj ET\n"
        "BT /F1 11 Tf 72 660 Td (Open the file again.) Tj ET"
    )
    document = read_pdf(pdf_file([first, second]))
    assert [s.text for s in document.segments] == [
        "Click Save to store your changes. The file is written to the disk at once. Close the window when you are "
        "done.",  # the second half ends the sentence, and the next line is still its paragraph's
        "Chapter one",
        "Open the file again.",
    ]
    words = document.segments[0].text.upper().split()
    written = document.rebuild([(" ".join(words), []), ("KAPITEL EINS", []), ("OEFFNEN", [])], "de")
    pages = [page.extract_text() for page in PdfReader(io.BytesIO(written)).pages]
    on_first = pages[0].split()
    assert on_first[: len(on_first) - 1] == words[: len(on_first) - 1] and on_first[-1] == "1"
    halves = [len(document.blocks[i].text) for i in document.groups[0]]
    assert halves == [60, 49]
    assert len(on_first) - 1 == round(len(words) * 60 / (60 + 49))  # each half its share of the words, by length
    assert " ".join(pages[1].split()).endswith("DONE. OEFFNEN") and "KAPITEL EINS" in pages[1]
    with_end = read_pdf(pdf_file(["BT /F1 11 Tf 72 100 Td (The file is saved.) Tj ET", second]))
    assert len(with_end.segments) == 4  # a page that ends a sentence: the next page's lines are their own


def test_a_translation_in_a_script_the_standard_fonts_lack_is_refused_not_drawn_as_question_marks() -> None:
    document = read_document("a.pdf", pdf_file(["BT /F1 11 Tf 72 700 Td (Open the file now.) Tj ET"]))
    with pytest.raises(DocumentError, match="not in Windows-1252"):
        document.rebuild([("Откройте файл сейчас.", [])], "ru")
    assert document.rebuild([("Öffnen Sie die Datei jetzt → sofort.", [])], "de")  # one arrow: drawn as "?"


def test_a_line_set_against_the_right_edge_stays_there_growing_to_the_left() -> None:
    alone = read_pdf(pdf_file(["BT /F1 10 Tf 72 760 Td (Chapter one) Tj ET"])).blocks[0].first
    assert alone.width is not None
    x = 540 - alone.width  # ends at the right text edge of a page with 72-point margins
    page = (
        f"BT /F1 10 Tf 72 760 Td (A guide) Tj ET\nBT /F1 10 Tf {x:.3f} 760 Td (Chapter one) Tj ET\n"
        "BT /F1 11 Tf 72 700 Td (Some text of the body.) Tj ET"
    )
    document = read_pdf(pdf_file([page]))
    header = next(b for b in document.blocks if b.text == "Chapter one")
    assert header.flush_right == pytest.approx(540, abs=0.01) and header.centre is None
    texts = {"A guide": "EIN LEITFADEN", "Chapter one": "KAPITEL EINS UND ZWEI", "Some text of the body.": "TEXT"}
    written = document.rebuild([(texts[s.text], []) for s in document.segments], "de")
    again = next(b for b in read_pdf(written).blocks if b.text == "KAPITEL EINS UND ZWEI").first
    assert again.x < x and again.x + text_width(again.text.strip(), again.size) == pytest.approx(540, abs=0.5)


def test_a_damaged_pdf_with_forms_colours_and_turned_text_is_translated_or_refused_never_a_crash() -> None:
    from tests.core.test_documents_fuzz import MUTATIONS, damaged, reverse

    original = _sample()
    rng = random.Random("pdf-forms-62")
    outcomes = {"translated": 0, "refused": 0}
    for _ in range(MUTATIONS):
        try:
            document = read_document("x.pdf", damaged(original, rng))
            document.rebuild([reverse(s.text) for s in document.segments], "de")
            outcomes["translated"] += 1
        except DocumentError:
            outcomes["refused"] += 1
    assert outcomes["translated"] and outcomes["refused"]  # (with this seed: 23 and 37) and nothing else raised
