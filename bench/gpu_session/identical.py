"""How many best outputs of some graph sets equal a reference set's, on the CPU (beam 4, batches of 32).

    PYTHONPATH=. python bench/gpu_session/identical.py REFERENCE SET [SET ...] [--input TSV] [--sentences 128]

Each of REFERENCE and SET is ``BUNDLE:GRAPHS`` (GRAPHS: main, or a variant such as cuda; ``cuda+static``: that set's
static-shape steps, ``Engine.load(static_step=True)``). ``bench gpu`` counts the
same share on a GPU against cuda-fp32; this one runs where there is none, for what an export changes in the numbers
(not the speed) of an fp16 set, e.g. the same checkpoint exported by two code trees (docs/inference-core.md).
"""

from __future__ import annotations

import argparse

from core.translation import DecodeOptions
from inference.engine import Engine


def best_outputs(spec: str, texts: list[str], batch: int = 32) -> list[list[int]]:
    bundle, _, graphs = spec.rpartition(":")
    graphs, _, static = graphs.partition("+")
    engine = Engine.load(bundle, provider="cpu", threads=2, graphs=graphs, static_step=static == "static")
    options = DecodeOptions(beam_size=4)
    out: list[list[int]] = []
    for start in range(0, len(texts), batch):
        out += [t.best.token_ids for t in engine.translate(texts[start : start + batch], options)]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reference")
    parser.add_argument("sets", nargs="+")
    parser.add_argument("--input", default=".gpu/model/test.tsv")
    parser.add_argument("--sentences", type=int, default=128)
    args = parser.parse_args(argv)
    with open(args.input, encoding="utf-8") as lines:
        texts = [line.split("\t")[0] for line in lines if line.strip()][: args.sentences]
    reference = best_outputs(args.reference, texts)
    for spec in args.sets:
        same = sum(a == b for a, b in zip(best_outputs(spec, texts), reference, strict=True))
        print(f"{spec}: {same}/{len(texts)} best outputs identical to {args.reference}'s", flush=True)


if __name__ == "__main__":
    main()
