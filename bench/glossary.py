"""Glossaries: does a client's term reach the translation, and what does forcing it cost the sentence?

    python -m bench glossary [--bundle models/en-de] [--inputs data/en-de/test.*.tsv]
                             [--freedict cache/corpus/extract/dict-freedict-eng-deu_*/usr/share/dictd]
                             [--out docs/reports/glossary/report]

Terms whose right translation is known, as in WMT's terminology task: from held-out TSV files, every sentence whose
source holds an English headword of FreeDict's dictionary (1-3 words, at least 5 letters, a noun: its German
capitalised) one of whose German translations the human reference holds as a whole word (for a German->English
bundle the other way round: a German noun of the dictionary, and its English headword in the reference). Each such
sentence gets a glossary of that one term (the longest the sentence holds; ``--terms`` more). Three ways to translate
each sentence, all as the server reads and answers it (core/reading.py, the server's search options):

- none: no glossary;
- aligned: what the server does with a glossary (inference/glossary.py): the model translates, and the target words
  aligned to a term the translation lacks are replaced by the term;
- placeholder: the term read as a placeholder that the model copies and the term replaces (core/protect.py's way
  with literals).

Counted: the share of terms found in the translation (whole words), BLEU and chrF over all sentences of a file and
over the sentences with a term. Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import glob
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.loadtools import ROOT, SERVER_SEARCH, report_dir, write_report

METHODS = ("none", "aligned", "placeholder")


def dictionary(directory: Path, source_language: str = "en") -> dict[str, set[str]]:
    """English headword (lowercase) -> its German nouns of 1-3 words, from FreeDict's dictd files; for a German
    source, German noun (lowercase) -> the English headwords."""
    from training.corpus.freedict import entry_headword, read_entries

    words: dict[str, set[str]] = defaultdict(set)
    for text in read_entries(directory / "freedict-eng-deu.index", directory / "freedict-eng-deu.dict.dz"):
        lines = text.split("\n")
        if len(lines) < 2:
            continue
        english = entry_headword(lines[0]).lower()
        if len(english) < 5 or len(english.split()) > 3 or not re.fullmatch(r"[a-z][a-z' -]*", english):
            continue
        for german in re.split(r"[,;]", re.sub(r"<[^>]*>|\[[^\]]*\]|\([^)]*\)", " ", lines[1])):
            german = " ".join(german.split())
            if german[:1].isupper() and 0 < len(german.split()) <= 3 and not re.search(r"[{}…/]", german):
                if source_language == "de":
                    words[german.lower()].add(english)
                else:
                    words[english].add(german)
    return words


def oracle_terms(source: str, reference: str, words: dict[str, set[str]], most: int) -> dict[str, str]:
    """Up to ``most`` (source, target) terms of ``source`` whose ``reference`` holds the target (any case), the
    longest first, none overlapping."""
    tokens = list(re.finditer(r"[^\W\d_]+(?:['-][^\W\d_]+)*", source))
    found: list[tuple[int, int, str, str]] = []
    for i in range(len(tokens)):
        for n in (3, 2, 1):
            if i + n > len(tokens):
                continue
            start, end = tokens[i].start(), tokens[i + n - 1].end()
            english = " ".join(source[start:end].lower().split())
            for german in sorted(words.get(english, ()), key=len, reverse=True):
                if holds(reference, german):
                    found.append((start, end, source[start:end], german))
                    break
    found.sort(key=lambda f: (f[0] - f[1], f[0]))  # the longest first
    chosen: list[tuple[int, int, str, str]] = []
    for term in found:
        if len(chosen) < most and all(term[1] <= c[0] or term[0] >= c[1] for c in chosen):
            chosen.append(term)
    return {english: german for _, _, english, german in chosen}


def holds(text: str, term: str) -> bool:
    """``text`` holds ``term`` as whole words, in any case."""
    return bool(re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.IGNORECASE))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--bundle", default=str(ROOT / "models" / "en-de"))
    parser.add_argument("--inputs", nargs="+", default=[str(ROOT / "data" / "en-de" / "test.*.tsv")])
    parser.add_argument(
        "--freedict",
        default=str(ROOT / "cache" / "corpus" / "extract" / "dict-freedict-eng-deu_*" / "usr" / "share" / "dictd"),
        help="the directory of freedict-eng-deu.index and .dict.dz (`python -m training build-corpus --sources "
        "freedict` puts it under the cache)",
    )
    parser.add_argument("--terms", type=int, default=1, help="terms at most a sentence (default 1)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--out", default=str(report_dir("glossary") / "report"))
    args = parser.parse_args(argv)

    import sacrebleu

    from inference.engine import Engine

    files = sorted({f for pattern in args.inputs for f in glob.glob(pattern)})
    places = glob.glob(args.freedict)
    if not files or not places:
        parser.error(f"no file matches {args.inputs}" if not files else f"no FreeDict directory at {args.freedict}")
    engine = Engine.load(args.bundle, provider="cpu", threads=args.threads, spinning="decoder")
    words = dictionary(Path(places[0]), engine.manifest["source_language"])
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for name in files:
        pairs = [line.split("\t")[:2] for line in Path(name).read_text(encoding="utf-8").splitlines() if line]
        glossaries = [oracle_terms(source, reference, words, args.terms) for source, reference in pairs]
        with_terms = [i for i, g in enumerate(glossaries) if g]
        refs = [reference for _, reference in pairs]
        row: dict[str, Any] = {"file": Path(name).name, "sentences": len(pairs), "with_terms": len(with_terms)}
        row["terms"] = sum(len(g) for g in glossaries)
        sources = [source for source, _ in pairs]
        outputs = {method: translate(engine, sources, glossaries, method, args.batch) for method in METHODS}
        for method, hyps in outputs.items():
            kept = sum(holds(hyps[i], target) for i in with_terms for target in glossaries[i].values())
            sub_h, sub_r = [hyps[i] for i in with_terms], [refs[i] for i in with_terms]
            row[method] = {
                "kept": kept,
                "bleu": sacrebleu.corpus_bleu(hyps, [refs]).score,
                "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score,
                "bleu_with_terms": sacrebleu.corpus_bleu(sub_h, [sub_r]).score if sub_h else 0.0,
                "examples": [
                    {"source": pairs[i][0], "terms": glossaries[i], "none": outputs["none"][i], "with": hyps[i]}
                    for i in with_terms
                    if hyps[i] != outputs["none"][i]
                ][:5],
            }
        rows.append(row)
        print(f"{row['file']}: {row['with_terms']} sentences with a term", flush=True)

    markdown = report(rows, args, engine.manifest, time.perf_counter() - started)
    print(markdown)
    write_report(Path(args.out), markdown, {"rows": rows, "bundle": args.bundle, "terms_per_sentence": args.terms})
    return 0


def translate(engine: Any, sources: list[str], glossaries: list[dict[str, str]], method: str, batch: int) -> list[str]:
    """Each source as the server answers it, with its glossary applied by ``method``."""
    import dataclasses

    from core.protect import Protected
    from core.reading import Reading, answer, read
    from core.translation import DecodeOptions
    from inference.glossary import Glossary, apply

    options = DecodeOptions(beam_size=4, **SERVER_SEARCH)  # type: ignore[arg-type]
    out: list[str] = []
    for lo in range(0, len(sources), batch):
        readings, found = [], []
        for source, entries in zip(sources[lo : lo + batch], glossaries[lo : lo + batch], strict=True):
            reading = read(engine, source)
            terms = Glossary(entries).find(reading.protected.text) if method != "none" else []
            if method == "placeholder" and terms:
                text, literals = _placeholders(reading.protected, terms)
                reading = Reading(engine.tokenize(text), Protected(text, literals))
                terms = []
            readings.append(reading)
            found.append(terms)
        asked = dataclasses.replace(options, return_attention=any(found))  # as the server asks, for a term found
        done = engine.translate_ids([r.ids for r in readings], asked)
        for reading, translation, terms in zip(readings, done, found, strict=True):
            if terms:
                translation, _ = apply(translation, reading.protected.text, terms)
            out.append(answer(reading, translation).best.text)
    return out


def _placeholders(protected: Any, terms: list[Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The sentence with each term as one more placeholder, numbered after its literals'."""
    text, literals = protected.text, list(protected.literals)
    first = max((int(p.strip("{}")) for p, _ in literals), default=0) + 1
    for k, term in sorted(enumerate(terms), key=lambda kt: -kt[1].start):
        placeholder = "{" + str(first + k) + "}"
        text = text[: term.start] + placeholder + text[term.end :]
        literals.append((placeholder, term.target))
    return text, tuple(literals)


def report(rows: list[dict[str, Any]], args: argparse.Namespace, manifest: dict[str, Any], seconds: float) -> str:
    table = [
        "| test set | sentences | with a term | terms kept: none / aligned / placeholder | BLEU all: none / aligned / "
        "placeholder | BLEU with a term: none / aligned / placeholder |",
        "|---|---:|---:|---|---|---|",
    ]
    for row in rows:
        kept = " / ".join(f"{row[m]['kept'] / max(1, row['terms']):.1%}" for m in METHODS)
        bleu = " / ".join(f"{row[m]['bleu']:.2f}" for m in METHODS)
        sub = " / ".join(f"{row[m]['bleu_with_terms']:.2f}" for m in METHODS)
        table.append(f"| {row['file']} | {row['sentences']} | {row['with_terms']} | {kept} | {bleu} | {sub} |")
    examples = [
        f"| {e['source']} | {', '.join(f'{k} → {v}' for k, v in e['terms'].items())} | {e['none']} | {e['with']} |"
        for row in rows
        for e in row["aligned"]["examples"][:2]
    ]
    return "\n".join(
        [
            "# Glossary terms",
            "",
            f"Generated by `python -m bench glossary --bundle {args.bundle} --terms {args.terms}` on "
            f"{time.strftime('%Y-%m-%d')} ({manifest['name']} {manifest['version']}, {seconds:.0f} s): held-out "
            f"sentences with up to {args.terms} FreeDict term(s) whose German the reference holds, each translated "
            "without a glossary, with the server's glossary (aligned words replaced) and with the term as a "
            "placeholder; beam 4 and the server's search options.",
            "",
            *table,
            "",
            "Examples (aligned):",
            "",
            "| source | glossary | without | with |",
            "|---|---|---|---|",
            *examples,
            "",
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
