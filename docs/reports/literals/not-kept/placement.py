"""Tried in session 32 and not kept: a placeholder the model lost, put back where the engine's word alignment puts
the source words on either side of it, against at the end of the sentence (what the server does).

Run in a worktree of commit 351337a with placement.diff applied (git apply), from its root:
    PYTHONPATH=. python docs/reports/literals/not-kept/placement.py models/en-de data/en-de/test.*.tsv \
        data/en-de/eval-*.tsv
Prints BLEU/chrF over the held-out sentences where the two placements differ, and writes them to a TSV.
"""

import dataclasses
import glob
import sys

import sacrebleu

from core.protect import LITERAL
from core.reading import answer, read
from core.translation import DecodeOptions
from inference.engine import Engine

bundle, patterns = sys.argv[1], sys.argv[2:]
pairs = []
for name in sorted({f for p in patterns for f in glob.glob(p)}):
    for line in open(name, encoding="utf-8"):
        source, reference = line.rstrip("\n").split("\t")[:2]
        if LITERAL.search(source):
            pairs.append((source, reference))
engine = Engine.load(bundle, provider="cpu", threads=1)
options = DecodeOptions(beam_size=4, length_penalty=1.4, no_repeat_ngram_size=3, return_attention=True)
rows = []
for lo in range(0, len(pairs), 32):
    readings = [read(engine, s) for s, _ in pairs[lo : lo + 32]]
    done = engine.translate_ids([r.ids for r in readings], options)
    for (source, reference), r, t in zip(pairs[lo : lo + 32], readings, done, strict=True):
        end = answer(r, dataclasses.replace(t, alignment=None)).best.text
        placed = answer(r, t).best.text
        if end != placed:
            rows.append((source, end, placed, reference))
refs = [[row[3] for row in rows]]
print(f"{len(pairs)} sentences with a literal, {len(rows)} where the model lost a placeholder")
for label, column in (("at the end", 1), ("placed by the alignment", 2)):
    hyps = [row[column] for row in rows]
    bleu, chrf = sacrebleu.corpus_bleu(hyps, refs).score, sacrebleu.corpus_chrf(hyps, refs).score
    print(f"{label}: BLEU {bleu:.2f} chrF {chrf:.2f}")
with open("placement.tsv", "w", encoding="utf-8") as out:
    out.write("source\tat the end\tplaced\treference\n")
    out.writelines("\t".join(row) + "\n" for row in rows)
