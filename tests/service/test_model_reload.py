"""Reloading a model without downtime via the admin endpoint (SIGHUP: test_server_lifecycle.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from testkit.fake_engine import FakeLoader, write_fake_bundle
from tests.service.servers import ThreadServer, settings_for, thread_server, wait_until

ADMIN = {"Authorization": "Bearer admin-token"}


@pytest.fixture
def admin(tmp_path: Path, loader: FakeLoader) -> Iterator[ThreadServer]:
    bundle = write_fake_bundle(tmp_path / "v1", version="1", delay_s=0.0)
    with thread_server(settings_for(bundle, admin_token="admin-token"), loader) as running:
        yield running


def translate(server: ThreadServer, text: str = "a b") -> tuple[str, str]:
    body = server.client.post("/translate", json={"text": text}).json()
    return body["translations"][0]["text"], body["model"]["version"]


def test_reload_with_a_good_bundle_switches_models(admin: ThreadServer, tmp_path: Path) -> None:
    v2 = write_fake_bundle(tmp_path / "v2", version="2", prefix="v2:")
    r = admin.client.post("/admin/reload", json={"bundle": str(v2)}, headers=ADMIN)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == {"name": "fake-en-de", "version": "2", "source_lang": "en", "target_lang": "de"}
    assert body["previous"] == {"name": "fake-en-de", "version": "1", "source_lang": "en", "target_lang": "de"}
    assert body["bundle"] == str(v2)
    assert translate(admin) == ("v2:b a", "2")
    assert admin.client.get("/model").json()["version"] == "2"
    assert 'version="2"' in admin.client.get("/metrics").text


def test_reload_without_a_body_reloads_the_configured_bundle(admin: ThreadServer, loader: FakeLoader) -> None:
    r = admin.client.post("/admin/reload", headers=ADMIN)
    assert r.status_code == 200 and r.json()["model"]["version"] == "1"
    assert len(loader.engines) == 2


@pytest.mark.parametrize(
    ("make", "status", "says"),
    [
        (lambda d: d / "missing", 422, "not a directory"),
        (lambda d: _corrupt(d / "corrupt"), 422, "manifest.json is corrupt"),
        (lambda d: write_fake_bundle(d / "cold", warmup_fails=True), 500, "warm-up"),
    ],
    ids=["missing", "corrupt", "warmup-fails"],
)
def test_a_bad_bundle_keeps_the_old_model(
    admin: ThreadServer, tmp_path: Path, make: object, status: int, says: str
) -> None:
    bad = make(tmp_path)  # type: ignore[operator]
    r = admin.client.post("/admin/reload", json={"bundle": str(bad)}, headers=ADMIN)
    assert r.status_code == status, r.text
    assert r.json()["error"] == "reload_failed"
    assert says in r.json()["message"]
    assert "still serving fake-en-de 1" in r.json()["message"]
    assert translate(admin) == ("b a", "1")
    assert admin.client.get("/readyz").status_code == 200
    assert 'mt_model_reloads_total{model="fake-en-de",result="failure"} 1.0' in admin.client.get("/metrics").text


def _corrupt(directory: Path) -> Path:
    directory.mkdir()
    (directory / "manifest.json").write_text('{"name": "truncat', encoding="utf-8")
    return directory


def test_in_flight_requests_finish_on_the_model_they_started_with(
    admin: ThreadServer, loader: FakeLoader, tmp_path: Path
) -> None:
    loader.last.delay_s = 0.5
    result: dict[str, httpx.Response] = {}

    def slow() -> None:
        result["r"] = admin.client.post("/translate", json={"text": "old model"}, timeout=10)

    thread = threading.Thread(target=slow)
    thread.start()
    wait_until(lambda: loader.last.batches, what="the slow request to start decoding")
    v2 = write_fake_bundle(tmp_path / "v2", version="2", prefix="v2:")
    r = admin.client.post("/admin/reload", json={"bundle": str(v2)}, headers=ADMIN)
    assert r.status_code == 200
    assert translate(admin) == ("v2:b a", "2")  # new requests: new model, at once
    thread.join()
    assert result["r"].json()["translations"][0]["text"] == "model old"
    assert result["r"].json()["model"]["version"] == "1"


def test_concurrent_reloads_get_409(admin: ThreadServer, tmp_path: Path) -> None:
    gate = threading.Event()
    slot = admin.service.models.default
    real_loader = slot._loader

    def slow_loader(bundle: Path, *, provider: str, threads: int) -> object:
        gate.wait(5)
        return real_loader(bundle, provider=provider, threads=threads)

    slot._loader = slow_loader  # type: ignore[assignment]
    first: dict[str, httpx.Response] = {}
    thread = threading.Thread(
        target=lambda: first.update(r=admin.client.post("/admin/reload", headers=ADMIN, timeout=10))
    )
    thread.start()
    wait_until(lambda: slot.loading, what="the first reload to start")
    second = admin.client.post("/admin/reload", headers=ADMIN)
    assert second.status_code == 409 and second.json()["error"] == "reload_in_progress"
    gate.set()
    thread.join()
    assert first["r"].status_code == 200
