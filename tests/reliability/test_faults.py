"""Faults: bad bundles at start-up and at reload, an engine that raises, SIGTERM under load.

Already covered in tests/service, not repeated here: a missing bundle at start-up
(test_server_lifecycle.py), a corrupt manifest, a missing bundle and a failing warm-up at reload
(test_model_reload.py), a corrupt graph at reload on the real engine (test_server_real_bundle.py),
an engine failure failing only its own request (test_http_errors.py) and SIGTERM with one request
decoding (test_server_lifecycle.py).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.bundle import write_manifest
from testkit.fake_engine import FakeLoader, write_fake_bundle
from tests.reliability.conftest import ADMIN
from tests.service.servers import (
    ROOT,
    ProcessServer,
    free_port,
    process_server,
    settings_for,
    thread_server,
    wait_until,
)


def _manifest(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))


def corrupt_graph(bundle: Path) -> str:
    decoder = bundle / "decoder.onnx"
    data = bytearray(decoder.read_bytes())
    data[len(data) // 2] ^= 0xFF
    decoder.write_bytes(bytes(data))
    return "sha256"


def truncated_graph(bundle: Path) -> str:
    encoder = bundle / "encoder.onnx"
    encoder.write_bytes(encoder.read_bytes()[:1000])
    return "truncated"


def truncated_manifest(bundle: Path) -> str:
    manifest = bundle / "manifest.json"
    manifest.write_bytes(manifest.read_bytes()[:200])
    return "not valid JSON"


def mismatched_vocabulary(bundle: Path) -> str:
    """vocab.json of another size, with the checksums updated: only the vocab_size check can tell."""
    vocab = json.loads((bundle / "vocab.json").read_text(encoding="utf-8"))
    del vocab["pieces"][-1]
    (bundle / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    write_manifest(bundle, _manifest(bundle))
    return "vocab_size"


def mismatched_graphs(bundle: Path) -> str:
    """The encoder graph in the decoder's place, checksums updated: its tensors are the wrong ones."""
    shutil.copy(bundle / "encoder.onnx", bundle / "decoder.onnx")
    write_manifest(bundle, _manifest(bundle))
    return "lacks the tensors"


BAD_BUNDLES: dict[str, Callable[[Path], str]] = {
    "corrupt-graph": corrupt_graph,
    "truncated-graph": truncated_graph,
    "truncated-manifest": truncated_manifest,
    "mismatched-vocabulary": mismatched_vocabulary,
    "mismatched-graphs": mismatched_graphs,
}


@pytest.fixture(scope="module")
def bad_bundles(real_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Each kind of damage on a copy of the tiny bundle: (directory, what the error must say)."""
    root = tmp_path_factory.mktemp("bad-bundles")
    out = {}
    for name, damage in BAD_BUNDLES.items():
        copy = Path(shutil.copytree(real_bundle, root / name))
        out[name] = (copy, damage(copy))
    return out


def test_a_bad_bundle_at_startup_exits_1_saying_what_is_wrong(bad_bundles: dict[str, tuple[Path, str]]) -> None:
    """All five start at once (each start imports onnxruntime: seconds); each must exit 1."""
    runs = {}
    for name, (bundle, _) in bad_bundles.items():
        command = [sys.executable, "-m", "service", "--bundle", str(bundle), "--provider", "cpu"]
        command += ["--host", "127.0.0.1", "--port", str(free_port())]
        runs[name] = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for name, process in runs.items():
        try:
            _, stderr = process.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail(f"{name}: the server did not exit within 90 s")
        assert process.returncode == 1, f"{name}: exit {process.returncode}\n{stderr}"
        errors = [json.loads(line)["message"] for line in stderr.splitlines() if '"level": "error"' in line]
        says = bad_bundles[name][1]
        assert any(says in e and str(bad_bundles[name][0]) in e for e in errors), f"{name}: {errors}"
        assert any("exiting: the model could not be loaded" in e for e in errors), errors
        assert "Traceback" not in stderr, f"{name}: a bad bundle is not a crash\n{stderr}"


@pytest.mark.parametrize("name", [n for n in BAD_BUNDLES if n != "corrupt-graph"])  # that one: tests/service
def test_a_bad_bundle_at_reload_keeps_the_old_model_serving(
    real_server: ProcessServer, bad_bundles: dict[str, tuple[Path, str]], name: str
) -> None:
    bundle, says = bad_bundles[name]
    before = real_server.client.get("/model").json()
    translation = real_server.client.post("/translate", json={"text": "red blue"}).json()["translations"]
    r = real_server.client.post("/admin/reload", json={"bundle": str(bundle)}, headers=ADMIN)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "reload_failed"
    assert says in r.json()["message"] and "still serving" in r.json()["message"]
    assert real_server.client.get("/readyz").status_code == 200
    assert real_server.client.get("/model").json()["loaded_at"] == before["loaded_at"]
    after = real_server.client.post("/translate", json={"text": "red blue"})
    assert after.status_code == 200 and after.json()["translations"] == translation


@pytest.mark.parametrize(
    ("scheduler", "retried"), [("batch", "retrying each alone"), ("continuous", "decoding each request alone")]
)
def test_an_engine_failure_fails_only_its_request_with_a_request_id_found_in_the_log(
    tmp_path: Path, scheduler: str, retried: str
) -> None:
    bundle = write_fake_bundle(tmp_path / "bundle", fail_word="POISON")
    args = ["--bundle", str(bundle), "--max-wait-ms", "300", "--max-batch-sentences", "64", "--scheduler", scheduler]
    with process_server(args, tmp_path / "server.log", fake=True) as server:
        wait_until(lambda: server.client.get("/readyz").status_code == 200, what="ready")
        texts = ["one two", "three POISON four", "five six", "seven"]

        async def burst() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                return list(await asyncio.gather(*(client.post("/translate", json={"text": t}) for t in texts)))

        answers = asyncio.run(burst())
        assert [a.status_code for a in answers] == [200, 500, 200, 200]
        bad = answers[1].json()
        assert bad["error"] == "engine_error" and "fake engine failure" in bad["message"]
        assert bad["request_id"] == answers[1].headers["x-request-id"]
        assert [a.json()["translations"][0]["text"] for a in answers if a.status_code == 200] == [
            "two one",
            "six five",
            "seven",
        ]
        batches = [line for line in server.log().splitlines() if retried in line]
        assert batches, "the failing step was not retried request by request"
        after = server.client.post("/translate", json={"text": "next batch"})
        assert after.status_code == 200 and after.json()["translations"][0]["text"] == "batch next"

        lines = [json.loads(line) for line in server.log().splitlines()]
        mine = [line for line in lines if bad["request_id"] in json.dumps(line)]
        access = [line for line in mine if line.get("logger") == "service.access"]
        assert access and access[0]["status"] == 500 and access[0]["error"] == "engine_error"
        assert any(line["level"] == "warning" and "fake engine failure" in line["message"] for line in mine)


@pytest.mark.parametrize("scheduler", ["batch", "continuous", "engine-process"])
def test_sigterm_under_load_answers_every_accepted_request_then_exits_0(tmp_path: Path, scheduler: str) -> None:
    """24 requests in flight (4 sentences per batch or running set, 1 s a batch or step: some decoding, the
    rest queued) when SIGTERM arrives: every one is answered, new connections are refused, exit 0. With
    engine-process the running sets are in the engine process (MT_ENGINE_PROCESS), which the server drains.
    The first batch takes a second so that all 24 requests are inside the server before any is
    answered, even on a slow, shared CI machine (at 0.25 s the load sometimes never built up)."""
    # a running set answers a sentence after its last step: 3 steps of 0.5 s (two words), so that the first step's
    # metrics come while all 24 requests still wait
    fake = {"delay_s": 1.0} if scheduler == "batch" else {"delay_s": 0.5, "steps_per_word": 1}
    bundle = write_fake_bundle(tmp_path / "bundle", **fake)
    args = ["--bundle", str(bundle), "--max-wait-ms", "0", "--max-batch-sentences", "4", "--request-timeout-s", "20"]
    args += ["--scheduler", "batch" if scheduler == "batch" else "continuous"]
    args += ["--engine-process"] if scheduler == "engine-process" else []
    texts = [f"word{i} other{i}" for i in range(24)]
    with process_server(args, tmp_path / "server.log", fake=True) as server:
        wait_until(lambda: server.client.get("/readyz").status_code == 200, what="ready")

        def metric(name: str) -> float:
            for line in server.client.get("/metrics").text.splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
            return 0.0

        def loaded() -> bool:  # all 24 (+ this scrape) inside the server, a batch decoding, more queued
            return (
                metric("mt_http_requests_in_flight") >= len(texts) + 1
                and metric("mt_batch_size_sentences_count") >= 1
                and metric("mt_queue_depth_sentences") > 0
            )

        async def load() -> tuple[list[httpx.Response | Exception], bool]:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                tasks = [asyncio.create_task(client.post("/translate", json={"text": t})) for t in texts]
                for _ in range(200):
                    if loaded():
                        break
                    await asyncio.sleep(0.02)
                else:
                    pytest.fail("the load never built up")
                server.signal(signal.SIGTERM)
                for _ in range(100):  # the listening socket closes at once
                    await asyncio.sleep(0.02)
                    try:
                        async with httpx.AsyncClient(base_url=server.url, timeout=1) as fresh:
                            await fresh.get("/healthz")
                    except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError):
                        # refused, or taken into the backlog as the socket closed and dropped unanswered
                        refused = True
                        break
                else:
                    refused = False
                return list(await asyncio.gather(*tasks, return_exceptions=True)), refused

        answers, refused = asyncio.run(load())
        assert refused, "new connections were still accepted after SIGTERM"
        statuses = [a.status_code if isinstance(a, httpx.Response) else repr(a) for a in answers]
        assert statuses == [200] * len(texts)
        out = [a.json()["translations"][0]["text"] for a in answers if isinstance(a, httpx.Response)]
        assert out == [" ".join(reversed(t.split())) for t in texts]
        assert server.process.wait(timeout=30) == 0
        log = server.log()
        assert "Shutting down" in log and "Finished server process" in log
        if scheduler == "engine-process":  # told to close, it exits by itself: not killed, not taken for dead
            assert "engine process started" in log
            assert "after close; killed" not in log and "the engine process exited" not in log, log[-3000:]


def test_a_request_received_while_draining_is_still_served(tmp_path: Path) -> None:
    """Between SIGTERM and the listening socket's close, or before its handler ran, a request is
    already the server's: it is translated, not refused (only /readyz says draining)."""
    loader = FakeLoader()
    with thread_server(settings_for(write_fake_bundle(tmp_path / "b")), loader) as s:
        s.service.models.draining = True
        r = s.client.post("/translate", json={"text": "still served"})
        assert r.status_code == 200 and r.json()["translations"][0]["text"] == "served still"
        assert s.client.get("/readyz").json()["status"] == "draining"
