"""Long sentences: translated whole (or cut off past the model's limit) against translated in parts.

    python -m bench long-sentences BUNDLE --inputs data/en-de-next/test.tsv [--reverse] [--parts 32,48,64]
                                   [--join 24] [--runs 30] [--out docs/reports/long-sentences/en-de]

Two sets of sentences from held-out TSV files (``--reverse``: the files are target<TAB>source), each translated
with the server's defaults (beam 4, its length penalty and n-gram guard):

* **real long sentences**: every source of more than the smallest ``--parts`` pieces, translated whole (the server
  before session 31) and in parts of at most N pieces for each N of ``--parts`` (``core.sentences.fit``: cut at
  semicolons, then commas, then spaces, in the middle half of what is cut);
* **run-on sentences**: ``--runs`` of ``--join`` consecutive sources joined with ", " (their references the same
  way), longer than the bundle's ``max_source_pieces``: cut off at the model's limit (the engine's own rule, what
  the server answered before with ``truncated: true``), in parts of at most the limit, in parts of at most
  ``core.sentences.PART_PIECES`` (the server's default now), and the joined sentences translated one by one (the
  ceiling).

BLEU, chrF and the length of the output against the references' (sacrebleu's ratio). Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.loadtools import report_dir, write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("bundle", help="bundle directory")
    parser.add_argument("--inputs", nargs="+", required=True, help="held-out TSV files (source, reference)")
    parser.add_argument("--reverse", action="store_true", help="the files are target<TAB>source")
    parser.add_argument("--parts", default="32,48,64", help="part lengths (pieces) to compare for real sentences")
    parser.add_argument("--join", type=int, default=24, help="held-out sentences joined into one run-on sentence")
    parser.add_argument("--runs", type=int, default=30, help="run-on sentences to translate")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(report_dir("long-sentences") / "report"))
    args = parser.parse_args(argv)
    parts_list = [int(n) for n in args.parts.split(",")]

    import sacrebleu

    from core.sentences import PART_PIECES, fit, whole_text
    from core.translation import DecodeOptions
    from inference.engine import Engine
    from service.settings import Settings

    settings = Settings()
    options = DecodeOptions(
        beam_size=4, length_penalty=settings.length_penalty, no_repeat_ngram_size=settings.no_repeat_ngram_size
    )
    engine = Engine.load(args.bundle, provider="cpu", threads=args.threads, spinning="decoder")
    limit = engine.max_source_pieces

    def pieces(text: str) -> int:
        return len(engine.tokenize(text))

    def translate(texts: list[str]) -> list[str]:
        out: list[str] = []
        for lo in range(0, len(texts), 16):
            out += [t.best.text for t in engine.translate(texts[lo : lo + 16], options)]
        return out

    def in_parts(texts: list[str], most: int) -> list[str]:
        splits = [fit(whole_text(t), pieces, most) for t in texts]
        done = translate([s for split in splits for s in split.sentences])
        out = []
        for split in splits:
            mine, done = done[: len(split.sentences)], done[len(split.sentences) :]
            out.append(split.join(mine))
        return out

    def score(hyps: list[str], refs: list[str]) -> dict[str, float]:
        bleu = sacrebleu.corpus_bleu(hyps, [refs])
        return {
            "bleu": round(bleu.score, 2),
            "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2),
            "length_ratio": round(bleu.sys_len / max(1, bleu.ref_len), 3),
        }

    started = time.perf_counter()
    pairs: list[tuple[str, str]] = []
    for name in args.inputs:
        for line in Path(name).read_text(encoding="utf-8").splitlines():
            source, reference = line.split("\t")[:2]
            pairs.append((reference, source) if args.reverse else (source, reference))
    shortest = min(parts_list)
    real = [(s, r) for s, r in pairs if pieces(s) > shortest]
    sources, refs = [s for s, _ in real], [r for _, r in real]
    real_rows = {"whole": score(translate(sources), refs)}
    for most in parts_list:
        real_rows[f"in parts of at most {most} pieces"] = score(in_parts(sources, most), refs)
    for label, row in real_rows.items():
        print(f"real, {label:32s} {row}", flush=True)

    groups = [pairs[i : i + args.join] for i in range(0, len(pairs) - args.join + 1, args.join)][: args.runs]
    runs = [(", ".join(s.rstrip(".!?;:,") for s, _ in g), ", ".join(r.rstrip(".!?;:,") for _, r in g)) for g in groups]
    kept = [i for i, (s, _) in enumerate(runs) if pieces(s) > limit]
    run_sources, run_refs = [runs[i][0] for i in kept], [runs[i][1] for i in kept]
    run_rows = {
        f"cut off at the model's {limit} pieces (before)": score(translate(run_sources), run_refs),
        f"in parts of at most {limit} pieces": score(in_parts(run_sources, limit), run_refs),
        f"in parts of at most {PART_PIECES} pieces (now)": score(in_parts(run_sources, PART_PIECES), run_refs),
        "one by one (ceiling)": score(
            [", ".join(translate([s.rstrip(".!?;:,") for s, _ in groups[i]])) for i in kept], run_refs
        ),
    }
    for label, row in run_rows.items():
        print(f"run-on, {label:40s} {row}", flush=True)

    def table(rows: dict[str, dict[str, float]]) -> list[str]:
        return [
            "| translated | BLEU | chrF | output / reference length |",
            "|---|---:|---:|---:|",
            *(f"| {k} | {v['bleu']:.2f} | {v['chrf']:.2f} | {v['length_ratio']:.3f} |" for k, v in rows.items()),
        ]

    manifest = engine.manifest
    lines = [
        f"# Long sentences: {manifest['name']} {manifest['version']} ({args.bundle})",
        "",
        f"`python -m bench long-sentences {args.bundle} --inputs {' '.join(args.inputs)}"
        f"{' --reverse' if args.reverse else ''} --parts {args.parts} --join {args.join} --runs {args.runs}`; beam 4, "
        f"the server's defaults. {time.perf_counter() - started:.0f} s.",
        "",
        f"**Real long sentences**: the {len(real)} of {len(pairs)} held-out sources with more than {shortest} pieces.",
        "",
        *table(real_rows),
        "",
        f"**Run-on sentences**: {len(kept)} of {args.join} held-out sentences each joined with commas, more than the "
        f"model's {limit} pieces.",
        "",
        *table(run_rows),
    ]
    data = {"bundle": args.bundle, "limit": limit, "real": real_rows, "real_count": len(real), "runs": run_rows}
    write_report(Path(args.out), "\n".join(lines) + "\n", data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
