"""mt-translate (service/offline.py) against the HTTP server: the same settings must give the same translations, of
texts and of files, with no server running; outputs go where the docs say and nothing is written over."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from service.loader import load_engine
from service.offline import Failed, parser, run, settings_from
from testkit.fake_engine import FakeLoader, write_fake_bundle
from tests.service.servers import settings_for, thread_server

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["Open the file.", "", "Click Save to store your changes. Then close the window.", "one two three"]
PO = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\nmsgid "Open the file"\nmsgstr ""\n'


def _offline(argv: list[str], bundle: Path, stdin: str = "", loader: object = None) -> tuple[int, str, str]:
    """mt-translate in this process with ``bundle``'s fake engine (or ``loader``); (status, stdout, stderr)."""
    args = parser().parse_args(argv)
    settings = settings_from(args, {}).model_copy(update={"bundle": bundle})
    out, err = io.StringIO(), io.StringIO()
    status = asyncio.run(
        run(args, settings, stdin=io.StringIO(stdin), stdout=out, stderr=err, engine_loader=loader or FakeLoader())
    )
    return status, out.getvalue(), err.getvalue()


def test_texts_from_stdin_and_arguments_are_translated_as_the_server_translates_them(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    with thread_server(settings_for(bundle), FakeLoader()) as server:
        expected = [t["text"] for t in server.client.post("/translate", json={"text": TEXTS}).json()["translations"]]
    assert expected[0] and expected[1] == ""  # the fake engine answers; a blank text stays blank
    status, out, _ = _offline(["--to", "de"], bundle, stdin="\n".join(TEXTS) + "\n")
    assert status == 0 and out.splitlines() == expected
    status, out, _ = _offline(["--to", "de", "--texts", *TEXTS], bundle)
    assert status == 0 and out.splitlines() == expected


def test_files_are_translated_as_the_document_route_translates_them(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    inputs = tmp_path / "in"
    (inputs / "sub").mkdir(parents=True)
    files = {
        "notes.txt": b"one two\n\nthree four five\n",
        "page.html": b"<p>Click <b>Save</b> now.</p>",
        "sub/strings.po": PO.encode(),
    }
    for name, data in files.items():
        (inputs / name).write_bytes(data)
    expected = {}
    with thread_server(settings_for(bundle), FakeLoader()) as server:
        for name, data in files.items():
            r = server.client.post(
                "/translate/document", files={"file": (Path(name).name, data)}, data={"target_lang": "de"}
            )
            assert r.status_code == 200, r.text
            expected[name] = r.content
    status, _, err = _offline(["--to", "de", str(inputs / "notes.txt"), str(inputs / "page.html")], bundle)
    assert status == 0, err
    assert (inputs / "notes.de.txt").read_bytes() == expected["notes.txt"]
    assert (inputs / "page.de.html").read_bytes() == expected["page.html"]
    assert "notes.txt -> " in err and "[2/2]" in err  # a line a file when stderr is no terminal
    out = tmp_path / "out"
    status, _, err = _offline(["--to", "de", "--out-dir", str(out), str(inputs)], bundle)
    assert status == 0, err  # the tree kept; the translations written above beside their inputs are no inputs
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "notes.de.txt",
        "page.de.html",
        "sub/strings.de.po",
    ]
    assert (out / "sub" / "strings.de.po").read_bytes() == expected["sub/strings.po"]
    assert (out / "notes.de.txt").read_bytes() == expected["notes.txt"]
    status, _, err = _offline(["--to", "de", "--out-dir", str(inputs / "de"), str(inputs)], bundle)
    assert status == 0 and "[3/3]" in err  # an out-dir inside the input tree: its files are not read again
    status, _, err = _offline(["--to", "de", "--out-dir", str(inputs / "de"), "--force", str(inputs)], bundle)
    assert status == 0 and "[3/3]" in err


def test_nothing_is_written_over_and_a_bad_file_does_not_stop_the_others(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    (tmp_path / "a.txt").write_text("one two\n")
    (tmp_path / "a.de.txt").write_text("kept\n")
    (tmp_path / "b.txt").write_text("three four\n")
    (tmp_path / "c.pdf").write_bytes(b"%PDF-1.4")
    (tmp_path / "d.docx").write_bytes(b"not a zip")
    names = [str(tmp_path / n) for n in ("a.txt", "c.pdf", "d.docx", "b.txt")]
    status, _, err = _offline(["--to", "de", *names], bundle)
    assert status == 1
    assert (tmp_path / "a.de.txt").read_text() == "kept\n" and "a.de.txt exists (--force" in err
    assert "c.pdf: not translated" in err and "d.docx: not translated" in err
    assert (tmp_path / "b.de.txt").read_text() == "four three\n"
    assert not list(tmp_path.glob(".*partial")) and not (tmp_path / "d.de.docx").exists()
    status, _, err = _offline(["--to", "de", "--force", names[0]], bundle)
    assert status == 0 and (tmp_path / "a.de.txt").read_text() == "two one\n"


def test_the_pairs_served_are_listed(tmp_path: Path) -> None:
    bundles = [write_fake_bundle(tmp_path / p, name=f"fake-{p}", languages=p) for p in ("en-de", "de-en")]
    args = parser().parse_args(["--languages"])
    settings = settings_from(args, {}).model_copy(update={"bundles": bundles})
    out = io.StringIO()
    status = asyncio.run(run(args, settings, stdin=io.StringIO(), stdout=out, stderr=io.StringIO()))
    assert status == 0 and out.getvalue() == "en→de\tfake-en-de\nde→en\tfake-de-en\n"


def test_usage_errors_name_what_to_fix(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.txt").write_text("one two\n")
    (tmp_path / "b.txt").write_text("x y\n")
    with pytest.raises(Failed, match="--out names one file"):
        _offline(
            ["--to", "de", "--out", str(tmp_path / "x.txt"), str(tmp_path / "b.txt"), str(tmp_path / "dir")], bundle
        )
    with pytest.raises(Failed, match="need --out-dir"):
        _offline(["--to", "de", str(tmp_path / "dir")], bundle)
    with pytest.raises(Failed, match="no model translates .*→xx"):
        _offline(["--to", "xx", "--texts", "one"], bundle)
    (tmp_path / "terms.tsv").write_text("two\tzwei\n")
    status, out, _ = _offline(["--to", "de", "--glossary", str(tmp_path / "terms.tsv"), "--texts", "one two"], bundle)
    assert status == 0 and out.strip()


def test_the_command_on_a_real_bundle_answers_as_the_real_server(tiny_bundle: Path, tmp_path: Path) -> None:
    """``python -m service.offline`` as a user runs it (a process of its own, MT_* from the environment), against
    uvicorn serving the same bundle over HTTP."""
    texts = ["a b c d", "e f g", "h i j k l"]
    (tmp_path / "lines.txt").write_text("\n".join(texts) + "\n")
    with thread_server(settings_for(tiny_bundle), load_engine) as server:
        expected = [t["text"] for t in server.client.post("/translate", json={"text": texts}).json()["translations"]]
        document = server.client.post(
            "/translate/document", files={"file": ("lines.txt", (tmp_path / "lines.txt").read_bytes())}, data={}
        ).content
    env = {k: v for k, v in os.environ.items() if not k.startswith("MT_")} | {"MT_BUNDLE": str(tiny_bundle)}
    done = subprocess.run(
        [sys.executable, "-m", "service.offline"],
        input="\n".join(texts) + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected
    done = subprocess.run(
        [sys.executable, "-m", "service.offline", "--bundles", str(tiny_bundle), "-q", str(tmp_path / "lines.txt")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (tmp_path / "lines.de.txt").read_bytes() == document
    assert any(expected)  # the real model answered something
