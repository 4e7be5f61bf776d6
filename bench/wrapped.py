"""Hard-wrapped text: held-out sentences wrapped at a width, split at every line break (before) or read across them.

    python -m bench wrapped BUNDLE --input data/en-de-next/test.tsv [--reverse] [--width 72] [--min-chars 100]
                            [--out docs/reports/wrapped/en-de]

Takes the held-out sources of at least ``--min-chars`` characters, wraps each at ``--width`` (``textwrap``, as
e-mail, man pages and plain-text documents are), and translates it with the server's defaults three ways: the
sentence on one line; wrapped, each line split into sentences on its own (the server before session 31: a line
break always ended a sentence); wrapped, split by ``core.sentences.split_sentences`` (now: a sentence goes on past
a line break in hard-wrapped prose). Translations are scored on one line against the references. Writes OUT.md
and OUT.json.
"""

from __future__ import annotations

import argparse
import textwrap
import time
from pathlib import Path

from bench.loadtools import report_dir, write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("bundle", help="bundle directory")
    parser.add_argument("--input", required=True, help="held-out TSV (source, reference)")
    parser.add_argument("--reverse", action="store_true", help="the file is target<TAB>source")
    parser.add_argument("--width", type=int, default=72, help="wrap width in characters")
    parser.add_argument("--min-chars", type=int, default=100, help="sources shorter than this are left out")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(report_dir("wrapped") / "report"))
    args = parser.parse_args(argv)

    import sacrebleu

    from core.sentences import Split, split_sentences
    from core.translation import DecodeOptions
    from inference.engine import Engine
    from service.settings import Settings

    settings = Settings()
    options = DecodeOptions(
        beam_size=4, length_penalty=settings.length_penalty, no_repeat_ngram_size=settings.no_repeat_ngram_size
    )
    engine = Engine.load(args.bundle, provider="cpu", threads=args.threads, spinning="decoder")
    pairs = [line.split("\t")[:2] for line in Path(args.input).read_text(encoding="utf-8").splitlines()]
    pairs = [(r, s) for s, r in pairs] if args.reverse else pairs
    pairs = [(s, r) for s, r in pairs if len(s) >= args.min_chars]
    sources, refs = [s for s, _ in pairs], [r for _, r in pairs]
    language = engine.manifest["source_language"]
    wrapped = ["\n".join(textwrap.wrap(s, args.width)) for s in sources]

    def translate(splits: list[list[Split]]) -> list[str]:
        """Each text's translation on one line: its splits' sentences translated, joined, line breaks as spaces."""
        sentences = [s for text in splits for split in text for s in split.sentences]
        done = [t.best.text for t in engine.translate(sentences, options)] if sentences else []
        out = []
        for text in splits:
            parts = []
            for split in text:
                mine, done = done[: len(split.sentences)], done[len(split.sentences) :]
                parts.append(split.join(mine))
            out.append(" ".join(" ".join(parts).split()))
        return out

    started = time.perf_counter()
    rows = {}
    for label, splits in (
        ("on one line", [[split_sentences(s, language)] for s in sources]),
        (
            "wrapped, every line break ending a sentence (before)",
            [[split_sentences(x, language) for x in w.split("\n")] for w in wrapped],
        ),
        ("wrapped, read across line breaks (now)", [[split_sentences(w, language)] for w in wrapped]),
    ):
        hyps = translate(splits)
        rows[label] = {
            "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2),
            "sentences": sum(len(split.sentences) for text in splits for split in text),
        }
        print(f"{label:56s} {rows[label]}", flush=True)
    manifest = engine.manifest
    lines = [
        f"# Hard-wrapped text: {manifest['name']} {manifest['version']} ({args.bundle})",
        "",
        f"`python -m bench wrapped {args.bundle} --input {args.input}{' --reverse' if args.reverse else ''} "
        f"--width {args.width} --min-chars "
        f"{args.min_chars}`: the {len(sources)} held-out sources of {args.min_chars} characters or more, wrapped at "
        f"{args.width}; beam 4, the server's defaults. {time.perf_counter() - started:.0f} s.",
        "",
        "| the sources | sentences translated | BLEU | chrF |",
        "|---|---:|---:|---:|",
        *(f"| {k} | {v['sentences']} | {v['bleu']:.2f} | {v['chrf']:.2f} |" for k, v in rows.items()),
    ]
    data = {"bundle": args.bundle, "width": args.width, "texts": len(sources), "rows": rows}
    write_report(Path(args.out), "\n".join(lines) + "\n", data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
