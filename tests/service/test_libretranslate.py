"""/libretranslate/: LibreTranslate's API shape, through LibreTranslate's own Python client (libretranslatepy)
and with the request shapes of LibreTranslate's API documentation (JSON, form-encoded, multipart)."""

from __future__ import annotations

import urllib.error
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from libretranslatepy import LibreTranslateAPI

from testkit.fake_engine import FakeLoader, write_fake_bundle
from tests.service.servers import ThreadServer, settings_for, thread_server

GERMAN = "Die Datei konnte nicht gespeichert werden, weil der Datenträger voll ist."
ENGLISH = "The file could not be saved because the disk is full."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    root = tmp_path_factory.mktemp("lt")
    en_de = write_fake_bundle(root / "en-de", name="fake-en-de", languages="en-de", prefix="de:")
    de_en = write_fake_bundle(root / "de-en", name="fake-de-en", languages="de-en", prefix="en:")
    with thread_server(settings_for(en_de, bundles=[en_de, de_en]), FakeLoader()) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: ThreadServer) -> LibreTranslateAPI:
    return LibreTranslateAPI(server.url + "/libretranslate/")


def test_the_libretranslate_client_translates_detects_and_lists_languages(client: LibreTranslateAPI) -> None:
    assert client.translate("a b", "en", "de") == "de:b a"
    assert client.translate("eins zwei", "de", "en") == "en:zwei eins"
    assert client.translate(GERMAN, "auto", "en").startswith("en:")
    detected = client.detect(GERMAN)
    assert detected[0]["language"] == "de" and 50 < detected[0]["confidence"] <= 100
    assert all(d["language"] in ("de", "en") for d in detected)
    assert client.languages() == [
        {"code": "en", "name": "English", "targets": ["de"]},
        {"code": "de", "name": "German", "targets": ["en"]},
    ]


def test_json_bodies_with_lists_auto_and_alternatives(server: ThreadServer) -> None:
    post = server.client.post
    r = post("/libretranslate/translate", json={"q": "a b", "source": "en", "target": "de"})
    assert r.json() == {"translatedText": "de:b a"}
    r = post("/libretranslate/translate", json={"q": ["a b", "c"], "source": "en", "target": "de"})
    assert r.json() == {"translatedText": ["de:b a", "de:c"]}
    r = post("/libretranslate/translate", json={"q": ENGLISH, "source": "auto", "target": "de"})
    body = r.json()
    assert body["detectedLanguage"]["language"] == "en" and 50 < body["detectedLanguage"]["confidence"] <= 100
    r = post("/libretranslate/translate", json={"q": "a b", "source": "en", "target": "de", "alternatives": 2})
    assert r.json() == {"translatedText": "de:b a", "alternatives": ["de:b a alt1", "de:b a alt2"]}
    r = post("/libretranslate/translate", json={"q": ["a", "b"], "source": "auto", "target": "de", "alternatives": 1})
    body = r.json()
    assert body["alternatives"] == [["de:a alt1"], ["de:b alt1"]] and len(body["detectedLanguage"]) == 2


def test_form_encoded_bodies_as_libretranslate_accepts_them(server: ThreadServer) -> None:
    r = server.client.post("/libretranslate/translate", data={"q": "a b", "source": "en", "target": "de"})
    assert r.json() == {"translatedText": "de:b a"}
    r = server.client.post("/libretranslate/detect", data={"q": ENGLISH})
    assert r.json()[0]["language"] == "en"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"source": "en", "target": "de"}, "missing q parameter"),
        ({"q": "a", "target": "de"}, "missing source parameter"),
        ({"q": "a", "source": "en"}, "missing target parameter"),
        ({"q": "a", "source": "en", "target": "fr"}, "no model translates en\u2192fr"),
        ({"q": "a", "source": "en", "target": "de", "format": "xml"}, "xml format is not supported"),
        ({"q": "a", "source": "en", "target": "de", "alternatives": "x"}, "alternatives parameter is not a number"),
        ({"q": "a", "source": "en", "target": "de", "alternatives": 99}, "alternatives parameter must be <= 15"),
        ({"q": 5, "source": "en", "target": "de"}, "q must be a string or a list of strings"),
    ],
)
def test_errors_have_libretranslates_shape(server: ThreadServer, body: dict[str, object], message: str) -> None:
    r = server.client.post("/libretranslate/translate", json=body)
    assert r.status_code == 400
    assert set(r.json()) == {"error"} and message in r.json()["error"]


def test_broken_json_is_a_400(server: ThreadServer) -> None:
    r = server.client.post("/libretranslate/translate", content=b"{nope", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json() == {"error": "Invalid JSON format"}


def test_a_text_file_is_translated_and_downloaded(server: ThreadServer) -> None:
    text = "a b\nc d e\n\nf g\n"
    r = server.client.post(
        "/libretranslate/translate_file",
        data={"source": "en", "target": "de"},
        files={"file": ("notes.txt", text.encode(), "text/plain")},
    )
    assert r.status_code == 200, r.text
    url = r.json()["translatedFileUrl"]
    assert url.startswith(server.url + "/libretranslate/download_file/") and url.endswith(".notes.txt")
    download = httpx.get(url)
    assert download.status_code == 200
    assert download.text == "de:b a\nde:e d c\n\nde:g f\n"
    assert "notes.txt" in download.headers["content-disposition"]
    r = server.client.post(
        "/libretranslate/translate_file",
        data={"source": "en", "target": "de"},
        files={"file": ("slides.key", b"PK", "application/octet-stream")},
    )
    assert r.status_code == 400 and "file format not supported" in r.json()["error"]
    assert server.client.get("/libretranslate/download_file/nothing.txt").status_code == 404
    r = server.client.post(
        "/libretranslate/translate_file",
        data={"source": "en", "target": "de"},
        files={"file": ("page.html", b"<p>Click <b>Save</b> now</p>", "text/html")},
    )
    page = httpx.get(r.json()["translatedFileUrl"])
    assert page.text == "<p>de:now <b>Save</b> Click</p>" and page.headers["content-type"].startswith("text/html")


def test_an_office_file_is_translated_and_downloaded_as_its_type(server: ThreadServer) -> None:
    from core import office
    from tests.service.test_documents import bold_words, word_file

    r = server.client.post(
        "/libretranslate/translate_file",
        data={"source": "en", "target": "de"},
        files={"file": ("guide.docx", word_file(), "application/octet-stream")},
    )
    assert r.status_code == 200, r.text
    download = httpx.get(r.json()["translatedFileUrl"])
    assert download.headers["content-type"] == office.KINDS[".docx"]
    assert bold_words(download.content) == ("de:now button Save the Click", ["Save"])
    settings = server.client.get("/libretranslate/frontend/settings").json()
    assert {".docx", ".odt", ".pptx"} <= set(settings["supportedFilesFormat"])


def test_the_api_key_is_asked_for_as_libretranslate_does(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    with thread_server(settings_for(bundle, api_key="k3y"), FakeLoader()) as s:
        anonymous = LibreTranslateAPI(s.url + "/libretranslate/")
        with pytest.raises(urllib.error.HTTPError) as refused:
            anonymous.translate("a b", "en", "de")
        assert refused.value.code == 403
        assert LibreTranslateAPI(s.url + "/libretranslate/", api_key="k3y").translate("a b", "en", "de") == "b a"
        r = s.client.post("/libretranslate/translate", json={"q": "a", "source": "en", "target": "de", "api_key": "no"})
        assert r.status_code == 403 and r.json() == {"error": "Invalid API key"}
        for key in (None, 5):  # not the documented string: refused as a bad request, key set or not
            r = s.client.post("/libretranslate/detect", json={"q": "a", "api_key": key})
            assert r.status_code == 400 and "api_key must be a string" in r.json()["error"]


def test_an_api_key_of_another_type_is_refused_without_a_server_key(server: ThreadServer) -> None:
    r = server.client.post("/libretranslate/detect", json={"q": "a b", "api_key": None})
    assert r.status_code == 400 and "api_key must be a string" in r.json()["error"]
    assert server.client.post("/libretranslate/detect", json={"q": "a b", "api_key": ""}).status_code == 200


def test_html_keeps_its_markup_as_libretranslate_promises(server: ThreadServer) -> None:
    body = {"q": "<p>Click <b>Save</b> now</p>", "source": "en", "target": "de", "format": "html", "alternatives": 2}
    r = server.client.post("/libretranslate/translate", json=body)
    assert r.json() == {"translatedText": "<p>de:now <b>Save</b> Click</p>", "alternatives": []}


def test_frontend_settings_say_what_a_client_needs_and_suggestions_are_refused(server: ThreadServer) -> None:
    settings = server.client.get("/libretranslate/frontend/settings").json()
    assert settings["charLimit"] == server.service.settings.max_chars
    assert (settings["keyRequired"], settings["apiKeys"], settings["suggestions"]) == (False, False, False)
    assert ".po" in settings["supportedFilesFormat"] and settings["filesTranslation"] is True
    assert settings["language"] == {
        "source": {"code": "en", "name": "English"},
        "target": {"code": "de", "name": "German"},
    }
    r = server.client.post("/libretranslate/suggest", data={"q": "a", "s": "b", "source": "en", "target": "de"})
    assert r.status_code == 403 and "Suggestions are disabled" in r.json()["error"]


def test_frontend_settings_say_a_key_is_required(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    with thread_server(settings_for(bundle, api_key="k3y-k3y-k3y"), FakeLoader()) as s:
        settings = s.client.get("/libretranslate/frontend/settings").json()
        assert settings["keyRequired"] is True and settings["apiKeys"] is True
