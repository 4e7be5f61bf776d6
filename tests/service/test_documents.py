"""POST /translate/document: a file in, the same file translated out (.txt, .html, .md, .po)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import polib
import pytest

from core import office
from testkit.fake_engine import FakeLoader, write_fake_bundle
from tests.core.test_markup import inspect
from tests.service.servers import ThreadServer, settings_for, thread_server

CATALOG = r"""msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Language: de\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

#, c-format
msgid "Copied %d files to %s"
msgstr ""

msgid "_Open the file"
msgstr ""

#, python-format
msgid "Hello %(name)s, you have {count} new messages\n"
msgstr ""

msgid "Already done"
msgstr "Schon erledigt"

#, c-format
msgid "%d file was removed"
msgid_plural "%d files were removed"
msgstr[0] ""
msgstr[1] ""

msgid "Use %1 or ~Save as\tfile"
msgstr ""
"""


def _zip(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()


def send(server: ThreadServer, name: str, data: bytes, **fields: str) -> tuple[int, bytes, dict[str, str]]:
    r = server.client.post("/translate/document", files={"file": (name, data)}, data=fields)
    return r.status_code, r.content, dict(r.headers)


def test_a_catalog_comes_back_complete_fuzzy_and_msgfmt_clean(shared_server: ThreadServer, tmp_path: Path) -> None:
    status, data, headers = send(shared_server, "app.po", CATALOG.encode(), target_lang="de")
    assert status == 200, data
    assert "app.po" in headers["content-disposition"]
    catalog = polib.pofile(data.decode())
    entries = {e.msgid: e for e in catalog}
    assert all(e.translated() or "fuzzy" in e.flags for e in catalog)
    assert entries["Already done"].msgstr == "Schon erledigt" and "fuzzy" not in entries["Already done"].flags
    # the fake engine reverses words: placeholders survive, in the source's order where the format needs it
    assert entries["Copied %d files to %s"].msgstr == "%d to files %s Copied"
    assert entries["_Open the file"].msgstr == "_file the Open"
    hello = entries["Hello %(name)s, you have {count} new messages\n"].msgstr
    assert hello.endswith("\n") and "%(name)s" in hello and "{count}" in hello
    assert entries["%d file was removed"].msgstr_plural == {0: "removed was file %d", 1: "removed were files %d"}
    assert "%1" in entries["Use %1 or ~Save as\tfile"].msgstr and "~" in entries["Use %1 or ~Save as\tfile"].msgstr
    if shutil.which("msgfmt") is None:
        pytest.skip("msgfmt is not installed (Debian package gettext; .ci/run installs it)")
    path = tmp_path / "app.po"
    path.write_bytes(data)
    check = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_a_template_gets_the_models_language_and_xliff_its_target(shared_server: ThreadServer) -> None:
    template = CATALOG.replace('"Language: de\\n"\n', "")
    assert "Language" not in template
    status, data, _ = send(shared_server, "app.pot", template.encode())
    assert status == 200 and polib.pofile(data.decode()).metadata["Language"] == "de"
    xliff = (
        '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="en">'
        '<body><trans-unit id="a"><source>one two</source></trans-unit></body></file></xliff>'
    )
    status, data, headers = send(shared_server, "app.xlf", xliff.encode())
    assert status == 200 and headers["content-type"].startswith("application/xliff+xml")
    assert b'target-language="de"' in data and b'<target state="needs-review-translation">two one</target>' in data


def test_text_html_and_markdown_files_keep_their_layout(shared_server: ThreadServer) -> None:
    status, data, headers = send(shared_server, "notes.txt", b"one two\n\n  three four\n")
    assert (status, data) == (200, b"two one\n\n  four three\n")
    assert headers["content-type"].startswith("text/plain")
    page = b'<html><body><h1>Big title</h1><p>Click <a href="/x">the button</a> now.</p></body></html>'
    status, data, _ = send(shared_server, "page.html", page)
    assert status == 200 and inspect(data.decode()).start_tags == inspect(page.decode()).start_tags
    assert b'<a href="/x">button the</a>' in data
    status, data, _ = send(shared_server, "README.md", b"# Big title\n\nRun `make` and **then** go.\n")
    assert (status, data) == (200, b"# title Big\n\ngo. **then** and `make` Run\n")
    cue = b"1\r\n00:00:01,000 --> 00:00:02,500\r\n<i>Hello</i> there\r\nmy friend\r\n"
    status, data, headers = send(shared_server, "film.srt", cue)
    assert (status, data) == (200, b"1\r\n00:00:01,000 --> 00:00:02,500\r\nfriend my there <i>Hello</i>\r\n")
    assert headers["content-type"].startswith("application/x-subrip")


@pytest.mark.parametrize(
    ("name", "data", "status"),
    [
        ("book.mobi", b"BOOKMOBI", 415),
        ("book.pdf", b"%PDF-1.7", 422),
        ("slides.pptx", b"not a zip", 422),
        ("empty.docx", _zip({"other.xml": b"<a/>"}), 422),
        ("broken.docx", _zip({"word/document.xml": b"<w:document"}), 422),
        ("latin1.txt", "Grüße".encode("latin-1"), 422),
        ("latin1.po", 'msgid "Grüße"\nmsgstr ""\n'.encode("latin-1"), 422),
        ("deep.html", b"<b>" * 600 + b"x", 422),
    ],
)
def test_what_cannot_be_translated_is_refused_clearly(
    shared_server: ThreadServer, name: str, data: bytes, status: int
) -> None:
    got, body, _ = send(shared_server, name, data)
    assert got == status, body


def word_file(*extra: str) -> bytes:
    """A Word file with "Click the **Save** button now" and ``extra`` paragraphs (python-docx's own writer)."""
    docx = pytest.importorskip("docx")
    document = docx.Document()
    paragraph = document.add_paragraph("Click the ")
    paragraph.add_run("Save").bold = True
    paragraph.add_run(" button now")
    for text in extra:
        document.add_paragraph(text)
    saved = io.BytesIO()
    document.save(saved)
    return saved.getvalue()


def bold_words(data: bytes) -> tuple[str, list[str]]:
    """The first paragraph's text and its bold runs' texts, as python-docx reads them."""
    docx = pytest.importorskip("docx")
    paragraph = docx.Document(io.BytesIO(data)).paragraphs[0]
    return paragraph.text, [r.text for r in paragraph.runs if r.bold]


def test_an_office_file_comes_back_translated_as_its_own_type(shared_server: ThreadServer) -> None:
    status, data, headers = send(shared_server, "guide.docx", word_file(), target_lang="de")
    assert status == 200, data
    assert headers["content-type"] == office.KINDS[".docx"] and "guide.docx" in headers["content-disposition"]
    assert bold_words(data) == ("now button Save the Click", ["Save"])


def test_documents_may_be_larger_than_other_bodies_up_to_their_own_limit(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "b")
    word = word_file()
    settings = settings_for(bundle, max_body_bytes=len(word) // 2, max_document_bytes=len(word) * 2)
    with thread_server(settings, FakeLoader()) as s:
        assert send(s, "guide.docx", word)[0] == 200
        r = s.client.post("/translate", json={"text": "x" * len(word)})
        assert r.status_code == 413 and "MT_MAX_BODY_BYTES" in r.json()["message"]
        big = io.BytesIO(word)
        with zipfile.ZipFile(big, "a") as archive:  # a picture's worth of bytes that do not compress
            archive.writestr("word/media/noise.bin", os.urandom(2 * len(word)))
        for path in ("/translate/document", "/libretranslate/translate_file", "/deepl/v2/document"):
            r = s.client.post(path, files={"file": ("big.docx", big.getvalue())}, data={"target_lang": "de"})
            assert r.status_code == 413 and "MT_MAX_DOCUMENT_BYTES" in r.text, (path, r.text)


def test_a_document_larger_than_the_queue_is_translated_group_by_group(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "b")
    settings = settings_for(bundle, max_queue=10, max_texts=4, max_document_segments=30)
    with thread_server(settings, FakeLoader()) as s:
        status, body, _ = send(s, "long.txt", b"one two\n" * 30)
        assert (status, body) == (200, b"two one\n" * 30)
        status, body, _ = send(s, "longer.txt", b"word\n" * 31)
        assert status == 413 and b"MT_MAX_DOCUMENT_SEGMENTS" in body


@pytest.mark.parametrize("groups", [1, 3])
def test_a_documents_groups_decode_at_once_up_to_the_setting_and_come_back_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, groups: int
) -> None:
    import asyncio

    from service.routes import translate as route

    real = route.translate_texts
    running, most = 0, 0

    async def watched(*args: object, **kwargs: object) -> object:
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            await asyncio.sleep(0.05)  # long enough for every group allowed in to start
            return await real(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            running -= 1

    monkeypatch.setattr(route, "translate_texts", watched)
    bundle = write_fake_bundle(tmp_path / "b")
    with thread_server(settings_for(bundle, max_texts=2, document_groups=groups), FakeLoader()) as s:
        lines = [f"w{i} x{i}" for i in range(10)]
        status, body, _ = send(s, "long.txt", "\n".join(lines).encode())
    assert status == 200 and body.decode().splitlines() == [f"x{i} w{i}" for i in range(10)]
    assert most == groups


def test_a_paragraph_longer_than_max_chars_is_translated_in_a_document_not_in_a_request(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "b")
    with thread_server(settings_for(bundle, max_chars=40), FakeLoader()) as s:
        paragraph = " ".join(f"Word{i} next{i}." for i in range(10))  # 130 characters, 10 sentences
        status, body, _ = send(s, "long.txt", paragraph.encode() + b"\n")
        assert status == 200 and body.decode().split() == [w for i in range(10) for w in (f"next{i}.", f"Word{i}")]
        assert s.client.post("/translate", json={"text": paragraph}).status_code == 413


def test_a_document_group_waits_while_the_queue_is_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The queue full at the second group: that group is sent again after the Retry-After, and the groups
    translated before it are not lost."""
    from service.batcher import QueueFull
    from service.routes import translate as route

    real = route.translate_texts
    calls: list[int] = []

    async def full_once(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise QueueFull(10, 4, 10, retry_after=1)
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(route, "translate_texts", full_once)
    bundle = write_fake_bundle(tmp_path / "b")
    with thread_server(settings_for(bundle, max_texts=4), FakeLoader()) as s:
        status, body, _ = send(s, "long.txt", b"one two\n" * 10)
        assert (status, body) == (200, b"two one\n" * 10) and len(calls) == 4  # 3 groups, the second twice
    calls.clear()
    with thread_server(settings_for(bundle, max_texts=4, request_timeout_s=0.5), FakeLoader()) as s:
        status, body, headers = send(s, "long.txt", b"one two\n" * 10)
        assert status == 503 and "retry-after" in headers  # waiting longer than the timeout: the server's answer


def test_a_pdf_comes_back_translated_as_a_pdf(shared_server: ThreadServer) -> None:
    from pypdf import PdfReader

    from testkit.pdf import pdf_file

    page = "BT /F2 18 Tf 72 720 Td (Saving your work) Tj ET\nBT /F1 11 Tf 72 690 Td (Click Save now.) Tj ET"
    status, data, headers = send(shared_server, "guide.pdf", pdf_file([page]), target_lang="de")
    assert status == 200, data
    assert headers["content-type"] == "application/pdf" and "guide.pdf" in headers["content-disposition"]
    text = PdfReader(io.BytesIO(data)).pages[0].extract_text()
    assert "work your Saving" in text and "now. Save Click" in text and "Saving your work" not in text
    status, data, _ = send(shared_server, "broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n")
    assert status == 422, data
