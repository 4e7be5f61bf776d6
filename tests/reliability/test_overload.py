"""The quick version of bench/overload.py: 3x the measured capacity of a slow fake engine.

The fake engine takes 100 ms a batch of at most 4 sentences (about 40 one-text requests/s, a rate a
Python client on a busy CI machine can triple) and the queue holds 16 sentences. The same code as
the benchmark measures the capacity with a closed loop, then offers three times that with an open
loop while it scrapes the queue depth gauge: excess requests must get 503 with Retry-After at once
(server-side p99 under 1 s, faster than accepted ones), accepted ones must all be translated
correctly, the queue must stay within its bound and /healthz must answer throughout.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType

from testkit.fake_engine import write_fake_bundle
from tests.service.servers import process_server, wait_until

MAX_QUEUE = 16


def load_bench() -> ModuleType:
    import bench.overload

    return bench.overload


def test_three_times_capacity_is_shed_with_503_and_retry_after(tmp_path: Path) -> None:
    bench = load_bench()
    bundle = write_fake_bundle(tmp_path / "bundle", delay_s=0.1)
    args = ["--bundle", str(bundle), "--max-batch-sentences", "4", "--max-wait-ms", "2"]
    args += ["--max-queue", str(MAX_QUEUE), "--request-timeout-s", "20"]
    args += ["--cache-mb", "0"]  # the load's sentences repeat: every one must be decoded, as bench overload runs it
    with process_server(args, tmp_path / "server.log", fake=True) as server:
        wait_until(lambda: server.client.get("/readyz").status_code == 200, what="ready")
        report = asyncio.run(
            bench.run(
                server.url,
                max_queue=MAX_QUEUE,
                factor=3.0,
                duration_s=3.0,
                capacity_duration_s=1.5,
                concurrency=8,
                per_request=1,
                max_requests=2000,
                pool_size=16,
                client_timeout_s=30,
                shards=4,
            )
        )
        report["server_side_latency"] = bench.server_side(server.log())
    print(bench.table(report))
    o = report["overload"]
    assert report["capacity"]["ok"] > 10 and report["capacity"]["not_ok"] == 0, report["capacity"]
    assert bench.check(report, max_refusal_p99_s=1.0) == [], report
    assert 0 < o["queue_depth_max"] <= MAX_QUEUE
    assert o["retry_after_s_min"] >= 1
