"""Translate a test set with a checkpoint (PyTorch reference decoder) and score it with sacrebleu."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from core.sentences import PART_PIECES
from training import checkpoint
from training.data import read_pairs
from training.decode import beam_search, greedy, strip_eos


def evaluate(
    ckpt: str | Path,
    test_file: str | Path,
    hypotheses_out: str | Path | None = None,
    beam_size: int = 4,
    length_penalty: float = 1.0,
    batch_size: int = 32,
    limit: int = 0,
    no_repeat_ngram: int = 0,
) -> dict[str, float]:
    import sacrebleu

    model, config, vocab_files = checkpoint.load_model(ckpt)
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = checkpoint.load_tokenizer(vocab_files, tmp)
    pairs = read_pairs(test_file)
    if limit:
        pairs = pairs[:limit]
    limit_src = config.model.max_positions - 1
    sources = [tokenizer.encode_source(s)[:limit_src] for s, _ in pairs]
    max_lens = [min(config.model.max_positions, 2 * len(s) + 10) for s in sources]
    hyps: list[str] = []
    eos = config.model.eos_id
    with torch.no_grad():
        if beam_size == 1:
            for start in tqdm(range(0, len(sources), batch_size), desc="translate", unit="batch"):
                outs = greedy(
                    model,
                    sources[start : start + batch_size],
                    max_lens[start : start + batch_size],
                    no_repeat_ngram=no_repeat_ngram,
                )
                hyps += [tokenizer.decode(strip_eos(o.tokens, eos)) for o in outs]
        else:
            for src, max_len in tqdm(list(zip(sources, max_lens, strict=True)), desc="translate", unit="sent"):
                best = beam_search(model, src, beam_size, max_len, length_penalty, no_repeat_ngram=no_repeat_ngram)[0]
                hyps.append(tokenizer.decode(strip_eos(best.tokens, eos)))
    refs = [t for _, t in pairs]
    if hypotheses_out:
        Path(hypotheses_out).write_text("\n".join(hyps) + "\n", encoding="utf-8")
    print_samples(str(test_file), [s for s, _ in pairs], hyps, refs)
    return {
        "bleu": sacrebleu.corpus_bleu(hyps, [refs]).score,
        "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score,
        "sentences": float(len(pairs)),
    }


def print_samples(name: str, sources: list[str], hyps: list[str], refs: list[str], count: int = 3) -> None:
    """A few translations beside their references on stderr (evenly spread over the file), so that a score
    comes with something to read."""
    if not sources:
        return
    print(f"samples of {name}:", file=sys.stderr)
    for i in sorted({round(k * (len(sources) - 1) / max(1, count - 1)) for k in range(count)}):
        print(f"  source:    {sources[i]}\n  output:    {hyps[i]}\n  reference: {refs[i]}", file=sys.stderr)


def translate_texts(
    engine: Any,
    texts: list[str],
    options: Any,
    batch_size: int = 32,
    desc: str | None = None,
    part_pieces: int = 0,
    split: bool = False,
) -> tuple[list[str], float]:
    """Best translations of ``texts`` through a service ``Engine`` in batches, and the seconds spent
    translating (tokenize + search + detokenize; the progress bar's own time excluded). Each text is read and answered
    as the server does (``core.reading``); with ``split``, cut into sentences as the server does by default
    (``core.sentences.split_sentences``, in the model's source language); with ``part_pieces``, a sentence of more
    source pieces is translated in parts of at most that many (``core.sentences.fit``)."""
    from core.reading import answer, read
    from core.sentences import fit, split_sentences, whole_text

    language = engine.manifest["source_language"]

    hyps: list[str] = []
    seconds = 0.0
    for start in tqdm(range(0, len(texts), batch_size), desc=desc, unit="batch", disable=desc is None):
        started = time.perf_counter()
        batch = texts[start : start + batch_size]
        splits = [split_sentences(t, language) if split else whole_text(t) for t in batch]
        if part_pieces:
            splits = [fit(s, lambda x: len(engine.tokenize(x)), part_pieces) for s in splits]
        readings = [read(engine, p) for s in splits for p in s.sentences]
        done = engine.translate_ids([r.ids for r in readings], options)
        parts = [answer(r, t).best.text for r, t in zip(readings, done, strict=True)]
        for cut in splits:
            mine, parts = parts[: len(cut.sentences)], parts[len(cut.sentences) :]
            hyps.append(cut.join(mine))
        seconds += time.perf_counter() - started
    return hyps, seconds


def evaluate_bundle(
    bundle: str | Path,
    test_files: list[str | Path],
    beam_size: int = 4,
    batch_size: int = 32,
    threads: int = 0,
    hypotheses_dir: str | Path | None = None,
    no_repeat_ngram: int | None = None,
    length_penalty: float | None = None,
    graphs: str = "auto",
    part_pieces: int = PART_PIECES,
    split_sentences: bool = True,
) -> dict[str, dict[str, float]]:
    """Score an exported bundle through the service's own engine, one result per test file.

    ``None`` for ``no_repeat_ngram`` or ``length_penalty`` means the server's default. ``graphs``: the graph
    set (``auto``, ``main``, or a variant such as ``cuda``, which the CPU provider runs too: what a GPU
    server would answer, up to the GPU's own rounding). ``part_pieces``: a line of more source pieces is translated
    in parts, as the server does (its default; 0: only lines longer than the model takes, as the server with
    ``MT_PART_PIECES=0``). ``split_sentences``: each line is cut into sentences as the server does by default (a
    line of the reserved sets often holds two or three); False sends each line whole, as ``split_sentences: false``."""
    import sacrebleu

    from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE, DecodeOptions
    from inference.engine import Engine

    engine = Engine.load(bundle, threads=threads, graphs=graphs, spinning="decoder")  # one engine, one thread
    if no_repeat_ngram is None:  # the server's default
        no_repeat_ngram = DEFAULT_NO_REPEAT_NGRAM_SIZE
    if length_penalty is None:
        length_penalty = DEFAULT_LENGTH_PENALTY
    options = DecodeOptions(beam_size=beam_size, length_penalty=length_penalty, no_repeat_ngram_size=no_repeat_ngram)
    results: dict[str, dict[str, float]] = {}
    for test_file in test_files:
        pairs = read_pairs(test_file)
        hyps, seconds = translate_texts(
            engine,
            [s for s, _ in pairs],
            options,
            batch_size,
            Path(test_file).name,
            part_pieces or engine.max_source_pieces,
            split_sentences,
        )
        refs = [t for _, t in pairs]
        print_samples(Path(test_file).name, [s for s, _ in pairs], hyps, refs)
        if hypotheses_dir:
            out = Path(hypotheses_dir) / (Path(test_file).stem + ".hyp")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("\n".join(hyps) + "\n", encoding="utf-8")
        results[Path(test_file).name] = {
            "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2),
            "sentences": len(pairs),
            "seconds": round(seconds, 2),  # translation time only (tokenize + search + detokenize)
        }
    return results
