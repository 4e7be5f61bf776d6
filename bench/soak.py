"""Soak: tens of thousands of translations through one server process; memory, threads and files stay flat.

    nice -n 19 python -m bench soak [--bundle DIR | --url URL --pid PID] [--translations 20000]
        [--warmup 2000] [--concurrency 8] [--sample-every 500] [--max-seconds 1200]
        [--out docs/reports/soak/report.json]

A closed loop of ``--concurrency`` clients sends short texts (one per request) until
``--translations`` texts have been translated. The requests vary: greedy and beam search, scores,
n-best, attention, several texts per request; one in 20 is a bad request (422 or 413), so the error
paths run as often. Every ``--sample-every`` translations the server's resident memory, threads and
open file descriptors are read from /proc/PID. The baseline is the first sample after ``--warmup``
translations; the last sample is taken after the load, once the server is idle again.

Checks (exit status 1 if one fails): resident memory grows less than 5% from the baseline to the
end; threads and file descriptors do not grow; every 200 answer with default options equals the
reference translation of its text; no 5xx. Prints a table and writes the JSON report to ``--out``.
Without ``--url`` it starts ``python -m service`` on 127.0.0.1 (default bundle: the tests' tiny fp32 bundle,
built into cache/ on first use; with int8 graphs, such as the shipped models', a sentence's translation may depend
on its batch mates, and differences from the reference are counted but not failed).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.loadtools import (
    batched_like_alone,
    command_line,
    conclude,
    exact_bundle,
    machine,
    percentile,
    report_dir,
    run_loop,
    server_process,
    texts,
    tree_stats,
)

MAX_RSS_GROWTH = 0.05


def request_for(i: int, pool: list[str]) -> tuple[dict[str, Any], int, bool]:
    """Request ``i`` of the mix: (body, texts it translates if it succeeds, whether it is checked
    against the reference). One in 20 is meant to fail (422 or 413)."""
    text = pool[i % len(pool)]
    if i % 40 == 19:
        return {"text": text, "beam_size": 0}, 0, False  # 422
    if i % 40 == 39:
        return {"text": ["a"] * 65}, 0, False  # 413: more than MT_MAX_TEXTS
    if i % 10 == 3:
        return {"text": text, "beam_size": 1}, 1, False
    if i % 10 == 5:
        return {"text": text, "return_scores": True, "beam_size": 2, "n_best": 2}, 1, False
    if i % 25 == 7:
        return {"text": text, "return_attention": True}, 1, False
    if i % 10 == 9:
        return {"text": [text, pool[(i + 1) % len(pool)], pool[(i + 2) % len(pool)]]}, 3, True
    return {"text": text}, 1, True


async def soak(
    url: str,
    pid: int,
    *,
    translations: int,
    warmup: int,
    concurrency: int,
    sample_every: int,
    max_seconds: float,
) -> dict[str, Any]:
    pool = texts(200, seed=11)
    statuses: dict[int, int] = {}
    wrong = 0
    done = 0
    latencies: list[float] = []
    samples: list[dict[str, Any]] = []
    next_sample = sample_every
    started = time.monotonic()
    deadline = started + max_seconds
    counter = itertools.count()

    def sample(label: str) -> None:
        samples.append({"translations": done, "seconds": round(time.monotonic() - started, 1), "at": label})
        samples[-1].update(tree_stats(pid))  # with MT_ENGINE_PROCESS, the engine process's too

    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        reference = {}
        for text in pool:
            r = await client.post("/translate", json={"text": text})
            r.raise_for_status()
            reference[text] = r.json()["translations"][0]["text"]
        sample("start")

        async def worker() -> None:
            nonlocal done, wrong, next_sample
            while done < translations and time.monotonic() < deadline:
                body, count, checked = request_for(next(counter), pool)
                t0 = time.perf_counter()
                r = await client.post("/translate", json=body)
                latencies.append(time.perf_counter() - t0)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                if r.status_code != 200:
                    continue
                out = [t["text"] for t in r.json()["translations"]]
                sent = [body["text"]] if isinstance(body["text"], str) else body["text"]
                if checked and out != [reference[t] for t in sent]:
                    wrong += 1
                done += count
                if done >= next_sample:
                    next_sample += sample_every
                    sample("load")

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.monotonic() - started
        await asyncio.sleep(2.0)  # idle: finished requests' threads and sockets settle
        sample("idle")

    after_warmup = [s for s in samples if s["translations"] >= warmup and s["at"] != "start"]
    base, last = after_warmup[0], samples[-1]
    load = [s for s in after_warmup if s["at"] == "load"]
    slope = _slope([s["translations"] for s in load], [s["vmrss_kib"] for s in load])
    return {
        "translations": done,
        "requests": sum(statuses.values()),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "wrong_translations": wrong,
        "seconds": round(elapsed, 1),
        "translations_per_s": round(done / elapsed, 1),
        "latency_p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "latency_p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "warmup_translations": warmup,
        "baseline": base,
        "end": last,
        "rss_growth_pct": round(100 * (last["vmrss_kib"] - base["vmrss_kib"]) / base["vmrss_kib"], 2),
        "rss_max_after_warmup_kib": max(s["vmrss_kib"] for s in after_warmup),
        "rss_slope_kib_per_1000": round(slope * 1000, 2),
        "threads_growth": last["threads"] - base["threads"],
        "fds_growth": last["fds"] - base["fds"],
        "threads_max": max(s["threads"] for s in after_warmup),
        "fds_max": max(s["fds"] for s in after_warmup),
        "samples": samples,
        "deadline_hit": done < translations,
    }


def _slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs (0 for fewer than two points)."""
    if len(xs) < 2:
        return 0.0
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def check(report: dict[str, Any], wanted: int) -> list[str]:
    problems = []
    if report["deadline_hit"]:
        problems.append(f"only {report['translations']} of {wanted} translations before --max-seconds")
    if report["rss_growth_pct"] >= MAX_RSS_GROWTH * 100:
        problems.append(f"resident memory grew {report['rss_growth_pct']}% after warm-up (limit 5%)")
    if report["threads_growth"] > 0:
        problems.append(f"threads grew by {report['threads_growth']}")
    if report["fds_growth"] > 0:
        problems.append(f"file descriptors grew by {report['fds_growth']}")
    if report["wrong_translations"] and report.get("exact_translations", True):
        problems.append(f"{report['wrong_translations']} answers differ from the reference")
    errors = {s: n for s, n in report["statuses"].items() if s.startswith("5")}
    if errors:
        problems.append(f"server errors: {errors}")
    return problems


def table(report: dict[str, Any]) -> str:
    b, e = report["baseline"], report["end"]
    rows = [
        ("translations", f"{report['translations']} in {report['requests']} requests, {report['seconds']} s"),
        ("throughput", f"{report['translations_per_s']} translations/s"),
        ("latency", f"p50 {report['latency_p50_ms']} ms, p99 {report['latency_p99_ms']} ms"),
        ("statuses", str(report["statuses"])),
        ("wrong translations", str(report["wrong_translations"])),
        (
            "resident memory",
            f"{b['vmrss_kib'] / 1024:.1f} MiB after {b['translations']} -> {e['vmrss_kib'] / 1024:.1f} MiB at the end "
            f"({report['rss_growth_pct']:+.2f}%), max {report['rss_max_after_warmup_kib'] / 1024:.1f} MiB, "
            f"slope {report['rss_slope_kib_per_1000']} KiB/1000",
        ),
        ("threads", f"{b['threads']} -> {e['threads']} (max {report['threads_max']})"),
        ("file descriptors", f"{b['fds']} -> {e['fds']} (max {report['fds_max']})"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines.append("")
    lines.append(f"{'translations':>12} {'seconds':>8} {'RSS MiB':>8} {'threads':>7} {'fds':>4}  at")
    for s in report["samples"]:
        lines.append(
            f"{s['translations']:>12} {s['seconds']:>8} {s['vmrss_kib'] / 1024:>8.1f} {s['threads']:>7} "
            f"{s['fds']:>4}  {s['at']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="a running server (needs --pid, read from /proc)")
    p.add_argument("--pid", type=int, help="the running server's process id")
    p.add_argument(
        "--bundle",
        type=Path,
        help="bundle to serve (default: the tests' tiny fp32 bundle, whose answers must equal the texts "
        "translated alone; with int8 graphs differences from alone are counted, not failed: docs/bundle.md)",
    )
    p.add_argument("--threads", type=int, default=1, help="the started server's inference threads (default 1)")
    p.add_argument(
        "--engine-process",
        action="store_true",
        help="the started server runs its models in an engine process (MT_ENGINE_PROCESS); its memory, threads and "
        "files count with the server's",
    )
    p.add_argument("--translations", type=int, default=20_000)
    p.add_argument("--warmup", type=int, default=2_000)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--sample-every", type=int, default=500)
    p.add_argument("--max-seconds", type=float, default=1200.0, help="stop (and fail) after this long")
    p.add_argument("--out", type=Path, default=report_dir("soak") / "report.json")
    args = p.parse_args(argv)
    if args.url and not args.pid:
        p.error("--url needs --pid")

    def go(url: str, pid: int) -> dict[str, Any]:
        return run_loop(
            soak(
                url,
                pid,
                translations=args.translations,
                warmup=args.warmup,
                concurrency=args.concurrency,
                sample_every=args.sample_every,
                max_seconds=args.max_seconds,
            )
        )

    info: dict[str, Any] = {"machine": machine(), "command": command_line("soak", argv)}
    if args.url:
        report = go(args.url, args.pid)
        info["server"] = {"url": args.url, "pid": args.pid}
    else:
        bundle = args.bundle or exact_bundle()
        flags = ["--provider", "cpu", "--threads", str(args.threads)] + ["--engine-process"] * args.engine_process
        with tempfile.TemporaryDirectory() as tmp, server_process(bundle, Path(tmp) / "server.log", flags=flags) as s:
            report = go(s.url, s.pid)
            info["server"] = {"bundle": str(bundle), "flags": flags}
            info["exact_translations"] = batched_like_alone(bundle)
    report.update(info)
    problems = check(report, args.translations)
    return conclude(report, problems, table(report), args.out)


if __name__ == "__main__":
    sys.exit(main())
