"""Shared pieces of the load benchmarks (bench/overload.py, bench/soak.py) and their CI tests, and of the
decoding-option sweeps (bench/length_penalty.py, bench/repeats.py).

A server under test is ``python -m service`` (or the fake-engine variant of the tests) started as a
subprocess on 127.0.0.1 and a free port; the load comes from one asyncio httpx client. Everything
here is bounded: every loop stops after a number of requests *and* a deadline, and every request has
a timeout.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE
from testkit.server import ProcessServer, process_server

T = TypeVar("T")
K = TypeVar("K")
ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "docs" / "reports"
"""Where benchmarks write their reports by default: one directory per benchmark, one current report each."""


def report_dir(benchmark: str) -> Path:
    """``docs/reports/<benchmark>``: a benchmark's default output directory."""
    return REPORTS / benchmark


SERVER_SEARCH = {"no_repeat_ngram_size": DEFAULT_NO_REPEAT_NGRAM_SIZE, "length_penalty": DEFAULT_LENGTH_PENALTY}
"""The search options a server decodes with by default beyond the beam (core/translation.py), as DecodeOptions
keywords: what ``--server-options`` of the A/B benches adds."""


def add_server_options(parser: Any) -> None:
    """``--server-options``: decode with :data:`SERVER_SEARCH` instead of the engine's plain defaults."""
    parser.add_argument(
        "--server-options",
        action="store_true",
        help="decode with the server's n-gram guard and length penalty (core/translation.py) instead of the "
        "engine's plain defaults",
    )


WORDS = ["red", "blue", "green", "black", "white", "gold", "pink", "gray", "cyan", "teal", "navy", "plum"]
"""The tiny test model's vocabulary (testkit/synthetic.py); plain English words for a real model too."""
TINY_BUNDLE = ROOT / "cache" / "bench-tiny-bundle"


def texts(n: int, seed: int = 1, min_words: int = 2, max_words: int = 6) -> list[str]:
    """``n`` short sentences of WORDS (the tiny model reverses and capitalises them)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(min_words, max_words))) for _ in range(n)]


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100, nearest rank); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@contextmanager
def server_process(
    bundle: Path,
    log_path: Path,
    *,
    fake: bool = False,
    flags: list[str] | None = None,
    env: dict[str, str] | None = None,
    ready_timeout_s: float = 300.0,
) -> Iterator[ProcessServer]:
    """``python -m service --bundle BUNDLE [flags]`` through the tests' harness (testkit.server), until
    ``/readyz``; stopped by SIGTERM at the end, as a deployment would stop it. The translation cache is off
    (``--cache-mb 0``) unless ``flags`` set it: these benches measure decoding, and their sentences repeat."""
    flags = flags or []
    cache = [] if any(flag.startswith("--cache-mb") for flag in flags) else ["--cache-mb", "0"]
    args = ["--bundle", str(bundle), *cache, *flags]
    with process_server(
        args, log_path, fake=fake, env=env, ready=True, timeout_s=ready_timeout_s, graceful=True
    ) as server:
        yield server


def process_stats(pid: int) -> dict[str, int]:
    """Resident memory (KiB), threads and open file descriptors of a process, from /proc."""
    stats: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            stats[key.lower() + "_kib"] = int(value.split()[0])
        elif key == "Threads":
            stats["threads"] = int(value)
    stats["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return stats


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the server's engine process, with MT_ENGINE_PROCESS), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:  # ppid: field 4 of stat(5)
            found.append(int(entry.name))
    return found


def thread_cpu_seconds(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) so far of each thread of a process and of its child processes, by thread id,
    from /proc.

    The main thread's id is the process id: in the server that is the event loop (HTTP, JSON, validation);
    the others are the batcher's worker, ``asyncio.to_thread``'s pool and onnxruntime's intra-op pool, and with
    MT_ENGINE_PROCESS the engine process's threads.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    seconds: dict[int, float] = {}
    for process in (pid, *children(pid)):
        try:
            tasks = list(Path(f"/proc/{process}/task").iterdir())
        except OSError:  # the process ended
            continue
        for task in tasks:
            try:
                stat = (task / "stat").read_text()
            except OSError:  # the thread ended between listing and reading
                continue
            fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state is field 3 of stat(5)
            seconds[int(task.name)] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime: fields 14, 15
    return seconds


def tree_stats(pid: int) -> dict[str, int]:
    """``process_stats`` summed over a process and its child processes (the server and its engine process)."""
    total: dict[str, int] = {}
    for process in (pid, *children(pid)):
        try:
            stats = process_stats(process)
        except OSError:  # the process ended
            continue
        for key, value in stats.items():
            total[key] = total.get(key, 0) + value
    return total


def resident_mib(pid: int) -> float:
    """Resident memory of a process and its child processes, MiB."""
    return tree_stats(pid).get("vmrss_kib", 0) / 1024


def metric(text: str, name: str) -> float | None:
    """The value of an unlabelled sample ``name`` in Prometheus text format."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


@dataclass
class Scrape:
    """What a scraper saw while the load ran: queue depths and /healthz answers."""

    depths: list[float] = field(default_factory=list)
    health_status: list[int] = field(default_factory=list)
    health_latency_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Transport errors of the probes (their status is recorded as 0)."""


async def scrape(
    client: httpx.AsyncClient, stop: asyncio.Event, interval_s: float = 0.05, limit: int = 20_000
) -> Scrape:
    """Poll /metrics (queue depth) and /healthz until ``stop`` is set (or ``limit`` polls)."""
    seen = Scrape()
    for _ in range(limit):
        if stop.is_set():
            break
        try:
            r = await client.get("/metrics")
            depth = metric(r.text, "mt_queue_depth_sentences")
            if depth is not None:
                seen.depths.append(depth)
            started = time.perf_counter()
            h = await client.get("/healthz")
            seen.health_latency_s.append(time.perf_counter() - started)
            seen.health_status.append(h.status_code)
        except httpx.HTTPError as err:
            seen.health_status.append(0)
            seen.errors.append(type(err).__name__)
        try:
            await asyncio.wait_for(stop.wait(), interval_s)
        except TimeoutError:
            pass
    return seen


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run the client's coroutine on uvloop when installed (uvicorn[standard] brings it): a faster client."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def access_log_latencies(log: str, path: str = "/translate") -> dict[int, list[float]]:
    """Server-side latencies (seconds) by status, from the JSON access log lines of ``path``."""
    out: dict[int, list[float]] = {}
    for line in log.splitlines():
        if '"service.access"' not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("path") == path:
            out.setdefault(int(record["status"]), []).append(float(record["latency_ms"]) / 1000)
    return out


def alternated(
    engine: Any, sources: list[str], options: dict[K, Any], batch: int, repeats: int
) -> tuple[dict[K, list[str]], dict[K, list[float]]]:
    """Translate ``sources`` once per entry of ``options`` (DecodeOptions), the entries alternated ``repeats``
    times (a b a b ...) so they share the machine's state: the last translations and every run's seconds."""
    from training.evaluate import translate_texts

    hyps: dict[K, list[str]] = {}
    seconds: dict[K, list[float]] = {key: [] for key in options}
    for _ in range(repeats):
        for key, option in options.items():
            hyps[key], took = translate_texts(engine, sources, option, batch)
            seconds[key].append(took)
    return hyps, seconds


STDLIB_DOCS = "stdlib-docs"
"""An ``--input`` that needs no corpus: English sentences read at run time from the installed Python's own
documentation (``stdlib_sentences``)."""


def stdlib_sentences(n: int, seed: int = 1) -> list[str]:
    """Up to ``n`` English sentences of software documentation (5 to 35 words, no code) from the docstrings of
    some of Python's standard modules as pydoc renders them, shuffled with ``seed``: the domain the default
    model knows, for speed figures on a machine without data/ (python -m training build-corpus). Nothing of it is
    stored here; the same Python version gives the same sentences."""
    import importlib
    import pydoc

    modules = ["argparse", "logging", "json", "subprocess", "os", "pathlib", "shutil", "tarfile", "zipfile"]
    modules += ["sqlite3", "csv", "email", "http.client", "urllib.request", "unittest", "datetime", "collections"]
    modules += ["socket", "threading", "asyncio"]
    found: dict[str, None] = {}
    for name in modules:
        text = pydoc.plain(pydoc.render_doc(importlib.import_module(name)))
        for paragraph in re.split(r"\n\s*\n", text):
            for sentence in re.split(r"(?<=[.!?])\s+", " ".join(paragraph.split())):
                words = sentence.split()
                if 5 <= len(words) <= 35 and sentence[0].isupper() and sentence.endswith("."):
                    if not re.search(r"[|=<>{}\[\]_]|\(\)", sentence):
                        found[sentence] = None
    sentences = list(found)
    random.Random(seed).shuffle(sentences)
    return sentences[:n]


def read_sources(source: str, n: int) -> list[str]:
    """``n`` source sentences from ``source``: a file's lines (a TSV's first column), repeated as often as needed,
    or ``stdlib-docs`` (``stdlib_sentences``)."""
    if source == STDLIB_DOCS:
        return stdlib_sentences(n)
    lines = [line.split("\t", 1)[0].strip() for line in Path(source).read_text(encoding="utf-8").splitlines()]
    sources = [line for line in lines if line]
    if not sources:
        raise SystemExit(f"{source}: no source sentences")
    return (sources * (n // len(sources) + 1))[:n]


def command_line(benchmark: str, argv: list[str] | None) -> str:
    """The command that reproduces a run, for its report: ``python -m bench <benchmark> <arguments>``."""
    args = sys.argv[1:] if argv is None else argv
    return " ".join(["python -m bench", benchmark, *args])


def conclude(report: dict[str, Any], problems: list[str], table: str, out: Path) -> int:
    """The end of a pass/fail benchmark (overload, soak): the table, the JSON report with its problems, each
    problem on stderr; the exit status says whether it passed."""
    report["problems"] = problems
    print(table)
    write_json(out, report)
    print(f"\nwrote {out}")
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


def report_path(out: Path | str, ext: str) -> Path:
    """``OUT`` + ``ext``: a report's stem may hold dots ("bench-load-0.4.0"), which ``with_suffix`` would cut.

    A stem given with one of the report extensions ("docs/x.md") loses it first, so ``x.md`` gives ``x.json``.
    The directory is created: reports go to ``docs/reports/<benchmark>/`` by default.
    """
    out = Path(out)
    if out.suffix in (".md", ".json", ".png"):
        out = out.with_suffix("")
    out.parent.mkdir(parents=True, exist_ok=True)
    return out.parent / (out.name + ext)


def write_report(out: Path, markdown: str, data: object) -> None:
    """A benchmark's results: ``out.md`` (the table as printed) and ``out.json`` (the raw rows)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    report_path(out, ".md").write_text(markdown, encoding="utf-8")
    report_path(out, ".json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    load = os.getloadavg()
    return {
        "cpus": os.cpu_count(),
        "load_average_1m_at_start": round(load[0], 2),
        "python": sys.version.split()[0],
        "nice": os.nice(0),
    }


def default_bundle() -> Path:
    """models/en-de when it exists, else the tiny test bundle (built on first use, needs torch)."""
    real = ROOT / "models" / "en-de"
    if (real / "manifest.json").is_file():
        return real
    return ensure_tiny_bundle()


def exact_bundle() -> Path:
    """The bundle a bench serves when it checks every answer against the text translated alone: the tests' tiny
    fp32 model. The shipped models' int8 graphs quantize activations with one scale for the whole batch, so a
    sentence's translation there can depend on what it is batched with (docs/bundle.md, "Batch mates")."""
    return ensure_tiny_bundle()


def batched_like_alone(bundle: Path) -> bool:
    """Whether the bundle's main graphs translate a sentence the same whatever it is batched with: float and
    int8-static graphs do; dynamic int8 ones (one activation scale per batch) need not."""
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    quantize = manifest.get("export", {}).get("quantize", "none") or "none"
    return quantize == "none" or quantize.startswith("int8-static")


def ensure_tiny_bundle(out: Path = TINY_BUNDLE) -> Path:
    """The tests' tiny model (testkit.tiny) exported to ``out``, built on first use."""
    if (out / "manifest.json").is_file():
        return out
    from testkit.tiny import build_tiny_bundle

    return build_tiny_bundle(out)


class Worker:
    """A Python process of its own (``python -c CODE ARGS``) that prints one JSON line when ready, then answers each
    JSON line sent to it with one: how the A/B benches run another code tree beside this one."""

    def __init__(self, code: str, args: list[str], name: str):
        self.name = name
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the worker for {self.name} died (see its error above)")
        return dict(json.loads(line))

    def call(self, job: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=30)


@contextmanager
def workers(code: str, argv: dict[str, list[str]]) -> Iterator[dict[str, Worker]]:
    """A :class:`Worker` running ``code`` per side (``python -c CODE *argv[side]``, the side's tree first), closed on
    the way out."""
    sides: dict[str, Worker] = {}
    try:
        for key, args in argv.items():
            sides[key] = Worker(code, args, args[0])
        yield sides
    finally:
        for side in sides.values():
            side.close()


def side_by_side(
    sides: dict[str, Worker],
    job: Callable[[int], dict[str, Any]],
    repeats: int,
    value: Callable[[dict[str, Any]], float],
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The A/B benches' loop: ``job(repeat)`` sent to each side in turn (a b a b ...), ``repeats`` times. Returns a row
    of each side's ``value`` per answer and, with two sides, whether every pair of answers named the same
    ``outputs``, the ratio of the medians a / b (``speedup``) and each repeat's (``per_repeat``); and the answers."""
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key in sides}
    for repeat in range(repeats):
        for key, side in sides.items():
            runs[key].append(side.call(job(repeat)))
    row: dict[str, Any] = {key: [value(answer) for answer in runs[key]] for key in sides}
    if len(sides) == 2:
        row["same_outputs"] = all(x["outputs"] == y["outputs"] for x, y in zip(runs["a"], runs["b"], strict=True))
        row["speedup"] = statistics.median(row["a"]) / statistics.median(row["b"])
        row["per_repeat"] = [x / y for x, y in zip(row["a"], row["b"], strict=True)]
    return row, runs


def side_by_side_line(row: dict[str, Any], unit: str, digits: int) -> str:
    """One printed line of an :func:`side_by_side` row: each side's median in ``unit``, then a / b."""
    parts = [f"batch {row['batch']}:"] + [
        f"{key} {statistics.median(row[key]):.{digits}f} {unit}" for key in ("a", "b") if key in row
    ]
    if "speedup" in row:
        parts.append(f"a/b {row['speedup']:.2f}x, same outputs {row['same_outputs']}")
    return " ".join(parts)


def side_by_side_table(
    rows: list[dict[str, Any]],
    sides: Iterable[str],
    unit: str,
    digits: int,
    extra: tuple[tuple[str, str], ...] = (),
    spread: bool = False,
) -> list[str]:
    """The markdown table of :func:`side_by_side` rows: batch, the ``extra`` (header, row key) columns, each side's
    median in ``unit`` a step, then with two sides a / b (``spread``: with each repeat's range) and whether the
    outputs were the same."""
    sides = list(sides)
    header = "| batch | " + "".join(f"{title} | " for title, _ in extra)
    header += " | ".join(f"{key} {unit} a step" for key in sides)
    header += (" | a / b (per repeat)" if spread else " | a / b") + " | same outputs |" if len(sides) == 2 else " |"
    lines = [header, "|---" * (header.count("|") - 1) + "|"]
    for row in rows:
        cells = [str(row["batch"]), *(str(row[key]) for _, key in extra)]
        cells += [f"{statistics.median(row[key]):.{digits}f}" for key in sides]
        if len(sides) == 2:
            ratio = f"{row['speedup']:.2f}x"
            if spread:
                ratio += f" ({min(row['per_repeat']):.2f}–{max(row['per_repeat']):.2f})"
            cells += [ratio, "yes" if row["same_outputs"] else "**no**"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines
