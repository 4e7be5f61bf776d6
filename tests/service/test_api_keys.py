"""API keys (service/keys.py): named keys with a request rate and a daily character quota, the same on every API
(this one's X-API-Key, LibreTranslate's api_key, DeepL's Authorization header), through real HTTP."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import deepl
import pytest

from service import keys as keys_module
from service.app import create_app
from service.keys import KeyRefused, Keys, KeysError
from service.models import ConfigurationError
from testkit.fake_engine import FakeLoader, write_fake_bundle
from tests.service.servers import settings_for, thread_server


def write_keys(path: Path, entries: dict[str, object]) -> Path:
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_key_s_requests_a_minute_are_a_bucket_refilled_evenly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(keys_module.time, "monotonic", clock)
    keys = Keys.configured(None, write_keys(tmp_path / "k.json", {"a": {"key": "alpha-key", "requests_per_minute": 2}}))
    assert keys.admit("alpha-key") is not None and keys.admit("alpha-key") is not None  # two at once
    with pytest.raises(KeyRefused) as refused:
        keys.admit("alpha-key")
    assert (
        refused.value.reason == "rate"
        and refused.value.retry_after == 30
        and "2 requests a minute" in str(refused.value)
    )
    clock.now += 29
    with pytest.raises(KeyRefused):
        keys.admit("alpha-key")
    clock.now += 1  # 30 s after the bucket was empty: one request back
    assert keys.admit("alpha-key") is not None


def test_a_key_s_characters_a_day_reset_at_midnight_utc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    day = ["2026-11-29"]
    monkeypatch.setattr(keys_module, "_today", lambda: day[0])
    keys = Keys.configured(None, write_keys(tmp_path / "k.json", {"b": {"key": "bravo-key", "characters_per_day": 10}}))
    client = keys.admit("bravo-key")
    keys.charge(client, 6)
    with pytest.raises(KeyRefused) as refused:
        keys.charge(client, 5)
    assert refused.value.reason == "quota" and "4 left today" in str(refused.value)
    keys.charge(client, 4)
    with pytest.raises(KeyRefused):  # spent: even a request that charges nothing yet is refused
        keys.admit("bravo-key")
    day[0] = "2026-11-30"
    assert keys.used_today(keys.admit("bravo-key")) == 0  # type: ignore[arg-type]


def test_no_key_configured_lets_every_request_in() -> None:
    keys = Keys.configured(None, None)
    assert not keys and keys.admit(None) is None and keys.admit("anything") is None


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"a": {"key": "short"}}, "at least 8 characters"),
        ({"a": {}}, "as key or as key_sha256"),
        ({"a": {"key": "alpha-key", "key_sha256": "0" * 64}}, "as key or as key_sha256"),
        ({"a": {"key_sha256": "xyz"}}, "64 hexadecimal digits"),
        ({"a": {"key": "alpha-key", "requests_per_minute": 0}}, "whole number of at least 1"),
        ({"a": {"key": "alpha-key", "characters_per_day": "many"}}, "whole number of at least 1"),
        ({"a": {"key": "alpha-key", "rpm": 3}}, "an object of key or key_sha256"),
        ({"a": {"key": "alpha-key"}, "b": {"key": "alpha-key"}}, "the same key as 'a'"),
        ([], "an object of named keys"),
    ],
)
def test_a_keys_file_it_cannot_use_is_refused_naming_the_entry(tmp_path: Path, entries: object, message: str) -> None:
    with pytest.raises(KeysError, match=message):
        Keys.configured(None, write_keys(tmp_path / "k.json", entries))  # type: ignore[arg-type]


def test_every_api_asks_for_a_key_and_counts_against_its_limits(tmp_path: Path) -> None:
    en_de = write_fake_bundle(tmp_path / "en-de", name="fake-en-de", languages="en-de")
    sha = hashlib.sha256(b"hashed-key-c").hexdigest()
    keys = write_keys(
        tmp_path / "keys.json",
        {
            "rate": {"key": "rate-key-a", "requests_per_minute": 2},
            "quota": {"key": "quota-key-b", "characters_per_day": 20},
            "hashed": {"key_sha256": sha},
        },
    )
    with thread_server(settings_for(en_de, api_keys=keys, api_key="plain-key-0"), FakeLoader()) as s:
        post = s.client.post

        def native(key: str, text: str = "a b") -> int:
            return post("/translate", json={"text": text}, headers={"X-API-Key": key}).status_code

        assert [native("rate-key-a") for _ in range(3)] == [200, 200, 429]
        limited = post("/translate", json={"text": "a"}, headers={"X-API-Key": "rate-key-a"})
        assert limited.json()["error"] == "rate_limited" and int(limited.headers["retry-after"]) >= 1
        assert native("hashed-key-c") == native("plain-key-0") == 200  # a hashed key, and MT_API_KEY beside them
        assert native("wrong-key-x") == 403 and post("/translate", json={"text": "a"}).status_code == 401
        assert native("quota-key-b", "x" * 15) == 200
        spent = post("/translate", json={"text": "y" * 6}, headers={"X-API-Key": "quota-key-b"})
        assert spent.status_code == 429 and spent.json()["error"] == "quota_exceeded" and "5 left" in spent.text
        # LibreTranslate's and DeepL's clients: the same keys, in their APIs' shapes
        lt = post(
            "/libretranslate/translate", json={"q": "zz", "source": "en", "target": "de", "api_key": "quota-key-b"}
        )
        assert lt.status_code == 200
        lt = post(
            "/libretranslate/translate", json={"q": "zzzz", "source": "en", "target": "de", "api_key": "quota-key-b"}
        )
        assert lt.status_code == 429 and "3 left today" in lt.json()["error"]
        translator = deepl.Translator("quota-key-b", server_url=s.url + "/deepl/")
        usage = translator.get_usage().character
        assert (usage.count, usage.limit) == (17, 20)
        assert translator.translate_text("abc", target_lang="DE").text == "abc"
        with pytest.raises(deepl.QuotaExceededException):
            translator.translate_text("d", target_lang="DE")
        with pytest.raises(deepl.AuthorizationException):
            deepl.Translator("wrong-key-x", server_url=s.url + "/deepl/").translate_text("a", target_lang="DE")
        usage = s.client.get("/usage", headers={"X-API-Key": "quota-key-b"}).json()
        assert usage == {"key": "quota", "characters_today": 20, "characters_per_day": 20, "requests_per_minute": None}
        assert s.client.get("/usage", headers={"X-API-Key": "plain-key-0"}).json()["key"] == "default"
        metrics = s.client.get("/metrics").text
        assert 'mt_api_key_requests_total{key="rate"} 2.0' in metrics
        assert 'mt_api_key_refusals_total{key="rate",limit="rate"} 2.0' in metrics
        assert 'mt_api_key_characters_total{key="quota"} 20.0' in metrics
        assert 'mt_api_key_refusals_total{key="quota",limit="quota"} 3.0' in metrics  # not /usage: it says so
        assert deepl.Translator("quota-key-b", server_url=s.url + "/deepl/").get_usage().character.limit_reached


def test_a_document_is_charged_whole_before_it_is_translated(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    keys = write_keys(tmp_path / "keys.json", {"q": {"key": "quota-key-b", "characters_per_day": 10}})
    loader = FakeLoader()
    with thread_server(settings_for(bundle, api_keys=keys), loader) as s:
        r = s.client.post(
            "/translate/document",
            files={"file": ("notes.txt", b"aaaa bbbb\n\ncccc dddd\n", "text/plain")},
            headers={"X-API-Key": "quota-key-b"},
        )
        assert r.status_code == 429 and "10 left today" in r.json()["message"]
        assert loader.last.batches == []  # nothing of it was decoded


def test_a_bad_keys_file_stops_the_server(tmp_path: Path) -> None:
    keys = write_keys(tmp_path / "keys.json", {"a": {"key": "short"}})
    with pytest.raises(ConfigurationError, match="MT_API_KEYS .*'a': a key is a string of at least 8"):
        create_app(settings_for(write_fake_bundle(tmp_path / "b"), api_keys=keys), engine_loader=FakeLoader())
