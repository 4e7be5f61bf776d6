"""Documents: what reading and writing a file costs beside translating it (core/documents.py and its readers).

    python -m bench documents [--bundle models/en-de] [--sentences data/en-de-ding/test.libreoffice-help.tsv]
                              [--paragraphs 300] [--repeats 5] [--out docs/reports/documents/report]
    python -m bench documents --groups 1,2,4 [--rounds 3] [--out docs/reports/documents/groups]
    python -m bench documents --files FILE... [--repeats 5] [--out REPORT]

One file of each kind is made from the same ``--paragraphs`` held-out English sentences (the source column of
``--sentences``), every third with a bold or italic word where the kind has formatting, with the formats' own
writers where Python has one (python-docx, python-pptx, openpyxl, odfpy, EbookLib), with pypdf's for the PDF
(10 pt Times, wrapped, testkit/pdf.py) and by hand for the text kinds. Each is read (``read_document``) and written
again (``rebuild``) ``--repeats`` times with a stand-in translation (the source words reversed, linked word for
word), and the medians are reported. The sentences are
translated once by the engine as the server does it (sentence split, beam 4, word links; bench/markup.py's
``translate_segments``), which gives the time a paragraph takes to translate; the last column is the file work
as a share of translating that kind's segments at that rate.

With ``--files``: existing files read and written again with the stand-in translation, no engine; their sizes before
and after.

With ``--groups``: the ``.docx`` through ``POST /translate/document`` of one server per value of
``MT_DOCUMENT_GROUPS`` (groups of ``MT_MAX_TEXTS`` paragraphs decoded at once), all started side by side on
127.0.0.1 with the same bundle and the cache off, the servers taking turns, ``--rounds`` times each (which goes
first changes every round); the median seconds per document, and each setting's ratio to the first one's.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.loadtools import report_dir, report_path, write_report


def _docx(paragraphs: list[str]) -> bytes:
    import docx

    document = docx.Document()
    for i, text in enumerate(paragraphs):
        head, _, tail = text.partition(" ")
        paragraph = document.add_paragraph()
        paragraph.add_run(head).bold = i % 3 == 0
        paragraph.add_run(" " + tail)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _pptx(paragraphs: list[str]) -> bytes:
    import pptx

    deck = pptx.Presentation()
    for start in range(0, len(paragraphs), 10):
        frame = deck.slides.add_slide(deck.slide_layouts[1]).placeholders[1].text_frame
        for i, text in enumerate(paragraphs[start : start + 10]):
            run = (frame.paragraphs[0] if i == 0 else frame.add_paragraph()).add_run()
            run.text, run.font.italic = text, i % 3 == 0
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def _xlsx(paragraphs: list[str]) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    for i, text in enumerate(paragraphs, start=1):
        book.active.cell(row=i, column=1, value=text)
        book.active.cell(row=i, column=2, value=i)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _odt(paragraphs: list[str]) -> bytes:
    from odf import style, text
    from odf.opendocument import OpenDocumentText

    document = OpenDocumentText()
    bold = style.Style(name="B", family="text")
    bold.addElement(style.TextProperties(fontweight="bold"))
    document.automaticstyles.addElement(bold)
    for i, sentence in enumerate(paragraphs):
        head, _, tail = sentence.partition(" ")
        paragraph = text.P()
        paragraph.addElement(text.Span(stylename=bold, text=head) if i % 3 == 0 else text.Span(text=head))
        paragraph.addText(" " + tail)
        document.text.addElement(paragraph)
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def _epub(paragraphs: list[str]) -> bytes:
    import tempfile

    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("bench")
    book.set_title("Bench")
    book.set_language("en")
    chapters = []
    for n, start in enumerate(range(0, len(paragraphs), 50)):
        chapter = epub.EpubHtml(title=f"Chapter {n + 1}", file_name=f"c{n}.xhtml", lang="en")
        chapter.content = "".join(f"<p>{_escape(p)}</p>" for p in paragraphs[start : start + 50])
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = [epub.Link(c.file_name, c.title, c.file_name) for c in chapters]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *chapters]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "b.epub"
        epub.write_epub(str(path), book)
        return path.read_bytes()


def _escape(text: str) -> str:
    import html

    return html.escape(text, quote=False)


def _html(paragraphs: list[str]) -> bytes:
    body = "".join(
        f"<p><b>{_escape(p.partition(' ')[0])}</b> {_escape(p.partition(' ')[2])}</p>"
        if i % 3 == 0
        else f"<p>{_escape(p)}</p>"
        for i, p in enumerate(paragraphs)
    )
    return f"<html><body>{body}</body></html>".encode()


def _srt(paragraphs: list[str]) -> bytes:
    cues = [f"{i}\n00:00:{i % 60:02d},000 --> 00:00:{i % 60:02d},900\n{p}\n" for i, p in enumerate(paragraphs, 1)]
    return "\n".join(cues).encode()


def _po(paragraphs: list[str]) -> bytes:
    entries = "".join(f'msgid {json.dumps(p, ensure_ascii=False)}\nmsgstr ""\n\n' for p in paragraphs)
    return ('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n' + entries).encode()


def _json(paragraphs: list[str]) -> bytes:
    return json.dumps({f"key{i}": p for i, p in enumerate(paragraphs)}, ensure_ascii=False, indent=2).encode()


def _pdf(paragraphs: list[str]) -> bytes:
    from testkit.pdf import paragraphs_pdf

    return paragraphs_pdf(paragraphs)


KINDS: dict[str, Callable[[list[str]], bytes]] = {
    "docx": _docx,
    "pptx": _pptx,
    "xlsx": _xlsx,
    "odt": _odt,
    "epub": _epub,
    "html": _html,
    "srt": _srt,
    "po": _po,
    "json": _json,
    "pdf": _pdf,
}


def reverse(text: str) -> tuple[str, list[tuple[int, int]]]:
    words = text.split()
    return " ".join(reversed(words)), [(i, len(words) - 1 - i) for i in range(len(words))]


def time_file(kind: str, data: bytes, repeats: int) -> dict[str, float | int]:
    """Median seconds to read the file and to write it again (with the stand-in translation)."""
    from core.documents import read_document

    reads, writes, segments, written = [], [], 0, 0
    for _ in range(repeats):
        started = time.perf_counter()
        document = read_document(f"bench.{kind}", data)
        reads.append(time.perf_counter() - started)
        done = [reverse(s.text) for s in document.segments]
        started = time.perf_counter()
        written = len(document.rebuild(done, "de"))
        writes.append(time.perf_counter() - started)
        segments = len(document.segments)
    return {
        "segments": segments,
        "bytes": len(data),
        "written_bytes": written,
        "read_s": statistics.median(reads),
        "write_s": statistics.median(writes),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", default="models/en-de")
    parser.add_argument("--sentences", type=Path, default=Path("data/en-de-ding/test.libreoffice-help.tsv"))
    parser.add_argument("--paragraphs", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated: " + ", ".join(KINDS))
    parser.add_argument("--groups", default="", help="comma-separated MT_DOCUMENT_GROUPS values to compare")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", nargs="+", type=Path, help="existing files to read and write (no engine)")
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    if args.files:
        return time_files(args)
    lines = args.sentences.read_text(encoding="utf-8").splitlines()
    paragraphs = [line.split("\t")[0].strip() for line in lines if line.strip()][: args.paragraphs]
    if not paragraphs:
        parser.error(f"{args.sentences} has no sentences")
    if args.groups:
        return compare_groups(args, paragraphs)
    args.out = args.out or str(report_dir("documents") / "report")
    from bench.markup import translate_segments
    from inference.engine import Engine

    engine = Engine.load(args.bundle, provider="cpu", threads=args.threads)
    started = time.perf_counter()
    translate_segments(engine, paragraphs)
    per_paragraph = (time.perf_counter() - started) / len(paragraphs)
    rows = []
    for kind in args.kinds.split(","):
        result = time_file(kind, KINDS[kind](paragraphs), args.repeats)
        translating = per_paragraph * int(result["segments"])
        share = (float(result["read_s"]) + float(result["write_s"])) / translating if translating else 0.0
        rows.append({"kind": kind, **result, "translate_s": round(translating, 2), "file_share": share})
        print(
            f"{kind}: {result['segments']} segments, read {1000 * float(result['read_s']):.1f} ms, "
            f"write {1000 * float(result['write_s']):.1f} ms, {100 * share:.2f} % of translating",
            flush=True,
        )
    table = [
        "| kind | file size | segments | read | write | translating its segments | read + write / translating |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        table.append(
            f"| .{r['kind']} | {int(r['bytes']) / 1024:.0f} KiB | {r['segments']} | {1000 * float(r['read_s']):.1f} ms "
            f"| {1000 * float(r['write_s']):.1f} ms | {r['translate_s']} s | {100 * float(r['file_share']):.2f} % |"
        )
    manifest = engine.manifest
    markdown = (
        f"# Documents: the file's work beside the translation\n\n`python -m bench documents --bundle {args.bundle} "
        f"--sentences {args.sentences} --paragraphs {args.paragraphs}` ({manifest.get('name')} "
        f"{manifest.get('version')}, CPU, {args.threads} threads): {len(paragraphs)} held-out sentences, one "
        f"paragraph each; translating one took {1000 * per_paragraph:.0f} ms on average (beam 4, word links, one "
        f"text at a time). Read and write: medians of {args.repeats}.\n\n" + "\n".join(table) + "\n"
    )
    print("\n".join(table))
    write_report(report_path(args.out, ""), markdown, {"per_paragraph_s": per_paragraph, "rows": rows})
    return 0


def time_files(args: argparse.Namespace) -> int:
    """``--files``: each file read and written again with the stand-in translation, its size before and after."""
    table = [
        "| file | size | segments | read | write | written |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    rows = []
    for path in args.files:
        data = path.read_bytes()
        result = time_file(path.suffix.lstrip(".").lower(), data, args.repeats)
        rows.append({"file": str(path), **result})
        table.append(
            f"| {path.name} | {len(data) / 1024:.0f} KiB | {result['segments']} | {float(result['read_s']):.2f} s "
            f"| {float(result['write_s']):.2f} s | {int(result['written_bytes']) / 1024:.0f} KiB |"
        )
    print("\n".join(table))
    if args.out:
        names = " ".join(str(p) for p in args.files)
        markdown = (
            f"# Documents: reading and writing files\n\n`python -m bench documents --files {names} --repeats "
            f"{args.repeats}`: medians of {args.repeats}; written with the source words reversed as the "
            "translation.\n\n" + "\n".join(table) + "\n"
        )
        write_report(report_path(args.out, ""), markdown, {"rows": rows})
    return 0


def compare_groups(args: argparse.Namespace, paragraphs: list[str]) -> int:
    import contextlib
    import tempfile

    import httpx

    from bench.loadtools import machine, server_process

    values = [int(v) for v in args.groups.split(",")]
    data = _docx(paragraphs)
    seconds: dict[int, list[float]] = {v: [] for v in values}
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        servers = {
            v: stack.enter_context(
                server_process(
                    Path(args.bundle),
                    Path(folder) / f"server-{v}.log",
                    env={"MT_DOCUMENT_GROUPS": str(v), "MT_THREADS": str(args.threads)},
                )
            )
            for v in values
        }
        for round_ in range(args.rounds):
            order = values[round_ % len(values) :] + values[: round_ % len(values)]
            for v in order:
                started = time.perf_counter()
                r = httpx.post(
                    servers[v].url + "/translate/document", files={"file": ("bench.docx", data)}, timeout=600
                )
                r.raise_for_status()
                seconds[v].append(time.perf_counter() - started)
                print(f"round {round_ + 1}, MT_DOCUMENT_GROUPS={v}: {seconds[v][-1]:.2f} s", flush=True)
    base = statistics.median(seconds[values[0]])
    table = [
        f"| MT_DOCUMENT_GROUPS | seconds per document (median of {args.rounds}) | against {values[0]} |",
        "|---:|---:|---:|",
    ]
    table += [
        f"| {v} | {statistics.median(seconds[v]):.2f} | {base / statistics.median(seconds[v]):.2f}x |" for v in values
    ]
    markdown = (
        f"# Documents: groups decoded at once\n\n`python -m bench documents --groups {args.groups} --rounds "
        f"{args.rounds} --paragraphs {args.paragraphs}` ({args.bundle}, {machine()['cpus']} CPUs): a .docx of "
        f"{len(paragraphs)} held-out help paragraphs through POST /translate/document, one server per setting, "
        "side by side, taking turns.\n\n" + "\n".join(table) + "\n"
    )
    print("\n".join(table))
    out = args.out or str(report_dir("documents") / "groups")
    write_report(
        report_path(out, ""), markdown, {"machine": machine(), "seconds": {str(k): v for k, v in seconds.items()}}
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
