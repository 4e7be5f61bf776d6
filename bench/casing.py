"""Text typed in capitals: BLEU of held-out sentences put in capitals, read as they are, folded, folded with the table.

    python -m bench casing BUNDLE --inputs data/en-de-next/test.tsv [--reverse] [--sentences 400]
                           [--out docs/reports/casing/en-de]

Draws ``--sentences`` pairs (seeded) from the TSV files (``--reverse``: the files are target<TAB>source, e.g. the
en-de sets for a de-en bundle) and translates their sources in-process with the server's defaults:

* as written: the sentences themselves, scored against their references;
* in capitals, each way the engine could read them (core/casing.py): as they are (no fold), folded without the
  bundle's truecase table (lower case, first letter capitalised), and folded with it (what the engine does); each
  translation put in capitals and scored against the reference in capitals;
* the ceiling: the translations of the sentences as written, put in capitals.

Then every sentence of the files that the engine folds (``shouting``: real text in capitals, headings mostly),
translated folded and not, against its own reference: the fold must not cost on real text. Last, the sentences
written all in lower case (three words or more), as they are and truecased the same way: why the engine leaves
them alone. Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from bench.loadtools import report_dir, write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("bundle", help="bundle directory")
    parser.add_argument("--inputs", nargs="+", required=True, help="held-out TSV files")
    parser.add_argument("--reverse", action="store_true", help="the files are target<TAB>source")
    parser.add_argument("--sentences", type=int, default=400, help="pairs drawn for the capitals experiment")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(report_dir("casing") / "report"))
    args = parser.parse_args(argv)

    import sacrebleu

    from core.casing import Casing, shouting
    from core.translation import DecodeOptions
    from inference.engine import Engine
    from service.settings import Settings

    pairs: list[tuple[str, str]] = []
    for name in args.inputs:
        for line in Path(name).read_text(encoding="utf-8").splitlines():
            source, reference = line.split("\t")[:2]
            pairs.append((reference, source) if args.reverse else (source, reference))
    drawn = random.Random(args.seed).sample(pairs, min(args.sentences, len(pairs)))
    settings = Settings()
    options = DecodeOptions(
        beam_size=4, length_penalty=settings.length_penalty, no_repeat_ngram_size=settings.no_repeat_ngram_size
    )
    engine = Engine.load(args.bundle, provider="cpu", threads=args.threads, spinning="decoder")
    plain = Casing()

    def translate(texts: list[str]) -> list[str]:
        """Translations of ``texts`` read exactly as given (the ids path: no fold, no restore)."""
        out: list[str] = []
        for lo in range(0, len(texts), args.batch):
            ids = [engine.tokenizer.encode_source(t) for t in texts[lo : lo + args.batch]]
            out += [t.best.text for t in engine.translate_ids(ids, options)]
        return out

    def score(hyps: list[str], refs: list[str]) -> dict[str, float]:
        return {
            "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2),
        }

    started = time.perf_counter()
    sources, refs = [s for s, _ in drawn], [r for _, r in drawn]
    capitals, refs_up = [s.upper() for s in sources], [r.upper() for r in refs]
    written = translate(sources)
    rows = {
        "as written": score(written, refs),
        "in capitals, read as they are": score([h.upper() for h in translate(capitals)], refs_up),
        "in capitals, folded without the table": score(
            [h.upper() for h in translate([plain.fold(s) for s in capitals])], refs_up
        ),
        "in capitals, folded with the table (the engine)": score(
            [h.upper() for h in translate([engine.casing.fold(s) for s in capitals])], refs_up
        ),
        "ceiling: the as-written translations in capitals": score([h.upper() for h in written], refs_up),
    }
    for label, row in rows.items():
        print(f"{label:52s} BLEU {row['bleu']:6.2f}  chrF {row['chrf']:6.2f}", flush=True)

    real = [(s, r) for s, r in pairs if shouting(s)]
    real_rows: dict[str, dict[str, float]] = {}
    examples = []
    if real:
        real_sources, real_refs = [s for s, _ in real], [r for _, r in real]
        unfolded = translate(real_sources)
        folded = [h.upper() for h in translate([engine.casing.fold(s) for s in real_sources])]
        real_rows = {"read as they are": score(unfolded, real_refs), "folded (the engine)": score(folded, real_refs)}
        examples = [
            {"source": s, "as they are": a, "folded": b, "reference": r}
            for s, a, b, r in zip(real_sources, unfolded, folded, real_refs, strict=True)
        ][:10]
    print(f"{len(real)} of {len(pairs)} sentences of the files are in capitals: {real_rows}", flush=True)

    lower = [(s, r) for s, r in pairs if not any(c.isupper() for c in s) and sum(w.isalpha() for w in s.split()) >= 3]
    lower_rows: dict[str, dict[str, float]] = {}
    if lower:
        lower_refs = [r for _, r in lower]
        lower_rows = {
            "as they are (the engine)": score(translate([s for s, _ in lower]), lower_refs),
            "truecased with the table": score(translate([engine.casing.truecased(s) for s, _ in lower]), lower_refs),
        }
    print(f"{len(lower)} sentences written in lower case: {lower_rows}", flush=True)

    manifest = engine.manifest
    truecase = manifest.get("export", {}).get("truecase", {})
    lines = [
        f"# Text in capitals: {manifest['name']} {manifest['version']} ({args.bundle})",
        "",
        f"`python -m bench casing {args.bundle} --inputs {' '.join(args.inputs)}"
        f"{' --reverse' if args.reverse else ''} --sentences {args.sentences}`; {len(drawn)} pairs drawn (seed "
        f"{args.seed}), beam 4, the server's length penalty and n-gram guard; truecase table: "
        f"{truecase.get('words', 'none')} words from {truecase.get('file', '-')}. "
        f"{time.perf_counter() - started:.0f} s.",
        "",
        "| the sources | BLEU | chrF |",
        "|---|---:|---:|",
        *(f"| {label} | {row['bleu']:.2f} | {row['chrf']:.2f} |" for label, row in rows.items()),
        "",
        "Every row in capitals is scored in capitals (translation and reference upper-cased).",
        "",
        f"**Real text in capitals**: {len(real)} of the files' {len(pairs)} sources are folded by the engine "
        "(`core.casing.shouting`), scored against their references as written:",
        "",
    ]
    if real_rows:
        lines += ["| those sources | BLEU | chrF |", "|---|---:|---:|"]
        lines += [f"| {label} | {row['bleu']:.2f} | {row['chrf']:.2f} |" for label, row in real_rows.items()]
        lines += ["", "| source | read as they are | folded | reference |", "|---|---|---|---|"]
        lines += [
            "| " + " | ".join(e[k].replace("|", "\\|") for k in ("source", "as they are", "folded", "reference")) + " |"
            for e in examples
        ]
    if lower_rows:
        lines += [
            "",
            f"**Text in lower case**: {len(lower)} sources have no capital letter and three words or more; truecasing "
            "them as a sentence in capitals is:",
            "",
            "| those sources | BLEU | chrF |",
            "|---|---:|---:|",
            *(f"| {label} | {row['bleu']:.2f} | {row['chrf']:.2f} |" for label, row in lower_rows.items()),
        ]
    out = Path(args.out)
    data = {
        "bundle": args.bundle,
        "drawn": len(drawn),
        "capitals": rows,
        "real": real_rows,
        "real_count": len(real),
        "lower": lower_rows,
        "lower_count": len(lower),
    }
    write_report(out, "\n".join(lines) + "\n", data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
