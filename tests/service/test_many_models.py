"""Several models in one server (service/models.py): routing by languages or name, per-model readiness,
reloads and metrics, and which bundles a server picks up from its settings."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.app import create_app
from service.models import ConfigurationError, bundle_paths
from service.settings import Settings
from testkit.fake_engine import FakeLoader, write_fake_bundle
from tests.service.servers import ThreadServer, settings_for, thread_server, wait_until

ADMIN = {"Authorization": "Bearer secret"}


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path]:
    """An en->de and a de->en fake model; their translations say which one made them."""
    return (
        write_fake_bundle(tmp_path / "en-de", name="fake-en-de", languages="en-de", prefix="de:"),
        write_fake_bundle(tmp_path / "de-en", name="fake-de-en", languages="de-en", prefix="en:"),
    )


@pytest.fixture
def loader() -> FakeLoader:
    return FakeLoader()


@pytest.fixture
def server(two: tuple[Path, Path], loader: FakeLoader) -> Iterator[ThreadServer]:
    settings = settings_for(two[0], bundles=list(two), admin_token="secret")
    with thread_server(settings, loader) as running:
        yield running


def text_of(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    return str(r.json()["translations"][0]["text"])


def test_languages_and_models_list_both(server: ThreadServer) -> None:
    pairs = server.client.get("/languages").json()["pairs"]
    assert pairs == [
        {"source_lang": "en", "target_lang": "de", "model": "fake-en-de", "version": "1", "ready": True},
        {"source_lang": "de", "target_lang": "en", "model": "fake-de-en", "version": "1", "ready": True},
    ]
    models = server.client.get("/models").json()["models"]
    assert [(m["name"], m["status"]) for m in models] == [("fake-en-de", "ready"), ("fake-de-en", "ready")]
    assert server.client.get("/model", params={"name": "fake-de-en"}).json()["source_language"] == "de"


def test_a_request_reaches_the_model_of_its_languages_or_name(server: ThreadServer) -> None:
    post = server.client.post
    assert text_of(post("/translate", json={"text": "a b", "source_lang": "en", "target_lang": "de"})) == "de:b a"
    assert text_of(post("/translate", json={"text": "a b", "source_lang": "de", "target_lang": "en"})) == "en:b a"
    assert text_of(post("/translate", json={"text": "a b", "target_lang": "en"})) == "en:b a"
    assert text_of(post("/translate", json={"text": "a b", "model": "fake-de-en"})) == "en:b a"
    assert text_of(post("/translate", json={"text": "a b"})) == "de:b a"  # the first model is the default
    r = post("/translate", json={"text": "a b", "source_lang": "de", "target_lang": "en"})
    assert r.json()["model"] == {"name": "fake-de-en", "version": "1", "source_lang": "de", "target_lang": "en"}


def test_what_no_model_serves_is_refused_with_what_is_served(server: ThreadServer) -> None:
    post = server.client.post
    r = post("/translate", json={"text": "a", "source_lang": "fr", "target_lang": "de"})
    assert r.status_code == 400 and r.json()["error"] == "unsupported_language_pair"
    assert "en\u2192de (fake-en-de)" in r.json()["message"] and "de\u2192en (fake-de-en)" in r.json()["message"]
    r = post("/translate", json={"text": "a", "model": "fake-fr-en"})
    assert r.status_code == 404 and r.json()["error"] == "unknown_model"
    assert "'fake-de-en'" in r.json()["message"]
    r = post("/translate", json={"text": "a", "model": "fake-de-en", "target_lang": "de"})
    assert r.status_code == 400 and "de\u2192en" in r.json()["message"]
    assert post("/translate", json={"text": "a", "target_lang": "German"}).status_code == 422


def test_concurrent_requests_for_both_models_never_share_a_batch(server: ThreadServer, loader: FakeLoader) -> None:
    results: dict[int, str] = {}

    def send(i: int) -> None:
        pair = {"source_lang": "en", "target_lang": "de"} if i % 2 else {"source_lang": "de", "target_lang": "en"}
        results[i] = text_of(server.client.post("/translate", json={"text": f"w{i} x{i}", **pair}))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: f"{'de' if i % 2 else 'en'}:x{i} w{i}" for i in range(24)}
    en_de, de_en = loader.engines
    for engine, parity in ((en_de, 1), (de_en, 0)):
        words = {engine.words(ids)[0] for batch in engine.batches for ids in batch}
        assert words == {f"w{i}" for i in range(24) if i % 2 == parity}


def test_one_model_reloads_while_the_other_keeps_serving(server: ThreadServer, tmp_path: Path) -> None:
    v2 = write_fake_bundle(tmp_path / "de-en-v2", version="2", name="fake-de-en", languages="de-en", prefix="en2:")
    en_de_before = server.service.models.named("fake-en-de").current  # type: ignore[union-attr]
    r = server.client.post("/admin/reload", json={"bundle": str(v2)}, headers=ADMIN)
    assert r.status_code == 400 and "'fake-en-de', 'fake-de-en'" in r.json()["message"]
    r = server.client.post("/admin/reload", json={"model": "fake-de-en", "bundle": str(v2)}, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["model"]["version"] == "2" and r.json()["previous"]["version"] == "1"
    assert text_of(server.client.post("/translate", json={"text": "a b", "target_lang": "en"})) == "en2:b a"
    assert text_of(server.client.post("/translate", json={"text": "a b", "target_lang": "de"})) == "de:b a"
    assert server.service.models.named("fake-en-de").current is en_de_before  # type: ignore[union-attr]
    # a bundle of another model does not replace this one
    other = write_fake_bundle(tmp_path / "other", name="fake-en-fr", languages="en-fr")
    r = server.client.post("/admin/reload", json={"model": "fake-de-en", "bundle": str(other)}, headers=ADMIN)
    assert r.status_code == 422 and "fake-en-fr" in r.json()["message"]
    assert text_of(server.client.post("/translate", json={"text": "a b", "target_lang": "en"})) == "en2:b a"
    metrics = server.client.get("/metrics").text
    assert 'mt_model_info{name="fake-de-en",provider="FakeExecutionProvider",version="2"} 1.0' in metrics
    assert 'version="1"' in metrics.split('mt_model_info{name="fake-en-de"')[1].split("\n")[0]
    assert 'name="fake-de-en",provider="FakeExecutionProvider",version="1"' not in metrics
    assert 'mt_model_reloads_total{model="fake-de-en",result="failure"} 1.0' in metrics
    assert 'mt_translated_sentences_total{model="fake-en-de"} 1.0' in metrics
    assert 'mt_translated_sentences_total{model="fake-de-en"} 1.0' in metrics  # decoded once,
    assert 'mt_cache_sentences_total{model="fake-de-en",result="hit"} 1.0' in metrics  # answered twice


def test_a_model_that_fails_to_load_leaves_the_other_serving(two: tuple[Path, Path], tmp_path: Path) -> None:
    broken = write_fake_bundle(tmp_path / "fr", name="fake-en-fr", languages="en-fr", warmup_fails=True)
    settings = settings_for(two[0], bundles=[two[0], broken, two[1]])
    with thread_server(settings, FakeLoader(), wait_ready=False) as s:
        wait_until(lambda: s.client.get("/readyz").json()["status"] == "failed", what="the failed load")
        ready = s.client.get("/readyz")
        assert ready.status_code == 503
        states = {m["name"]: m["status"] for m in ready.json()["models"]}
        assert states["fake-en-de"] == "ready" and states["fake-en-fr"] == "failed"
        assert "fake-en-fr" in ready.json()["message"]
        assert text_of(s.client.post("/translate", json={"text": "a b", "target_lang": "de"})) == "de:b a"
        r = s.client.post("/translate", json={"text": "a b", "target_lang": "fr"})
        assert r.status_code == 503 and "fake-en-fr" in r.json()["message"]


def test_which_bundles_a_server_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_fake_bundle(tmp_path / "models" / "en-de")
    assert bundle_paths(Settings()) == [Path("models/en-de")]
    write_fake_bundle(tmp_path / "models" / "de-en", name="fake-de-en", languages="de-en")
    assert bundle_paths(Settings()) == [Path("models/en-de"), Path("models/de-en")]  # the default serves both
    assert bundle_paths(Settings(bundle=Path("models/en-de"))) == [Path("models/en-de")]  # named: that one alone
    monkeypatch.setenv("MT_BUNDLES", "models")  # a directory of bundles, in name order
    assert bundle_paths(Settings()) == [Path("models/de-en"), Path("models/en-de")]
    monkeypatch.setenv("MT_BUNDLES", "models/en-de, models/de-en")
    assert bundle_paths(Settings()) == [Path("models/en-de"), Path("models/de-en")]
    monkeypatch.setenv("MT_BUNDLES", "models/en-de,models/en-de")
    with pytest.raises(ConfigurationError, match="both named 'fake-en-de'"):
        create_app(Settings(), engine_loader=FakeLoader())
    monkeypatch.setenv("MT_BUNDLES", str(tmp_path))
    with pytest.raises(ConfigurationError, match="neither a bundle nor a directory of bundles"):
        bundle_paths(Settings())


def test_auto_detects_the_source_language_and_picks_the_direction(server: ThreadServer) -> None:
    post = server.client.post
    german = "Die Datei konnte nicht gespeichert werden, weil der Datenträger voll ist."
    english = "The file could not be saved because the disk is full."
    r = post("/translate", json={"text": german, "source_lang": "auto", "target_lang": "en"})
    assert text_of(r).startswith("en:") and r.json()["detected_language"]["language"] == "de"
    assert r.json()["detected_language"]["confidence"] > 0.5
    r = post("/translate", json={"text": english, "source_lang": "auto"})  # no target: the detected source decides
    assert text_of(r).startswith("de:") and r.json()["model"]["name"] == "fake-en-de"
    r = post("/translate", json={"text": german, "source_lang": "auto", "target_lang": "de"})
    assert r.status_code == 400 and r.json()["message"].startswith("detected de (confidence")
    assert "detected_language" not in post("/translate", json={"text": english, "source_lang": "en"}).json()


def test_a_document_is_detected_once_as_a_whole(two: tuple[Path, Path], loader: FakeLoader) -> None:
    """A document is translated in groups of MT_MAX_TEXTS; its language is detected once, on the whole of it, so
    that a group of short or mixed lines does not go to another model than the rest."""
    german = [
        "Die Datei konnte nicht gespeichert werden, weil der Datenträger voll ist.",
        "Bitte schließen Sie alle anderen Programme, bevor Sie fortfahren.",
        "Die Einstellungen wurden erfolgreich übernommen und gespeichert.",
        "Wählen Sie einen Ordner aus, in dem die Sicherung abgelegt werden soll.",
    ]
    lines = [*german, "The end."]
    settings = settings_for(two[0], bundles=list(two), max_texts=2)
    with thread_server(settings, loader) as server:
        r = server.client.post(
            "/translate/document",
            files={"file": ("notes.txt", "\n".join(lines).encode())},
            data={"source_lang": "auto", "target_lang": "en"},
        )
        assert r.status_code == 200, r.text
        assert all(line.startswith("en:") for line in r.text.splitlines()), r.text
        r = server.client.post("/translate", json={"text": "The end.", "source_lang": "auto", "target_lang": "en"})
        assert r.status_code == 400  # alone, the last line is English: the document's group would have failed


def test_detect_names_the_language_of_each_text(server: ThreadServer) -> None:
    r = server.client.post("/detect", json={"text": ["Einstellungen speichern", "Save the settings", "   "]})
    assert r.status_code == 200, r.text
    german, english, blank = r.json()["detections"]
    assert german["language"] == "de" and english["language"] == "en"
    assert [c["language"] for c in german["candidates"]] == ["de", "en"]
    assert abs(sum(c["confidence"] for c in german["candidates"]) - 1) < 0.01
    assert blank == {"language": None, "confidence": 0.0, "candidates": []}
    assert server.client.post("/detect", json={"text": []}).status_code == 422
