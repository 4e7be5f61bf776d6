"""/microsoft: Microsoft Translator's Text API v3, through Microsoft's own Python client
(``azure-ai-translation-text`` 1.x's ``TextTranslationClient``, pointed at the server by ``endpoint``) and with the
request shapes of Microsoft's v3 reference. The fake engine reverses each sentence's words behind a ""/"en:" prefix
and aligns target word t to source word n-1-t: an aligned source word and its target word are the same word."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

text_api = pytest.importorskip("azure.ai.translation.text")
from azure.core.credentials import AzureKeyCredential  # noqa: E402
from azure.core.exceptions import HttpResponseError  # noqa: E402

from testkit.fake_engine import FakeLoader, write_fake_bundle  # noqa: E402
from tests.service.servers import ThreadServer, settings_for, thread_server, two_way_server  # noqa: E402

ENGLISH = "The file could not be saved because the disk is full. Free some space and try again."
GERMAN = "Die Datei konnte nicht gespeichert werden."
V3 = "/microsoft/translate?api-version=3.0"
NEXT = "/microsoft/translate?api-version=2026-06-06"
NEWER_CLIENT = Path(sys.prefix) / "azure-text-2"
"""Microsoft's 2.x client, installed there by `make install` (the 1.x one is the package the tests import)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    with two_way_server(tmp_path_factory.mktemp("microsoft")) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: ThreadServer) -> Any:
    return text_api.TextTranslationClient(endpoint=server.url + "/microsoft", credential=AzureKeyCredential("any"))


def _reversed(sentence: str) -> str:
    return " ".join(reversed(sentence.split()))


def _projected(proj: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Microsoft's ``a:b-c:d ...`` as ((a, b + 1), (c, d + 1)) slices."""
    pairs = []
    for link in proj.split():
        source, target = link.split("-")
        a, b = map(int, source.split(":"))
        c, d = map(int, target.split(":"))
        pairs.append(((a, b + 1), (c, d + 1)))
    return pairs


def test_microsofts_client_translates_into_several_languages_with_alignment_and_sentence_lengths(client: Any) -> None:
    done = client.translate(
        body=[ENGLISH, GERMAN], to_language=["de", "en"], include_alignment=True, include_sentence_length=True
    )
    assert [(item.detected_language.language, len(item.translations)) for item in done] == [("en", 2), ("de", 2)]
    assert all(0 < item.detected_language.score <= 1 for item in done)
    english, german = done
    first, second = ENGLISH.split(". ")
    assert [(t.to, t.text) for t in english.translations] == [
        ("de", f"{_reversed(first + '.')} {_reversed(second)}"),
        ("en", ENGLISH),  # already in English: as it is
    ]
    assert [(t.to, t.text) for t in german.translations] == [("de", GERMAN), ("en", "en:" + _reversed(GERMAN))]
    for source, item in ((ENGLISH, english), (GERMAN, german)):
        for translation in item.translations:
            links = _projected(translation.alignment.proj)
            assert len(links) == len(source.split())  # every source word, once
            for (a, b), (c, d) in links:  # the fake translates each word into itself
                assert source[a:b] == translation.text[c:d].removeprefix("en:"), (translation.text, a, b, c, d)
            lengths = translation.sent_len
            assert sum(lengths.src_sent_len) == len(source) and sum(lengths.trans_sent_len) == len(translation.text)
    assert english.translations[0].sent_len.src_sent_len == [len(first) + 2, len(second)]
    assert english.translations[0].sent_len.trans_sent_len == [len(first) + 2, len(second)]


def test_microsofts_client_lists_languages_and_finds_sentence_boundaries(client: Any) -> None:
    languages = client.get_supported_languages(scope="translation")
    assert {code: (lang.name, lang.native_name, lang.dir) for code, lang in languages.translation.items()} == {
        "de": ("German", "Deutsch", "ltr"),
        "en": ("English", "English", "ltr"),
    }
    found = client.find_sentence_boundaries(body=[ENGLISH, GERMAN])
    assert [f.sent_len for f in found] == [[len(ENGLISH.split(". ")[0]) + 2, len(ENGLISH.split(". ")[1])], [42]]
    assert [f.detected_language.language for f in found] == ["en", "de"]
    assert client.find_sentence_boundaries(body=["Hi. Bye."], language="en")[0].sent_len == [4, 4]


def test_request_shapes_of_the_v3_reference(server: ThreadServer) -> None:
    # "Text" in any case, "to" repeated or comma-separated, the source given, a model named by category
    r = server.client.post(V3 + "&from=en&to=de", json=[{"text": "a b"}, {"Text": "c"}])
    assert r.status_code == 200, r.text
    assert r.json() == [{"translations": [{"text": "b a", "to": "de"}]}, {"translations": [{"text": "c", "to": "de"}]}]
    assert r.headers["x-metered-usage"] == "4" and r.headers["x-requestid"]
    r = server.client.post(V3 + "&from=en&to=de,en", json=[{"Text": "a b"}])
    assert [(t["to"], t["text"]) for t in r.json()[0]["translations"]] == [("de", "b a"), ("en", "a b")]
    r = server.client.post(V3 + "&to=en&category=fake-de-en", json=[{"Text": "eins zwei"}])
    assert r.json()[0]["translations"] == [{"text": "en:zwei eins", "to": "en"}]
    assert r.json()[0]["detectedLanguage"]["language"] == "de" and 0 < r.json()[0]["detectedLanguage"]["score"] <= 1
    # html: the markup comes back around the words it enclosed
    r = server.client.post(V3 + "&from=en&to=de&textType=html", json=[{"Text": "Click <b>Save</b> now"}])
    assert r.json()[0]["translations"][0]["text"] == "now <b>Save</b> Click"
    # an unknown text falls back to suggestedFrom
    r = server.client.post(V3 + "&to=en&suggestedFrom=de", json=[{"Text": "123"}])
    assert r.json()[0]["translations"][0]["text"] == "en:123", r.text
    r = server.client.post("/microsoft/detect?api-version=3.0", json=[{"Text": GERMAN}, {"Text": ENGLISH}])
    detected = r.json()
    assert [d["language"] for d in detected] == ["de", "en"]
    assert all(d["isTranslationSupported"] and not d["isTransliterationSupported"] for d in detected)
    assert [a["language"] for a in detected[0]["alternatives"]] == ["en"]
    r = server.client.get("/microsoft/languages", params={"api-version": "3.0"})
    assert set(r.json()) == {"translation", "transliteration", "dictionary"} and set(r.json()["translation"]) == {
        "de",
        "en",
    }


@pytest.mark.parametrize(
    ("path", "body", "status", "code", "message"),
    [
        ("/microsoft/translate?to=de", [{"Text": "a"}], 400, 400021, "api-version=3.0"),
        ("/microsoft/translate?api-version=2.0&to=de", [{"Text": "a"}], 400, 400021, "'2.0' is not served"),
        (V3, [{"Text": "a"}], 400, 400036, "target language is missing"),
        (V3 + "&to=deu-DE", [{"Text": "a"}], 400, 400036, "'deu-DE' is not valid"),
        (V3 + "&to=de&from=123", [{"Text": "a"}], 400, 400035, "source language"),
        (V3 + "&to=fr&from=en", [{"Text": "a"}], 400, 400023, "no model translates en→fr"),
        (V3 + "&to=de&category=custom-1", [{"Text": "a"}], 400, 400079, "no model named 'custom-1'"),
        (V3 + "&to=de&profanityAction=Marked", [{"Text": "a"}], 400, 400042, "no profanity lists"),
        (V3 + "&to=de&toScript=Cyrl", [{"Text": "a"}], 400, 400004, "only Latn"),
        (V3 + "&to=de&textType=xml", [{"Text": "a"}], 400, 400071, "plain or html"),
        (V3 + "&to=de&includeAlignment=yes", [{"Text": "a"}], 400, 400000, "true or false"),
        (V3 + "&to=de", {"Text": "a"}, 400, 400000, "JSON array"),
        (V3 + "&to=de", [], 400, 400000, "JSON array"),
        (V3 + "&to=de", [{"Text": 5}], 400, 400020, "Element 0"),
        (V3 + "&to=de", [{"Text": "a"}, "b"], 400, 400020, "Element 1"),
        ("/microsoft/transliterate?api-version=3.0", [{"Text": "a"}], 400, 400080, "not served"),
        ("/microsoft/breaksentence?api-version=3.0&script=Arab", [{"Text": "a"}], 400, 400073, "only Latn"),
    ],
)
def test_errors_have_microsofts_shape(
    server: ThreadServer, path: str, body: object, status: int, code: int, message: str
) -> None:
    r = server.client.post(path, json=body)
    assert r.status_code == status, r.text
    assert set(r.json()) == {"error"} and set(r.json()["error"]) == {"code", "message"}
    assert r.json()["error"]["code"] == code and message in r.json()["error"]["message"], r.json()


def test_bodies_that_are_not_json_are_refused(server: ThreadServer) -> None:
    r = server.client.post(V3 + "&to=de", content=b"[{", headers={"Content-Type": "application/json"})
    assert (r.status_code, r.json()["error"]["code"]) == (400, 400074)
    r = server.client.post(V3 + "&to=de", data={"Text": "a"})
    assert (r.status_code, r.json()["error"]["code"]) == (415, 415000)
    r = server.client.get("/microsoft/languages", params={"api-version": "3.0", "scope": "speech"})
    assert (r.status_code, r.json()["error"]["code"]) == (400, 400001)


def test_microsofts_client_sees_errors_and_limits_with_their_codes(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    with thread_server(settings_for(bundle, max_texts=2, max_chars=20), FakeLoader()) as s:
        client = text_api.TextTranslationClient(endpoint=s.url + "/microsoft", credential=AzureKeyCredential("x"))
        for body, code in ((["a", "b", "c"], 400072), (["x" * 21], 400050)):
            with pytest.raises(HttpResponseError) as raised:
                client.translate(body=body, to_language=["de"])
            assert raised.value.status_code == 400 and raised.value.error.code == code, raised.value
            assert "limit" in raised.value.error.message


def test_the_key_is_asked_for_as_microsoft_does(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    with thread_server(settings_for(bundle, api_key="k3y"), FakeLoader()) as s:

        def client(key: str) -> Any:
            return text_api.TextTranslationClient(endpoint=s.url + "/microsoft", credential=AzureKeyCredential(key))

        with pytest.raises(HttpResponseError) as raised:
            client("wrong").translate(body=["a b"], to_language=["de"], from_language="en")
        assert raised.value.status_code == 401 and raised.value.error.code == 401000
        assert client("k3y").translate(body=["a b"], to_language=["de"], from_language="en")[0].translations[
            0
        ].text == ("b a")
        r = s.client.post(V3 + "&to=de&from=en", json=[{"Text": "a b"}])
        assert (r.status_code, r.json()["error"]["code"]) == (401, 401000)
        for headers, query in (
            ({"X-API-Key": "k3y"}, ""),
            ({"Authorization": "Bearer k3y"}, ""),
            ({}, "&Subscription-Key=k3y"),
        ):
            r = s.client.post(V3 + "&to=de&from=en" + query, json=[{"Text": "a b"}], headers=headers)
            assert r.status_code == 200 and r.json()[0]["translations"][0]["text"] == "b a", r.text


def test_a_keys_limits_answer_with_microsofts_codes(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "day": {"key": "day-key-1", "characters_per_day": 6},
                "minute": {"key": "min-key-1", "requests_per_minute": 1},
            }
        )
    )
    with thread_server(settings_for(bundle, api_keys=keys), FakeLoader()) as s:
        day = {"Ocp-Apim-Subscription-Key": "day-key-1"}
        assert s.client.post(V3 + "&to=de&from=en", json=[{"Text": "a b c"}], headers=day).status_code == 200
        for _ in range(2):  # the characters past the day's limit, then the key whose day is spent
            r = s.client.post(V3 + "&to=de&from=en", json=[{"Text": "a b c"}], headers=day)
            assert (r.status_code, r.json()["error"]["code"]) == (403, 403001), r.text
        minute = {"Ocp-Apim-Subscription-Key": "min-key-1"}
        assert s.client.post(V3 + "&to=de&from=en", json=[{"Text": "a"}], headers=minute).status_code == 200
        r = s.client.post(V3 + "&to=de&from=en", json=[{"Text": "a"}], headers=minute)
        assert (r.status_code, r.json()["error"]["code"]) == (429, 429001) and r.headers["retry-after"], r.text


NEWER_SCRIPT = """
import json, sys
from azure.ai.translation.text import TextTranslationClient, __version__
from azure.ai.translation.text.models import TranslateInputItem, TranslationTarget
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import HttpResponseError

client = TextTranslationClient(endpoint=sys.argv[1] + "/microsoft", credential=AzureKeyCredential("any"))
out = {"version": __version__}
done = client.translate(body=sys.argv[2:], to_language=["de", "en"])
out["plain"] = [item.as_dict() for item in done]
items = [
    TranslateInputItem(
        text="a b", language="en", targets=[TranslationTarget(language="de", deployment_name="general")]
    ),
    TranslateInputItem(text="eins zwei", targets=[TranslationTarget(language="en", deployment_name="fake-de-en")]),
]
out["items"] = [item.as_dict() for item in client.translate(body=items)]
out["languages"] = client.get_supported_languages().as_dict()
try:
    client.translate(body=[TranslateInputItem(text="a", targets=[TranslationTarget(language="de", tone="formal")])])
except HttpResponseError as err:
    out["error"] = [err.status_code, err.error.code, err.error.message]
print(json.dumps(out))
"""


def test_microsofts_newer_client_translates_with_its_api_version(server: ThreadServer) -> None:
    if not (NEWER_CLIENT / "azure" / "ai" / "translation" / "text").is_dir():
        pytest.skip(f"Microsoft's 2.x client is not installed in {NEWER_CLIENT} (make install puts it there)")
    env = {**os.environ, "PYTHONPATH": str(NEWER_CLIENT)}
    run = subprocess.run(
        [sys.executable, "-c", NEWER_SCRIPT, server.url, ENGLISH, GERMAN],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = json.loads(run.stdout)
    assert out["version"].startswith("2.")
    english, german = out["plain"]
    first, second = ENGLISH.split(". ")
    assert english["detectedLanguage"]["language"] == "en" and german["detectedLanguage"]["language"] == "de"
    assert english["translations"] == [
        {"language": "de", "text": f"{_reversed(first + '.')} {_reversed(second)}", "sourceCharacters": len(ENGLISH)},
        {"language": "en", "text": ENGLISH, "sourceCharacters": len(ENGLISH)},
    ]
    assert [t["text"] for t in german["translations"]] == [GERMAN, "en:" + _reversed(GERMAN)]
    given, named = out["items"]
    assert "detectedLanguage" not in given and given["translations"][0]["text"] == "b a"
    assert named["detectedLanguage"]["language"] == "de" and named["translations"][0]["text"] == "en:zwei eins"
    assert out["languages"]["translation"]["de"] == {
        "name": "German",
        "nativeName": "Deutsch",
        "dir": "ltr",
        "models": ["fake-de-en", "fake-en-de"],
    }
    assert out["languages"]["models"] == ["general", "fake-de-en", "fake-en-de"]
    status, code, message = out["error"]
    assert (status, code) == (400, 400042) and "tone 'formal' is not served" in message


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ([{"Text": "a"}], 400000, '{"inputs"'),
        ({"inputs": []}, 400000, '{"inputs"'),
        ({"inputs": [{"text": "a"}]}, 400036, "targets"),
        ({"inputs": [{"text": 5, "targets": [{"language": "de"}]}]}, 400020, "inputs[0]"),
        ({"inputs": [{"text": "a", "targets": [{"language": ""}]}]}, 400036, "needs a language"),
        ({"inputs": [{"text": "a", "targets": [{"language": "fr"}]}]}, 400023, "no model translates"),
        ({"inputs": [{"text": "a", "textType": "xml", "targets": [{"language": "de"}]}]}, 400071, "plain or html"),
        ({"inputs": [{"text": "a", "targets": [{"language": "de", "allowFallback": "no"}]}]}, 400000, "true or false"),
        ({"inputs": [{"text": "a", "targets": [{"language": "de", "referenceTextPairs": [{}]}]}]}, 400042, "adapted"),
        ({"inputs": [{"text": "a", "targets": [{"language": "de", "deploymentName": "gpt-4o"}]}]}, 400079, "gpt-4o"),
    ],
)
def test_the_newer_versions_errors(server: ThreadServer, body: object, code: int, message: str) -> None:
    r = server.client.post(NEXT, json=body)
    assert r.status_code == 400 and r.json()["error"]["code"] == code and message in r.json()["error"]["message"], (
        r.text
    )


def test_dictionary_lookup_gives_the_models_alternatives_each_translated_back(client: Any) -> None:
    found = client.lookup_dictionary_entries(body=["fly", " save "], from_language="en", to_language="de")
    assert [(item.display_source, item.normalized_source) for item in found] == [("fly", "fly"), ("save", "save")]
    weights = [math.exp(-0.1 * (k + 1)) for k in range(6)]  # the fake's n-best scores
    entries = found[0].translations
    assert [t.display_target for t in entries] == ["fly", *(f"fly alt{k}" for k in range(1, 6))]
    assert [t.confidence for t in entries] == pytest.approx([w / sum(weights) for w in weights], abs=1e-4)
    assert entries[1].back_translations[0].display_text == "en:alt1 fly"  # de→en of "fly alt1", its best first
    assert all(len(t.back_translations) == 6 for t in entries)
    languages = client.get_supported_languages(scope="dictionary").dictionary
    assert {code: [t.code for t in entry.translations] for code, entry in languages.items()} == {
        "en": ["de"],
        "de": ["en"],
    }


def test_a_lookup_keeps_the_alternatives_that_come_back_to_the_term() -> None:
    from service.routes.microsoft import _returns_to

    assert _returns_to("fly", [("flying", -1.0), ("en:fly", -2.0)])
    assert _returns_to("save game", [("Save Game now", 0.0)])
    assert not _returns_to("fly", [("flying", 0.0), ("butterfly", 0.0)])


def test_a_lookup_without_a_model_back_and_its_bounds(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    with thread_server(settings_for(bundle), FakeLoader()) as s:
        lookup = "/microsoft/dictionary/lookup?api-version=3.0&from=en&to=de"
        r = s.client.post(lookup, json=[{"Text": "a"}])
        assert [t["backTranslations"] for t in r.json()[0]["translations"]] == [[]] * 6, r.text
        r = s.client.post(lookup, json=[{"Text": "x"}] * 11)
        assert (r.status_code, r.json()["error"]["code"]) == (400, 400050)
        r = s.client.post(lookup.replace("&to=de", ""), json=[{"Text": "a"}])
        assert (r.status_code, r.json()["error"]["code"]) == (400, 400036)


def test_the_dynamic_dictionary_forces_a_phrases_translation_in_its_own_text(server: ThreadServer) -> None:
    marked = 'Ask <mstrans:dictionary translation="Wort &amp; Co">wordomatic</mstrans:dictionary> now'
    r = server.client.post(V3 + "&from=en&to=de", json=[{"Text": marked}, {"Text": "wordomatic again"}])
    assert [item["translations"][0]["text"] for item in r.json()] == [
        "now Wort & Co Ask",  # the fake's "wordomatic" replaced by the translation given
        "again wordomatic",  # another text: the phrase is not in its dictionary
    ], r.text
    body = {"inputs": [{"text": marked, "language": "en", "targets": [{"language": "de"}]}]}
    assert server.client.post(NEXT, json=body).json()["value"][0]["translations"][0]["text"] == "now Wort & Co Ask"
    r = server.client.post(V3 + "&to=de", json=[{"Text": marked}])
    assert (r.status_code, r.json()["error"]["code"]) == (400, 400035) and "send from" in r.json()["error"]["message"]
