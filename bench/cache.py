"""Cache: what the translation cache (MT_CACHE_MB, service/cache.py) saves when clients send sentences again.

    python -m bench cache [--bundle models/en-de] [--input stdlib-docs] [--repeated 0,3] [--per-request 6]
                          [--pool 20] [--requests 20] [--clients 4] [--rounds 2] [--out docs/reports/cache/report]

Two servers run side by side on 127.0.0.1, the same bundle and settings but for the cache (``--cache-mb 0`` and
the default); each run sends both the same requests, the servers alternated (which goes first changes every
round), ``--clients`` closed-loop clients until ``--requests`` requests are answered. A request holds
``--per-request`` sentences of a site's page: ``R`` of them (each value of ``--repeated``) drawn from a pool of
``--pool`` sentences every page shares (its menus, footers, notices), the others new to that run. ``R = 0`` is
the cache's cost where nothing repeats. Reported per scenario: sentences per second with and without the cache
(medians over the rounds, and their ratio per round), the hit rate the server's metrics counted, and how many
texts came back the same from both servers (the int8 graphs' translation of a sentence may change with its batch
mates, docs/bundle.md#batch-mates: the server without the cache decodes a repeated sentence among other mates each
time).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.loadtools import (
    ROOT,
    STDLIB_DOCS,
    command_line,
    machine,
    metric,
    percentile,
    read_sources,
    report_dir,
    run_loop,
    server_process,
    write_report,
)


def pages(pool: list[str], fresh: list[str], count: int, per_request: int, repeated: int) -> list[list[str]]:
    """``count`` requests of ``per_request`` sentences, ``repeated`` of them from ``pool`` (in turn), the others
    taken from ``fresh`` in order."""
    out, next_fresh = [], 0
    for i in range(count):
        shared = [pool[(i * repeated + j) % len(pool)] for j in range(repeated)]
        new = fresh[next_fresh : next_fresh + per_request - repeated]
        next_fresh += per_request - repeated
        out.append(shared + new)
    return out


async def run(url: str, requests: list[list[str]], clients: int) -> dict[str, Any]:
    """Send ``requests`` with ``clients`` closed-loop clients; the translations by request, and the timings."""
    answers: list[list[str]] = [[] for _ in requests]
    latencies: list[float] = []
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(requests)):
        queue.put_nowait(i)
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        before = (await client.get("/metrics")).text

        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                started = time.perf_counter()
                r = await client.post("/translate", json={"text": requests[i]})
                r.raise_for_status()
                latencies.append(time.perf_counter() - started)
                answers[i] = [t["text"] for t in r.json()["translations"]]

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        seconds = time.perf_counter() - started
        after = (await client.get("/metrics")).text
    hits, misses = (_cache(after, result) - _cache(before, result) for result in ("hit", "miss"))
    sentences = sum(len(r) for r in requests)
    return {
        "answers": answers,
        "seconds": seconds,
        "sentences_per_s": sentences / seconds,
        "p50_ms": 1000 * percentile(latencies, 50),
        "hit_rate": hits / (hits + misses) if hits + misses else 0.0,
    }


def lookup_cost_us(sentences: int = 20_000, pieces: int = 25, per_request: int = 6) -> dict[str, float]:
    """Microseconds the cache costs a sentence in the server's path (``TranslationCache.translate``, as the route
    calls it: keys built, looked up, a miss handed to ``decode`` and kept), requests of ``per_request`` sentences;
    in-process, the decoding itself a stub that returns at once."""
    from core.translation import DecodeOptions, Hypothesis, Translation
    from service.cache import TranslationCache

    options = DecodeOptions()
    scope = ("model", "1", 0.0, "bundle")
    ids = [list(range(i, i + pieces)) for i in range(sentences)]
    words = [f"▁w{i}" for i in range(pieces)]
    done = Translation(words, [Hypothesis(" ".join(words), words, list(range(pieces)), -0.5, [-0.1] * pieces)])
    cache = TranslationCache(1 << 34)

    async def decode(keys: list[Any], seconds: float) -> list[Translation]:
        return [done] * len(keys)

    async def requests() -> float:
        started = time.perf_counter()
        for start in range(0, sentences, per_request):
            keys = [(scope, tuple(sentence), options) for sentence in ids[start : start + per_request]]
            await cache.translate(keys, decode, 30.0)
        return time.perf_counter() - started

    miss = asyncio.run(requests())
    hit = asyncio.run(requests())
    return {"miss_us": 1e6 * miss / sentences, "hit_us": 1e6 * hit / sentences}


def _cache(text: str, result: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith("mt_cache_sentences_total{") and f'result="{result}"' in line:
            total += float(line.split()[-1])
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--bundle", default=str(ROOT / "models" / "en-de"))
    parser.add_argument(
        "--input",
        default=STDLIB_DOCS,
        help=f"TSV (first column), text file, or {STDLIB_DOCS}; several, comma-separated",
    )
    parser.add_argument("--repeated", default="0,3", help="sentences of a request from the shared pool, per scenario")
    parser.add_argument("--per-request", type=int, default=6)
    parser.add_argument("--pool", type=int, default=20)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(report_dir("cache") / "report"))
    args = parser.parse_args(argv)
    scenarios = [int(r) for r in args.repeated.split(",")]
    if any(not 0 <= r <= args.per_request for r in scenarios):
        raise SystemExit("--repeated: each value between 0 and --per-request")
    needed = args.pool + args.rounds * sum(args.requests * (args.per_request - r) for r in scenarios)
    read = [sentence for source in args.input.split(",") for sentence in read_sources(source, needed * 2)]
    sources = list(dict.fromkeys(read))[:needed]  # distinct, in order
    if len(sources) < needed:
        raise SystemExit(
            f"{args.input}: {len(sources)} distinct sentences, the runs need {needed}; lower --requests or --rounds"
        )
    pool, fresh = sources[: args.pool], iter(sources[args.pool :])
    flags = ["--threads", str(args.threads), "--log-level", "warning"]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        off_log, on_log = Path(tmp) / "off.log", Path(tmp) / "on.log"
        bundle = Path(args.bundle)
        with (
            server_process(bundle, off_log, flags=[*flags, "--cache-mb", "0"]) as off,
            server_process(bundle, on_log, flags=[*flags, "--cache-mb", "64"]) as on,
        ):
            for round_ in range(args.rounds):
                for repeated in scenarios:
                    new = [next(fresh) for _ in range(args.requests * (args.per_request - repeated))]
                    requests = pages(pool, new, args.requests, args.per_request, repeated)
                    order = [("off", off), ("on", on)] if round_ % 2 == 0 else [("on", on), ("off", off)]
                    done = {name: run_loop(run(server.url, requests, args.clients)) for name, server in order}
                    pairs = zip(done["on"]["answers"], done["off"]["answers"], strict=True)
                    same = [a == b for on_texts, off_texts in pairs for a, b in zip(on_texts, off_texts, strict=True)]
                    row = {
                        "round": round_,
                        "repeated": repeated,
                        "off_sentences_per_s": done["off"]["sentences_per_s"],
                        "on_sentences_per_s": done["on"]["sentences_per_s"],
                        "off_p50_ms": done["off"]["p50_ms"],
                        "on_p50_ms": done["on"]["p50_ms"],
                        "hit_rate": done["on"]["hit_rate"],
                        "same_texts": sum(same) / len(same),
                    }
                    runs.append(row)
                    print(
                        f"round {round_}, {repeated}/{args.per_request} repeated: off {row['off_sentences_per_s']:.1f}"
                        f" sent/s, on {row['on_sentences_per_s']:.1f} sent/s, hits {row['hit_rate']:.0%}",
                        flush=True,
                    )
            final = httpx.get(on.url + "/metrics").text
            held = {"bytes": metric(final, "mt_cache_bytes") or 0.0, "sentences": _cache(final, "miss")}
    cost = lookup_cost_us()
    table = [
        "| repeated per request | sentences/s, cache off | sentences/s, cache on | on / off per round (low, median, "
        "high) | p50 ms off / on | hit rate | texts translated the same |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for repeated in scenarios:
        mine = [r for r in runs if r["repeated"] == repeated]
        ratios = sorted(r["on_sentences_per_s"] / r["off_sentences_per_s"] for r in mine)

        def median(key: str, rows: list[dict[str, Any]] = mine) -> float:
            return statistics.median(r[key] for r in rows)

        table.append(
            f"| {repeated} of {args.per_request} | {median('off_sentences_per_s'):.1f} "
            f"| {median('on_sentences_per_s'):.1f} | {ratios[0]:.2f}, {statistics.median(ratios):.2f}, "
            f"{ratios[-1]:.2f} | {median('off_p50_ms'):.0f} / {median('on_p50_ms'):.0f} "
            f"| {median('hit_rate'):.0%} | {median('same_texts'):.0%} |"
        )
    setup = {
        "bundle": args.bundle,
        "input": args.input,
        "per_request": args.per_request,
        "pool": args.pool,
        "requests": args.requests,
        "clients": args.clients,
        "rounds": args.rounds,
        "threads": args.threads,
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
    }
    markdown = "\n".join(
        [
            "# What the translation cache saves",
            "",
            f"Generated by `{command_line('cache', argv)}` on {setup['date']}: {args.bundle}, {args.requests} "
            f"requests of {args.per_request} sentences per run ({args.input}), {args.clients} clients, two servers "
            f"side by side (cache off, cache on), alternated, medians over {args.rounds} rounds; clients and "
            f"servers on the same {setup['machine']['cpus']} CPUs (127.0.0.1). A repeated sentence comes from a "
            f"pool of {args.pool} that every request shares; the others are new to the run.",
            "",
            *table,
            "",
            f"The cache then held {held['sentences']:.0f} sentences in {held['bytes'] / 2**20:.1f} MiB (its estimate, "
            f"mt_cache_bytes): {held['bytes'] / max(held['sentences'], 1):,.0f} bytes a sentence, so the default "
            f"64 MiB holds about {64 * 2**20 / max(held['bytes'] / max(held['sentences'], 1), 1):,.0f} such sentences.",
            "",
            f"In-process, without HTTP or decoding, the cache costs a sentence of 25 pieces {cost['miss_us']:.1f} µs "
            f"when it misses (key, lookup, hand-off, store) and {cost['hit_us']:.1f} µs when it hits; without the "
            f"cache the server spent {1000 / max(r['off_sentences_per_s'] for r in runs):.1f} ms a sentence at best "
            "(1000 / its highest sentences/s above).",
            "",
        ]
    )
    print()
    print(markdown)
    write_report(Path(args.out), markdown, {"setup": setup, "runs": runs, "held": held, "lookup": cost})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
