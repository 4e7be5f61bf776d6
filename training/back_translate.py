"""Back-translation (Sennrich et al. 2016): synthetic source sentences for real target-language text.

    python -m training back-translate models/de-en data/mono-de/de.txt --out data/bt/en-de.tsv [--noise | --sample]

Each line of the input (German) is translated by a reverse bundle (German->English) through the server's
engine, beam search with the server's defaults (or, with ``--sample``, one draw from the model's
distribution: inference/sampling.py), and written as ``synthetic English<TAB>real German``: a
parallel TSV for training the forward model, kept in its own file so that synthetic pairs stay marked: a run
mixes them in with ``--set data.synthetic=data/bt/en-de.tsv`` (``data.tag_synthetic`` tags them) or by
training on the concatenation (``cat data/en-de/train.tsv data/bt/en-de.tsv``), or leaves them out.
``--noise`` applies the noise of Edunov et al. (2018) to the synthetic side (each word deleted with p=0.1,
replaced by a filler with p=0.1, words moved by at most 3 positions), which they found to help more than plain
beam output when there is much synthetic data, as did unrestricted sampling (``--sample``; ``--top-k 10``
restricts it to the 10 likeliest tokens).

The work is written as it goes, in input order; a run that stops (Ctrl-C, the end of a session) resumes where
the output file ends when started again with the same arguments.

On the CPU, beam search decodes each batch as two lanes (``--lanes``, ``Engine.load(lanes=2)``): two running sets of
half the batch, each stepped by a thread of its own with half the cores, one set's graphs running while Python
searches the other's. On the 2-core CPU that translated 1.20x as fast as one set at batches of 32 and 64 with the
server's search options, at the same test BLEU within 0.11 (README, "Performance": ``python -m bench lanes ...
--configs 1x2-spin,2x1 --server-options --bleu``). Its int8 graphs round a sentence by its batch mates, so about a
quarter of the outputs differ a little from ``--lanes 1``'s, as they would with another ``--batch``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from core.casing import shouting
from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE, DecodeOptions

FILLER = "<blank>"
CHUNK = 256
"""Sentences read, sorted by length and translated together before they are written."""


def noisy(sentence: str, rng: random.Random, p_drop: float = 0.1, p_blank: float = 0.1, k: int = 3) -> str:
    """Edunov et al. (2018), section 3: drop words, replace words by a filler, shuffle within k positions."""
    words = []
    for word in sentence.split():
        draw = rng.random()
        if draw < p_drop:
            continue
        words.append(FILLER if draw < p_drop + p_blank else word)
    keys = [i + rng.uniform(0, k) for i in range(len(words))]
    return " ".join(word for _, word in sorted(zip(keys, words, strict=True), key=lambda item: item[0]))


def back_translate(
    bundle: Path,
    source: Path,
    out: Path,
    *,
    beam: int = 4,
    batch: int = 32,
    threads: int = 0,
    lanes: int = 0,
    noise: bool = False,
    sample: bool = False,
    top_k: int = 0,
    seed: int = 1,
    limit: int = 0,
) -> int:
    """Translate ``source`` (one sentence a line) with ``bundle`` into ``out``; returns the lines written.
    ``lanes``: running sets a batch decodes as (module docstring); 0: two for beam search on the CPU with batches of
    32 or more, else one."""
    if noise and sample:
        raise SystemExit("--noise and --sample are two kinds of back-translation: choose one")
    if top_k and not sample:
        raise SystemExit("--top-k restricts --sample: give both, or neither")
    import numpy as np
    from tqdm import tqdm

    from inference.engine import DECODE_THREADS, LANE_SENTENCES, Engine, choose_providers
    from inference.threads import usable_cpus

    lines = [line.rstrip("\n") for line in source.open(encoding="utf-8")]
    lines = [line.replace("\t", " ") for line in lines if line.strip()]
    if limit:
        lines = lines[:limit]
    done = sum(1 for _ in out.open(encoding="utf-8")) if out.is_file() else 0
    if done > len(lines):
        raise SystemExit(f"{out} has {done} lines, more than the {len(lines)} of {source}: a different input?")
    if not 0 <= lanes <= DECODE_THREADS:
        raise SystemExit(f"--lanes {lanes}: 0 (two on the CPU, one on a GPU) to {DECODE_THREADS}")
    cores = threads or usable_cpus()
    if not lanes:
        on_cpu = choose_providers("auto")[0] == "CPUExecutionProvider"
        wide = batch >= 2 * LANE_SENTENCES  # a smaller batch would decode as one lane on its share of the cores
        lanes = 2 if on_cpu and wide and not sample and cores >= 2 else 1
    if lanes > 1:  # each lane's sessions get its share of the cores
        engine = Engine.load(bundle, provider="auto", threads=max(1, cores // lanes), lanes=lanes)
    else:
        engine = Engine.load(bundle, provider="auto", threads=threads, spinning="decoder")  # one engine, one thread
    options = DecodeOptions(
        beam_size=beam, length_penalty=DEFAULT_LENGTH_PENALTY, no_repeat_ngram_size=DEFAULT_NO_REPEAT_NGRAM_SIZE
    )
    rng = random.Random(f"{seed}:{done}")
    generator = np.random.default_rng([seed, done])

    def decode(sources: list[list[int]]) -> list[str]:
        if sample:
            return engine.sample_ids(sources, options, generator, top_k)
        return [t.hypotheses[0].text if t.hypotheses else "" for t in engine.translate_ids(sources, options)]

    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with (
        out.open("a", encoding="utf-8") as sink,
        tqdm(total=len(lines), initial=done, unit="sent", desc="back-translating", file=sys.stderr) as progress,
    ):
        for start in range(done, len(lines), CHUNK):
            chunk = lines[start : start + CHUNK]
            ids = [engine.tokenize(line) for line in chunk]
            order = sorted(range(len(chunk)), key=lambda i: len(ids[i]))
            texts: list[str] = [""] * len(chunk)
            for first in range(0, len(order), batch):
                part = order[first : first + batch]
                for i, text in zip(part, decode([ids[i] for i in part]), strict=True):
                    texts[i] = text.upper() if shouting(chunk[i]) else text  # read folded: core/casing.py
                progress.update(len(part))
            for synthetic, real in zip(texts, chunk, strict=True):
                synthetic = " ".join(synthetic.replace("\t", " ").split())
                sink.write(f"{noisy(synthetic, rng) if noise else synthetic}\t{real}\n")
            sink.flush()
    written = len(lines) - done
    print(f"{written} sentences in {time.monotonic() - started:.0f} s -> {out}", file=sys.stderr)
    return written


def run_command(args: argparse.Namespace) -> int:
    back_translate(
        args.bundle,
        args.input,
        args.out,
        beam=args.beam,
        batch=args.batch,
        threads=args.threads,
        lanes=args.lanes,
        noise=args.noise,
        sample=args.sample,
        top_k=args.top_k,
        seed=args.seed,
        limit=args.limit,
    )
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "back-translate",
        help="translate target-language text with a reverse bundle into synthetic pairs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("bundle", type=Path, help="the reverse model's bundle, e.g. models/de-en")
    parser.add_argument("input", type=Path, help="one sentence a line, in the reverse model's source language")
    parser.add_argument("--out", type=Path, required=True, help="TSV to write (synthetic source, real target)")
    parser.add_argument("--beam", type=int, default=4, help="beam width")
    parser.add_argument("--batch", type=int, default=32, help="sentences decoded together")
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime threads (0: onnxruntime decides)")
    parser.add_argument(
        "--lanes",
        type=int,
        default=0,
        help="running sets a batch decodes as, each on a thread with its share of the threads "
        "(0: two for beam search on the CPU with --batch 32 or more; one on a GPU, with --sample or smaller batches)",
    )
    parser.add_argument("--noise", action="store_true", help="noise the synthetic side (Edunov et al. 2018)")
    parser.add_argument(
        "--sample", action="store_true", help="draw each translation from the model instead of beam search"
    )
    parser.add_argument("--top-k", type=int, default=0, help="with --sample: draw from the k likeliest tokens (0: all)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the noise and of the samples")
    parser.add_argument("--limit", type=int, default=0, help="only the first N lines")
    parser.set_defaults(func=run_command)
