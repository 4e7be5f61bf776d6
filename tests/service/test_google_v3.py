"""/v3/projects/...: Google Cloud Translation's Advanced API (v3), through Google's own Python client over REST
(``translate_v3.TranslationServiceClient(transport="rest")``, pointed at the server by ``api_endpoint``). The fake
engine reverses each sentence's words behind a ""/"en:" prefix and aligns target word t to source word n-1-t."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

translate_v3 = pytest.importorskip("google.cloud.translate_v3")
from google.api_core import exceptions  # noqa: E402
from google.auth import api_key  # noqa: E402
from google.auth.credentials import AnonymousCredentials  # noqa: E402

from testkit.fake_engine import FakeLoader, write_fake_bundle  # noqa: E402
from tests.service.servers import ThreadServer, settings_for, thread_server, two_way_server  # noqa: E402

ENGLISH = "The file could not be saved."
GERMAN = "Die Datei konnte nicht gespeichert werden."
PARENT = "projects/my-project/locations/global"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    with two_way_server(tmp_path_factory.mktemp("google-v3")) as running:
        yield running


def _client(url: str, credentials: Any = None) -> Any:
    return translate_v3.TranslationServiceClient(
        credentials=credentials or AnonymousCredentials(), transport="rest", client_options={"api_endpoint": url}
    )


@pytest.fixture(scope="module")
def client(server: ThreadServer) -> Any:
    return _client(server.url)


def _reversed(sentence: str) -> str:
    return " ".join(reversed(sentence.split()))


def test_googles_v3_client_translates_detects_and_lists_languages(client: Any) -> None:
    done = client.translate_text(
        request={
            "parent": PARENT,
            "contents": [ENGLISH, GERMAN],
            "target_language_code": "de",
            "mime_type": "text/plain",
        }
    )
    assert [(t.translated_text, t.detected_language_code) for t in done.translations] == [
        (_reversed(ENGLISH), "en"),
        (GERMAN, "de"),  # already German: as it is
    ]
    # Google's default mime type is HTML: markup back around its words; a model named by its path
    html = client.translate_text(
        request={
            "parent": "projects/p",  # no location: Google's global parent
            "contents": ["Klicken Sie <b>hier</b>"],
            "target_language_code": "en",
            "source_language_code": "de",
            "model": "projects/p/locations/global/models/fake-de-en",
        }
    )
    assert html.translations[0].translated_text == "<b>en:hier</b> Sie Klicken"
    assert html.translations[0].model == "projects/p/locations/global/models/fake-de-en"
    found = client.detect_language(request={"parent": PARENT, "content": GERMAN})
    assert [lang.language_code for lang in found.languages] == ["de"] and 0 < found.languages[0].confidence <= 1
    languages = client.get_supported_languages(request={"parent": PARENT, "display_language_code": "en"})
    assert [
        (lang.language_code, lang.display_name, lang.support_source, lang.support_target)
        for lang in languages.languages
    ] == [
        ("de", "German", True, True),
        ("en", "English", True, True),
    ]


def test_glossaries_made_elsewhere_are_listed_used_and_deleted(server: ThreadServer, client: Any) -> None:
    made = {
        "name": "it-terms",
        "dictionaries": [
            {"source_lang": "en", "target_lang": "de", "entries": "password\tKennwort", "entries_format": "tsv"}
        ],
    }
    assert server.client.post("/deepl/v3/glossaries", json=made).status_code == 201
    name = f"{PARENT}/glossaries/it-terms"
    done = client.translate_text(
        request={
            "parent": PARENT,
            "contents": ["Enter the password"],
            "target_language_code": "de",
            "source_language_code": "en",
            "mime_type": "text/plain",
            "glossary_config": {"glossary": name},
        }
    )
    assert done.translations[0].translated_text == "password the Enter"  # without the glossary, as Google answers
    assert done.glossary_translations[0].translated_text == "Kennwort the Enter"
    assert done.glossary_translations[0].glossary_config.glossary == name
    listed = list(client.list_glossaries(request={"parent": PARENT}))
    assert [(g.name, g.entry_count, g.language_pair.source_language_code) for g in listed] == [(name, 1, "en")]
    assert client.get_glossary(name=name).language_pair.target_language_code == "de"
    with pytest.raises(exceptions.BadRequest, match="Cloud Storage"):
        client.create_glossary(parent=PARENT, glossary={"name": name + "2"})
    assert client.delete_glossary(name=name).result().name == name
    with pytest.raises(exceptions.NotFound):
        client.get_glossary(name=name)
    with pytest.raises(exceptions.NotFound):
        client.translate_text(
            request={
                "parent": PARENT,
                "contents": ["a"],
                "target_language_code": "de",
                "source_language_code": "en",
                "glossary_config": {"glossary": name},
            }
        )


def test_a_document_given_inline_comes_back_translated(client: Any) -> None:
    done = client.translate_document(
        request={
            "parent": PARENT,
            "target_language_code": "de",
            "document_input_config": {"content": b"<p>Click <b>Save</b> now.</p>", "mime_type": "text/html"},
        }
    )
    assert done.document_translation.byte_stream_outputs == [b"<p>now. <b>Save</b> Click</p>"]
    assert (done.document_translation.mime_type, done.document_translation.detected_language_code) == (
        "text/html",
        "en",
    )


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"targetLanguageCode": "de"}, 400, "contents is required"),
        ({"contents": ["a"]}, 400, "targetLanguageCode is required"),
        ({"contents": ["a"], "targetLanguageCode": "fr"}, 400, "no model translates"),
        (
            {"contents": ["a"], "targetLanguageCode": "de", "mimeType": "application/pdf"},
            400,
            "text/html or text/plain",
        ),
        (
            {"contents": ["a"], "targetLanguageCode": "de", "glossaryConfig": {"glossary": "x"}},
            400,
            "sourceLanguageCode is required",
        ),
        (
            {"contents": ["a"], "targetLanguageCode": "de", "model": "projects/p/locations/l/models/nope"},
            404,
            "no model named",
        ),
    ],
)
def test_errors_have_googles_shape(server: ThreadServer, body: dict[str, Any], status: int, message: str) -> None:
    r = server.client.post(f"/v3/{PARENT}:translateText", json=body)
    assert r.status_code == status and message in r.json()["error"]["message"], r.text
    assert r.json()["error"]["code"] == status and r.json()["error"]["status"] in ("INVALID_ARGUMENT", "NOT_FOUND")


def test_the_key_is_asked_for_as_google_does(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    with thread_server(settings_for(bundle, api_key="k3y"), FakeLoader()) as s:
        request = {"parent": PARENT, "contents": ["a b"], "target_language_code": "de", "mime_type": "text/plain"}
        with pytest.raises(exceptions.Forbidden):
            _client(s.url).translate_text(request=request)
        with pytest.raises(exceptions.BadRequest, match="API key not valid"):
            _client(s.url, api_key.Credentials("wrong")).translate_text(request=request)
        done = _client(s.url, api_key.Credentials("k3y")).translate_text(request=request)
        assert done.translations[0].translated_text == "b a"
        content = base64.b64encode(b"a b").decode()
        body = {"targetLanguageCode": "de", "documentInputConfig": {"content": content, "mimeType": "text/plain"}}
        r = s.client.post(f"/v3/{PARENT}:translateDocument?key=k3y", json=body)
        assert base64.b64decode(r.json()["documentTranslation"]["byteStreamOutputs"][0]) == b"b a"
