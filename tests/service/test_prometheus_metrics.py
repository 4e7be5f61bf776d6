"""/metrics: the names the dashboards rely on, and promtool's verdict on the format."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.service.servers import ThreadServer

EXPECTED = [
    "mt_http_request_duration_seconds_bucket",
    "mt_http_requests_in_flight",
    "mt_queue_wait_seconds_bucket",
    "mt_queue_depth_sentences",
    "mt_batch_size_sentences_bucket",
    "mt_batch_size_tokens_bucket",
    "mt_batch_decode_duration_seconds_bucket",
    "mt_input_tokens_total",
    "mt_generated_tokens_total",
    "mt_errors_total",
    "mt_model_reloads_total",
    "mt_ready",
    "mt_model_ready",
    "mt_model_info",
]


def traffic(server: ThreadServer) -> str:
    c = server.client
    c.post("/translate", json={"text": "some words. more words"})
    c.post("/translate", json={"text": "x", "beam_size": 99})
    c.get("/nowhere")
    c.get("/healthz")
    return c.get("/metrics").text


def test_metrics_names_and_labels(server: ThreadServer) -> None:
    text = traffic(server)
    for name in EXPECTED:
        assert f"\n{name}" in text, name
    assert 'mt_model_info{name="fake-en-de",provider="FakeExecutionProvider",version="1"} 1.0' in text
    assert 'mt_http_request_duration_seconds_count{method="POST",route="/translate",status="200"} 1.0' in text
    assert 'route="/translate",status="422"' in text
    assert 'route="unmatched",status="404"' in text  # no raw paths: label values stay bounded
    assert 'mt_errors_total{reason="validation"} 1.0' in text
    assert 'mt_errors_total{reason="overloaded"} 0.0' in text
    assert 'mt_input_tokens_total{model="fake-en-de"} 4.0' in text
    assert 'mt_model_ready{model="fake-en-de"} 1.0' in text
    assert 'le="0.005"' in text and 'le="60.0"' in text
    assert "mt_ready 1.0" in text


def test_promtool_accepts_the_metrics(server: ThreadServer) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not on PATH (Debian package 'prometheus'; CI installs it)")
    text = traffic(server)
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == "", "promtool lint findings"


def test_process_build_and_text_counters_without_created_twins(server: ThreadServer) -> None:
    text = traffic(server)
    for name in ("process_resident_memory_bytes", "process_cpu_seconds_total", "python_info", "mt_build_info{"):
        assert f"\n{name}" in text, name
    assert "_created" not in text
    assert 'mt_translated_texts_total{model="fake-en-de"} 1.0' in text
    assert 'mt_translated_characters_total{model="fake-en-de"} 22.0' in text  # "some words. more words"
    assert 'mt_model_reloads_total{model="fake-en-de",result="success"} 0.0' in text  # the start-up load is no reload
    assert 'mt_queue_wait_seconds_bucket{le="0.001"}' in text


def test_a_form_body_is_told_to_send_json(server: ThreadServer) -> None:
    r = server.client.post("/translate", data={"text": "hello"})
    assert r.status_code == 422
    assert "takes JSON" in r.json()["message"] and "application/x-www-form-urlencoded" in r.json()["message"]
