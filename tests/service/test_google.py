"""/language/translate/v2: Google Cloud Translation's Basic API, through Google's own Python client
(``google-cloud-translate``'s ``translate_v2.Client``, pointed at the server by ``api_endpoint``) and with the
request shapes of Google's v2 reference (JSON, form-encoded and query strings with ``q`` repeated). The fake engine
reverses each sentence's words behind a ""/"en:" prefix and aligns target word t to source word n-1-t."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

translate_v2 = pytest.importorskip("google.cloud.translate_v2")
from google.api_core import exceptions  # noqa: E402
from google.auth import api_key  # noqa: E402
from google.auth.credentials import AnonymousCredentials  # noqa: E402

from testkit.fake_engine import FakeLoader, write_fake_bundle  # noqa: E402
from tests.service.servers import ThreadServer, settings_for, thread_server, two_way_server  # noqa: E402

ENGLISH = "The file could not be saved because the disk is full."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    with two_way_server(tmp_path_factory.mktemp("google")) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: ThreadServer) -> object:
    return translate_v2.Client(credentials=AnonymousCredentials(), client_options={"api_endpoint": server.url})


def test_googles_client_translates_detects_and_lists_languages(client: object) -> None:
    one = client.translate("a b", target_language="de", source_language="en", format_="text")  # type: ignore[attr-defined]
    assert one == {"translatedText": "b a", "input": "a b"}
    many = client.translate(["eins zwei", "drei"], target_language="en")  # type: ignore[attr-defined]
    assert [t["translatedText"] for t in many] == ["en:zwei eins", "en:drei"]
    assert {t["detectedSourceLanguage"] for t in many} == {"de"}
    # Google's default format is html: markup comes back around the words it enclosed, text escaped
    html = client.translate("Click <b>Save</b> &amp; go", target_language="de", source_language="en")  # type: ignore[attr-defined]
    assert html["translatedText"] == "go &amp; <b>Save</b> Click"
    found = client.detect_language([ENGLISH, "Die Datei konnte nicht gespeichert werden."])  # type: ignore[attr-defined]
    assert [d["language"] for d in found] == ["en", "de"] and all(0 < d["confidence"] <= 1 for d in found)
    assert client.get_languages() == [{"language": "de", "name": "German"}, {"language": "en", "name": "English"}]  # type: ignore[attr-defined]
    assert client.get_languages(target_language=None) is not None  # type: ignore[attr-defined]


def test_form_encoded_and_query_string_requests_with_q_repeated(server: ThreadServer) -> None:
    r = server.client.post("/language/translate/v2", data={"q": [ENGLISH, "Open the file."], "target": "de"})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "data": {
            "translations": [
                {"translatedText": " ".join(reversed(ENGLISH.split())), "detectedSourceLanguage": "en"},
                {"translatedText": "file. the Open", "detectedSourceLanguage": "en"},
            ]
        }
    }
    r = server.client.get("/language/translate/v2", params={"q": "a b", "target": "de", "source": "en", "model": "nmt"})
    assert r.json() == {"data": {"translations": [{"translatedText": "b a", "model": "nmt"}]}}
    # each text's language is detected on its own: a page's text already in the target language comes back as it is
    mixed = ["Die Datei konnte nicht gespeichert werden.", ENGLISH, "Klicken Sie auf Speichern."]
    r = server.client.post("/language/translate/v2", json={"q": mixed, "target": "de", "format": "text"})
    assert [(t["translatedText"], t["detectedSourceLanguage"]) for t in r.json()["data"]["translations"]] == [
        (mixed[0], "de"),
        (" ".join(reversed(ENGLISH.split())), "en"),
        (mixed[2], "de"),
    ]
    r = server.client.post("/language/translate/v2", json={"q": mixed, "target": "en", "format": "text"})
    assert [t["translatedText"][:3] for t in r.json()["data"]["translations"]] == ["en:", "The", "en:"]
    r = server.client.get("/language/translate/v2/languages")
    assert r.json() == {"data": {"languages": [{"language": "de"}, {"language": "en"}]}}


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"target": "de"}, 400, "Required Text"),
        ({"q": "a"}, 400, "Target language is required"),
        ({"q": "a", "target": "fr"}, 400, "no model translates"),
        ({"q": [1], "target": "de"}, 400, "list of strings"),
        ({"q": "a", "target": "de", "format": "pdf"}, 400, "use html or text"),
        ({"q": "a", "target": "de", "format": {}}, 400, "use html or text"),
        ({"q": "a", "target": "de", "cid": ["x"]}, 400, "Customization ids"),
        ({"q": "a", "target": "de", "cid": ""}, 400, "Customization ids"),
        ({"q": "a", "target": "de", "key": 5}, 400, "key must be a string"),
        ({"q": "a", "target": "de", "model": "no-such-model"}, 404, "no model named 'no-such-model'"),
    ],
)
def test_errors_have_googles_shape(server: ThreadServer, body: dict[str, object], status: int, message: str) -> None:
    r = server.client.post("/language/translate/v2", json=body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) == {"code", "message", "errors", "status"} and error["code"] == status
    assert error["status"] == {400: "INVALID_ARGUMENT", 404: "NOT_FOUND"}[status] and message in error["message"], error


def test_too_many_or_too_long_texts_are_refused_before_any_detection(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    with thread_server(settings_for(bundle, max_texts=2, max_chars=20), FakeLoader()) as s:
        detected = 0
        models = s.service.models
        one, each = models.detect, models.detect_each

        async def counting_one(text: str) -> object:
            nonlocal detected
            detected += 1
            return await one(text)

        async def counting_each(texts: list[str]) -> object:
            nonlocal detected
            detected += len(texts)
            return await each(texts)

        models.detect, models.detect_each = counting_one, counting_each  # type: ignore[method-assign]
        for q in (["a", "b", "c"], ["x" * 21]):
            for path in ("/language/translate/v2", "/language/translate/v2/detect"):
                r = s.client.post(path, json={"q": q, "target": "de"})
                assert r.status_code == 400 and "limit" in r.json()["error"]["message"], r.text
        assert detected == 0
        for path in ("/language/translate/v2", "/language/translate/v2/detect"):  # within the limits: detected
            assert s.client.post(path, json={"q": ["a", "b"], "target": "de"}).status_code == 200
        assert detected == 4


def test_the_key_is_asked_for_as_google_does(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    with thread_server(settings_for(bundle, api_key="k3y"), FakeLoader()) as s:
        anonymous = translate_v2.Client(credentials=AnonymousCredentials(), client_options={"api_endpoint": s.url})
        with pytest.raises(exceptions.Forbidden, match="missing a valid API key"):
            anonymous.translate("a b", target_language="de")
        wrong = translate_v2.Client(credentials=api_key.Credentials("wrong"), client_options={"api_endpoint": s.url})
        with pytest.raises(exceptions.BadRequest, match="API key not valid"):
            wrong.translate("a b", target_language="de")
        right = translate_v2.Client(credentials=api_key.Credentials("k3y"), client_options={"api_endpoint": s.url})
        assert right.translate("a b", target_language="de", format_="text")["translatedText"] == "b a"
        r = s.client.post("/language/translate/v2?key=k3y", json={"q": "a b", "target": "de", "format": "text"})
        assert r.json()["data"]["translations"][0]["translatedText"] == "b a"
        r = s.client.get("/language/translate/v2/languages", headers={"Authorization": "Bearer k3y"})
        assert r.status_code == 200 and r.json()["data"]["languages"] == [{"language": "de"}, {"language": "en"}]
