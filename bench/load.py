"""Load: a real server under increasing concurrency, with and without cross-request batching, vs the raw engine.

    nice -n 0 python -m bench load [--bundle models/en-de] [--input data/en-de/test.tsv] [--levels 1,4,16,32]
                                   [--requests 96] [--beam 4] [--threads 2] [--servers batch,continuous,off]
                                   [--out docs/reports/load/report]

For each server (batch: the batch scheduler with the server's defaults; continuous: ``--scheduler continuous``;
off: the batch scheduler with ``--max-batch-sentences 1``) the script
starts ``python -m service`` on 127.0.0.1, then for each concurrency level runs a closed loop: that many
asyncio httpx clients, each sending one test sentence per request and the next as soon as it is answered,
until ``--requests`` requests are answered (or ``--deadline`` seconds pass). It reports throughput
(sentences/s) and p50/p95/p99 latency per level, and the mean batch the server formed (from /metrics).

The raw engine figure is the same sentences translated in-process by ``Engine.translate_ids`` in batches
of that mean size, same threads and beam, measured right after the level; the ratio server / engine says
what HTTP, JSON, queueing and batching cost. A second table splits the CPU time of each level between the
load generator (this process), the server's event-loop thread and its other threads (/proc), which says how
much of the gap is the client sharing the machine. Writes OUT.md, OUT.json and OUT.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.loadtools import (
    ROOT,
    STDLIB_DOCS,
    machine,
    metric,
    percentile,
    report_dir,
    report_path,
    resident_mib,
    run_loop,
    server_process,
    stdlib_sentences,
    thread_cpu_seconds,
    write_report,
)
from inference.static_state import OPENED_KINDS
from service.settings import GPU_DEFAULTS


def server_option(name: str) -> str:
    """A setting's command-line flag: ``max_batch_tokens`` -> ``--max-batch-tokens``."""
    return "--" + name.replace("_", "-")


def server_flag(option: str) -> list[str]:
    """``admit-every=4`` -> ``["--admit-every", "4"]`` (a server name's ``:flag=value`` suffix, several joined
    by ``+``: ``static-step+inflight-batches=1``); "" -> []."""
    flags: list[str] = []
    for one in filter(None, option.split("+")):
        flag, _, value = one.partition("=")
        flags += [f"--{flag}", value] if value else [f"--{flag}"]
    return flags


def histogram_totals(metrics: str, name: str) -> tuple[float, float]:
    """(sum, count) of an unlabelled histogram in Prometheus text format."""
    total = count = 0.0
    for line in metrics.splitlines():
        if line.startswith(name + "_sum "):
            total = float(line.split()[-1])
        elif line.startswith(name + "_count "):
            count = float(line.split()[-1])
    return total, count


def cpu_split(before: dict[int, float], after: dict[int, float], main: int) -> tuple[float, float]:
    """(main thread, other threads) CPU seconds between two ``thread_cpu_seconds`` snapshots."""
    spent = {tid: after[tid] - before.get(tid, 0.0) for tid in after}  # a thread born meanwhile started at 0
    loop = spent.pop(main, 0.0)
    return loop, sum(spent.values())


class RawConnection:
    """One keep-alive HTTP/1.1 connection for the load generator: a request costs this process tens of
    microseconds, so the clients measure the server, not themselves."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str):
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, url: str) -> RawConnection:
        host, _, port = url.removeprefix("http://").partition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer, host)

    async def post(self, path: str, body: dict[str, Any]) -> int:
        """POST a JSON body; the response's status (its body is read and dropped)."""
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        await self.writer.drain()
        status = int((await self.reader.readline()).split()[1])
        length = None
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if length is None:
            raise ValueError("the response has no Content-Length")
        await self.reader.readexactly(length)
        return status

    def close(self) -> None:
        self.writer.close()


LENGTH_BUCKETS = ((1, 10), (11, 30), (31, 100))
"""Words per request in ``--mixed`` runs, one third of the requests each."""


def mixed_texts(sentences: list[str], count: int, seed: int = 0) -> list[str]:
    """``count`` texts of 1 to 100 running words of the test set, lengths spread evenly over LENGTH_BUCKETS."""
    words = " ".join(sentences).split()
    rng = random.Random(seed)
    texts = []
    for i in range(count):
        low, high = LENGTH_BUCKETS[i % len(LENGTH_BUCKETS)]
        length = rng.randint(low, high)
        start = rng.randrange(0, max(1, len(words) - length))
        texts.append(" ".join(words[start : start + length]))
    rng.shuffle(texts)
    return texts


def p50_by_length(timed: list[tuple[int, float]]) -> dict[str, float]:
    """Median latency (ms) of the answered requests of each LENGTH_BUCKETS range of words."""
    return {
        f"{low}-{high}": 1000 * percentile([t for n, t in timed if low <= n <= high], 50)
        for low, high in LENGTH_BUCKETS
    }


async def closed_loop(
    url: str,
    sentences: list[str],
    clients: int,
    requests: int,
    beam: int,
    deadline_s: float,
    server_pid: int,
    whole: bool = False,
) -> dict[str, Any]:
    """``whole``: each text is one sentence (``split_sentences`` off), as ``--mixed`` sends them."""
    latencies: list[float] = []
    timed: list[tuple[int, float]] = []  # (words, seconds) per answered request
    failures: dict[str, int] = {}
    sent = 0
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:  # /metrics only; requests go raw
        before = (await client.get("/metrics")).text
        deadline = time.monotonic() + deadline_s

        async def one_client() -> None:
            # A keep-alive connection spoken to in plain HTTP/1.1: httpx cost this process ~3 ms of CPU per
            # request at 64 clients and saturated its core while the server idled (docs/reports/load/fake-gpu.md).
            nonlocal sent
            connection = await RawConnection.open(url)
            try:
                while sent < requests and time.monotonic() < deadline:
                    text = sentences[sent % len(sentences)]
                    sent += 1
                    started = time.perf_counter()
                    body = {"text": text, "beam_size": beam, "no_repeat_ngram_size": 0, "length_penalty": 1.0}
                    if whole:
                        body["split_sentences"] = False
                    try:
                        status = await connection.post("/translate", body)
                    except (OSError, asyncio.IncompleteReadError, ValueError) as err:
                        failures[type(err).__name__] = failures.get(type(err).__name__, 0) + 1
                        connection.close()
                        connection = await RawConnection.open(url)
                        continue
                    if status == 200:
                        latencies.append(time.perf_counter() - started)
                        timed.append((len(text.split()), latencies[-1]))
                    else:
                        failures[str(status)] = failures.get(str(status), 0) + 1
            finally:
                connection.close()

        server_cpu0, client_cpu0 = thread_cpu_seconds(server_pid), time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        elapsed = time.perf_counter() - started
        client_cpu = time.process_time() - client_cpu0  # this process: the clients (the engine here is idle)
        loop_cpu, other_cpu = cpu_split(server_cpu0, thread_cpu_seconds(server_pid), server_pid)
        after = (await client.get("/metrics")).text

    def grown(name: str) -> tuple[float, float]:  # (sum, count) a histogram gained during the level
        (sum0, count0), (sum1, count1) = histogram_totals(before, name), histogram_totals(after, name)
        return sum1 - sum0, count1 - count0

    def gained(name: str) -> float:  # how much a gauge that only grows gained during the level
        return (metric(after, name) or 0.0) - (metric(before, name) or 0.0)

    sentences, batches = grown("mt_batch_size_sentences")
    step_s, steps = grown("mt_step_duration_seconds")
    admit_s, admissions = grown("mt_admit_duration_seconds")
    return {
        "clients": clients,
        "answered": len(latencies),
        "failures": failures,
        "seconds": elapsed,
        "sentences_per_s": len(latencies) / elapsed,
        "p50_ms": 1000 * percentile(latencies, 50),
        "p95_ms": 1000 * percentile(latencies, 95),
        "p99_ms": 1000 * percentile(latencies, 99),
        "p50_ms_by_words": p50_by_length(timed),
        "batches": batches,
        "mean_batch": sentences / batches if batches else 0.0,
        "server_rss_mib": resident_mib(server_pid),  # the engine process's included
        # continuous scheduler only: decoder steps and admissions (encoder + merge) of its running sets
        "steps": steps,
        "step_s": step_s,
        "admissions": admissions,
        "admit_s": admit_s,
        # --static-step: sessions and buffer sets opened, and CUDA graphs captured, during the level
        "static_opened": sum(gained(f'mt_static_opened{{kind="{kind}"}}') for kind in OPENED_KINDS),
        "static_opened_by_kind": {kind: gained(f'mt_static_opened{{kind="{kind}"}}') for kind in OPENED_KINDS},
        "captures": gained("mt_cuda_graph_captures"),
        "client_cpu_s": client_cpu,
        "server_loop_cpu_s": loop_cpu,
        "server_other_cpu_s": other_cpu,
        "cpu_capacity_s": elapsed * (os.cpu_count() or 1),
    }


def engine_rate(engine: Any, ids: list[list[int]], batch: int, beam: int, count: int) -> float:
    """Sentences/s of the raw engine on ``count`` sentences (cycling through ``ids``) in batches of ``batch``."""
    from core.translation import DecodeOptions

    options = DecodeOptions(beam_size=beam)
    work = [ids[i % len(ids)] for i in range(count)]
    started = time.perf_counter()
    for lo in range(0, len(work), batch):
        engine.translate_ids(work[lo : lo + batch], options)
    return len(work) / (time.perf_counter() - started)


def plot(results: dict[str, list[dict[str, Any]]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    for name, levels in results.items():
        clients = [r["clients"] for r in levels]
        left.plot(clients, [r["sentences_per_s"] for r in levels], marker="o", label=f"server, {name}")
        right.plot(clients, [r["p95_ms"] for r in levels], marker="o", label=f"p95, {name}")
    on = results.get("batch", [])
    if on:
        left.plot([r["clients"] for r in on], [r["engine_sentences_per_s"] for r in on], "k--", label="raw engine")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent clients")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    left.set_ylabel("sentences/s")
    right.set_ylabel("latency ms")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--bundle", default=str(ROOT / "models" / "en-de"))
    parser.add_argument(
        "--input",
        default=str(ROOT / "data" / "en-de" / "test.tsv"),
        help=f"TSV, first column; {STDLIB_DOCS}: sentences of Python's own documentation (no corpus needed)",
    )
    parser.add_argument("--levels", default="1,4,16,32", help="concurrent clients, comma separated")
    parser.add_argument("--requests", type=int, default=96, help="requests answered per level")
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds per level at most")
    parser.add_argument(
        "--warmup-requests",
        type=int,
        default=0,
        help="requests each server answers at the highest level before the first measured one, not counted "
        "(with --static-step on a GPU: its buckets' sessions opened and their CUDA graphs captured)",
    )
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--provider",
        default="auto",
        help="execution provider of the raw engine and the servers: auto (CUDA if usable), cpu or cuda",
    )
    parser.add_argument("--max-wait-ms", help="MT_MAX_WAIT_MS of the batching-on server (default: the server's)")
    parser.add_argument("--inflight-batches", help="MT_INFLIGHT_BATCHES of the servers (default: the server's)")
    parser.add_argument(
        "--fake-gpu",
        action="store_true",
        help="serve the tests' fake engine with H100-like step costs (testkit/fake_engine.py GPU_LIKE) "
        "instead of --bundle: what the schedulers do with an engine whose step time barely grows with its batch",
    )
    parser.add_argument(
        "--fake-costs",
        choices=["h100", "step-only", "none"],
        default="h100",
        help="with --fake-gpu: h100, the costs measured on an H100 in 2026-11 (steps, the beam search's Python, "
        "encoder calls, select calls); step-only, the first calibration (decoder steps only); none, an engine that "
        "costs nothing (each sentence done at its first step): what the server itself costs per request",
    )
    parser.add_argument(
        "--servers",
        default="batch,off",
        help="servers to measure, in order: batch (the batch scheduler, the default), continuous "
        "(--scheduler continuous), off (batch scheduler, one sentence a batch); each may add one server flag, "
        "e.g. continuous:admit-every=4, or several joined by + (continuous:static-step+inflight-batches=1)",
    )
    parser.add_argument(
        "--mixed",
        action="store_true",
        help="requests of 1 to 100 words (a third each of 1-10, 11-30, 31-100; one sentence each) instead of "
        "test sentences; adds p50 latency by length",
    )
    parser.add_argument(
        "--also-serve",
        nargs="*",
        default=[],
        metavar="BUNDLE",
        help="more bundles in the server (requests use --bundle)",
    )
    parser.add_argument(
        "--server-args",
        default="",
        help='more flags for every server, in one string (e.g. "--max-batch-sentences 256")',
    )
    parser.add_argument("--out", default=str(report_dir("load") / "report"))
    args = parser.parse_args(argv)

    from inference.engine import Engine

    if args.input == STDLIB_DOCS:
        sentences = stdlib_sentences(1000)
    else:
        lines = Path(args.input).read_text(encoding="utf-8").splitlines()
        sentences = [line.split("\t")[0] for line in lines if line.strip()]
    sentences = mixed_texts(sentences, max(args.requests, 1)) if args.mixed else sentences[: max(args.requests, 1)]
    levels = [int(c) for c in args.levels.split(",")]
    work = tempfile.TemporaryDirectory(prefix="bench-load-")  # removed when main returns
    engine: Any
    if args.fake_gpu:
        from testkit.fake_engine import GPU_LIKE, GPU_LIKE_STEP_ONLY, FakeLoader, write_fake_bundle

        costs = {"h100": GPU_LIKE, "step-only": GPU_LIKE_STEP_ONLY, "none": {}}[args.fake_costs]
        args.bundle = str(write_fake_bundle(Path(work.name) / "fake-gpu", **costs, max_source_pieces=255))
        engine = FakeLoader()(Path(args.bundle), provider="cpu", threads=args.threads)
    else:
        engine = Engine.load(args.bundle, provider=args.provider, threads=args.threads)
    engine.warmup()
    ids = [engine.tokenize(s) for s in sentences]
    wait = ["--max-wait-ms", args.max_wait_ms] if args.max_wait_ms is not None else []
    inflight = ["--inflight-batches", args.inflight_batches] if args.inflight_batches is not None else []
    known = {
        "batch": ["--scheduler", "batch", *wait],
        "continuous": ["--scheduler", "continuous"],
        "off": ["--scheduler", "batch", "--max-batch-sentences", "1"],
    }
    names = args.servers.split(",")
    unknown = [n for n in names if n.partition(":")[0] not in known]
    if unknown:
        raise SystemExit(f"--servers {unknown}: choose from {', '.join(known)} (each may add :flag=value)")
    settings = {name: known[name.partition(":")[0]] + server_flag(name.partition(":")[2]) for name in names}
    on_gpu = getattr(engine, "provider", "") == "CUDAExecutionProvider"
    candidates = (16, 32, 64, 128, 256) if on_gpu else (16, 32, 64)  # a GPU's best batch is larger
    best_batch, best_rate = max(
        ((b, engine_rate(engine, ids, b, args.beam, max(args.requests, 2 * b))) for b in candidates),
        key=lambda pair: pair[1],
    )
    print(f"raw engine at its best batch ({best_batch}): {best_rate:.1f} sent/s", flush=True)
    results: dict[str, list[dict[str, Any]]] = {}
    failed: dict[str, str] = {}
    ready_s: dict[str, float] = {}  # each server's start: its process launched to /readyz (models loaded, warmed up)

    def report(final: bool) -> None:
        """The report of the servers measured so far: written after each one (a run stopped by a timeout keeps
        what it measured), printed at the end."""
        manifest = engine.manifest
        if args.fake_gpu:
            costs_text = "no costs" if args.fake_costs == "none" else "H100-like step costs"
            bundle_text, model_text = f"the fake engine with {costs_text}", str(manifest.get("fake"))
        else:
            arch = manifest["architecture"]
            bundle_text = (
                f"{manifest['name']} {manifest['version']} ({manifest['export']['dtype']}, "
                f"quantize {manifest['export']['quantize']})"
            )
            model_text = f"d{arch['d_model']} {arch['encoder_layers']}+{arch['decoder_layers']} layers"
        setup = {
            "bundle": bundle_text,
            "model": model_text,
            "input": args.input,
            "requests_per_level": args.requests,
            "warmup_requests": args.warmup_requests,
            "beam": args.beam,
            "threads": args.threads,
            "max_wait_ms": args.max_wait_ms,
            "inflight_batches": args.inflight_batches,
            "mixed_lengths": args.mixed,
            "engine_best_batch": best_batch,
            "engine_best_sentences_per_s": best_rate,
            "machine": machine(),
            "date": time.strftime("%Y-%m-%d"),
            "failed": failed,
            "ready_s": ready_s,
        }
        table = [
            "| server | clients | sent/s | p50 ms | p95 ms | p99 ms | mean batch | raw engine sent/s at that batch "
            f"| server / engine | server / engine at its best batch ({best_batch}: {best_rate:.0f} sent/s) "
            "| gain from batching | server RSS MiB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        off = {r["clients"]: r for r in results.get("off", [])}
        for name, rows in results.items():
            for r in rows:
                gain = ""
                if name != "off" and r["clients"] in off:
                    gain = f"{r['sentences_per_s'] / off[r['clients']]['sentences_per_s']:.2f}x"
                table.append(
                    f"| {name} | {r['clients']} | {r['sentences_per_s']:.1f} | {r['p50_ms']:.0f} "
                    f"| {r['p95_ms']:.0f} | {r['p99_ms']:.0f} | {r['mean_batch']:.1f} "
                    f"| {r['engine_sentences_per_s']:.1f} | {r['server_over_engine']:.2f} "
                    f"| {r['server_over_best_engine']:.2f} | {gain} | {r.get('server_rss_mib', 0):.0f} |"
                )
        cpu_table = [
            "| server | clients | client CPU | server event loop | server other threads "
            "| rest (idle, other processes) | event loop ms/request | other threads ms/request |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, rows in results.items():
            for r in rows:
                capacity, answered = r["cpu_capacity_s"], max(1, r["answered"])
                used = r["client_cpu_s"] + r["server_loop_cpu_s"] + r["server_other_cpu_s"]
                cpu_table.append(
                    f"| {name} | {r['clients']} | {r['client_cpu_s'] / capacity:.0%} "
                    f"| {r['server_loop_cpu_s'] / capacity:.0%} | {r['server_other_cpu_s'] / capacity:.0%} "
                    f"| {max(0.0, 1 - used / capacity):.0%} | {1000 * r['server_loop_cpu_s'] / answered:.2f} "
                    f"| {1000 * r['server_other_cpu_s'] / answered:.2f} |"
                )
        length_table: list[str] = []
        if args.mixed:
            ranges = [f"{low}-{high}" for low, high in LENGTH_BUCKETS]
            length_table = [
                "Median latency by request length (words), the requests of each range answered at that level:",
                "",
                "| server | clients | " + " | ".join(f"p50 ms, {r} words" for r in ranges) + " |",
                "|---|---:|" + "---:|" * len(ranges),
            ]
            for name, rows in results.items():
                for r in rows:
                    cells = " | ".join(f"{r['p50_ms_by_words'][k]:.0f}" for k in ranges)
                    length_table.append(f"| {name} | {r['clients']} | {cells} |")
            length_table.append("")

        def kinds(r: dict[str, Any]) -> str:
            by_kind = r.get("static_opened_by_kind")
            if not r.get("static_opened") or not by_kind:
                return ""
            return " (" + " / ".join(f"{by_kind.get(kind, 0):.0f}" for kind in OPENED_KINDS) + ")"

        worker_table: list[str] = []
        stepped = [(name, r) for name, rows in results.items() for r in rows if r.get("steps")]
        if stepped:
            worker_table = [
                "The continuous scheduler's running sets (from /metrics: mt_step_duration_seconds, a decoder step with "
                "its beam search; mt_admit_duration_seconds, an admission: encoder and merge), and the worker "
                "seconds spent in both per second of the level; with --static-step, what it opened during the level "
                "(mt_static_opened: decoder sessions, encoder sessions and sets of buffers, a set of buffers opened "
                "again where the pool had freed its bucket's) and the CUDA graphs it captured "
                "(mt_cuda_graph_captures):",
                "",
                "| server | clients | steps/s | mean step ms | admissions per step | mean admission ms | busy workers "
                "| static opened (decoder / encoder / buffers) | captures |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for name, r in stepped:
                steps, admissions = r["steps"], r["admissions"]
                worker_table.append(
                    f"| {name} | {r['clients']} | {steps / r['seconds']:.0f} | {1000 * r['step_s'] / steps:.2f} | "
                    f"{admissions / steps:.2f} | {1000 * r['admit_s'] / admissions if admissions else 0:.2f} | "
                    f"{(r['step_s'] + r['admit_s']) / r['seconds']:.2f} | {r.get('static_opened', 0):.0f}{kinds(r)} | "
                    f"{r.get('captures', 0):.0f} |"
                )
            worker_table.append("")
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        has_plot = plot(results, report_path(out, ".png"))
        markdown = "\n".join(
            [
                "# Server under load: throughput and latency by concurrency",
                "",
                f"Generated by `python -m bench load` on {setup['date']}: {setup['bundle']}, {setup['model']}, "
                + (
                    "one text of 1-100 running words per request, as one sentence"
                    if args.mixed
                    else "one test sentence per request"
                )
                + f" ({setup['input']}), beam {setup['beam']}, {setup['threads']} inference "
                f"threads, {setup['requests_per_level']} requests per level, server and client on the same "
                f"{setup['machine']['cpus']} CPUs (127.0.0.1)"
                + (
                    f"; the batch scheduler with --max-wait-ms {args.max_wait_ms}"
                    if args.max_wait_ms is not None
                    else ""
                )  # noqa: E501
                + (f"; --inflight-batches {args.inflight_batches}" if args.inflight_batches is not None else "")
                + (f"; server flags {args.server_args}" if args.server_args else "")
                + ".",
                "",
                *table,
                "",
                *length_table,
                "Where the CPU went during each level, as shares of all CPUs over the level's wall time (from "
                "/proc: the load generator's process, the server's main thread, which runs the event loop with HTTP, "
                "JSON and validation, and the server's other threads: batcher, tokenization pool, onnxruntime, and "
                "with engine-process the engine process's threads; server RSS includes the engine process):",
                "",
                *cpu_table,
                "",
                *worker_table,
                *([f"![load]({report_path(out, '.png').name})", ""] if has_plot else []),
                "Each server's start, launched to ready (models loaded and warmed up; with --static-step, its buckets "
                "opened): " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in ready_s.items()) + ".",
                "",
                *[
                    f"{name} could not be measured: `{error.splitlines()[-1] if error else ''}`\n"
                    for name, error in failed.items()
                ],
            ]
        )
        if final:
            print()
            print(markdown)
        write_report(out, markdown, {"setup": setup, "results": results})

    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in settings.items():
            flags = ["--threads", str(args.threads), "--provider", args.provider, "--log-level", "warning"]
            if args.fake_gpu:  # the fake engine stands for a GPU: a GPU's defaults (service/app.py), not the CPU's
                flags += ["--refill-at", "1024"]
                flags += [word for name, value in GPU_DEFAULTS.items() for word in (server_option(name), str(value))]
            flags += [*inflight, *extra, *shlex.split(args.server_args)]
            if args.also_serve:  # more models in the server (memory as deployed); requests go to --bundle's
                flags += ["--bundles", ",".join([args.bundle, *args.also_serve])]
            results[name] = []
            log_path = Path(tmp) / f"{name}.log"
            try:  # a server that cannot start (or dies) is reported, and the next one still measured
                launched = time.monotonic()
                with server_process(Path(args.bundle), log_path, fake=args.fake_gpu, flags=flags) as server:
                    url, pid = server.url, server.pid
                    ready_s[name] = time.monotonic() - launched
                    print(f"{name}: ready in {ready_s[name]:.1f} s", flush=True)

                    def load(clients: int, requests: int, url: str = url, pid: int = pid) -> dict[str, Any]:
                        return run_loop(
                            closed_loop(
                                url, sentences, clients, requests, args.beam, args.deadline, pid, whole=args.mixed
                            )
                        )

                    if args.warmup_requests:
                        load(max(levels), args.warmup_requests)
                    for clients in levels:
                        level = load(clients, args.requests)
                        batch = max(1, round(level["mean_batch"]))
                        level["engine_batch"] = batch
                        level["engine_sentences_per_s"] = engine_rate(engine, ids, batch, args.beam, args.requests)
                        level["server_over_engine"] = level["sentences_per_s"] / level["engine_sentences_per_s"]
                        level["server_over_best_engine"] = level["sentences_per_s"] / best_rate
                        results[name].append(level)
                        print(
                            f"{name}, {clients:>3} clients: {level['sentences_per_s']:6.1f} sent/s, "
                            f"p50 {level['p50_ms']:.0f} ms, p95 {level['p95_ms']:.0f} ms, "
                            f"p99 {level['p99_ms']:.0f} ms, "
                            f"mean batch {level['mean_batch']:.1f}, engine at that batch "
                            f"{level['engine_sentences_per_s']:.1f} sent/s (x{level['server_over_engine']:.2f}), "
                            f"failures {level['failures'] or 0}",
                            flush=True,
                        )
            except RuntimeError as err:  # testkit.server: the server exited or never answered
                failed[name] = str(err)[-1500:]
                print(f"{name} failed: {failed[name]}", flush=True)
            report(final=False)
    report(final=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
