"""MT_ENGINE_PROCESS: the models and the continuous scheduler in a process of their own (service/engine_process.py),
through a real server on 127.0.0.1 with the fake engine. The real engine's run is in test_server_real_bundle.py."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

from testkit.fake_engine import FakeEngine, write_fake_bundle
from tests.service.servers import ProcessServer, process_server, wait_until

ADMIN_TOKEN = "engine-process-token"


def metric(server: ProcessServer, name: str) -> float:
    """A series' value; 0 until it exists (the engine process sends its metrics every 0.2 s)."""
    for line in server.client.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def start(tmp_path: Path, bundle: Path, *extra: str) -> AbstractContextManager[ProcessServer]:
    args = ["--bundle", str(bundle), "--engine-process", "--scheduler", "continuous", *extra]
    return process_server(args, tmp_path / "server.log", fake=True, env={"MT_ADMIN_TOKEN": ADMIN_TOKEN}, ready=True)


def engine_pid(server: ProcessServer) -> int:
    """The engine process: the server's child that runs multiprocessing's spawn entry point."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if int(stat[1]) == server.pid and b"spawn_main" in command:
            return int(pid)
    raise AssertionError("no engine process under the server")


def test_fake_ids_are_the_same_in_every_process() -> None:
    """The server tokenizes and the engine process decodes: a fake id must mean the same word in both."""
    one, other = FakeEngine({}), FakeEngine({})
    text = "Grüße aus Köln 東京 x"
    assert other.words(one.tokenize(text)) == text.split()


def test_answers_concurrent_requests_and_exports_the_engine_process_metrics(tmp_path: Path) -> None:
    """Requests with different options from 16 threads share running sets in the engine process (sentences join
    mid-run); each gets its own translation, and the scheduler's metrics reach /metrics, which promtool accepts."""
    bundle = write_fake_bundle(tmp_path / "bundle", steps_per_word=1.0, step_s=0.002)
    texts = [" ".join(f"w{i}x{j}" for j in range(1 + i % 7)) for i in range(96)]
    with start(tmp_path, bundle, "--admit-every", "1", "--refill-at", "1024") as server:

        def ask(i: int) -> tuple[str, list[str]]:
            body = {"text": texts[i], "n_best": 1 + i % 2, "return_attention": i % 3 == 0}
            r = server.client.post("/translate", json=body)
            assert r.status_code == 200, r.text
            out = r.json()["translations"][0]
            return out["text"], [a["text"] for a in out.get("alternatives", [])]

        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(ask, range(len(texts))))
        wait_until(lambda: metric(server, 'mt_translated_sentences_total{model="fake-en-de"}') == len(texts))
        mid_run = metric(server, "mt_admitted_mid_run_sentences_total")
        steps = metric(server, "mt_step_duration_seconds_count")
        text = server.client.get("/metrics").text
        model = server.client.get("/model").json()
        engine_memory = metric(server, "mt_engine_process_resident_memory_bytes")
        # a glossary's term goes in by the alignment the engine process sent back
        glossary = {"text": "alpha password beta", "glossary": {"password": "Kennwort"}}
        termed = server.client.post("/translate", json=glossary).json()["translations"][0]["text"]
    assert termed == "beta Kennwort alpha"
    for i, (best, alternatives) in enumerate(answers):
        assert best == " ".join(reversed(texts[i].split()))
        assert len(alternatives) == i % 2
    assert mid_run > 0, "no sentence joined a running set mid-run: the test did not test that"
    assert steps >= 7  # the longest text alone takes 8 steps
    assert model["provider"] == "FakeExecutionProvider"
    assert engine_memory > 10 * 2**20  # the engine process's own, beside the server's process_* metrics
    promtool = shutil.which("promtool")
    if promtool is not None:
        result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_a_timed_out_request_leaves_the_engine_process(tmp_path: Path) -> None:
    """A request past MT_REQUEST_TIMEOUT_S gets 504 and its sentences stop decoding at once: the engine process is
    told, not left to its own deadline a second later."""
    bundle = write_fake_bundle(tmp_path / "bundle", steps_per_word=2.0, step_s=0.02)
    long_text = " ".join(f"w{i}" for i in range(200))  # 401 steps of 20 ms: 8 s
    with start(tmp_path, bundle, "--request-timeout-s", "0.5") as server:
        r = server.client.post("/translate", json={"text": long_text})
        assert r.status_code == 504, r.text
        time.sleep(0.3)  # the cancel's way there, and the step running when it came
        before = metric(server, "mt_step_duration_seconds_count")
        time.sleep(0.8)  # past the engine process's own deadline (1.5 s after the request) too
        assert metric(server, "mt_step_duration_seconds_count") - before <= 1, "the timed-out sentence kept decoding"
        assert server.client.post("/translate", json={"text": "a b"}).json()["translations"][0]["text"] == "b a"


def test_a_full_queue_refuses_with_retry_after(tmp_path: Path) -> None:
    """The server keeps the queue bound: one sentence decodes in the engine process, MT_MAX_QUEUE more wait, the
    next request gets 503 with Retry-After, and every accepted one is answered."""
    bundle = write_fake_bundle(tmp_path / "bundle", steps_per_word=2.0, step_s=0.05)
    texts = [f"a b c d e f g {i}" for i in range(5)]  # 17 steps of 50 ms each; distinct, or the cache would wait
    args = ("--max-queue", "4", "--max-batch-sentences", "1", "--inflight-batches", "1")
    with start(tmp_path, bundle, *args) as server:
        with ThreadPoolExecutor(5) as pool:
            accepted = [pool.submit(server.client.post, "/translate", json={"text": texts[0]})]
            wait_until(lambda: metric(server, "mt_step_duration_seconds_count") >= 1, what="a step")
            accepted += [pool.submit(server.client.post, "/translate", json={"text": t}) for t in texts[1:]]
            wait_until(lambda: metric(server, "mt_queue_depth_sentences") >= 4, what="a full queue")
            refused = server.client.post("/translate", json={"text": "one more"})
            statuses = [f.result().status_code for f in accepted]
    assert refused.status_code == 503 and int(refused.headers["Retry-After"]) >= 1, refused.text
    assert statuses == [200] * 5


def test_a_reload_serves_the_new_model_from_the_engine_process(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "bundle", steps_per_word=1.0)
    newer = write_fake_bundle(tmp_path / "newer", version="2", prefix="new: ", steps_per_word=1.0)
    with start(tmp_path, bundle) as server:
        assert server.client.post("/translate", json={"text": "a b"}).json()["translations"][0]["text"] == "b a"
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        r = server.client.post("/admin/reload", json={"bundle": str(newer)}, headers=headers)
        assert r.status_code == 200, r.text
        out = server.client.post("/translate", json={"text": "a b"}).json()
        bad = server.client.post("/admin/reload", json={"bundle": str(tmp_path / "missing")}, headers=headers)
        still = server.client.post("/translate", json={"text": "c d"}).json()
        wait_until(lambda: "fake-en-de 1 unloaded" in server.log(), what="the replaced model unloaded")
    assert out["translations"][0]["text"] == "new: b a" and out["model"]["version"] == "2"
    assert bad.status_code in (409, 422) and still["translations"][0]["text"] == "new: d c"


def test_the_server_exits_non_zero_when_the_engine_process_dies(tmp_path: Path) -> None:
    """A request in the engine process when it is killed gets 500; the server then exits non-zero, so that its
    supervisor restarts it, and says why."""
    bundle = write_fake_bundle(tmp_path / "bundle", steps_per_word=2.0, step_s=0.05)
    with start(tmp_path, bundle) as server:
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(server.client.post, "/translate", json={"text": "a b c d e f g h"})
            wait_until(lambda: metric(server, "mt_step_duration_seconds_count") >= 1, what="a step")
            os.kill(engine_pid(server), signal.SIGKILL)
            answer = waiting.result()
        code = server.process.wait(timeout=30)
        log = server.log()
    assert answer.status_code == 500 and "engine process exited" in answer.json()["message"], answer.text
    assert code != 0 and "the engine process exited" in log


def test_the_batch_scheduler_cannot_run_in_an_engine_process(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "bundle")
    with pytest.raises(RuntimeError, match="exited with 2"):
        args = ["--bundle", str(bundle), "--engine-process", "--scheduler", "batch"]
        with process_server(args, tmp_path / "l", fake=True):
            pass
    assert "MT_ENGINE_PROCESS" in (tmp_path / "l").read_text()


def test_translations_stay_when_the_client_hangs_up(tmp_path: Path) -> None:
    """A client that leaves mid-request (its sentences cancelled in the engine process) does not disturb the
    others."""
    bundle = write_fake_bundle(tmp_path / "bundle", steps_per_word=1.0, step_s=0.01)
    with start(tmp_path, bundle) as server:
        for _ in range(3):
            try:
                httpx.post(server.url + "/translate", json={"text": " ".join("x" * 60)}, timeout=0.1)
            except httpx.TimeoutException:
                pass
        out = server.client.post("/translate", json={"text": "left right"}).json()
        wait_until(lambda: metric(server, "mt_queue_depth_sentences") == 0, what="an empty queue")
    assert out["translations"][0]["text"] == "right left"


def test_two_models_in_the_engine_process_each_answer_their_own_requests(tmp_path: Path) -> None:
    """MT_BUNDLES with two models: both load in the engine process, and a request reaches the one of its
    languages (the prefix says which model made a translation)."""
    en_de = write_fake_bundle(tmp_path / "en-de", name="fake-en-de", languages="en-de", prefix="de:", step_s=0.002)
    de_en = write_fake_bundle(tmp_path / "de-en", name="fake-de-en", languages="de-en", prefix="en:", step_s=0.002)
    with start(tmp_path, en_de, "--bundles", f"{en_de},{de_en}") as server:

        def ask(i: int) -> str:
            pair = {"source_lang": "en", "target_lang": "de"} if i % 2 else {"source_lang": "de", "target_lang": "en"}
            r = server.client.post("/translate", json={"text": f"w{i} x{i}", **pair})
            assert r.status_code == 200, r.text
            return str(r.json()["translations"][0]["text"])

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, range(24)))
        models = {m["name"] for m in server.client.get("/models").json()["models"]}
    assert answers == [f"{'de' if i % 2 else 'en'}:x{i} w{i}" for i in range(24)]
    assert models == {"fake-en-de", "fake-de-en"}


def test_sigterm_closes_the_engine_process_cleanly(tmp_path: Path) -> None:
    """Told to close, the engine process exits by itself: not killed, and not taken for a dead one."""
    bundle = write_fake_bundle(tmp_path / "bundle", steps_per_word=1.0)
    with start(tmp_path, bundle) as server:
        assert server.client.post("/translate", json={"text": "a b"}).status_code == 200
        child = engine_pid(server)
        server.signal(signal.SIGTERM)
        code = server.process.wait(timeout=30)
        log = server.log()
    assert code == 0 and not Path(f"/proc/{child}").exists()
    assert "after close; killed" not in log and "the engine process exited" not in log, log[-2000:]


def test_a_model_failing_in_the_engine_process_is_reported_as_in_one(tmp_path: Path) -> None:
    """A warm-up that fails in the engine process: at start-up the server exits non-zero saying why; at reload the
    admin gets the same reason as in one process and the old model keeps serving."""
    cold = write_fake_bundle(tmp_path / "cold", version="2", warmup_fails=True)
    args = ["--bundle", str(cold), "--engine-process", "--scheduler", "continuous"]
    with pytest.raises(RuntimeError, match="exited with 1"):
        with process_server(args, tmp_path / "cold.log", fake=True, ready=True):
            pass
    assert "warm-up translation failed: RuntimeError: fake warm-up failure" in (tmp_path / "cold.log").read_text()

    bundle = write_fake_bundle(tmp_path / "bundle", steps_per_word=1.0)
    with start(tmp_path, bundle) as server:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        r = server.client.post("/admin/reload", json={"bundle": str(cold)}, headers=headers)
        still = server.client.post("/translate", json={"text": "a b"}).json()
    assert r.status_code == 500 and "warm-up translation failed" in r.json()["message"], r.text
    assert still["translations"][0]["text"] == "b a" and still["model"]["version"] == "1"
