"""Tried in session 32 and not kept: literals read as Qt placeholders (%1, %2: 7,525 training pairs hold one) instead
of brace ones ({1}, {2}: 320 pairs). From the repository root:

    for form in brace qt; do
      PYTHONPATH=. python docs/reports/literals/not-kept/forms.py models/en-de $form data/en-de/test.*.tsv \
        data/en-de/eval-*.tsv
    done

(de-en: models/de-en on the reversed sets; forms.txt has the four lines this printed.)

Prints, over the held-out sentences holding a literal, how many placeholders the model's translation lost and
BLEU/chrF of the answers (literals put back as the server does; lost ones at the end).
"""

import glob
import re
import sys

import sacrebleu

import core.protect as protect_module
import core.reading as reading_module
from core.reading import answer, read
from core.translation import DecodeOptions
from inference.engine import Engine

bundle, form, patterns = sys.argv[1], sys.argv[2], sys.argv[3:]
pairs = []
for name in sorted({f for p in patterns for f in glob.glob(p)}):
    for line in open(name, encoding="utf-8"):
        source, reference = line.rstrip("\n").split("\t")[:2]
        if protect_module.LITERAL.search(source):
            pairs.append((source, reference))
if form == "qt":  # the same literals, numbered the same, written %n (no %n of the text's own is renumbered here)
    protect_module._NUMBERED = re.compile(r"%(\d+)(?!\d)")
    brace = protect_module.protect

    def protect(sentence, unknown=None):
        out = brace(sentence.replace("%", "\x00"), unknown)
        text = re.sub(r"\{(\d+)\}", r"%\1", out.text).replace("\x00", "%")
        return protect_module.Protected(
            text, tuple((f"%{p[1:-1]}", literal.replace("\x00", "%")) for p, literal in out.literals)
        )

    reading_module.protect = protect
engine = Engine.load(bundle, provider="cpu", threads=1)
options = DecodeOptions(beam_size=4, length_penalty=1.4, no_repeat_ngram_size=3)
hyps, lost, total = [], 0, 0
for lo in range(0, len(pairs), 32):
    readings = [read(engine, s) for s, _ in pairs[lo : lo + 32]]
    for r, t in zip(readings, engine.translate_ids([r.ids for r in readings], options), strict=True):
        total += len(r.protected.literals)
        lost += sum(p not in t.best.text for p, _ in r.protected.literals)
        hyps.append(answer(r, t).best.text)
refs = [[reference for _, reference in pairs]]
bleu, chrf = sacrebleu.corpus_bleu(hyps, refs).score, sacrebleu.corpus_chrf(hyps, refs).score
print(f"{form}: {len(pairs)} sentences, {total} placeholders, {lost} lost; BLEU {bleu:.2f} chrF {chrf:.2f}")
