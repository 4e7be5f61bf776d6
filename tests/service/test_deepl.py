"""/deepl/: DeepL's API shape, through DeepL's own Python client (``deepl``) and with the request shapes of DeepL's
API documentation (JSON, form-encoded with ``text`` repeated, multipart documents). The fake engine reverses each
sentence's words behind a ""/"en:" prefix and aligns target word t to source word n-1-t."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import deepl
import pytest
from deepl.api_data import MultilingualGlossaryDictionaryEntries

from service.app import create_app
from service.document_store import DocumentStore
from service.models import ConfigurationError
from service.routes import deepl as deepl_routes
from testkit.fake_engine import FakeLoader, write_fake_bundle
from tests.service.servers import ThreadServer, settings_for, thread_server, two_way_bundles

ENGLISH = "The file could not be saved because the disk is full."
GERMAN = "Die Datei konnte nicht gespeichert werden, weil der Datenträger voll ist."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    bundles = two_way_bundles(tmp_path_factory.mktemp("deepl"))
    with thread_server(settings_for(bundles[0], bundles=bundles), FakeLoader()) as running:
        yield running


@pytest.fixture(scope="module")
def translator(server: ThreadServer) -> deepl.Translator:
    return deepl.Translator("any-key", server_url=server.url + "/deepl/")


def test_the_deepl_client_translates_detects_and_lists_languages(translator: deepl.Translator) -> None:
    result = translator.translate_text("a b", source_lang="EN", target_lang="DE")
    assert (result.text, result.detected_source_lang, result.billed_characters) == ("b a", "EN", 3)
    results = translator.translate_text(["eins zwei", "drei"], target_lang="EN-US")  # no source: detected
    assert [r.text for r in results] == ["en:zwei eins", "en:drei"]
    assert {r.detected_source_lang for r in results} == {"DE"}
    assert translator.translate_text(ENGLISH, target_lang="de").detected_source_lang == "EN"
    assert [(lang.code, lang.name) for lang in translator.get_source_languages()] == [
        ("DE", "German"),
        ("EN", "English"),
    ]
    targets = translator.get_target_languages()
    assert [lang.code for lang in targets] == ["DE", "EN-GB", "EN-US"]
    assert not any(lang.supports_formality for lang in targets)
    usage = translator.get_usage()
    assert usage.character.count >= len("a beins zweidrei" + ENGLISH) and not usage.any_limit_reached


def test_html_keeps_its_markup(translator: deepl.Translator) -> None:
    result = translator.translate_text(
        "<p>Click <b>Save</b> now</p>", source_lang="EN", target_lang="DE", tag_handling="html"
    )
    assert result.text == "<p>now <b>Save</b> Click</p>"
    with pytest.raises(deepl.DeepLException, match="tag_handling"):
        translator.translate_text("<x>a</x>", source_lang="EN", target_lang="DE", tag_handling="json")
    kept = translator.translate_text(
        '<p>Say <keep>Foo Bar</keep> twice <span class="x">here</span></p>',
        source_lang="EN",
        target_lang="DE",
        tag_handling="html",
        ignore_tags="keep,code",
        splitting_tags=["span"],
    )
    assert kept.text == '<p>twice <keep>Foo Bar</keep> Say <span class="x">here</span></p>'


def test_xml_keeps_its_outline_its_inline_tags_and_what_is_ignored(translator: deepl.Translator) -> None:
    source = (
        '<?xml version="1.0"?>\n<Doc>\n <Title>Big news</Title>\n <Para>Click <B>Save</B> now &amp; then</Para>\n'
        ' <Para><Keep>v1 x</Keep> notes here<Br/> see <Ref id="7"></Ref></Para>\n</Doc>'
    )
    result = translator.translate_text(
        source, source_lang="EN", target_lang="DE", tag_handling="xml", ignore_tags="Keep"
    )
    assert result.text == (
        '<?xml version="1.0"?>\n<Doc>\n <Title>news Big</Title>\n <Para>then &amp; now <B>Save</B> Click</Para>\n'
        ' <Para><Ref id="7"></Ref> see here<Br/> notes <Keep>v1 x</Keep></Para>\n</Doc>'
    )
    # without the outline only the splitting tags split: the title's words and the paragraph's are one sentence,
    # which the fake engine turns around
    flat = "<Doc><Title>a b</Title> <Para>c d</Para></Doc>"
    assert (
        translator.translate_text(
            flat, source_lang="EN", target_lang="DE", tag_handling="xml", outline_detection=False
        ).text
        == "<Doc><Para>d c</Para> <Title>b a</Title></Doc>"
    )
    assert (
        translator.translate_text(
            flat, source_lang="EN", target_lang="DE", tag_handling="xml", outline_detection=False, splitting_tags="Para"
        ).text
        == "<Doc><Title>b a</Title> <Para>d c</Para></Doc>"
    )


def test_weblates_placeholders_come_back_in_place(server: ThreadServer) -> None:
    """Weblate's DeepL machinery sends JSON with its placeholders as ``<x id="N"></x>`` and ``ignore_tags: ["x"]``,
    the text XML-escaped."""
    body = {
        "text": ['Hello <x id="6"></x>, you have <x id="25"></x> files &lt;new&gt;', "Plain text"],
        "source_lang": "EN",
        "target_lang": "DE",
        "formality": "default",
        "tag_handling": "xml",
        "ignore_tags": ["x"],
    }
    r = server.client.post("/deepl/v2/translate", json=body, headers={"Authorization": "DeepL-Auth-Key k"})
    assert r.status_code == 200, r.text
    assert [t["text"] for t in r.json()["translations"]] == [
        '&lt;new&gt; files <x id="25"></x> have you <x id="6"></x>, Hello',
        "text Plain",
    ]


def test_split_sentences_0_translates_a_text_as_one_sentence(translator: deepl.Translator) -> None:
    assert translator.translate_text("a b. c d.", source_lang="EN", target_lang="DE").text == "b. a d. c"
    whole = translator.translate_text("a b. c d.", source_lang="EN", target_lang="DE", split_sentences="0")
    assert whole.text == "d. c b. a"


def test_glossaries_are_created_used_listed_and_deleted(translator: deepl.Translator) -> None:
    assert [(p.source_lang, p.target_lang) for p in translator.get_glossary_languages()] == [
        ("de", "en"),
        ("en", "de"),
    ]
    glossary = translator.create_glossary("IT terms", "EN", "DE", {"password": "Kennwort", "hard disk": "Festplatte"})
    assert (glossary.name, glossary.source_lang, glossary.target_lang, glossary.entry_count) == (
        "IT terms",
        "EN",
        "DE",
        2,
    )
    assert glossary.ready
    result = translator.translate_text("alpha password beta", source_lang="EN", target_lang="DE", glossary=glossary)
    assert result.text == "beta Kennwort alpha"
    assert translator.translate_text("alpha password beta", source_lang="EN", target_lang="DE").text == (
        "beta password alpha"
    )
    assert translator.get_glossary_entries(glossary) == {"password": "Kennwort", "hard disk": "Festplatte"}
    assert glossary.glossary_id in [g.glossary_id for g in translator.list_glossaries()]
    assert translator.get_glossary(glossary.glossary_id).entry_count == 2
    with pytest.raises(ValueError, match="source_lang and target_lang must match"):  # the client checks this one
        translator.translate_text("a", source_lang="DE", target_lang="EN-US", glossary=glossary)
    translator.delete_glossary(glossary)
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator.get_glossary(glossary.glossary_id)
    with pytest.raises(deepl.DeepLException, match="Glossary not found"):
        translator.translate_text("a", source_lang="EN", target_lang="DE", glossary=glossary.glossary_id)


def test_multilingual_glossaries_through_deepls_newer_client(server: ThreadServer) -> None:
    client = deepl.DeepLClient("any-key", server_url=server.url + "/deepl/")
    created = client.create_multilingual_glossary(
        "both ways",
        [
            MultilingualGlossaryDictionaryEntries("EN", "DE", {"password": "Kennwort"}),
            MultilingualGlossaryDictionaryEntries("DE", "EN", {"Datei": "file"}),
        ],
    )
    pairs = {(d.source_lang, d.target_lang, d.entry_count) for d in created.dictionaries}
    assert pairs == {("EN", "DE", 1), ("DE", "EN", 1)}
    forward = client.translate_text("alpha password beta", source_lang="EN", target_lang="DE", glossary=created)
    backward = client.translate_text("eins Datei zwei", source_lang="DE", target_lang="EN-GB", glossary=created)
    assert forward.text == "beta Kennwort alpha"
    # the de->en fake's "en:" prefix is not its pieces' words: the term is found, but cannot be placed
    assert backward.text == "en:zwei Datei eins"
    metrics = server.client.get("/metrics").text
    assert 'mt_glossary_terms_total{model="fake-de-en",outcome="unplaced"} 1.0' in metrics
    updated = client.update_multilingual_glossary_dictionary(
        created, MultilingualGlossaryDictionaryEntries("EN", "DE", {"hard disk": "Festplatte"})
    )
    assert {(d.source_lang, d.entry_count) for d in updated.dictionaries} == {("EN", 2), ("DE", 1)}
    entries = client.get_multilingual_glossary_entries(created, "EN", "DE").dictionaries[0].entries
    assert deepl.util.convert_tsv_to_dict(entries) == {"password": "Kennwort", "hard disk": "Festplatte"}
    replaced = client.replace_multilingual_glossary_dictionary(
        created, MultilingualGlossaryDictionaryEntries("EN", "DE", {"file": "Akte"})
    )
    assert (replaced.source_lang, replaced.entry_count) == ("EN", 1)
    assert client.update_multilingual_glossary_name(created, "renamed").name == "renamed"
    assert [g.name for g in client.list_multilingual_glossaries()] == ["renamed"]
    with pytest.raises(deepl.DeepLException, match="2 dictionaries: use /v3/"):  # v2 has room for one pair
        client.get_glossary(created.glossary_id)
    assert created.glossary_id not in [g.glossary_id for g in client.list_glossaries()]
    client.delete_multilingual_glossary_dictionary(created, source_lang="DE", target_lang="EN")
    assert client.get_glossary(created.glossary_id).entry_count == 1  # one pair left: v2 sees it now
    with pytest.raises(deepl.DeepLException, match="no dictionary for de->en"):
        client.translate_text("Datei", source_lang="DE", target_lang="EN-US", glossary=created.glossary_id)
    with pytest.raises(deepl.DeepLException, match="last dictionary"):
        client.delete_multilingual_glossary_dictionary(created, source_lang="EN", target_lang="DE")
    client.delete_multilingual_glossary(created)
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_multilingual_glossary(created.glossary_id)


def test_a_glossary_from_csv_and_one_for_a_pair_not_served(server: ThreadServer, translator: deepl.Translator) -> None:
    glossary = translator.create_glossary_from_csv("csv", "DE", "EN", '"Kennwort",password\nDatei,"file, the"\n')
    assert translator.get_glossary_entries(glossary) == {"Kennwort": "password", "Datei": "file, the"}
    with pytest.raises(deepl.DeepLException, match="no model translates en->fr"):
        translator.create_glossary("fr", "EN", "FR", {"a": "b"})
    r = server.client.post(
        "/deepl/v2/glossaries",
        json={"name": "bad", "source_lang": "en", "target_lang": "de", "entries": "one\ttwo\nthree"},
    )
    assert r.status_code == 400 and "entry 2 is not two terms" in r.json()["message"]
    translator.delete_glossary(glossary)


def test_a_document_is_uploaded_translated_and_downloaded(translator: deepl.Translator, tmp_path: Path) -> None:
    source, out = tmp_path / "notes.txt", tmp_path / "notes.de.txt"
    source.write_text("a b\nc d e\n\nalpha password\n", encoding="utf-8")
    glossary = translator.create_glossary("doc", "EN", "DE", {"password": "Kennwort"})
    status = translator.translate_document_from_filepath(
        source, out, source_lang="EN", target_lang="DE", glossary=glossary
    )
    assert status.done and status.billed_characters == len("a bc d ealpha password")
    assert out.read_text(encoding="utf-8") == "b a\ne d c\n\nKennwort alpha\n"
    page = io.BytesIO()
    translator.translate_document(b"<p>Click <b>Save</b> now</p>", page, target_lang="DE", filename="p.html")
    assert page.getvalue() == b"<p>now <b>Save</b> Click</p>"
    from tests.service.test_documents import bold_words, word_file

    word = io.BytesIO()
    translator.translate_document(word_file(), word, target_lang="DE", filename="guide.docx")
    assert bold_words(word.getvalue()) == ("now button Save the Click", ["Save"])
    with pytest.raises(deepl.DeepLException, match="Invalid file type"):
        translator.translate_document_upload(b"x", target_lang="DE", filename="slides.key")
    with pytest.raises(deepl.DeepLException, match="no model translates en"):
        translator.translate_document_upload(b"a", source_lang="EN", target_lang="FR", filename="a.txt")
    translator.delete_glossary(glossary)


def test_a_client_given_the_bare_server_url_is_told_where_the_api_is(server: ThreadServer) -> None:
    with pytest.raises(deepl.DeepLException, match="server_url ends in /deepl/"):
        deepl.Translator("k", server_url=server.url + "/deepl").translate_text("a", target_lang="DE")


def test_document_status_needs_its_key(server: ThreadServer) -> None:
    r = server.client.post(
        "/deepl/v2/document", data={"target_lang": "DE"}, files={"file": ("a.txt", b"a b", "text/plain")}
    )
    handle = r.json()
    assert set(handle) == {"document_id", "document_key"}
    r = server.client.post(f"/deepl/v2/document/{handle['document_id']}", json={"document_key": "wrong"})
    assert r.status_code == 403 and "document_key" in r.json()["message"]
    r = server.client.post("/deepl/v2/document/NOPE", json={"document_key": handle["document_key"]})
    assert r.status_code == 404


def test_form_encoded_bodies_with_text_repeated(server: ThreadServer) -> None:
    r = server.client.post(
        "/deepl/v2/translate",
        data={"text": ["a b", "c"], "source_lang": "EN", "target_lang": "DE"},
        headers={"Authorization": "DeepL-Auth-Key whatever"},
    )
    assert r.json() == {
        "translations": [
            {"detected_source_language": "EN", "text": "b a"},
            {"detected_source_language": "EN", "text": "c"},
        ]
    }
    r = server.client.get("/deepl/v2/languages", params={"type": "target"})
    assert [lang["language"] for lang in r.json()] == ["DE", "EN-GB", "EN-US"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"target_lang": "DE"}, "'text' not specified"),
        ({"text": ["a"]}, "'target_lang' not specified"),
        ({"text": "a", "target_lang": "FR"}, "no model translates"),
        ({"text": ["a"], "target_lang": "DE", "source_lang": "e n"}, "not a language code"),
        ({"text": [1], "target_lang": "DE"}, "list of strings"),
        ({"text": ["a"], "target_lang": "DE", "formality": "more"}, "no formality control"),
        ({"text": ["a"], "target_lang": "DE", "ignore_tags": ["x"]}, "'ignore_tags' needs tag_handling"),
        ({"text": ["a"], "target_lang": "DE", "tag_handling": "xml", "ignore_tags": ["a b"]}, "not an element name"),
        ({"text": ["a"], "target_lang": "DE", "tag_handling": "xml", "splitting_tags": [1]}, "element names"),
        ({"text": ["<a><b>x</a>"], "target_lang": "DE", "tag_handling": "yaml"}, "use html or xml"),
        ({"text": ["a"], "target_lang": "DE", "split_sentences": "2"}, "split_sentences"),
        ({"text": ["a"], "target_lang": "DE", "glossary_id": "x"}, "requires the 'source_lang'"),
        ({"text": ["a"], "target_lang": "DE", "source_lang": "EN", "glossary_id": "x"}, "Glossary not found"),
    ],
)
def test_errors_have_deepls_shape(server: ThreadServer, body: dict[str, object], message: str) -> None:
    r = server.client.post("/deepl/v2/translate", json=body)
    assert r.status_code in (400, 404) and set(r.json()) == {"message"}, r.text
    assert message in r.json()["message"]


def test_the_key_is_asked_for_as_deepl_does(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    with thread_server(settings_for(bundle, api_key="k3y"), FakeLoader()) as s:
        with pytest.raises(deepl.AuthorizationException):
            deepl.Translator("wrong", server_url=s.url + "/deepl/").translate_text("a b", target_lang="DE")
        with pytest.raises(deepl.AuthorizationException):
            deepl.Translator("wrong", server_url=s.url + "/deepl/").get_usage()
        assert (
            deepl.Translator("k3y", server_url=s.url + "/deepl/").translate_text("a b", target_lang="DE").text == "b a"
        )
        r = s.client.post("/deepl/v2/translate", json={"text": ["a"], "target_lang": "DE"})
        assert r.status_code == 403 and "DeepL-Auth-Key" in r.json()["message"]


def test_glossaries_outlive_a_restart_and_replicas_share_a_glossary_dir(tmp_path: Path) -> None:
    bundles, kept = two_way_bundles(tmp_path), tmp_path / "glossaries"
    settings = settings_for(bundles[0], bundles=bundles, glossary_dir=kept)
    with thread_server(settings, FakeLoader()) as s:
        created = deepl.Translator("k", server_url=s.url + "/deepl/").create_glossary(
            "t", "EN", "DE", {"password": "Kennwort"}
        )
    with thread_server(settings, FakeLoader()) as a, thread_server(settings, FakeLoader()) as b:
        one, other = (deepl.Translator("k", server_url=s.url + "/deepl/") for s in (a, b))
        assert one.get_glossary(created.glossary_id).name == "t"  # written before the restart
        result = one.translate_text("my password here", source_lang="EN", target_lang="DE", glossary=created)
        assert result.text == "here Kennwort my"
        second = other.create_glossary("u", "DE", "EN", {"Datei": "file"})  # one replica sees the other's
        assert sorted(g.name for g in one.list_glossaries()) == ["t", "u"]
        assert one.get_glossary_entries(second) == {"Datei": "file"}
        one.delete_glossary(created)
        other.delete_glossary(second)
        with pytest.raises(deepl.GlossaryNotFoundException):
            other.get_glossary(created.glossary_id)
        assert one.list_glossaries() == [] and other.list_glossaries() == []
        assert a.client.get("/deepl/v2/glossaries/..%2F..%2Fetc").status_code == 404  # an id names no other file
    assert not list(kept.iterdir())
    (kept / "broken.json").write_text(
        '{"glossary_id": "broken", "name": "n", "creation_time": "2026-01-01T00:00:00.000Z", '
        '"dictionaries": [{"source_lang": "en", "target_lang": "de", "entries": {"": "leer"}}]}'
    )
    with pytest.raises(ConfigurationError, match="MT_GLOSSARY_DIR .*broken.json: .*need a word"):
        create_app(settings, engine_loader=FakeLoader())


def test_replicas_sharing_a_document_dir_answer_for_each_others_documents(tmp_path: Path) -> None:
    """MT_DOCUMENT_DIR: a document uploaded to one replica has its status and result on another, and after a
    restart; LibreTranslate's downloads too."""
    bundles, kept = two_way_bundles(tmp_path), tmp_path / "documents"
    settings = settings_for(bundles[0], bundles=bundles, document_dir=kept)
    with thread_server(settings, FakeLoader()) as a, thread_server(settings, FakeLoader()) as b:
        r = a.client.post("/deepl/v2/document", files={"file": ("notes.txt", b"one two\n")}, data={"target_lang": "DE"})
        assert r.status_code == 200, r.text
        handle = r.json()
        status = a.client.post(f"/deepl/v2/document/{handle['document_id']}", data=handle).json()
        assert status["status"] == "done"
        assert b.client.post(f"/deepl/v2/document/{handle['document_id']}", data=handle).json() == status
        result = b.client.post(f"/deepl/v2/document/{handle['document_id']}/result", data=handle)
        assert result.status_code == 200 and result.content == b"two one\n"
        wrong = {**handle, "document_key": "0" * 64}
        assert b.client.post(f"/deepl/v2/document/{handle['document_id']}", data=wrong).status_code == 403
        r = a.client.post(
            "/libretranslate/translate_file",
            data={"source": "en", "target": "de"},
            files={"file": ("my notes.txt", b"three four\n")},
        )
        url = r.json()["translatedFileUrl"]
        download = b.client.get(url.replace(a.url, ""))
        assert download.status_code == 200 and download.text == "four three\n"
    with thread_server(settings, FakeLoader()) as restarted:
        result = restarted.client.post(f"/deepl/v2/document/{handle['document_id']}/result", data=handle)
        assert result.status_code == 200 and result.content == b"two one\n"
        assert restarted.client.get(url.replace(a.url, "")).text == "four three\n"
    assert all(len(path.name) == 64 for path in (kept / "deepl").iterdir())  # no client's name on disk


def _document_state(kept: Path, document_id: str, status: str, written: float | None) -> dict[str, str]:
    """A state another replica wrote in MT_DOCUMENT_DIR; the handle to ask for it with."""
    key = "AB" * 32
    state = {"key": key, "name": "notes.txt", "status": status, "characters": 0, "error": None}
    if written is not None:
        state["written"] = written
    DocumentStore(kept / "deepl", 8).put(f"{document_id}.json", json.dumps(state).encode())
    return {"document_id": document_id, "document_key": key}


def test_a_document_whose_replica_stopped_is_an_error_not_translating_forever(tmp_path: Path) -> None:
    """A replica killed while it translated a document leaves its state "translating" in MT_DOCUMENT_DIR: once it
    has not been written for STALE_S, other replicas (and the replica restarted) answer that it failed."""
    bundles, kept = two_way_bundles(tmp_path), tmp_path / "documents"
    now = time.time()
    dead = _document_state(kept, "DEAD", "translating", now - deepl_routes.STALE_S - 5)
    queued = _document_state(kept, "QUEUED", "queued", now - deepl_routes.STALE_S - 5)
    alive = _document_state(kept, "ALIVE", "translating", now)
    older = _document_state(kept, "OLDER", "translating", None)  # written by a server before the heartbeat
    with thread_server(settings_for(bundles[0], bundles=bundles, document_dir=kept), FakeLoader()) as s:
        for handle in (dead, queued):
            status = s.client.post(f"/deepl/v2/document/{handle['document_id']}", data=handle).json()
            assert status["status"] == "error" and "upload the document again" in status["error_message"], status
            result = s.client.post(f"/deepl/v2/document/{handle['document_id']}/result", data=handle)
            assert result.status_code == 400 and "stopped before it was done" in result.json()["message"]
        for handle in (alive, older):
            status = s.client.post(f"/deepl/v2/document/{handle['document_id']}", data=handle).json()
            assert status == {"document_id": handle["document_id"], "status": "translating"}


def test_a_replica_translating_a_document_keeps_its_state_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one replica translates a long document it writes the state again every HEARTBEAT_S, so that another
    replica says "translating" for longer than STALE_S, and then "done"."""
    monkeypatch.setattr(deepl_routes, "HEARTBEAT_S", 0.05)
    monkeypatch.setattr(deepl_routes, "STALE_S", 1.5)
    release = threading.Event()
    real = deepl_routes.native.translate_file

    async def slow(*args: Any, **kwargs: Any) -> tuple[bytes, str]:
        await asyncio.to_thread(release.wait, 30)
        return await real(*args, **kwargs)

    monkeypatch.setattr(deepl_routes.native, "translate_file", slow)
    bundles, kept = two_way_bundles(tmp_path), tmp_path / "documents"
    settings = settings_for(bundles[0], bundles=bundles, document_dir=kept)
    with thread_server(settings, FakeLoader()) as a, thread_server(settings, FakeLoader()) as b:
        r = a.client.post("/deepl/v2/document", files={"file": ("notes.txt", b"one two\n")}, data={"target_lang": "DE"})
        handle = r.json()
        path = kept / "deepl" / hashlib.sha256(f"{handle['document_id']}.json".encode()).hexdigest()
        first = json.loads(path.read_text())["written"]
        deadline = time.monotonic() + 2 * deepl_routes.STALE_S
        while time.monotonic() < deadline:  # past STALE_S since the upload, the state still fresh
            status = b.client.post(f"/deepl/v2/document/{handle['document_id']}", data=handle).json()
            assert status["status"] in ("queued", "translating"), status  # queued: read before the task began
            time.sleep(0.05)
        assert status["status"] == "translating"
        assert json.loads(path.read_text())["written"] > first + deepl_routes.STALE_S
        release.set()
        deadline = time.monotonic() + 10
        while status["status"] != "done" and time.monotonic() < deadline:
            time.sleep(0.05)
            status = b.client.post(f"/deepl/v2/document/{handle['document_id']}", data=handle).json()
        assert status["status"] == "done", status
        result = b.client.post(f"/deepl/v2/document/{handle['document_id']}/result", data=handle)
        assert result.content == b"two one\n"
        time.sleep(4 * deepl_routes.HEARTBEAT_S)  # no heartbeat after the end puts "translating" back
        assert json.loads(path.read_text())["status"] == "done"
