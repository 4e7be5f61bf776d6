"""Literals kept: do numbers, URLs, file names, paths and options of the source reach the translation unchanged?

    python -m bench literals BUNDLE [BUNDLE ...] [--inputs data/en-de/test.*.tsv data/en-de/eval-*.tsv]
                             [--out docs/reports/literals/report]

From held-out TSV files, takes every pair whose source holds a literal (number, URL, e-mail address, file name,
path, command-line option, or a symbol or word with a character the first bundle's vocabulary lacks or has only as
a rare piece: "character") that the human reference also holds verbatim: there, copying it is what a translator
did. Each bundle translates those sources in-process with the server's defaults (beam 4, length penalty and
n-gram guard as ``python -m service`` sets them); the score is the share of those literals found verbatim in
the translation, by kind and overall, with BLEU/chrF on the same sentences for context. Writes OUT.md and
OUT.json with examples where the bundles differ.
"""

from __future__ import annotations

import argparse
import glob
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bench.loadtools import ROOT, report_dir, write_report
from core.protect import KINDS as PROTECTED
from core.protect import whole_word

KINDS = {**PROTECTED, "number": r"\b\d+(?:[.:]\d+)*\b"}
"""The literals the server reads as placeholders (core/protect.py), and numbers, which it does not."""
COLUMNS = [*KINDS, "character"]
LITERAL = re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, pattern in KINDS.items()))


def literals(
    source: str, reference: str, unknown: Callable[[str], list[tuple[int, int]]] | None = None
) -> list[tuple[str, str]]:
    """(kind, text) of each literal of ``source`` that ``reference`` holds verbatim; with ``unknown``
    (``Tokenizer.unknown_spans``), kind "character" too: a symbol or word with a character the vocabulary lacks or
    has only as a rare piece, which the server keeps the same way."""
    found = []
    for match in LITERAL.finditer(source):
        kind = match.lastgroup or "number"
        if match.group(0) in reference:
            found.append((kind, match.group(0)))
    for span in unknown(source) if unknown is not None else []:
        text = source[slice(*whole_word(source, *span))]
        if text in reference and not any(text in t for _, t in found):  # not again, nor inside another literal
            found.append(("character", text))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("bundles", nargs="+", help="bundle directories; the first one is the baseline")
    parser.add_argument(
        "--inputs",
        nargs="+",
        default=[str(ROOT / "data" / "en-de" / "test.*.tsv"), str(ROOT / "data" / "en-de" / "eval-*.tsv")],
        help="held-out TSV files (globs)",
    )
    parser.add_argument(
        "--kinds", nargs="+", choices=COLUMNS, help="only the sentences holding a literal of these kinds (default: all)"
    )
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--protect",
        action="store_true",
        help="also translate each bundle as the server reads and answers a sentence (core/reading.py): the literals "
        "of core/protect.py read as placeholders and put back, a sentence in capitals folded (one more row a bundle)",
    )
    parser.add_argument("--out", default=str(report_dir("literals") / "report"))
    args = parser.parse_args(argv)

    import sacrebleu

    from core.reading import answer, read
    from core.tokenizer import Tokenizer
    from core.translation import DecodeOptions
    from inference.engine import Engine
    from service.settings import Settings

    files = sorted({f for pattern in args.inputs for f in glob.glob(pattern)})
    if not files:
        parser.error(f"no file matches {args.inputs}")
    items = []
    unknown = Tokenizer(args.bundles[0]).unknown_spans  # the first bundle's vocabulary says which characters count
    for name in files:
        for line in Path(name).read_text(encoding="utf-8").splitlines():
            source, reference = line.split("\t")[:2]
            found = literals(source, reference, unknown)
            if args.kinds and not any(kind in args.kinds for kind, _ in found):
                continue
            if found:
                items.append({"file": Path(name).name, "source": source, "reference": reference, "literals": found})
    settings = Settings()
    options = DecodeOptions(
        beam_size=4, length_penalty=settings.length_penalty, no_repeat_ngram_size=settings.no_repeat_ngram_size
    )
    results = []
    outputs: dict[str, list[str]] = {}
    runs = [(bundle, False) for bundle in args.bundles]
    if args.protect:
        runs = [(bundle, protected) for bundle in args.bundles for protected in (False, True)]
    for bundle, protected in runs:
        engine = Engine.load(bundle, provider="cpu", threads=args.threads)
        label = f"{engine.manifest['name']} {engine.manifest['version']} ({bundle})"
        if protected:
            label += ", literals protected"
        started = time.perf_counter()
        hyps: list[str] = []
        placeholders = dropped = 0
        sources = [item["source"] for item in items]
        for lo in range(0, len(sources), args.batch):
            batch = sources[lo : lo + args.batch]
            if not protected:
                hyps += [t.best.text for t in engine.translate(batch, options)]
                continue
            readings = [read(engine, s) for s in batch]  # as the server reads them (core.reading)
            done = engine.translate_ids([r.ids for r in readings], options)
            hyps += [answer(r, t).best.text for t, r in zip(done, readings, strict=True)]
            for r, t in zip(readings, done, strict=True):  # the model's own text, before the literals go back
                placeholders += len(r.protected.literals)
                dropped += sum(placeholder not in t.best.text for placeholder, _ in r.protected.literals)
        kept, total = Counter(), Counter()
        for item, hyp in zip(items, hyps, strict=True):
            for kind, text in item["literals"]:
                total[kind] += 1
                kept[kind] += text in hyp
        refs = [item["reference"] for item in items]
        results.append(
            {
                "bundle": label,
                "seconds": time.perf_counter() - started,
                "kept": dict(kept),
                "total": dict(total),
                "kept_share": sum(kept.values()) / max(1, sum(total.values())),
                "bleu": sacrebleu.corpus_bleu(hyps, [refs]).score,
                "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score,
                "placeholders": placeholders if protected else None,
                "placeholders_dropped": dropped if protected else None,
            }
        )
        outputs[label] = hyps
        print(f"{label}: {results[-1]['kept_share']:.1%} of literals kept", flush=True)

    kinds = [k for k in COLUMNS if any(k in r["total"] for r in results)]
    header = "| bundle | " + " | ".join(kinds) + " | all literals | BLEU | chrF | placeholders dropped |"
    table = [header, "|---|" + "---:|" * (len(kinds) + 4)]
    for r in results:
        cells = [f"{r['kept'].get(k, 0)}/{r['total'].get(k, 0)}" for k in kinds]
        table.append(
            f"| {r['bundle']} | "
            + " | ".join(cells)
            + f" | {r['kept_share']:.1%} | {r['bleu']:.2f} | {r['chrf']:.2f} | "
            + ("" if r["placeholders"] is None else f"{r['placeholders_dropped']}/{r['placeholders']}")
            + " |"
        )
    examples = []
    if len(results) > 1:
        base, last = outputs[results[0]["bundle"]], outputs[results[-1]["bundle"]]
        for item, a, b in zip(items, base, last, strict=True):
            lost = [t for _, t in item["literals"] if t in b and t not in a] or [
                t for _, t in item["literals"] if t in a and t not in b
            ]
            if lost and len(examples) < 12:
                examples.append(f"| {item['source']} | {a} | {b} |")
    markdown = "\n".join(
        [
            "# Literals kept in translation",
            "",
            f"Generated by `python -m bench literals` on {time.strftime('%Y-%m-%d')}: {len(items)} held-out "
            "sentences whose source holds a literal the reference repeats verbatim "
            f"({', '.join(Path(f).name for f in files)}), "
            f"beam 4, length penalty {options.length_penalty}, no-repeat n-gram {options.no_repeat_ngram_size}. "
            "Cells: literals found verbatim in the translation / literals. Placeholders dropped: the `{n}` the "
            "model left out of its translation of the protected sentence (its literal then goes at the end), of all "
            "it was given.",
            "",
            *table,
            "",
            *(
                [
                    f"Sentences where one bundle keeps a literal the other loses (first: {results[0]['bundle']}; "
                    f"second: {results[-1]['bundle']}):",
                    "",
                    "| source | first | second |",
                    "|---|---|---|",
                    *examples,
                    "",
                ]
                if examples
                else []
            ),
        ]
    )
    print()
    print(markdown)
    write_report(Path(args.out), markdown, {"files": files, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
