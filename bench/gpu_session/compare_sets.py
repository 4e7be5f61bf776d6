"""Two bundles' GPU sets on the CPU, scored against the references: whether a re-exported GPU set (training graft,
docs/bundle.md) translates as well as the one it replaces.

    python bench/gpu_session/compare_sets.py OLD_BUNDLE NEW_BUNDLE TEST_TSV [SENTENCES]

Prints, for each bundle, chrF and BLEU (sacrebleu) of its best outputs over the first SENTENCES (200) pairs decoded
as one batch (beam 4), and how many of the first 32 translate the same alone as in that batch.
"""

from __future__ import annotations

import sys

import sacrebleu

from core.translation import DecodeOptions
from inference.engine import Engine


def main(argv: list[str]) -> None:
    old, new, path = argv[0], argv[1], argv[2]
    count = int(argv[3]) if len(argv) > 3 else 200
    with open(path, encoding="utf-8") as lines:
        rows = [line.rstrip("\n").split("\t") for line in lines if line.strip()][:count]
    texts, refs = [row[0] for row in rows], [row[1] for row in rows]
    options = DecodeOptions(beam_size=4, max_length=128)
    for name, bundle in (("old", old), ("new", new)):
        engine = Engine.load(bundle, provider="cpu", graphs="cuda", threads=1)
        alone = [engine.translate([text], options)[0].best.text for text in texts[:32]]
        together = [t.best.text for t in engine.translate(texts, options)]
        chrf = sacrebleu.corpus_chrf(together, [refs]).score
        bleu = sacrebleu.corpus_bleu(together, [refs]).score
        same = sum(a == b for a, b in zip(alone, together[:32], strict=True))
        print(f"{name}: chrF {chrf:.2f} BLEU {bleu:.2f}, alone = in the batch for {same}/32")


if __name__ == "__main__":
    main(sys.argv[1:])
