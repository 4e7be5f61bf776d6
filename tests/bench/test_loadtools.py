"""bench/loadtools' /proc readings, which bench/load.py's CPU table rests on, and where reports are written."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from bench.load import cpu_split, server_flag
from bench.loadtools import report_path, thread_cpu_seconds, write_report

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _burn(seconds: float, tids: list[int]) -> None:
    tids.append(threading.get_native_id())
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_thread_cpu_is_charged_to_the_thread_that_spent_it() -> None:
    tids: list[int] = []
    done = threading.Event()

    def burn_then_wait() -> None:
        _burn(0.3, tids)
        done.wait()

    worker = threading.Thread(target=burn_then_wait)
    before = thread_cpu_seconds(os.getpid())
    worker.start()
    while not tids:
        time.sleep(0.001)
    time.sleep(0.05)
    deadline = time.monotonic() + 30
    while thread_cpu_seconds(os.getpid()).get(tids[0], 0.0) < 0.25 and time.monotonic() < deadline:
        time.sleep(0.02)
    after = thread_cpu_seconds(os.getpid())
    done.set()
    worker.join()
    main, others = cpu_split(before, after, os.getpid())
    assert tids[0] != os.getpid()
    assert after[tids[0]] >= 0.25  # clock ticks are 10 ms: 0.3 s of burn reads 0.29-0.31
    assert others >= after[tids[0]] - before.get(tids[0], 0.0)
    assert main < after[tids[0]]


def test_report_names_keep_dotted_stems(tmp_path) -> None:
    """``--out runs/bench-load-0.4.0`` writes bench-load-0.4.0.md, not bench-load-0.4.md."""
    write_report(tmp_path / "bench-load-0.4.0", "| a |\n", {"rows": [1]})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench-load-0.4.0.json", "bench-load-0.4.0.md"]
    assert report_path(tmp_path / "x-1.2.md", ".json") == tmp_path / "x-1.2.json"
    assert report_path("docs/peers", ".png") == report_path("docs/peers.json", ".png")


def test_the_raw_load_client_speaks_http_to_the_real_server(tmp_path) -> None:
    """bench/load.py's keep-alive HTTP/1.1 client against a real uvicorn (fake engine): statuses are read, the
    connection is reused, a response's body is consumed so the next one parses."""
    import asyncio

    from bench.load import RawConnection
    from bench.loadtools import server_process
    from testkit.fake_engine import write_fake_bundle

    bundle = write_fake_bundle(tmp_path / "fake")
    with server_process(bundle, tmp_path / "server.log", fake=True) as server:

        async def talk() -> list[int]:
            connection = await RawConnection.open(server.url)
            try:
                return [
                    await connection.post("/translate", {"text": "one two three"}),
                    await connection.post("/translate", {"text": ""}),
                    await connection.post("/translate", {"text": "again", "beam_size": 0}),
                    await connection.post("/translate", {"text": "and again"}),
                ]
            finally:
                connection.close()

        assert asyncio.run(talk()) == [200, 200, 422, 200]


def test_stdlib_docs_sentences_are_prose_and_the_same_every_time() -> None:
    """``--input stdlib-docs``: English sentences of Python's own documentation, no code, the same list for the
    same seed (the figures it gives can be reproduced), another order for another seed."""
    from bench.loadtools import stdlib_sentences

    sentences = stdlib_sentences(120)
    assert len(sentences) == len(set(sentences)) == 120
    for sentence in sentences:
        assert 5 <= len(sentence.split()) <= 35 and sentence[0].isupper() and sentence.endswith("."), sentence
        assert not any(c in sentence for c in "|=<>{}[]_"), sentence
    assert stdlib_sentences(120) == sentences
    assert stdlib_sentences(120, seed=2) != sentences


def test_server_names_carry_one_or_several_flags() -> None:
    assert server_flag("") == []
    assert server_flag("static-step") == ["--static-step"]
    assert server_flag("static-step+inflight-batches=1") == ["--static-step", "--inflight-batches", "1"]
