"""The server command as a process: startup failure, SIGHUP reload, SIGTERM drain.

The SIGHUP and SIGTERM tests share one server process (starting one costs seconds); SIGTERM comes
last, since it ends the process.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from testkit.fake_engine import write_fake_bundle
from tests.service.servers import ROOT, ProcessServer, free_port, process_server, wait_until


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fake_bundle(tmp_path_factory.mktemp("lifecycle") / "bundle", version="1")


@pytest.fixture(scope="module")
def process(bundle: Path) -> Iterator[ProcessServer]:
    args = ["--bundle", str(bundle), "--max-wait-ms", "0", "--request-timeout-s", "20"]
    with process_server(args, bundle.parent / "server.log", fake=True) as server:
        wait_until(lambda: server.client.get("/readyz").status_code == 200, what="ready")
        yield server


def test_missing_bundle_at_startup_exits_non_zero_with_a_clear_log() -> None:
    command = [sys.executable, "-m", "service", "--bundle", "/nonexistent/bundle"]
    command += ["--host", "127.0.0.1", "--port", str(free_port())]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.strip()]
    errors = [line["message"] for line in lines if line["level"] == "error"]
    assert any("/nonexistent/bundle" in e and "not a directory" in e for e in errors), errors


def test_sighup_reloads_the_configured_bundle(process: ProcessServer, bundle: Path) -> None:
    (bundle / "manifest.json").write_text("{broken", encoding="utf-8")
    process.signal(signal.SIGHUP)
    wait_until(lambda: "SIGHUP reload failed" in process.log(), what="the failed reload")
    assert process.client.get("/model").json()["version"] == "1"  # the old model stays

    write_fake_bundle(bundle, version="2", prefix="v2:")
    process.signal(signal.SIGHUP)
    wait_until(lambda: process.client.get("/model").json()["version"] == "2", what="v2")
    r = process.client.post("/translate", json={"text": "a b"})
    assert r.json()["translations"][0]["text"] == "v2:b a"


def test_sigterm_drains_in_flight_requests_then_exits_0(process: ProcessServer, bundle: Path) -> None:
    write_fake_bundle(bundle, version="3", delay_s=1.5)
    process.signal(signal.SIGHUP)
    wait_until(lambda: process.client.get("/model").json()["version"] == "3", what="slow model")

    def batches() -> int:
        text = process.client.get("/metrics").text
        return int(float(text.split("\nmt_batch_size_sentences_count ")[1].split()[0]))

    before = batches()
    result: dict[str, httpx.Response] = {}
    thread = threading.Thread(target=lambda: result.update(r=process.client.post("/translate", json={"text": "x y z"})))
    thread.start()
    wait_until(lambda: batches() > before, what="the request to be decoding")
    process.signal(signal.SIGTERM)
    wait_until(lambda: _refused(process.url), timeout=5, what="the listening socket to close")
    thread.join(timeout=20)
    assert result["r"].status_code == 200
    assert result["r"].json()["translations"][0]["text"] == "z y x"
    assert process.process.wait(timeout=20) == 0
    log = process.log()
    assert "Shutting down" in log and "Finished server process" in log
    for line in log.splitlines():
        json.loads(line)  # every log line is structured


def _refused(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    try:
        socket.create_connection((host, int(port)), timeout=0.5).close()
    except ConnectionRefusedError:
        return True
    return False
