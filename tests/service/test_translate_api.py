"""The API's happy paths on a real uvicorn with the fake engine (it reverses a sentence's words)."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from testkit.fake_engine import FakeEngine, FakeLoader, write_fake_bundle
from tests.service.servers import ThreadServer, settings_for, thread_server, wait_until


def test_probes_and_model_info(shared_server: ThreadServer) -> None:
    c = shared_server.client
    assert c.get("/healthz").json() == {"status": "ok"}
    assert c.get("/readyz").json() == {
        "status": "ready",
        "model": {"name": "fake-en-de", "version": "1", "source_lang": "en", "target_lang": "de"},
        "models": [{"name": "fake-en-de", "status": "ready", "version": "1", "source_lang": "en", "target_lang": "de"}],
    }
    model = c.get("/model").json()
    assert model["provider"] == "FakeExecutionProvider"
    assert (model["source_language"], model["target_language"]) == ("en", "de")
    assert model["manifest"]["scores"] == {"bleu": 99.0}


def test_one_text_in_one_translation_out(shared_server: ThreadServer) -> None:
    r = shared_server.client.post("/translate", json={"text": "hello big world"})
    assert r.status_code == 200
    assert r.json() == {
        "translations": [{"text": "world big hello"}],
        "model": {"name": "fake-en-de", "version": "1", "source_lang": "en", "target_lang": "de"},
    }
    assert r.headers["x-request-id"]


def test_texts_come_back_in_order_with_their_layout(shared_server: ThreadServer) -> None:
    texts = ["First one. Second one!", "", "  Spaced out.  \n\nNew paragraph here.\n", "solo"]
    r = shared_server.client.post("/translate", json={"text": texts})
    out = [t["text"] for t in r.json()["translations"]]
    assert out == ["one. First one! Second", "", "  out. Spaced  \n\nhere. paragraph New\n", "solo"]


def test_split_sentences_false_translates_each_text_whole(shared_server: ThreadServer) -> None:
    r = shared_server.client.post("/translate", json={"text": "a b. c d.", "split_sentences": False})
    assert r.json()["translations"][0]["text"] == "d. c b. a"


def test_scores_and_alternatives(shared_server: ThreadServer) -> None:
    body = {"text": ["a b", "c d. e"], "beam_size": 3, "n_best": 3, "return_scores": True}
    first, second = shared_server.client.post("/translate", json=body).json()["translations"]
    assert first == {
        "text": "b a",
        "score": -0.1,
        "alternatives": [{"text": "b a alt1", "score": -0.2}, {"text": "b a alt2", "score": -0.3}],
    }
    assert second["alternatives"][0] == {"text": "d. c alt1 e alt1", "score": -0.2}
    assert "attention" not in first and "sentences" not in first


def test_attention_per_text_and_per_sentence(shared_server: ThreadServer) -> None:
    r = shared_server.client.post(
        "/translate", json={"text": "a b c. d e", "return_attention": True, "return_scores": True}
    )
    text = r.json()["translations"][0]
    attention = text["attention"]
    assert attention["source_tokens"] == ["▁a", "▁b", "▁c.", "▁d", "▁e"]
    assert attention["target_tokens"] == ["▁c.", "▁b", "▁a", "▁e", "▁d"]
    weights = attention["weights"]
    assert len(weights) == 5 and all(len(row) == 5 for row in weights)  # target x source
    assert weights[0] == [0, 0, 1, 0, 0] and weights[3] == [0, 0, 0, 0, 1]  # block-diagonal
    assert [(link["target_word"], link["source_word"]) for link in text["alignment"]] == [
        ("c.", "c."),
        ("b", "b"),
        ("a", "a"),
        ("e", "e"),
        ("d", "d"),
    ]
    assert [link["source"] for link in text["alignment"]] == [2, 1, 0, 4, 3]  # across sentences
    first, second = text["sentences"]
    assert (first["source"], first["source_span"], first["text"]) == ("a b c.", [0, 6], "c. b a")
    assert second["attention"]["weights"] == [[0, 1], [1, 0]]
    assert second["alignment"][0] == {
        "target": 0,
        "source": 1,
        "target_word": "e",
        "source_word": "e",
        "weight": 1.0,
    }
    assert first["score"] == -0.1


def test_literals_are_read_as_placeholders_and_put_back(tmp_path: Path) -> None:
    """The engine is given a placeholder where the path was (the fake reverses the words it is given), and the path
    comes back whole where the placeholder went; in a sentence in capitals too, the path untouched."""
    loader = FakeLoader()
    with thread_server(settings_for(write_fake_bundle(tmp_path / "b")), loader) as s:
        texts = ["open /etc/fstab now", "SEE /ETC/A -V", "I like 😀 a lot"]  # the fake lacks the emoji
        r = s.client.post("/translate", json={"text": texts})
        read = [loader.last.words(ids) for batch in loader.last.batches for ids in batch]
    assert sorted(read) == [["I", "like", "{1}", "a", "lot"], ["SEE", "{1}", "{2}"], ["open", "{1}", "now"]]
    assert [t["text"] for t in r.json()["translations"]] == ["now /etc/fstab open", "-V /ETC/A SEE", "lot a 😀 like I"]


def test_a_sentence_too_long_for_the_model_is_translated_in_parts(shared_server: ThreadServer) -> None:
    words = [f"w{i}" for i in range(70)]  # the fake's max: 32 pieces, one a word
    r = shared_server.client.post("/translate", json={"text": ", ".join(words[:10]) + " " + " ".join(words[10:])})
    out = r.json()["translations"][0]
    assert "truncated" not in out
    # the fake reverses each part's words: the answer is runs of consecutive words, each reversed, in order
    order = [int(w.strip(",")[1:]) for w in out["text"].split()]
    runs: list[list[int]] = []
    for i in order:
        if runs and runs[-1][-1] == i + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    assert [i for run in runs for i in reversed(run)] == list(range(70))  # every word, once, in order
    assert len(runs) >= 3 and all(len(run) <= 32 for run in runs), runs


def test_openapi_documents_the_contract(shared_server: ThreadServer) -> None:
    spec = shared_server.client.get("/openapi.json").json()
    assert {"/translate", "/healthz", "/readyz", "/metrics", "/model", "/admin/reload"} <= set(spec["paths"])
    schemas = spec["components"]["schemas"]
    request = schemas["TranslateRequest"]
    for field in ("text", "beam_size", "n_best", "max_length", "max_length_ratio", "no_repeat_ngram_size"):
        assert request["properties"][field].get("description"), field
    assert request["examples"]
    assert {"attention", "alignment", "sentences"} <= set(schemas["TextTranslation"]["properties"])
    assert {"413", "422", "503", "504"} <= set(spec["paths"]["/translate"]["post"]["responses"])
    assert shared_server.client.get("/docs").status_code == 200


def test_root_serves_the_web_page_and_its_assets(shared_server: ThreadServer) -> None:
    r = shared_server.client.get("/", follow_redirects=False)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    for asset in ("static/app.js", "static/style.css"):
        assert asset in r.text
        assert shared_server.client.get("/" + asset).status_code == 200


def test_request_id_is_echoed_and_in_the_access_log(
    shared_server: ThreadServer, caplog: pytest.LogCaptureFixture
) -> None:
    def logged() -> list[dict[str, Any]]:
        records = [r for r in caplog.records if r.name == "service.access"]
        fields = [getattr(r, "fields", {}) for r in records]
        return [f for f in fields if f.get("request_id") == "abc-123"]

    with caplog.at_level(logging.INFO, logger="service.access"):
        r = shared_server.client.post("/translate", json={"text": "secret words"}, headers={"X-Request-ID": "abc-123"})
        wait_until(logged, what="the access log line")
    assert r.headers["x-request-id"] == "abc-123"
    fields = logged()[0]
    assert fields["status"] == 200 and fields["method"] == "POST" and fields["latency_ms"] > 0
    assert fields["texts"] == 1 and fields["sentences"] == 1 and fields["input_tokens"] == 2
    assert fields["request_bytes"] > 0 and fields["response_bytes"] > 0
    assert "secret" not in json.dumps(fields)  # no text unless debug


def test_debug_logs_texts(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    bundle = write_fake_bundle(tmp_path / "b")
    with thread_server(settings_for(bundle, debug=True), FakeLoader()) as s:
        with caplog.at_level(logging.INFO, logger="service.access"):
            s.client.post("/translate", json={"text": "visible words"})
            wait_until(lambda: any(rec.name == "service.access" for rec in caplog.records))
    record = next(rec for rec in caplog.records if rec.name == "service.access")
    assert record.fields["source"] == ["visible words"]  # type: ignore[attr-defined]


def test_readyz_is_503_while_the_model_loads(tmp_path: Path) -> None:
    gate = threading.Event()
    loader = FakeLoader()

    def slow_loader(bundle: Path, *, provider: str, threads: int) -> FakeEngine:
        gate.wait(10)
        return loader(bundle, provider=provider, threads=threads)

    bundle = write_fake_bundle(tmp_path / "b")
    with thread_server(settings_for(bundle), slow_loader, wait_ready=False) as s:
        r = s.client.get("/readyz")
        assert r.status_code == 503 and r.json()["status"] == "loading"
        assert r.headers["retry-after"]
        assert s.client.get("/healthz").status_code == 200
        busy = s.client.post("/translate", json={"text": "too early"})
        assert busy.status_code == 503 and busy.json()["error"] == "not_ready"
        gate.set()
        wait_until(lambda: s.client.get("/readyz").status_code == 200, what="ready")


def test_cors_preflight_allows_configured_origins(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "b")
    settings = settings_for(bundle, cors_origins="https://app.example")
    with thread_server(settings, FakeLoader()) as s:
        headers = {
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-api-key",
        }
        r = s.client.options("/translate", headers=headers)
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://app.example"
        other = s.client.options("/translate", headers={**headers, "Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers


def test_static_web_page_is_served_at_the_root_when_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    static = tmp_path / "static"
    static.mkdir()
    (static / "index.html").write_text("<h1>translate</h1>", encoding="utf-8")
    monkeypatch.setattr("service.app.STATIC_DIR", static)
    bundle = write_fake_bundle(tmp_path / "b")
    with thread_server(settings_for(bundle), FakeLoader()) as s:
        assert s.client.get("/").text == "<h1>translate</h1>"
        assert s.client.post("/translate", json={"text": "still api"}).status_code == 200
        missing = s.client.get("/missing.js")
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"


def test_search_defaults_come_from_the_settings_and_requests_override_them(fake_bundle: Path) -> None:
    from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE

    cases = [
        ({}, {}, (DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE)),
        ({"length_penalty": 0.6, "no_repeat_ngram_size": 0}, {}, (0.6, 0)),
        ({}, {"length_penalty": 2.0, "no_repeat_ngram_size": 4}, (2.0, 4)),
        ({"length_penalty": 0.6}, {"length_penalty": 0.0}, (0.0, DEFAULT_NO_REPEAT_NGRAM_SIZE)),
    ]
    for settings, request, expected in cases:
        loader = FakeLoader()
        with thread_server(settings_for(fake_bundle, **settings), loader) as s:
            r = s.client.post("/translate", json={"text": "hello world", **request})
            assert r.status_code == 200, r.text
            used = loader.last.options[-1]
            assert (used.length_penalty, used.no_repeat_ngram_size) == expected, (settings, request)
