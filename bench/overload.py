"""Overload: offer a server about 3x what it can do and check that it sheds the excess cleanly.

    nice -n 19 python -m bench overload [--bundle DIR | --url URL --max-queue N] [--factor 3]
        [--duration 10] [--capacity-duration 5] [--concurrency 16] [--texts-per-request 32]
        [--threads 1] [--max-queue 1024] [--out docs/reports/overload/report.json]

1. Reference: each text of a small pool is translated alone, one request at a time.
2. Capacity: a closed loop (``--concurrency`` clients, each sending its next request of
   ``--texts-per-request`` short texts when the last one is answered) for ``--capacity-duration``
   seconds; capacity is the requests answered per second.
3. Overload: an open loop at ``--factor`` x capacity for ``--duration`` seconds: request *i* is sent
   at ``i / rate`` whether or not earlier ones were answered, while a scraper reads the queue depth
   gauge from /metrics and times /healthz every 50 ms.

Checks (exit status 1 if one fails): some requests are refused, each a 503 (or 429) with
``Retry-After``; refusals are answered at once: p99 under ``--max-refusal-p99`` seconds (as the
server's access log measures it, when the script started the server) and faster than accepted
requests; every accepted request is a 200 whose translation equals the reference; no other status
appears; the queue depth never exceeds its bound; /healthz answers 200 throughout. Latencies are
reported as the client saw them and, when the script started the server, as the server logged them
(from the request parsed to the response sent): on a machine short of CPU the difference is time
spent waiting for the client's or the server's event loop.

Without ``--url`` the script starts ``python -m service`` on 127.0.0.1 with the bundle (default:
the tests' tiny fp32 bundle, built into cache/ on first use: with int8 graphs, such as the shipped models', a
sentence's translation may depend on its batch mates, and differences from alone are counted but not failed).
Every loop is
bounded by a request count and a deadline. The CI version is tests/reliability/test_overload.py.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.loadtools import (
    access_log_latencies,
    batched_like_alone,
    command_line,
    conclude,
    exact_bundle,
    machine,
    percentile,
    process_stats,
    report_dir,
    run_loop,
    scrape,
    server_process,
    texts,
)

REFUSED = (429, 503)
KEEPALIVE = 16
"""Idle connections each client keeps (and opens before the overload)."""


@dataclass
class Outcome:
    status: int
    """HTTP status; 0 for a transport error (connection refused or reset, client timeout)."""
    latency_s: float
    retry_after: str | None
    error: str | None
    correct: bool
    sent_at: float = 0.0
    """Seconds from the start of its phase to the moment it was sent."""


async def reference(client: httpx.AsyncClient, pool: list[str]) -> dict[str, str]:
    """Each text of the pool translated alone: what every accepted answer must equal."""
    out = {}
    for text in pool:
        r = await client.post("/translate", json={"text": text})
        r.raise_for_status()
        out[text] = r.json()["translations"][0]["text"]
    return out


class Clients:
    """Several httpx clients used in turn: one pool of thousands of connections is slow to manage."""

    def __init__(self, url: str, shards: int, timeout_s: float):
        # idle connections are dropped after 2 s, before the server's 5 s keep-alive timeout
        # (uvicorn's default) can close one under a request being sent on it
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=KEEPALIVE, keepalive_expiry=2.0)
        timeout = httpx.Timeout(timeout_s, pool=timeout_s)
        self.shards = [httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) for _ in range(shards)]
        self._next = 0

    async def warm(self, per_shard: int) -> None:
        """Open ``per_shard`` keep-alive connections in each client, as a proxy in front would hold:
        the overload then measures the server, not TCP connection set-up in a Python client."""
        for client in self.shards:
            await asyncio.gather(*(client.get("/healthz") for _ in range(per_shard)))

    def next(self) -> httpx.AsyncClient:
        self._next = (self._next + 1) % len(self.shards)
        return self.shards[self._next]

    async def aclose(self) -> None:
        for client in self.shards:
            await client.aclose()


def request_texts(pool: list[str], i: int, per_request: int) -> list[str]:
    """The texts of request ``i``: ``per_request`` consecutive texts of the pool."""
    return [pool[(i * per_request + j) % len(pool)] for j in range(per_request)]


async def _send(client: httpx.AsyncClient, batch: list[str], expected: dict[str, str], sent_at: float = 0.0) -> Outcome:
    started = time.perf_counter()
    try:
        r = await client.post("/translate", json={"text": batch})
    except httpx.HTTPError as err:
        return Outcome(0, time.perf_counter() - started, None, type(err).__name__, False, sent_at)
    latency = time.perf_counter() - started
    error = None
    correct = False
    if r.status_code == 200:
        correct = [t["text"] for t in r.json()["translations"]] == [expected[t] for t in batch]
    else:
        try:
            error = r.json().get("error")
        except ValueError:
            error = "not json"
    return Outcome(r.status_code, latency, r.headers.get("retry-after"), error, correct, sent_at)


async def closed_loop(
    clients: Clients,
    pool: list[str],
    expected: dict[str, str],
    per_request: int,
    concurrency: int,
    duration_s: float,
    max_requests: int = 100_000,
) -> dict[str, Any]:
    """``concurrency`` clients back to back for ``duration_s``: the server's capacity in requests/s."""
    outcomes: list[Outcome] = []
    deadline = time.monotonic() + duration_s
    counter = iter(range(max_requests))

    async def worker(client: httpx.AsyncClient) -> None:
        for i in counter:
            if time.monotonic() >= deadline:
                return
            outcomes.append(await _send(client, request_texts(pool, i, per_request), expected))

    started = time.monotonic()
    await asyncio.gather(*(worker(clients.next()) for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    ok = [o for o in outcomes if o.status == 200]
    return {
        "concurrency": concurrency,
        "texts_per_request": per_request,
        "seconds": round(elapsed, 2),
        "requests": len(outcomes),
        "ok": len(ok),
        "not_ok": len(outcomes) - len(ok),
        "wrong_translation": sum(not o.correct for o in ok),
        "rps": round(len(ok) / elapsed, 1),
        "latency_p50_ms": round(percentile([o.latency_s for o in ok], 50) * 1000, 1),
        "latency_p99_ms": round(percentile([o.latency_s for o in ok], 99) * 1000, 1),
    }


async def open_loop(
    clients: Clients,
    pool: list[str],
    expected: dict[str, str],
    per_request: int,
    rate: float,
    duration_s: float,
    max_requests: int,
) -> tuple[list[Outcome], float]:
    """Send ``rate`` requests/s for ``duration_s`` regardless of answers; (outcomes, worst send lag)."""
    n = min(max_requests, max(1, int(rate * duration_s)))
    tasks: list[asyncio.Task[Outcome]] = []
    worst_lag = 0.0
    started = time.monotonic()
    for i in range(n):
        due = started + i / rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            worst_lag = max(worst_lag, -delay)
        batch = request_texts(pool, i, per_request)
        tasks.append(asyncio.create_task(_send(clients.next(), batch, expected, time.monotonic() - started)))
    return list(await asyncio.gather(*tasks)), worst_lag


def summarize(outcomes: list[Outcome], max_queue: int, depths: list[float]) -> dict[str, Any]:
    accepted = [o for o in outcomes if o.status == 200]
    refused = [o for o in outcomes if o.status in REFUSED]
    other: dict[str, int] = {}
    for o in outcomes:
        if o.status != 200 and o.status not in REFUSED:
            key = f"{o.status} {o.error}"
            other[key] = other.get(key, 0) + 1
    retry_after = [int(o.retry_after) for o in refused if o.retry_after and o.retry_after.isdigit()]

    def ms(values: list[float], q: float) -> float:
        return round(percentile(values, q) * 1000, 1)

    # accepted requests per second, from the first request sent to the last accepted one answered
    span = max((o.sent_at + o.latency_s for o in accepted), default=0.0)
    return {
        "sent": len(outcomes),
        "accepted": len(accepted),
        "accepted_rps": round(len(accepted) / span, 1) if span else 0.0,
        "refused": len(refused),
        "refused_by_status": {str(s): sum(o.status == s for o in refused) for s in REFUSED},
        "other_statuses": other,
        "accepted_wrong_translation": sum(not o.correct for o in accepted),
        "accepted_latency_p50_ms": ms([o.latency_s for o in accepted], 50),
        "accepted_latency_p99_ms": ms([o.latency_s for o in accepted], 99),
        "accepted_latency_max_ms": ms([o.latency_s for o in accepted], 100),
        "refused_latency_p50_ms": ms([o.latency_s for o in refused], 50),
        "refused_latency_p99_ms": ms([o.latency_s for o in refused], 99),
        "refused_latency_max_ms": ms([o.latency_s for o in refused], 100),
        "refused_without_retry_after": sum(not o.retry_after for o in refused),
        "retry_after_s_min": min(retry_after, default=None),
        "retry_after_s_max": max(retry_after, default=None),
        "queue_bound": max_queue,
        "queue_depth_max": max(depths, default=None),
        "queue_samples": len(depths),
    }


def check(report: dict[str, Any], max_refusal_p99_s: float) -> list[str]:
    """What went wrong, in words (empty: the server shed the load as it should)."""
    o = report["overload"]
    problems = []
    if o["refused"] == 0:
        problems.append("nothing was refused: the load did not exceed the capacity (raise --factor)")
    if o["other_statuses"]:
        problems.append(f"statuses other than 200/429/503: {o['other_statuses']}")
    if o["accepted_wrong_translation"] and report.get("exact_translations", True):
        problems.append(f"{o['accepted_wrong_translation']} accepted requests got a wrong translation")
    if o["refused_without_retry_after"]:
        problems.append(f"{o['refused_without_retry_after']} refusals lack Retry-After")
    if o["refused"]:
        # the server's own view when it was started here: on a loaded machine the client-side figure
        # also holds the time the request waited for the client's and the server's event loops
        server = report.get("server_side_latency", {})
        refused, accepted = server.get("503"), server.get("200")
        p99 = refused["p99_ms"] if refused else o["refused_latency_p99_ms"]
        if p99 > max_refusal_p99_s * 1000:
            problems.append(f"refusal p99 {p99} ms > {max_refusal_p99_s * 1000:g} ms")
        if refused and accepted:
            slower = refused["p50_ms"] >= accepted["p50_ms"]
        else:
            slower = o["refused_latency_p50_ms"] >= o["accepted_latency_p50_ms"]
        if slower:
            problems.append("refusals were not faster than accepted requests (p50)")
    if o["queue_depth_max"] is None or o["queue_samples"] < 3:
        problems.append("the queue depth gauge was not scraped")
    elif o["queue_depth_max"] > o["queue_bound"]:
        problems.append(f"queue depth reached {o['queue_depth_max']} > bound {o['queue_bound']}")
    h = report["healthz"]
    if h["not_200"]:
        problems.append(f"/healthz failed {h['not_200']} times during the overload")
    return problems


async def run(
    url: str,
    *,
    max_queue: int,
    factor: float = 3.0,
    duration_s: float = 10.0,
    capacity_duration_s: float = 5.0,
    concurrency: int = 16,
    per_request: int = 32,
    max_requests: int = 50_000,
    pool_size: int = 64,
    client_timeout_s: float = 120.0,
    shards: int = 16,
) -> dict[str, Any]:
    """Measure capacity, then offer ``factor`` x capacity; the report of both phases."""
    pool = texts(pool_size, seed=7)
    clients = Clients(url, shards, client_timeout_s)
    try:
        async with httpx.AsyncClient(base_url=url, timeout=10) as probe:
            expected = await reference(probe, pool)
            capacity = await closed_loop(
                clients, pool, expected, per_request, concurrency, capacity_duration_s, max_requests
            )
            rate = max(1.0, capacity["rps"] * factor)
            await clients.warm(KEEPALIVE)
            stop = asyncio.Event()
            scraper = asyncio.create_task(scrape(probe, stop))
            outcomes, lag = await open_loop(clients, pool, expected, per_request, rate, duration_s, max_requests)
            stop.set()
            seen = await scraper
    finally:
        await clients.aclose()
    overload = summarize(outcomes, max_queue, seen.depths)
    overload.update(
        offered_rps=round(rate, 1),
        factor=factor,
        seconds=duration_s,
        texts_per_request=per_request,
        worst_send_lag_ms=round(lag * 1000),
    )
    return {
        "capacity": capacity,
        "overload": overload,
        "healthz": {
            "probes": len(seen.health_status),
            "not_200": sum(s != 200 for s in seen.health_status),
            "errors": seen.errors,
            "latency_p99_ms": round(percentile(seen.health_latency_s, 99) * 1000, 1),
            "latency_max_ms": round(percentile(seen.health_latency_s, 100) * 1000, 1),
        },
    }


def server_side(log: str) -> dict[str, Any]:
    """The server's own view (its access log: from request parsed to response sent), by status."""
    out = {}
    for status, values in sorted(access_log_latencies(log).items()):
        out[str(status)] = {
            "requests": len(values),
            "p50_ms": round(percentile(values, 50) * 1000, 1),
            "p99_ms": round(percentile(values, 99) * 1000, 1),
        }
    return out


def table(report: dict[str, Any]) -> str:
    c, o, h = report["capacity"], report["overload"], report["healthz"]
    rows = [
        (
            "capacity (closed loop)",
            f"{c['rps']} req/s of {c['texts_per_request']} texts at concurrency {c['concurrency']} "
            f"(p99 {c['latency_p99_ms']} ms, {c['not_ok']} not 200)",
        ),
        ("offered", f"{o['offered_rps']} req/s ({o['factor']:g}x) for {o['seconds']:g} s: {o['sent']} requests"),
        (
            "accepted",
            f"{o['accepted']} ({o['accepted_rps']} req/s, {o['accepted_wrong_translation']} "
            + ("wrong)" if report.get("exact_translations", True) else "differ from alone: int8 graphs)"),
        ),
        ("accepted latency", f"p50 {o['accepted_latency_p50_ms']} ms, p99 {o['accepted_latency_p99_ms']} ms"),
        ("refused", f"{o['refused']} {o['refused_by_status']}, {o['refused_without_retry_after']} without Retry-After"),
        (
            "refusal latency",
            f"p50 {o['refused_latency_p50_ms']} ms, p99 {o['refused_latency_p99_ms']} ms, "
            f"max {o['refused_latency_max_ms']} ms",
        ),
        ("Retry-After", f"{o['retry_after_s_min']}..{o['retry_after_s_max']} s"),
        ("other statuses", str(o["other_statuses"] or "none")),
        ("queue depth", f"max {o['queue_depth_max']} of bound {o['queue_bound']} ({o['queue_samples']} scrapes)"),
        ("/healthz", f"{h['probes']} probes, {h['not_200']} not 200, p99 {h['latency_p99_ms']} ms"),
        ("client send lag", f"worst {o['worst_send_lag_ms']} ms behind schedule"),
    ]
    for status, v in report.get("server_side_latency", {}).items():
        line = f"{v['requests']} requests (whole run), p50 {v['p50_ms']} ms, p99 {v['p99_ms']} ms"
        rows.append((f"server-side {status}", line))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="a running server (else one is started with --bundle)")
    p.add_argument(
        "--bundle",
        type=Path,
        help="bundle to serve (default: the tests' tiny fp32 bundle, whose answers must equal the texts "
        "translated alone; with int8 graphs differences from alone are counted, not failed: docs/bundle.md)",
    )
    p.add_argument("--max-queue", type=int, default=1024, help="the server's MT_MAX_QUEUE (default 1024)")
    p.add_argument("--threads", type=int, default=1, help="the started server's inference threads (default 1)")
    p.add_argument("--factor", type=float, default=3.0)
    p.add_argument("--duration", type=float, default=10.0, help="seconds of overload (default 10)")
    p.add_argument("--capacity-duration", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, default=16, help="clients of the capacity run (default 16)")
    p.add_argument(
        "--texts-per-request",
        type=int,
        default=32,
        help="short texts per request (default 32: fewer, bigger requests keep a Python client on the "
        "same machine from being the bottleneck)",
    )
    p.add_argument("--max-requests", type=int, default=50_000, help="hard cap on requests per phase")
    p.add_argument(
        "--max-refusal-p99",
        type=float,
        default=1.0,
        help="seconds, server-side when the script started the server (default 1)",
    )
    p.add_argument("--out", type=Path, default=report_dir("overload") / "report.json")
    args = p.parse_args(argv)

    started = time.time()

    def go(url: str) -> dict[str, Any]:
        return run_loop(
            run(
                url,
                max_queue=args.max_queue,
                factor=args.factor,
                duration_s=args.duration,
                capacity_duration_s=args.capacity_duration,
                concurrency=args.concurrency,
                per_request=args.texts_per_request,
                max_requests=args.max_requests,
            )
        )

    info: dict[str, Any] = {"machine": machine(), "command": command_line("overload", argv)}
    if args.url:
        report = go(args.url)
        info["server"] = {"url": args.url}
    else:
        bundle = args.bundle or exact_bundle()
        flags = ["--provider", "cpu", "--threads", str(args.threads), "--max-queue", str(args.max_queue)]
        with tempfile.TemporaryDirectory() as tmp, server_process(bundle, Path(tmp) / "server.log", flags=flags) as s:
            report = go(s.url)
            info["server"] = {"bundle": str(bundle), "flags": flags, "after": process_stats(s.pid)}
            info["exact_translations"] = batched_like_alone(bundle)
            info["server_side_latency"] = server_side(s.log())
    report.update(info)
    report.update(wall_seconds=round(time.time() - started, 1))
    problems = check(report, args.max_refusal_p99)
    return conclude(report, problems, table(report), args.out)


if __name__ == "__main__":
    sys.exit(main())
