"""When a decode on a GPU reaches its steady state, and where its host time goes there.

    python bench/gpu_session/warm.py BUNDLE INPUT BATCH PASSES [--static-step] [--profile]

Decodes the first 128 sentences of INPUT (beam 4) PASSES times with the same engine and prints each pass's
seconds: the first opens the sessions of every bucket and captures their CUDA graphs (with --static-step), the
later ones show whether anything still does. --profile adds one more pass under cProfile, by own time. Run on the
GPU machine (bench/gpu_session/device.sh sets it up); figures in docs/inference-core.md, session 25.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

from core.translation import DecodeOptions
from inference.engine import Engine


def main(argv: list[str]) -> None:
    bundle, path, batch, passes = argv[0], argv[1], int(argv[2]), int(argv[3])
    static = "--static-step" in argv
    engine = Engine.load(bundle, provider="cuda", static_step=static)
    with open(path, encoding="utf-8") as lines:
        texts = [line.split("\t")[0] for line in lines if line.strip()][:128]
    sources = [engine.tokenize(text) for text in texts]
    options = DecodeOptions(beam_size=4, max_length=128)

    def decode() -> tuple[float, int]:
        started, tokens = time.perf_counter(), 0
        for at in range(0, len(sources), batch):
            tokens += sum(len(t.best.token_ids) for t in engine.translate_ids(sources[at : at + batch], options))
        return time.perf_counter() - started, tokens

    runs = [decode() for _ in range(passes)]
    last, tokens = runs[-1]
    seconds = ", ".join(f"{s:.3f}" for s, _ in runs)
    per_sentence = 1000 * last / len(sources)
    rate = tokens / last
    print(f"static={static} batch={batch}: {seconds} s; last {rate:.0f} tok/s, {per_sentence:.2f} ms a sentence")
    if "--profile" in argv:
        profile = cProfile.Profile()
        profile.runcall(decode)
        pstats.Stats(profile).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main(sys.argv[1:])
