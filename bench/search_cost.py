"""What the beam search's own bookkeeping costs per decoder step, without a model: two code trees side by side.

    python -m bench search-cost [--a OLD_TREE] [--b .] [--batch-sizes 1,8,32,128] [--beam 4] [--steps 400]
                                [--repeats 5] [--a-arrays-from N] [--b-arrays-from N] [--evict-mb MB]
                                [--out docs/reports/search-cost/report]

On a GPU the decoder step is cheap and the host work around it is not: the H100 profile of docs/inference-core.md
put the Python search at 18 % of a batch-1 decode and 33 % at batch 32. This measures that Python alone. Each tree's
``inference.beam_search.BeamSearch`` drives a synthetic stepper whose outputs cost nothing to make (drawn once,
before the clock starts): per row ``k`` distinct token ids with sorted log-probabilities, and EOS on top of every
hypothesis of a sentence once it passes its length (10 to 40 tokens, seeded). The running set is kept full at
the batch size: a finished sentence is replaced at once, as the continuous scheduler does. Each side runs in a
worker process of its own (its tree first on ``sys.path``) and the runs alternate a b a b ...; a figure is the
median, over the repeats, of the search's seconds per step (the stepper's own time subtracted), and whether both
trees chose the same tokens. ``--a-arrays-from`` / ``--b-arrays-from`` set a side's ``ARRAYS_FROM`` and
``GUARDED_ARRAYS_FROM`` (the set size from which the search keeps its hypotheses in arrays):
``--a . --a-arrays-from 1000000000 --b . --b-arrays-from 1`` compares the two forms of one tree. Writes OUT.md and
OUT.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.loadtools import (
    machine,
    report_dir,
    side_by_side,
    side_by_side_line,
    side_by_side_table,
    workers,
    write_report,
)

WORKER = r"""
import json, sys, time
import numpy as np
tree, arrays_from = sys.argv[1], sys.argv[2]
sys.path.insert(0, tree)
import inference.beam_search
from inference.beam_search import BeamSearch, SearchOptions
assert BeamSearch.__init__.__code__.co_filename.startswith(tree), "imported another tree's search"
if arrays_from:
    assert hasattr(inference.beam_search, "ARRAYS_FROM"), "this tree's search has no ARRAYS_FROM"
    inference.beam_search.ARRAYS_FROM = int(arrays_from)
    if hasattr(inference.beam_search, "GUARDED_ARRAYS_FROM"):  # the line of guarded sets too (session 49 on)
        inference.beam_search.GUARDED_ARRAYS_FROM = int(arrays_from)
VOCAB, BOS, EOS = 8000, 1, 2


class Stepper:
    # Outputs are drawn before the clock starts: a pool of rows, handed out in turn.
    def __init__(self, seed, k, pieces, evict_mb=0):
        rng = np.random.default_rng(seed)
        self.evict = np.ones(evict_mb * (1 << 20) // 8) if evict_mb else None
        drawn = np.arange(3, min(VOCAB, 3 + pieces))
        self.pool_ids = np.stack([rng.choice(drawn, size=k, replace=False) for _ in range(4096)])
        lp = np.sort(np.log(rng.dirichlet(np.full(k, 0.3), size=4096) + 1e-9), axis=1)[:, ::-1]
        self.pool_lp = np.ascontiguousarray(lp, dtype=np.float32)
        self.lengths = rng.integers(10, 41, size=100000)
        self.next_row, self.running, self.admitted, self.seconds = 0, [], 0, 0.0

    def admit(self, sources):
        self.running += list(range(self.admitted, self.admitted + len(sources)))
        self.admitted += len(sources)

    def keep(self, sentences):
        self.running = [self.running[i] for i in sentences.tolist()]

    def step(self, tokens, positions, reorder, k, attention=True):
        started = time.perf_counter()
        batch, hyps = tokens.shape
        n = batch * hyps
        rows = (self.next_row + np.arange(n)) % len(self.pool_ids)
        self.next_row += n
        ids = self.pool_ids[rows, :k].reshape(batch, hyps, k).copy()
        lp = self.pool_lp[rows, :k].reshape(batch, hyps, k).copy()
        over = positions >= self.lengths[self.running]
        ids[over, :, 0] = EOS
        out = lp, ids, np.zeros((batch, hyps, 8), np.float32)
        if self.evict is not None:  # stream through memory, as a graph run reads its weights: caches go cold
            self.evict += 1.0
        self.seconds += time.perf_counter() - started
        return out


def run(batch, beam, steps, seed, ngram=0, penalty=1.0, pieces=VOCAB, evict_mb=0):
    k = 2 * beam
    # the guard asks for k + the most a hypothesis bans
    stepper = Stepper(seed, k + (32 if ngram else 0), pieces, evict_mb)
    search = BeamSearch(stepper, vocab_size=VOCAB, bos_id=BOS, eos_id=EOS)
    options = SearchOptions(beam_size=beam, max_len=64, no_repeat_ngram=ngram, length_penalty=penalty)
    search.admit((key, [5] * 12, options) for key in range(batch))
    key, outputs, started = batch, [], time.perf_counter()
    for _ in range(steps):
        for done_key, finished in search.step():
            outputs.append([done_key, finished[0].tokens])
        missing = batch - len(search)
        if missing:
            search.admit((key + i, [5] * 12, options) for i in range(missing))
            key += missing
    seconds = time.perf_counter() - started - stepper.seconds
    return {"seconds": seconds, "outputs": outputs}


print(json.dumps({"ready": tree}), flush=True)
for line in sys.stdin:
    job = json.loads(line)
    extra = {"ngram": job["ngram"], "penalty": job["penalty"]} if job.get("ngram") or job.get("penalty") else {}
    extra |= {"pieces": job["pieces"]} if job.get("pieces") else {}
    extra |= {"evict_mb": job["evict_mb"]} if job.get("evict_mb") else {}
    print(json.dumps(run(job["batch"], job["beam"], job["steps"], job["seed"], **extra)), flush=True)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", help="baseline tree (e.g. `git worktree add /tmp/old HEAD~1`); none: --b alone")
    parser.add_argument("--b", default=".", help="candidate tree")
    parser.add_argument("--batch-sizes", default="1,8,32,128")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--steps", type=int, default=400, help="search steps a run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--no-repeat-ngram",
        type=int,
        default=0,
        help="every sentence's n-gram guard (the server's default is 3: MT_NO_REPEAT_NGRAM_SIZE)",
    )
    parser.add_argument("--length-penalty", type=float, default=1.0, help="the server's default is 1.4")
    parser.add_argument(
        "--pieces",
        type=int,
        default=0,
        help="draw the stepper's tokens from this many pieces instead of 8,000, so that hypotheses repeat pieces "
        "(and the n-gram guard bans some) as a real model's do; 0: 8,000",
    )
    parser.add_argument(
        "--evict-mb",
        type=int,
        default=0,
        help="after each step the stepper writes through this many MB (not counted), as a graph run on the CPU "
        "streams its weights through the caches: the search then runs cold, as in the CPU engine (16 covers "
        "this machine's L2 and the shipped model's 8 MB output projection); 0: warm, as between a GPU's steps",
    )
    for side in ("a", "b"):
        parser.add_argument(
            f"--{side}-arrays-from",
            type=int,
            default=None,
            help=f"side {side}'s ARRAYS_FROM: sets of this many sentences or more keep arrays (1: always; "
            "1000000000: never); default: the tree's own",
        )
    parser.add_argument("--out", default=str(report_dir("search-cost") / "report"))
    args = parser.parse_args(argv)
    if args.pieces and args.pieces < 2 * args.beam + 32:
        parser.error(f"--pieces {args.pieces}: at least {2 * args.beam + 32}, the widest row the stepper draws")

    trees = {key: str(Path(tree).resolve()) for key, tree in (("a", args.a), ("b", args.b)) if tree}
    arrays_from = {"a": args.a_arrays_from, "b": args.b_arrays_from}
    sides_argv = {key: [tree, "" if arrays_from[key] is None else str(arrays_from[key])] for key, tree in trees.items()}
    rows: list[dict[str, Any]] = []
    with workers(WORKER, sides_argv) as sides:
        for batch in map(int, args.batch_sizes.split(",")):

            def job(repeat: int, batch: int = batch) -> dict[str, Any]:
                job = {"batch": batch, "beam": args.beam, "steps": args.steps, "seed": repeat}
                if args.no_repeat_ngram or args.length_penalty != 1.0:  # a tree older than these options: none
                    job |= {"ngram": args.no_repeat_ngram, "penalty": args.length_penalty}
                if args.pieces:
                    job["pieces"] = args.pieces
                if args.evict_mb:
                    job["evict_mb"] = args.evict_mb
                return job

            measured, _ = side_by_side(sides, job, args.repeats, lambda r: float(r["seconds"]) / args.steps * 1e3)
            row: dict[str, Any] = {"batch": batch, "beam": args.beam, "steps": args.steps, **measured}
            rows.append(row)
            print(side_by_side_line(row, "ms", 3), flush=True)

    host = machine()
    lines = [
        "# The beam search's own cost per step",
        "",
        f"Generated by `python -m bench search-cost` ({host['cpus']} CPUs, load {host['load_average_1m_at_start']}, "
        f"Python {host['python']}): "
        + ", ".join(
            f"{key} = `{tree}`" + ("" if arrays_from[key] is None else f" (ARRAYS_FROM {arrays_from[key]})")
            for key, tree in trees.items()
        )
        + f"; beam {args.beam}, n-gram guard {args.no_repeat_ngram}, length penalty {args.length_penalty:g}, "
        + (f"tokens drawn from {args.pieces} pieces, " if args.pieces else "")
        + (f"{args.evict_mb} MB written between steps (cold caches), " if args.evict_mb else "")
        + f"{args.steps} steps a run, the set kept full, median of {args.repeats} alternated"
        " runs; the synthetic stepper's own time is not counted.",
        "",
        *side_by_side_table(rows, sides, "ms", 3),
    ]
    write_report(
        Path(args.out),
        "\n".join(lines) + "\n",
        {"machine": host, "trees": trees, "arrays_from": arrays_from, "rows": rows},
    )
    print(f"wrote {args.out}.md")
    return 0 if all(row.get("same_outputs", True) for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
