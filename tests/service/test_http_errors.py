"""Every error path answers JSON: its status, a stable code and a message that says what to fix."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.fake_engine import FakeLoader, write_fake_bundle
from tests.service.servers import ThreadServer, settings_for, thread_server, wait_until

KEY = {"X-API-Key": "client-key"}


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    """Keys and small limits."""
    bundle = write_fake_bundle(tmp_path_factory.mktemp("strict") / "b")
    settings = settings_for(
        bundle,
        api_key="client-key",
        admin_token="admin-token",
        max_texts=3,
        max_chars=50,
        max_body_bytes=2000,
    )
    with thread_server(settings, FakeLoader()) as running:
        yield running


def error(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["error"] == code
    assert body["request_id"] == r.headers["x-request-id"]
    assert "Traceback" not in r.text
    message: str = body["message"]
    return message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, "text: Field required"),
        ({"text": []}, "text: Value error, text is an empty list"),
        ({"text": 5}, "text.str: Input should be a valid string (got 5)"),
        ({"text": "a", "beam_size": 0}, "beam_size: Input should be greater than or equal to 1"),
        ({"text": "a", "beam_size": 17}, "less than or equal to 16 (got 17)"),
        ({"text": "a", "beam_size": 2, "n_best": 3}, "n_best (3) must not exceed beam_size (2)"),
        ({"text": "a", "beamsize": 2}, "beamsize: Extra inputs are not permitted"),
        ({"text": "a", "max_length_ratio": -1}, "max_length_ratio: Input should be greater than 0"),
        ({"text": "a", "no_repeat_ngram_size": -1}, "no_repeat_ngram_size: Input should be greater than or equal"),
        ({"text": "a", "return_attention": "maybe"}, "return_attention: Input should be a valid"),
    ],
)
def test_invalid_bodies_get_422_naming_the_field(strict: ThreadServer, body: dict[str, Any], expected: str) -> None:
    message = error(strict.client.post("/translate", json=body, headers=KEY), 422, "validation")
    assert expected in message


def test_malformed_json_gets_422(strict: ThreadServer) -> None:
    r = strict.client.post("/translate", content=b'{"text": ', headers={**KEY, "Content-Type": "application/json"})
    assert "not valid JSON" in error(r, 422, "validation")


def test_api_key_missing_401_wrong_403(strict: ThreadServer) -> None:
    missing = strict.client.post("/translate", json={"text": "a"})
    assert "X-API-Key" in error(missing, 401, "unauthorized")
    wrong = strict.client.post("/translate", json={"text": "a"}, headers={"X-API-Key": "nope"})
    assert "wrong API key" in error(wrong, 403, "forbidden")
    assert strict.client.post("/translate", json={"text": "a"}, headers=KEY).status_code == 200
    assert strict.client.get("/healthz").status_code == 200  # probes need no key


def test_admin_token_missing_401_wrong_403(strict: ThreadServer) -> None:
    missing = strict.client.post("/admin/reload")
    assert "Bearer" in error(missing, 401, "unauthorized")
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = strict.client.post("/admin/reload", headers={"Authorization": "Bearer nope"})
    assert "wrong admin token" in error(wrong, 403, "forbidden")
    client_key = strict.client.post("/admin/reload", headers=KEY)
    error(client_key, 401, "unauthorized")


def test_admin_disabled_without_a_token(server: ThreadServer) -> None:
    r = server.client.post("/admin/reload", headers={"Authorization": "Bearer anything"})
    assert "MT_ADMIN_TOKEN" in error(r, 403, "forbidden")


def test_too_many_texts_and_too_long_texts_get_413_with_the_limit(strict: ThreadServer) -> None:
    many = strict.client.post("/translate", json={"text": ["a"] * 4}, headers=KEY)
    assert "4 texts; the limit is 3 (MT_MAX_TEXTS)" in error(many, 413, "too_large")
    long = strict.client.post("/translate", json={"text": ["ok", "x" * 51]}, headers=KEY)
    assert "text[1] has 51 characters; the limit is 50" in error(long, 413, "too_large")


def test_large_bodies_get_413_declared_or_chunked(strict: ThreadServer) -> None:
    big = b'{"text": "' + b"a " * 1500 + b'"}'
    declared = strict.client.post("/translate", content=big, headers={**KEY, "Content-Type": "application/json"})
    assert "larger than 2000 bytes (MT_MAX_BODY_BYTES)" in error(declared, 413, "too_large")

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(big), 500):
            yield big[i : i + 500]

    with httpx.Client(base_url=strict.url) as fresh:  # a 413 closes the connection
        chunked = fresh.post("/translate", content=chunks(), headers={**KEY, "Content-Type": "application/json"})
    error(chunked, 413, "too_large")


def test_unknown_route_404_and_wrong_method_405(strict: ThreadServer) -> None:
    assert "/docs" in error(strict.client.get("/nowhere"), 404, "not_found")
    error(strict.client.get("/translate"), 405, "method_not_allowed")


def test_a_bug_after_the_engine_gets_a_500_without_a_trace(strict: ThreadServer) -> None:
    r = strict.client.post("/translate", json={"text": "this will BREAK"}, headers=KEY)
    message = error(r, 500, "internal")
    assert r.json()["request_id"] in message
    assert strict.client.post("/translate", json={"text": "fine"}, headers=KEY).status_code == 200


def test_engine_failure_fails_only_its_request_and_the_next_batch_works(tmp_path: Path) -> None:
    """The batch scheduler (the continuous one's retry is tested in tests/service/test_scheduler.py and
    tests/reliability/test_faults.py)."""
    bundle = write_fake_bundle(tmp_path / "b")
    loader = FakeLoader()
    with thread_server(settings_for(bundle, max_wait_ms=300, scheduler="batch"), loader) as s:
        results: dict[str, httpx.Response] = {}

        def send(name: str, text: str) -> None:
            results[name] = s.client.post("/translate", json={"text": text}, timeout=10)

        threads = [threading.Thread(target=send, args=(n, t)) for n, t in [("bad", "x FAIL y"), ("good", "one two")]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert "fake engine failure" in error(results["bad"], 500, "engine_error")
        assert results["good"].json()["translations"][0]["text"] == "two one"
        assert loader.last.batch_sizes[0] == 2  # they did share a batch
        after = s.client.post("/translate", json={"text": "next batch"})
        assert after.json()["translations"][0]["text"] == "batch next"


def test_full_queue_gets_503_with_retry_after(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "b", delay_s=1.5)  # the queue stays full while the checks below run
    loader = FakeLoader()
    with thread_server(settings_for(bundle, max_queue=3, max_wait_ms=0, inflight_batches=1), loader) as s:
        done: list[httpx.Response] = []

        def send(texts: list[str]) -> None:
            done.append(s.client.post("/translate", json={"text": texts}, timeout=10))

        first = threading.Thread(target=send, args=(["decoding now"],))
        first.start()
        wait_until(lambda: len(loader.last.batches) == 1, what="the first batch to start")
        second = threading.Thread(target=send, args=(["a", "b", "c"],))
        second.start()
        wait_until(lambda: s.service.batcher.depth == 3, what="the queue to fill")
        refused = s.client.post("/translate", json={"text": "one more"})
        message = error(refused, 503, "overloaded")
        assert "the bound is 3" in message
        assert int(refused.headers["retry-after"]) >= 1
        # refused before its body is parsed (service/middleware.py Shed): an invalid one too, and LibreTranslate's
        # in its own error shape; a route that queues nothing is not refused
        assert "the bound is 3" in error(s.client.post("/translate", json={"text": 5}), 503, "overloaded")
        lt = s.client.post("/libretranslate/translate", json={"q": "x", "source": "en", "target": "de"})
        assert lt.status_code == 503 and "the bound is 3" in lt.json()["error"] and lt.headers["retry-after"]
        dl = s.client.post("/deepl/v2/translate", json={"text": ["x"], "target_lang": "DE"})
        assert dl.status_code == 503 and "the bound is 3" in dl.json()["message"] and dl.headers["retry-after"]
        gl = s.client.post("/language/translate/v2", json={"q": "x", "target": "de"})
        assert gl.status_code == 503 and gl.json()["error"]["status"] == "UNAVAILABLE" and gl.headers["retry-after"]
        assert "the bound is 3" in gl.json()["error"]["message"]
        ms = s.client.post("/microsoft/translate?api-version=3.0&to=de", json=[{"Text": "x"}])
        assert ms.status_code == 503 and ms.json()["error"]["code"] == 503000 and ms.headers["retry-after"]
        assert "the bound is 3" in ms.json()["error"]["message"]
        aws = {"X-Amz-Target": "AWSShineFrontendService_20170701.TranslateText"}
        am = s.client.post(
            "/aws", json={"Text": "x", "SourceLanguageCode": "en", "TargetLanguageCode": "de"}, headers=aws
        )
        assert (
            am.status_code == 503 and am.json()["__type"] == "ServiceUnavailableException" and am.headers["retry-after"]
        )
        v3 = s.client.post(
            "/v3/projects/p/locations/global:translateText", json={"contents": ["x"], "targetLanguageCode": "de"}
        )
        assert v3.status_code == 503 and v3.json()["error"]["status"] == "UNAVAILABLE" and v3.headers["retry-after"]
        listing = {"X-Amz-Target": "AWSShineFrontendService_20170701.ListLanguages"}  # decodes nothing: answered
        assert s.client.post("/aws", json={}, headers=listing).status_code == 200
        assert s.client.post("/detect", json={"text": "hello world"}).status_code != 503
        assert 'mt_errors_total{reason="overloaded"} 8.0' in s.client.get("/metrics").text
        first.join()
        second.join()
        assert [r.status_code for r in done] == [200, 200]
        too_big = s.client.post("/translate", json={"text": ["a", "b", "c", "d"]})  # never fits: 413, not 503
        assert "MT_MAX_QUEUE" in error(too_big, 413, "too_large")


def test_a_request_the_queue_has_no_room_for_is_refused_in_its_apis_shape(tmp_path: Path) -> None:
    """The queue not full (so not refused early), but without room for the request's sentences: each API answers
    the batcher's refusal in its own shape, not this API's."""
    bundle = write_fake_bundle(tmp_path / "b", delay_s=1.5)  # the queue holds while the checks below run
    loader = FakeLoader()
    with thread_server(settings_for(bundle, max_queue=3, max_wait_ms=0, inflight_batches=1), loader) as s:
        first = threading.Thread(target=s.client.post, args=("/translate",), kwargs={"json": {"text": "decoding"}})
        first.start()
        wait_until(lambda: len(loader.last.batches) == 1, what="the first batch to start")
        second = threading.Thread(target=s.client.post, args=("/translate",), kwargs={"json": {"text": ["a", "b"]}})
        second.start()
        wait_until(lambda: s.service.batcher.depth == 2, what="two sentences queued")
        two = ["one more", "and another"]
        answers = {
            "libretranslate": s.client.post(
                "/libretranslate/translate", json={"q": two, "source": "en", "target": "de"}
            ),
            "deepl": s.client.post("/deepl/v2/translate", json={"text": two, "target_lang": "DE"}),
            "google": s.client.post("/language/translate/v2", json={"q": two, "target": "de", "source": "en"}),
            "google v3": s.client.post(
                "/v3/projects/p:translateText",
                json={"contents": two, "targetLanguageCode": "de", "sourceLanguageCode": "en"},
            ),
            "microsoft": s.client.post(
                "/microsoft/translate?api-version=3.0&to=de&from=en", json=[{"Text": t} for t in two]
            ),
        }
        shapes = {name: (r.status_code, sorted(r.json())) for name, r in answers.items()}
        assert shapes == {
            "libretranslate": (503, ["error"]),
            "deepl": (503, ["message"]),
            "google": (503, ["error"]),
            "google v3": (503, ["error"]),
            "microsoft": (503, ["error"]),
        }, {name: r.text for name, r in answers.items()}
        assert answers["microsoft"].json()["error"]["code"] == 503000
        assert answers["google"].json()["error"]["status"] == "UNAVAILABLE"
        assert all(r.headers["retry-after"] for r in answers.values())
        aws = {"X-Amz-Target": "AWSShineFrontendService_20170701.TranslateText"}
        am = s.client.post(
            "/aws", json={"Text": "x. y.", "SourceLanguageCode": "en", "TargetLanguageCode": "de"}, headers=aws
        )
        assert (am.status_code, am.json()["__type"]) == (503, "ServiceUnavailableException"), am.text
        first.join()
        second.join()


def test_a_full_queue_refuses_early_only_a_request_with_the_right_api_key(tmp_path: Path) -> None:
    """With MT_API_KEY set, a request without the key is told so (401) even while the queue is full; one with it
    is refused (503) before its body is parsed; LibreTranslate's requests, whose key is in the body, go on to
    the route, which refuses them as well."""
    bundle = write_fake_bundle(tmp_path / "b", delay_s=2.0)  # the queue stays full while the checks below run
    loader = FakeLoader()
    settings = settings_for(bundle, max_queue=1, max_wait_ms=0, inflight_batches=1, api_key="client-key")
    with thread_server(settings, loader) as s:
        threads = [
            threading.Thread(target=s.client.post, args=("/translate",), kwargs={"json": {"text": t}, "headers": KEY})
            for t in ("decoding now", "waiting")
        ]
        threads[0].start()
        wait_until(lambda: len(loader.last.batches) == 1, what="the first batch to start")
        threads[1].start()
        wait_until(lambda: s.service.batcher.depth == 1, what="the queue to fill")
        error(s.client.post("/translate", json={"text": "x"}), 401, "unauthorized")
        error(s.client.post("/translate", json={"text": 5}, headers=KEY), 503, "overloaded")
        lt = {"q": "x", "source": "en", "target": "de", "api_key": "client-key"}
        assert s.client.post("/libretranslate/translate", json=lt).status_code == 503
        dl = {"text": ["x"], "target_lang": "DE"}
        assert s.client.post("/deepl/v2/translate", json=dl).status_code == 403  # no key: told so, not refused early
        right = {"Authorization": "DeepL-Auth-Key client-key"}
        assert s.client.post("/deepl/v2/translate", json=dl, headers=right).status_code == 503
        gl = {"q": "x", "target": "de"}
        assert s.client.post("/language/translate/v2", json=gl).status_code == 403  # no key: told so
        assert s.client.post("/language/translate/v2?key=client-key", json=gl).status_code == 503
        bearer = {"Authorization": "Bearer client-key"}
        assert s.client.post("/language/translate/v2", json=gl, headers=bearer).status_code == 503
        ms = "/microsoft/translate?api-version=3.0&to=de"
        assert s.client.post(ms, json=[{"Text": "x"}]).status_code == 401  # no key: told so
        for given in ({"Ocp-Apim-Subscription-Key": "client-key"}, bearer):
            assert s.client.post(ms, json=[{"Text": "x"}], headers=given).status_code == 503
        assert s.client.post(ms + "&Subscription-Key=client-key", json=[{"Text": "x"}]).status_code == 503
        signed = "AWS4-HMAC-SHA256 Credential={}/20261129/us-east-1/translate/aws4_request, Signature=0"
        aws = {"X-Amz-Target": "AWSShineFrontendService_20170701.TranslateText"}
        am = {"Text": "x", "SourceLanguageCode": "en", "TargetLanguageCode": "de"}
        wrong = {**aws, "Authorization": signed.format("other")}
        assert s.client.post("/aws", json=am, headers=wrong).json()["__type"] == "UnrecognizedClientException"
        right = {**aws, "Authorization": signed.format("client-key")}
        assert s.client.post("/aws", json=am, headers=right).status_code == 503
        for t in threads:
            t.join()


def test_request_timeout_gets_504_and_the_server_recovers(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "b", delay_s=0.6)
    loader = FakeLoader()
    with thread_server(settings_for(bundle, request_timeout_s=0.3, max_wait_ms=0), loader) as s:
        started = time.monotonic()
        r = s.client.post("/translate", json={"text": "too slow"})
        assert "0.3 s (MT_REQUEST_TIMEOUT_S)" in error(r, 504, "timeout")
        assert time.monotonic() - started < 0.6
        loader.last.delay_s = 0
        time.sleep(0.4)  # the abandoned batch finishes
        assert s.client.post("/translate", json={"text": "fast"}).status_code == 200
