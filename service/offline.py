"""``mt-translate`` (``python -m service.offline``): translate text and files with the server's models, no server.

    mt-translate --to de "Click Save to store your changes."        # texts as arguments, one translation a line
    echo "Open the file." | mt-translate --to de                    # stdin, one text a line, blank lines kept
    mt-translate --to de manual.docx strings.po app.json            # manual.de.docx, strings.de.po, app.de.json
    mt-translate --to de --out-dir out/ docs/                       # every file of a known kind under docs/

What it translates with is what ``python -m service`` would serve with the same ``MT_*`` settings (the bundles,
the provider, threads, glossaries, decoding defaults), through the same code as the HTTP API: the same sentence
splitting, placeholders, casing, glossary terms and markup, and for files ``POST /translate/document``'s reading and
rewriting of each kind (docs/service.md, "Documents"). Only the HTTP is left out, and the limits that protect a
server from its clients: a document's paragraph count, a text's length and the request timeout do not apply unless
set in the environment.

A file is written beside its input as NAME.LANG.EXT (``--out-dir`` for another directory, which a directory input
needs and whose tree it keeps; ``--out`` for one file's exact path) and never over an existing file without
``--force``. A file that cannot be translated is named on stderr and the others go on; the exit status is then 1.
Progress goes to stderr: a bar for each file on a terminal, a line per file otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from core.documents import KINDS
from service.app import create_app
from service.batcher import QueueFull, RequestTimeout, TooManySentences
from service.deps import ServiceState
from service.errors import ApiError
from service.loader import EngineLoader, load_engine
from service.logs import configure_logging
from service.models import ConfigurationError
from service.routes.translate import translate_file, translate_texts
from service.schemas import TranslateRequest
from service.settings import Settings

UNBOUNDED = {
    "max_document_segments": 10**9,
    "request_timeout_s": 86_400.0,
    "max_chars": 10**9,
    "max_queue": 1_000_000,
}
"""The server's limits against its clients, lifted where the environment does not set them (MT_<NAME>)."""


class Failed(Exception):
    """One input that could not be translated; the message says which and why."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mt-translate",
        description="Translate texts and files with the server's models, without a server.",
        epilog="Models, provider, threads and decoding defaults come from the same MT_* variables as the server's "
        "(python -m service --help). Kinds of file: " + ", ".join(KINDS) + ".",
    )
    p.add_argument(
        "inputs",
        nargs="*",
        help="texts, or files and directories with --files (the default when the "
        "first input is a path that exists); none: one text a line from stdin",
    )
    p.add_argument("--to", dest="target", help="target language code (de); default: the first model's")
    p.add_argument(
        "--from",
        dest="source",
        help="source language code, or auto to detect it (once a file); default: the model --to picks, as the API's",
    )
    p.add_argument("--model", help="a model by name, as the API's 'model' (instead of --from/--to)")
    p.add_argument("--format", choices=["text", "html", "xml", "markdown"], default="text", help="of texts (not files)")
    p.add_argument(
        "--glossary", type=Path, help="terms: a JSON object {term: translation}, or term<TAB>translation lines"
    )
    p.add_argument("--beam-size", type=int, default=4)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--files", action="store_true", default=None, help="the inputs are files and directories")
    group.add_argument("--texts", dest="files", action="store_false", help="the inputs are texts")
    p.add_argument("--out-dir", type=Path, help="write translated files here (keeping the inputs' tree)")
    p.add_argument("--out", type=Path, help="the translated file's path (one input file)")
    p.add_argument("--force", action="store_true", help="write over existing files")
    p.add_argument("--bundles", help="model bundle directories, comma-separated (MT_BUNDLES)")
    p.add_argument("--provider", choices=["auto", "cpu", "cuda"], help="execution provider (MT_PROVIDER)")
    p.add_argument("--threads", type=int, help="onnxruntime threads (MT_THREADS)")
    p.add_argument("--languages", action="store_true", help="list the language pairs and models, and stop")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("-v", "--verbose", action="store_true", help="the server's log lines on stderr")
    return p


def settings_from(args: argparse.Namespace, environ: dict[str, str]) -> Settings:
    """The server's settings from the environment and the flags, its client limits lifted where not set."""
    values: dict[str, Any] = {k: v for k, v in UNBOUNDED.items() if f"MT_{k.upper()}" not in environ}
    if args.bundles:
        values["bundles"] = args.bundles
    if args.provider:
        values["provider"] = args.provider
    if args.threads is not None:
        values["threads"] = args.threads
    return Settings(**values)


def read_glossary(path: Path) -> dict[str, str]:
    """A JSON object of terms, or term<TAB>translation lines (blank lines and #-comments skipped)."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):
        terms = json.loads(text)
        if not isinstance(terms, dict) or not all(isinstance(v, str) for v in terms.values()):
            raise ValueError("a JSON glossary is one object of term: translation strings")
        return terms
    terms = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        term, tab, translation = line.partition("\t")
        if not tab or not term.strip() or not translation.strip():
            raise ValueError(f"line {number}: expected term<TAB>translation")
        terms[term.strip()] = translation.strip()
    return terms


def files_of(inputs: Sequence[str], language: str, out_dir: Path | None = None) -> Iterator[tuple[Path, Path]]:
    """(file, path relative to what was named) for each file named, and each file of a known kind under each
    directory named but the translations of earlier runs (under ``out_dir``, or named NAME.LANG.EXT), in order."""
    skip = out_dir.resolve() if out_dir is not None else None
    for name in inputs:
        path = Path(name)
        if path.is_dir():
            for found in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in KINDS):
                if found.stem.endswith(f".{language}") or (skip and found.resolve().is_relative_to(skip)):
                    continue
                yield found, found.relative_to(path)
        else:
            yield path, Path(path.name)


def output_path(source: Path, relative: Path, language: str, args: argparse.Namespace) -> Path:
    if args.out is not None:
        return args.out
    named = relative.with_name(f"{relative.stem}.{language}{relative.suffix}")
    return args.out_dir / named if args.out_dir is not None else source.with_name(named.name)


class Progress:
    """A bar on a terminal (redrawn as groups of a file finish), else one line a file when it is done."""

    def __init__(self, stream: TextIO, quiet: bool):
        self.stream = stream
        self.quiet = quiet
        self.live = not quiet and stream.isatty()

    def update(self, label: str, done: int, total: int) -> None:
        if self.live and total:
            filled = 30 * done // total
            self.stream.write(f"\r{label} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
            self.stream.flush()

    def finish(self, line: str) -> None:
        if self.live:
            self.stream.write("\r\033[K")
        if not self.quiet:
            self.stream.write(line + "\n")
            self.stream.flush()


async def _ready(service: ServiceState, fatal: list[str]) -> None:
    while not service.models.ready():
        if fatal:
            raise Failed(fatal[0])
        await asyncio.sleep(0.02)


def _body(args: argparse.Namespace, texts: list[str], glossary: dict[str, str] | None) -> TranslateRequest:
    fields: dict[str, Any] = {"text": texts, "source_lang": args.source, "format": args.format}
    fields |= {"beam_size": args.beam_size, "target_lang": args.target, "model": args.model, "glossary": glossary}
    try:
        return TranslateRequest.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as err:
        raise Failed(f"{err.errors()[0]['loc'][0]}: {err.errors()[0]['msg']}") from None


async def translate_lines(
    service: ServiceState, args: argparse.Namespace, texts: list[str], glossary: dict[str, str] | None
) -> list[str]:
    """Texts in groups of MT_MAX_TEXTS, MT_DOCUMENT_GROUPS groups at once, as a document's paragraphs go."""
    step, in_flight = service.settings.max_texts, asyncio.Semaphore(service.settings.document_groups)

    async def group(chunk: list[str]) -> list[str]:
        async with in_flight:
            try:
                done = await translate_texts(service, _body(args, chunk, glossary), {}, document=True)
            except ApiError as err:
                raise Failed(err.message) from None
            except (QueueFull, TooManySentences, RequestTimeout) as err:
                raise Failed(str(err)) from None
        return [t.text for t in done.texts]

    chunks = [texts[i : i + step] for i in range(0, len(texts), step)]
    results = await asyncio.gather(*(group(chunk) for chunk in chunks))
    return [text for result in results for text in result]


async def translate_one_file(
    service: ServiceState,
    args: argparse.Namespace,
    source: Path,
    target: Path,
    glossary: dict[str, str] | None,
    report: Callable[[int, int], None],
) -> int:
    """``source`` translated into ``target``; returns its paragraphs and strings."""
    if target.exists() and not args.force:
        raise Failed(f"{target} exists (--force to write over it)")
    try:
        data = source.read_bytes()
    except OSError as err:
        raise Failed(f"cannot read it: {err.strerror or err}") from None
    options: dict[str, Any] = {"source_lang": args.source, "target_lang": args.target, "model": args.model}
    options = {k: v for k, v in options.items() if v is not None}
    if glossary:
        options["glossary"] = glossary
    fields: dict[str, Any] = {}
    try:
        written, _ = await translate_file(service, source.name, data, options, fields, progress=report)
    except ApiError as err:
        raise Failed(err.message) from None
    except (QueueFull, TooManySentences, RequestTimeout) as err:
        raise Failed(str(err)) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    partial.write_bytes(written)
    partial.replace(target)  # whole or not at all
    return int(fields.get("segments", 0))


async def run(
    args: argparse.Namespace,
    settings: Settings,
    *,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    engine_loader: EngineLoader = load_engine,
) -> int:
    fatal: list[str] = []
    app = create_app(settings, engine_loader=engine_loader, on_fatal=fatal.append)
    service: ServiceState = app.state.service
    if args.languages:  # the bundles' manifests say it: no engine is loaded
        for slot in service.models.slots:
            stdout.write(f"{service.models.pair_of(slot) or 'unknown languages'}\t{slot.name}\n")
        return 0
    glossary = read_glossary(args.glossary) if args.glossary else None
    files = args.files if args.files is not None else bool(args.inputs) and Path(args.inputs[0]).exists()
    progress = Progress(stderr, args.quiet)
    failures = 0
    async with app.router.lifespan_context(app):
        await _ready(service, fatal)
        language = args.target or (service.models.current(service.models.pick(args.model, None, None)).target_language)
        if not files:
            texts = args.inputs or [line.rstrip("\r\n") for line in stdin]
            for text in await translate_lines(service, args, texts, glossary):
                stdout.write(text + "\n")
            stdout.flush()
            return 0
        found = list(files_of(args.inputs, language, args.out_dir))
        if args.out is not None and len(found) != 1:
            raise Failed(f"--out names one file's output; {len(found)} files were given")
        if args.out_dir is None and any(Path(name).is_dir() for name in args.inputs):
            raise Failed("a directory's files need --out-dir")
        for number, (source, relative) in enumerate(found, 1):
            label = f"[{number}/{len(found)}] {source}"
            target = output_path(source, relative, language, args)
            started = time.monotonic()
            try:
                report = functools.partial(progress.update, label)
                segments = await translate_one_file(service, args, source, target, glossary, report)
            except Failed as err:
                failures += 1
                progress.finish(f"{label}: not translated: {err}")
                if args.quiet:
                    stderr.write(f"{source}: not translated: {err}\n")
                continue
            seconds = time.monotonic() - started
            progress.finish(f"{label} -> {target}: {segments} paragraphs and strings, {seconds:.1f} s")
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    configure_logging("info" if args.verbose else "warning")
    try:
        settings = settings_from(args, dict(os.environ))
    except (ValidationError, ConfigurationError) as err:
        print(f"mt-translate: {err}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(args, settings, stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr))
    except (Failed, ConfigurationError, OSError, ValueError) as err:
        print(f"mt-translate: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
