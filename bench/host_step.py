"""The host's own work a decoder step, the device's part taken out: two code trees side by side.

    python -m bench host-step --bundle BUNDLE --input TSV [--a OLD_TREE] [--b .] [--batch-sizes 1,8,32,128]
                              [--sentences 64] [--repeats 5] [--server-options] [--out docs/reports/host-step/report]

On a GPU a static step's graph is replayed while the host waits; everything else a step does is Python and numpy on
the host: the beam search, the static state's inputs and bookkeeping, the engine's loop (``RunningSet.step``). On the
H100 of session 42 that was ~80 us of a ~330 us batch-1 step (docs/inference-core.md). On the CPU the graph runs on
the same cores and leaves the host's work cold in the caches, so timing the engine there mixes the two. This bench
takes the graph out: each tree's engine (static steps, BUNDLE's GPU set on the CPU provider) first decodes the
sentences for real, recording every static step's outputs; then it decodes them again with each static step's run
replaced by a copy of the outputs recorded for it, so the search takes the same path, and times ``RunningSet.step``
less the graphs that still run inside it (``grow``, ``compact``: device work on a GPU). What is left is the host's
work a step as it would be between two replays, with warm caches. Each side runs in a worker process of its own
(its tree first on ``sys.path``); runs alternate a b a b ...; a figure is the median over the repeats of each run's
best of three passes, and both trees must translate alike. Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.loadtools import (
    SERVER_SEARCH,
    add_server_options,
    machine,
    report_dir,
    side_by_side,
    side_by_side_line,
    side_by_side_table,
    workers,
    write_report,
)

WORKER = r"""
import gc, hashlib, json, sys, time
tree, bundle, path = sys.argv[1:4]
sys.path.insert(0, tree)
from core.translation import DecodeOptions
from inference import engine as engine_module, static_state
from inference.engine import Engine
assert static_state.__file__.startswith(tree), "imported another tree's engine"
engine = Engine.load(bundle, provider="cpu", threads=2, static_step=True)
with open(path, encoding="utf-8") as lines:
    texts = [line.split("\t")[0] for line in lines if line.strip()]
real_run, real_step, real_graph = static_state._run, engine_module.RunningSet.step, engine.run_graph
tape, at, clock = [], [0], {"inside": False, "seconds": 0.0, "steps": 0}


def recorded(bound, attention):
    if clock["replay"]:  # the outputs of this step's real run, where the run would have written them
        for value, saved in zip(bound.outputs, tape[at[0]], strict=True):
            value.numpy()[...] = saved
        at[0] += 1
        return real_run(bound, attention)
    out = real_run(bound, attention)
    tape.append([value.numpy().copy() for value in bound.outputs])
    return out


def timed_step(self):
    clock["inside"], started = True, time.perf_counter()
    try:
        return real_step(self)
    finally:
        clock["seconds"] += time.perf_counter() - started
        clock["steps"] += 1
        clock["inside"] = False


def timed_graph(*args, **kwargs):  # grow and compact inside a step: the device's work on a GPU, not counted
    started = time.perf_counter()
    try:
        return real_graph(*args, **kwargs)
    finally:
        if clock["inside"]:
            clock["seconds"] -= time.perf_counter() - started


def nothing(*args):
    return None


static_state._run = recorded
engine_module.RunningSet.step = timed_step
engine.run_graph = timed_graph


def decode(batch, sentences, options):
    done = []
    for start in range(0, sentences, batch):
        done += [t.best.token_ids for t in engine.translate(texts[start : start + batch], options)]
    return done


print(json.dumps({"ready": tree}), flush=True)
for line in sys.stdin:
    job = json.loads(line)
    batch, sentences = job["batch"], min(job["sentences"], len(texts))
    options = DecodeOptions(beam_size=4, **job["options"])
    clock["replay"] = False
    decode(batch, sentences, options)  # opens the buckets
    tape.clear()
    real = decode(batch, sentences, options)
    sessions = [s for s in gc.get_objects() if isinstance(s, static_state.StaticSession)]
    runs = [s.run for s in sessions]
    for s in sessions:
        s.run = nothing
    clock["replay"], best, steps = True, None, 0
    try:
        for _ in range(3):
            at[0], clock["seconds"], clock["steps"] = 0, 0.0, 0
            replayed = decode(batch, sentences, options)
            assert replayed == real, "the replay decoded otherwise than the real run"
            seconds = clock["seconds"] / clock["steps"]
            best, steps = seconds if best is None else min(best, seconds), clock["steps"]
    finally:
        for s, run in zip(sessions, runs, strict=True):
            s.run = run
    digest = hashlib.sha256(json.dumps(real).encode()).hexdigest()
    print(json.dumps({"seconds": best, "steps": steps, "outputs": digest}), flush=True)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", required=True, help="a bundle whose GPU set has static steps (--static-step)")
    parser.add_argument("--input", required=True, help="TSV, source first")
    parser.add_argument("--a", help="baseline tree (e.g. `git worktree add /tmp/old HEAD~1`); none: --b alone")
    parser.add_argument("--b", default=".", help="candidate tree")
    parser.add_argument("--batch-sizes", default="1,8,32,128")
    parser.add_argument("--sentences", type=int, default=64, help="decoded a pass (at least the batch size)")
    parser.add_argument("--repeats", type=int, default=5)
    add_server_options(parser)
    parser.add_argument("--out", default=str(report_dir("host-step") / "report"))
    args = parser.parse_args(argv)
    options = SERVER_SEARCH if args.server_options else {}

    trees = {key: str(Path(tree).resolve()) for key, tree in (("a", args.a), ("b", args.b)) if tree}
    bundle, source = str(Path(args.bundle).resolve()), str(Path(args.input).resolve())
    rows: list[dict[str, Any]] = []
    with workers(WORKER, {key: [tree, bundle, source] for key, tree in trees.items()}) as sides:
        for batch in map(int, args.batch_sizes.split(",")):
            job = {"batch": batch, "sentences": max(batch, args.sentences), "options": options}

            def same_job(repeat: int, job: dict[str, Any] = job) -> dict[str, Any]:
                return job

            measured, runs = side_by_side(sides, same_job, args.repeats, lambda r: float(r["seconds"]) * 1e6)
            row: dict[str, Any] = {"batch": batch, "steps": runs["b"][0]["steps"], **measured}
            rows.append(row)
            print(side_by_side_line(row, "us", 1), flush=True)

    host = machine()
    lines = [
        "# The host's own work a decoder step",
        "",
        f"Generated by `python -m bench host-step` ({host['cpus']} CPUs, load {host['load_average_1m_at_start']}, "
        f"Python {host['python']}): "
        + ", ".join(f"{key} = `{tree}`" for key, tree in trees.items())
        + f"; `{args.bundle}` (static steps of its GPU set on the CPU provider), `{args.input}`, beam 4"
        + (" with the server's n-gram guard and length penalty" if args.server_options else "")
        + ", "
        f"{args.sentences} sentences a pass; `RunningSet.step` less the graphs it runs, each static step's run "
        f"replaced by its recorded outputs; median over {args.repeats} alternated runs of each run's best of 3 "
        "passes.",
        "",
        *side_by_side_table(rows, sides, "us", 1, extra=(("steps a pass", "steps"),), spread=True),
    ]
    write_report(Path(args.out), "\n".join(lines) + "\n", {"machine": host, "trees": trees, "rows": rows})
    print(f"wrote {args.out}.md")
    return 0 if all(row.get("same_outputs", True) for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
