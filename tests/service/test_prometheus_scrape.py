"""Debian's real Prometheus scrapes a running server with the project's scrape config (deploy/prometheus.yml).

Only the service discovery changes: compose finds replicas by DNS name, here the one target is 127.0.0.1.
The scrape interval is shortened so the test takes seconds. Everything else (job name, metrics path) is the
shipped file, so a broken path or job in it fails here.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.service.servers import ROOT, ThreadServer, free_port

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="prometheus is not on PATH (Debian package 'prometheus'; CI installs it)"
)


def scrape_config(target: str) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = "1s"
    jobs = config["scrape_configs"]
    assert [j["job_name"] for j in jobs] == ["translator"], "the test expects the shipped single translator job"
    job = jobs[0]
    job["scrape_interval"] = "1s"
    job["scrape_timeout"] = "1s"
    assert "dns_sd_configs" in job, "the shipped config discovers replicas by DNS; update this test if that changes"
    del job["dns_sd_configs"]
    job["static_configs"] = [{"targets": [target]}]
    return config


def query(api: httpx.Client, expr: str) -> list[dict[str, Any]]:
    reply = api.get("/api/v1/query", params={"query": expr})
    reply.raise_for_status()
    body = reply.json()
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_prometheus_scrapes_the_latency_histogram(server: ThreadServer, tmp_path: Path) -> None:
    for _ in range(3):
        assert server.client.post("/translate", json={"text": "hello world"}).status_code == 200
    target = server.url.removeprefix("http://")
    config_path = tmp_path / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(scrape_config(target)))
    check = subprocess.run(["promtool", "check", "config", str(config_path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port()
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config_path}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as api:
            deadline = time.monotonic() + 60
            series: list[dict[str, Any]] = []
            targets: list[dict[str, Any]] = []
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    targets = api.get("/api/v1/targets").json()["data"]["activeTargets"]
                    series = query(
                        api, 'mt_http_request_duration_seconds_bucket{job="translator",route="/translate",le="+Inf"}'
                    )
                except (httpx.TransportError, httpx.HTTPStatusError, ValueError):
                    series = []  # not listening yet, or "Service Unavailable" while it starts up
                if series:
                    break
                time.sleep(0.5)
            assert proc.poll() is None, "prometheus exited:\n" + (tmp_path / "prometheus.log").read_text()
            assert series, f"no histogram scraped within 60 s; targets: {targets}"
            assert [t["health"] for t in targets] == ["up"], targets
            assert targets[0]["labels"]["instance"] == target
            assert targets[0]["scrapeUrl"] == f"http://{target}/metrics"
            labels = series[0]["metric"]
            assert labels["method"] == "POST" and labels["status"] == "200"
            assert float(series[0]["value"][1]) >= 3
            # The whole histogram is there: buckets aggregate to a quantile Prometheus can compute.
            count = query(api, 'sum(mt_http_request_duration_seconds_count{route="/translate",status="200"})')
            assert float(count[0]["value"][1]) == float(series[0]["value"][1])
            quantile = query(
                api,
                "histogram_quantile(0.5, sum by (le) "
                '(mt_http_request_duration_seconds_bucket{route="/translate",status="200"}))',
            )
            assert 0 < float(quantile[0]["value"][1]) < 60
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
