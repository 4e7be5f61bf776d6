"""A stand-in engine for the server's tests: "translates" by reversing the words of a sentence.

A fake bundle is a directory whose manifest.json has the usual name/version/languages plus a
``fake`` section: ``delay_s`` (sleep per batch, or per step of a running set), ``prefix``
(prepended to every translation, to
tell models apart), ``fail_word`` (a batch holding it raises), ``break_word`` (a sentence holding
it comes back malformed, a bug past the engine), ``warmup_fails``. A manifest that is not valid
JSON raises BundleError, like a corrupt real bundle. The engine records every batch it decodes,
so tests can see what the batcher did.

Its running sets (``running_set()``, what service/scheduler.py drives) finish a sentence after ``1 +
steps_per_word * words`` steps; each step sleeps ``delay_s + step_s + row_s * rows`` (rows: the running
sentences times their beam), releasing the GIL as onnxruntime does, plus ``finish_s`` when a sentence finished
(the engine's ``select`` graph), then works ``host_step_s + host_row_s * rows`` holding the GIL (the beam
search's Python bookkeeping). Each ``admit`` call sleeps ``admit_s`` (the encoder and ``merge`` graphs).
With the defaults (no steps per word) every sentence finishes at its first step, so a step is what a batch
was. With any of them set, ``translate_ids`` decodes its batch as a running set too, so both of the server's
schedulers pay the same per-step costs.

``GPU_LIKE``: costs measured on an H100 (2026-11-25, model 0.7.0, fp16w graphs, onnxruntime-gpu 1.31.1;
docs/reports/gpu/profile-cuda-batch1.md and -batch32.md): a decoder step 1.12 ms at 4 rows and 1.32 ms at 128,
so 1.114 ms plus 1.6 µs per hypothesis row; the Python around it 0.26 ms at 4 rows and 0.79 ms at 128, so
0.241 ms plus 4.3 µs per row; an encoder call 2.44 ms (at batch 1; ``merge`` was not measured and is left
out); a ``select`` call 0.15 ms. With 1.3 steps per source word a 20-word sentence takes 27 steps, about its
length in pieces. ``GPU_LIKE_STEP_ONLY`` is the first calibration (../shared/GPU.md: 0.757 ms a step plus 3.3 µs
a row, nothing else), which charged nothing for admissions and bookkeeping.
"""

from __future__ import annotations

import json
import time
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from core.bundle import BundleError
from core.translation import DecodeOptions, Hypothesis, Translation, WordAlignment

WORD = "\u2581"
GPU_LIKE: dict[str, Any] = {
    "step_s": 0.001114,
    "row_s": 0.0000016,
    "host_step_s": 0.000241,
    "host_row_s": 0.0000043,
    "admit_s": 0.00244,
    "finish_s": 0.00015,
    "steps_per_word": 1.3,
}
GPU_LIKE_STEP_ONLY: dict[str, Any] = {"step_s": 0.000757, "row_s": 0.0000033, "steps_per_word": 1.3}


def write_fake_bundle(
    directory: Path, version: str = "1", *, name: str = "fake-en-de", languages: str = "en-de", **fake: Any
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    source, target = languages.split("-")
    manifest = {
        "name": name,
        "version": version,
        "source_language": source,
        "target_language": target,
        "architecture": {"layers": 0},
        "scores": {"bleu": 99.0},
        "fake": fake,
    }
    (directory / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return directory


class FakeEngine:
    provider = "FakeExecutionProvider"

    def __init__(self, manifest: dict[str, Any], max_source_pieces: int = 32):
        self.manifest = manifest
        fake = manifest.get("fake", {})
        self.delay_s: float = float(fake.get("delay_s", 0.0))
        self.prefix: str = str(fake.get("prefix", ""))
        self.fail_word: str = str(fake.get("fail_word", "FAIL"))
        self.break_word: str = str(fake.get("break_word", "BREAK"))
        self.warmup_fails: bool = bool(fake.get("warmup_fails", False))
        self.steps_per_word: float = float(fake.get("steps_per_word", 0.0))
        self.step_s: float = float(fake.get("step_s", 0.0))
        self.row_s: float = float(fake.get("row_s", 0.0))
        self.host_step_s: float = float(fake.get("host_step_s", 0.0))
        self.host_row_s: float = float(fake.get("host_row_s", 0.0))
        self.admit_s: float = float(fake.get("admit_s", 0.0))
        self.finish_s: float = float(fake.get("finish_s", 0.0))
        self.max_source_pieces = max_source_pieces
        self.batches: list[list[list[int]]] = []
        """Every batch decoded (warm-up excluded), in order."""
        self.options: list[DecodeOptions] = []
        self.warm = False

    @property
    def batch_sizes(self) -> list[int]:
        return [len(b) for b in self.batches]

    def tokenize(self, text: str) -> list[int]:
        """A word's id is its UTF-8 bytes as one number: the same in every process (the server's and the engine
        process's, service/engine_process.py)."""
        return [int.from_bytes(b"\x01" + word.encode("utf-8"), "big") for word in text.split()]

    def unknown_spans(self, text: str) -> list[tuple[int, int]]:
        """Characters outside the basic multilingual plane (emoji): the fake's vocabulary lacks them."""
        return [(i, i + 1) for i, c in enumerate(text) if ord(c) > 0xFFFF]

    def words(self, ids: list[int]) -> list[str]:
        return [i.to_bytes((i.bit_length() + 7) // 8, "big")[1:].decode("utf-8") for i in ids]

    @property
    def stepwise(self) -> bool:
        """Costs are per decoder step (GPU-like timing): a batch is decoded as a running set to its end."""
        return bool(self.steps_per_word or self.step_s or self.row_s or self.host_step_s or self.admit_s)

    def translate_ids(self, batch: list[list[int]], options: DecodeOptions) -> list[Translation]:
        if self.stepwise:
            running, results = self.running_set(), dict[Hashable, Translation]()
            running.admit((i, ids, options) for i, ids in enumerate(batch))
            while running:
                results.update(running.step())
            return [results[i] for i in range(len(batch))]
        self.batches.append([list(ids) for ids in batch])
        self.options.append(options)
        time.sleep(self.delay_s)
        sentences = [self.words(ids[: self.max_source_pieces]) for ids in batch]
        if any(self.fail_word in words for words in sentences):
            raise RuntimeError(f"fake engine failure: a sentence holds {self.fail_word!r}")
        return [
            self._translate(words, len(ids) > self.max_source_pieces, options)
            for words, ids in zip(sentences, batch, strict=True)
        ]

    def _translate(self, source: list[str], truncated: bool, options: DecodeOptions) -> Translation:
        target = list(reversed(source))
        if self.break_word in source:
            broken = Hypothesis(text=None, pieces=[], token_ids=[], score=0, token_logprobs=[])  # type: ignore[arg-type]
            return Translation(source_pieces=[], hypotheses=[broken])
        hypotheses = []
        for k in range(options.n_best):
            words = target + ([f"alt{k}"] if k else [])
            text = self.prefix + " ".join(words)
            n = len(words)
            attention = None
            if options.return_attention:
                attention = np.zeros((n, len(source)))
                for t in range(min(n, len(source))):
                    attention[t, len(source) - 1 - t] = 1.0
            hypotheses.append(
                Hypothesis(
                    text=text,
                    pieces=[WORD + w for w in words],
                    token_ids=list(range(n)),
                    score=-0.1 * (k + 1),
                    token_logprobs=[-0.1] * n,
                    attention=attention,
                )
            )
        alignment = None
        if options.return_attention:
            best = hypotheses[0]
            weights = best.attention.tolist() if best.attention is not None else []
            links = [[len(source) - 1 - t] if t < len(source) else [] for t in range(len(target))]
            alignment = WordAlignment(source, target, weights, links)
        return Translation(
            source_pieces=[WORD + w for w in source],
            hypotheses=hypotheses,
            alignment=alignment,
            truncated_source=truncated,
        )

    def running_set(self) -> FakeRunningSet:
        return FakeRunningSet(self)

    def warmup(self) -> None:
        if self.warmup_fails:
            raise RuntimeError("fake warm-up failure")
        self.warm = True


class FakeRunningSet:
    """Sentences decoded step by step; each finishes after its number of steps, translated as in a batch."""

    def __init__(self, engine: FakeEngine):
        self.engine = engine
        self.running: dict[Hashable, tuple[list[int], DecodeOptions]] = {}
        self.left: dict[Hashable, int] = {}
        self.words: dict[Hashable, list[str]] = {}

    def __len__(self) -> int:
        return len(self.running)

    def admit(self, items: Iterable[tuple[Hashable, str | list[int], DecodeOptions]]) -> None:
        entries = [(key, self.engine.tokenize(s) if isinstance(s, str) else list(s), o) for key, s, o in items]
        for key, _, options in entries:
            if key in self.running:
                raise ValueError(f"sentence key {key!r} is already in the running set")
            if options.beam_size < 1:
                raise ValueError(f"beam_size={options.beam_size} must be at least 1")
        if entries and self.engine.admit_s:
            time.sleep(self.engine.admit_s)
        for key, ids, options in entries:
            self.running[key] = (ids, options)
            self.words[key] = self.engine.words(ids[: self.engine.max_source_pieces])  # once, not at every step
            self.left[key] = 1 + round(self.engine.steps_per_word * min(len(ids), self.engine.max_source_pieces))

    def step(self) -> list[tuple[Hashable, Translation]]:
        engine = self.engine
        engine.batches.append([ids for ids, _ in self.running.values()])
        rows = sum(options.beam_size for _, options in self.running.values())
        time.sleep(engine.delay_s + engine.step_s + engine.row_s * rows)
        sentences = self.words
        if any(engine.fail_word in sentences[key] for key in self.running):
            raise RuntimeError(f"fake engine failure: a sentence holds {engine.fail_word!r}")
        done = []
        for key in list(self.running):
            self.left[key] -= 1
            if self.left[key] <= 0:
                ids, options = self.running.pop(key)
                del self.left[key]
                engine.options.append(options)
                words = sentences.pop(key)
                done.append((key, engine._translate(words, len(ids) > engine.max_source_pieces, options)))
        if done and engine.finish_s:
            time.sleep(engine.finish_s)
        _hold_gil(engine.host_step_s + engine.host_row_s * rows)
        return done

    def drop(self, keys: Iterable[Hashable]) -> None:
        for key in keys:
            self.running.pop(key, None)
            self.left.pop(key, None)
            self.words.pop(key, None)


def _hold_gil(seconds: float) -> None:
    """Busy Python for ``seconds``, the GIL held all along, like the beam search's bookkeeping."""
    if seconds <= 0:
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class FakeLoader:
    """An engine_loader for create_app that remembers the engines it made."""

    def __init__(self) -> None:
        self.engines: list[FakeEngine] = []

    def __call__(self, bundle: Path, *, provider: str, threads: int) -> FakeEngine:
        try:
            manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
        except FileNotFoundError as err:
            raise BundleError(f"{bundle}/manifest.json is missing: not a model bundle") from err
        except json.JSONDecodeError as err:
            raise BundleError(f"{bundle}/manifest.json is corrupt ({err}); re-export it") from err
        engine = FakeEngine(manifest, int(manifest.get("fake", {}).get("max_source_pieces", 32)))
        self.engines.append(engine)
        return engine

    @property
    def last(self) -> FakeEngine:
        return self.engines[-1]


def load_fake(bundle: Path, *, provider: str, threads: int) -> FakeEngine:
    return FakeLoader()(bundle, provider=provider, threads=threads)
