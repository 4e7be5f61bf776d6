"""What refusing a request costs the server while its queue is full: two code trees side by side.

    python -m bench refusal-cost [--a OLD_TREE] [--b .] [--sizes 8x40,500x200] [--requests 60] [--repeats 3]
                                 [--out docs/reports/refusal-cost/report]

Each run starts a tree's server on 127.0.0.1 (``python -m testkit.fake_server``: the fake engine, whose every step
takes 60 s; one running set of one sentence, ``--max-queue 1000``), fills its queue (one sentence decoding, then a
request of 1,000 sentences waiting), and sends ``--requests`` requests one after another, each of N texts of C
characters (``--sizes NxC,...``), every one refused with 503; a figure is the median round trip of all but the
first 10. One client and one request at a time, so a difference between the trees is the server's own work per
refusal (the client's is the same). Each side runs in a worker process with its tree first on ``sys.path``; runs
alternate a b a b ... Writes OUT.md and OUT.json. Measured for the early refusal of service/middleware.py ``Shed``
(docs/reliability.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARMUP = 10


def worker(sizes: list[tuple[int, int]], requests: int) -> dict[str, float]:
    """In a tree's process: its server, its queue filled, the median ms of a refused request per size."""
    import threading

    import httpx

    from testkit.fake_engine import write_fake_bundle
    from testkit.server import process_server

    work = Path(tempfile.mkdtemp())
    bundle = write_fake_bundle(work / "b", delay_s=60)
    flags = ["--bundle", str(bundle), "--max-queue", "1000", "--max-batch-sentences", "1", "--inflight-batches", "1"]
    flags += ["--cache-mb", "0"]  # every request is decoded (or refused), none answered from the cache
    flags += ["--max-texts", "5000", "--max-chars", "1000000", "--request-timeout-s", "120", "--provider", "cpu"]
    medians: dict[str, float] = {}
    with process_server(flags, work / "server.log", fake=True, ready=True) as server:
        url = server.url

        def post(texts: list[str]) -> None:
            with httpx.Client(base_url=url, timeout=120) as client:
                client.post("/translate", json={"text": texts})

        threading.Thread(target=post, args=(["decoding"],), daemon=True).start()
        time.sleep(0.5)
        threading.Thread(target=post, args=(["waiting"] * 1000,), daemon=True).start()
        with httpx.Client(base_url=url, timeout=30) as client:
            deadline = time.monotonic() + 30
            while "mt_queue_depth_sentences 1000.0" not in client.get("/metrics").text:
                if time.monotonic() > deadline:
                    raise RuntimeError("the queue did not fill")
                time.sleep(0.05)
            for texts, chars in sizes:
                body = json.dumps({"text": ["word " * (chars // 5)] * texts}).encode()
                times = []
                for _ in range(requests):
                    started = time.perf_counter()
                    answer = client.post("/translate", content=body, headers={"content-type": "application/json"})
                    times.append(time.perf_counter() - started)
                    if answer.status_code != 503:
                        raise RuntimeError(f"expected 503, got {answer.status_code}: {answer.text[:200]}")
                medians[f"{texts}x{chars}"] = statistics.median(times[WARMUP:]) * 1e3
    return medians


def run_tree(tree: Path, sizes: str, requests: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--sizes", sizes, "--requests", str(requests)]
    out = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=600, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def parse_sizes(text: str) -> list[tuple[int, int]]:
    pairs = []
    for one in text.split(","):
        texts, _, chars = one.partition("x")
        pairs.append((int(texts), int(chars)))
    return pairs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench refusal-cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--a", type=Path, help="baseline tree (e.g. `git worktree add /tmp/old HEAD~1`); none: --b alone")
    p.add_argument("--b", type=Path, default=Path("."), help="candidate tree")
    p.add_argument("--sizes", default="8x40,500x200", help="requests of N texts of C characters: NxC,...")
    p.add_argument("--requests", type=int, default=60, help="refused requests per size and run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=Path("docs/reports/refusal-cost/report"))
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(parse_sizes(args.sizes), args.requests)))
        return 0
    from bench.loadtools import write_report

    trees = {"a": args.a, "b": args.b} if args.a else {"b": args.b}
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in trees}
    for repeat in range(args.repeats):
        for side, tree in trees.items():
            runs[side].append(run_tree(tree.resolve(), args.sizes, args.requests))
            print(f"run {repeat + 1} {side}: {runs[side][-1]}", flush=True)
    sizes = list(runs["b"][0])
    median = {side: {s: statistics.median(r[s] for r in rs) for s in sizes} for side, rs in runs.items()}
    head = "| request | " + " | ".join(f"{side} ms a refusal" for side in trees) + (" | a / b |" if args.a else " |")
    lines = [head, "|---|" + "---:|" * (len(trees) + (1 if args.a else 0))]
    for s in sizes:
        texts, chars = s.split("x")
        cells = [f"{median[side][s]:.2f}" for side in trees]
        if args.a:
            cells.append(f"{median['a'][s] / median['b'][s]:.2f}x")
        lines.append(f"| {texts} texts of {chars} characters | " + " | ".join(cells) + " |")
    trees_text = ", ".join(f"{side} = `{tree}`" for side, tree in trees.items())
    markdown = (
        "# What a refusal costs while the queue is full\n\n"
        f"Generated by `python -m bench refusal-cost` ({os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.2f}): {trees_text}; {args.requests} refused requests a size and run, one at a time, "
        f"the median of all but the first {WARMUP}, then the median of {args.repeats} alternated runs.\n\n"
        + "\n".join(lines)
        + "\n"
    )
    print(markdown)
    write_report(args.out, markdown, {"trees": {k: str(v) for k, v in trees.items()}, "runs": runs, "median": median})
    return 0


if __name__ == "__main__":
    sys.exit(main())
