"""The translation engine: a verified bundle, three ONNX Runtime sessions and beam search on the host.

Tensors that stay on the device between steps (cross-attention K/V, the source mask, the self-attention
cache) are kept as ``OrtValue``s and passed through IO binding, on the CPU provider as on CUDA, so both run
the same code. Per step only ``tokens``, ``reorder`` and ``k`` go in and ``batch x hyps x k`` top-k
log-probs and ids plus one attention row per hypothesis come out. Sentences that are done leave the batch
through select.onnx (a Gather on the device); their cache rows are dropped by ``reorder``.

Input handling, documented in docs/bundle.md: an empty source gets one empty hypothesis without a model
call; a source longer than ``max_source_pieces`` is cut and flagged ``truncated_source``; characters the
vocabulary lacks become the unk id (``Translation.source_pieces`` keeps the original piece, and an unk the
model generates is rendered as sentencepiece renders it, " ⁇ ").
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from service.alignment import piece_attention, word_alignment
from service.beam_search import Finished, search
from service.bundle import GRAPHS, BundleError, cache_names, read_manifest
from service.tokenizer import Tokenizer, TokenizerError
from service.translation import DecodeOptions, Hypothesis, Translation, WordAlignment

log = logging.getLogger(__name__)

PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
}


def graph_names(role: str, layers: int) -> tuple[list[str], list[str]]:
    """The inputs and outputs the engine binds on each graph (docs/bundle.md)."""
    memory = ["src_mask", *cache_names("cross", layers)]  # per sentence, batch-major
    if role == "encoder":
        return ["src_ids"], memory
    if role == "decoder":
        fixed_in, fixed_out = ["tokens", "step", "reorder", "k"], ["topk_logprobs", "topk_ids", "attention"]
        return fixed_in + memory + cache_names("past", layers), fixed_out + cache_names("present", layers)
    return [*memory, "keep"], [f"kept_{name}" for name in memory]


_FLOAT_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


class EngineError(RuntimeError):
    """The engine cannot run as asked (e.g. CUDA requested where there is none)."""


def gpu_present() -> bool:
    """An NVIDIA GPU is visible to this process (checked without loading CUDA)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    gpus = Path("/proc/driver/nvidia/gpus")
    return Path("/dev/nvidia0").exists() or (gpus.is_dir() and any(gpus.iterdir()))


def choose_providers(requested: str) -> list[str]:
    """Execution providers for ``auto``, ``cpu`` or ``cuda`` (or an onnxruntime provider name).

    CUDA is only asked for when onnxruntime was built with it *and* a GPU is there: asking without one
    makes onnxruntime log errors before it falls back to the CPU.
    """
    name = PROVIDERS.get(requested.lower(), requested)
    cuda_usable = "CUDAExecutionProvider" in ort.get_available_providers() and gpu_present()
    if requested.lower() == "auto":
        name = "CUDAExecutionProvider" if cuda_usable else "CPUExecutionProvider"
    if name == "CUDAExecutionProvider":
        if not cuda_usable:
            raise EngineError(
                f"provider={requested!r}: no usable CUDA (onnxruntime providers: "
                f"{ort.get_available_providers()}, GPU visible: {gpu_present()}); use 'cpu' or 'auto'"
            )
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    if name != "CPUExecutionProvider":
        raise EngineError(f"provider={requested!r} is not supported: use 'auto', 'cpu' or 'cuda'")
    return ["CPUExecutionProvider"]


class _Decoding:
    """The device-side state of one batch: encoder outputs and the self-attention cache (a Stepper)."""

    def __init__(self, engine: Engine, src_ids: np.ndarray):
        self.engine = engine
        binding = engine.sessions["encoder"].io_binding()
        binding.bind_cpu_input("src_ids", src_ids)
        for name in engine.memory_names:
            binding.bind_output(name, *engine.device)
        engine.sessions["encoder"].run_with_iobinding(binding)
        self.memory: list[ort.OrtValue] = binding.get_outputs()  # src_mask, cross_k_0, cross_v_0, ...
        arch = engine.manifest["architecture"]
        shape = [len(src_ids), arch["n_heads"], 0, arch["d_head"]]
        empty = ort.OrtValue.ortvalue_from_shape_and_type(shape, engine.float_type, *engine.device)
        self.cache: list[ort.OrtValue] = [empty] * len(engine.past_names)
        self.position = 0

    def step(self, tokens: np.ndarray, reorder: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        session = self.engine.sessions["decoder"]
        binding = session.io_binding()
        binding.bind_cpu_input("tokens", tokens)
        binding.bind_cpu_input("step", np.array(self.position, dtype=np.int64))
        binding.bind_cpu_input("reorder", reorder)
        binding.bind_cpu_input("k", np.array(k, dtype=np.int64))
        for name, value in zip(self.engine.memory_names, self.memory, strict=True):
            binding.bind_ortvalue_input(name, value)
        for name, value in zip(self.engine.past_names, self.cache, strict=True):
            binding.bind_ortvalue_input(name, value)
        binding.bind_output("topk_logprobs", "cpu")
        binding.bind_output("topk_ids", "cpu")
        binding.bind_output("attention", "cpu")
        for name in self.engine.present_names:
            binding.bind_output(name, *self.engine.device)
        session.run_with_iobinding(binding)
        top_lp, top_ids, attention, *self.cache = binding.get_outputs()
        self.position += 1
        return top_lp.numpy(), top_ids.numpy(), attention.numpy()

    def keep(self, sentences: np.ndarray) -> None:
        session = self.engine.sessions["select"]
        binding = session.io_binding()
        for name, value in zip(self.engine.memory_names, self.memory, strict=True):
            binding.bind_ortvalue_input(name, value)
        binding.bind_cpu_input("keep", sentences)
        for name in self.engine.memory_names:
            binding.bind_output(f"kept_{name}", *self.engine.device)
        session.run_with_iobinding(binding)
        self.memory = binding.get_outputs()


class Engine:
    """Translates batches of sentences with a bundle's ONNX graphs; thread-safe once loaded."""

    def __init__(
        self,
        bundle_dir: Path,
        manifest: dict[str, Any],
        tokenizer: Tokenizer,
        sessions: dict[str, ort.InferenceSession],
    ):
        self.bundle_dir = bundle_dir
        self.manifest = manifest
        self.tokenizer = tokenizer
        self.sessions = sessions
        self.provider: str = sessions["decoder"].get_providers()[0]
        self.device: tuple[str, int] = ("cuda", 0) if self.provider == "CUDAExecutionProvider" else ("cpu", 0)
        self.max_source_pieces: int = int(manifest["max_source_pieces"])
        self.max_positions: int = int(manifest["architecture"]["max_positions"])
        self.vocab_size: int = int(manifest["architecture"]["vocab_size"])
        layers = int(manifest["architecture"]["decoder_layers"])
        self.memory_names = ["src_mask", *cache_names("cross", layers)]
        self.past_names = cache_names("past", layers)
        self.present_names = cache_names("present", layers)
        past_type = next(i.type for i in sessions["decoder"].get_inputs() if i.name == self.past_names[0])
        self.float_type = _FLOAT_TYPES[past_type]
        specials = manifest["special_ids"]
        self.pad_id, self.bos_id, self.eos_id = specials["pad"], specials["bos"], specials["eos"]

    @classmethod
    def load(
        cls, bundle_dir: str | Path, *, provider: str = "auto", threads: int = 0, spinning: bool = False
    ) -> Engine:
        """Verify the bundle (manifest, sha256 of every file) and open its graphs; BundleError if bad.

        ``threads`` sets onnxruntime's intra-op threads (0: its default, one per physical core).
        ``spinning`` lets idle intra-op threads busy-wait for work: a little lower latency on a machine
        of its own, much slower when the cores are shared (measured in docs/bundle.md).
        """
        bundle = Path(bundle_dir)
        manifest = read_manifest(bundle)
        try:
            tokenizer = Tokenizer(bundle)
        except TokenizerError as err:
            raise BundleError(f"bundle {bundle}: {err}") from err
        vocab_size = manifest["architecture"]["vocab_size"]
        if len(tokenizer) != vocab_size:
            raise BundleError(
                f"bundle {bundle}: vocab.json has {len(tokenizer)} pieces but the manifest "
                f"says vocab_size={vocab_size}; re-export the bundle"
            )
        providers = choose_providers(provider)
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(0, threads)
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        if not spinning:  # idle pool threads sleep instead of spinning: see docs/bundle.md
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sessions = {}
        for role in GRAPHS:
            path = bundle / manifest["graphs"][role]["file"]
            try:
                session = ort.InferenceSession(str(path), options, providers=providers)
            except Exception as err:  # onnxruntime's own exception types
                raise BundleError(f"{path} cannot be loaded by onnxruntime {ort.__version__}: {err}") from err
            _check_names(path, role, session, int(manifest["architecture"]["decoder_layers"]))
            sessions[role] = session
        engine = cls(bundle, manifest, tokenizer, sessions)
        if providers[0] != engine.provider:
            log.warning(
                "asked for %s but onnxruntime runs on %s (CUDA/cuDNN libraries missing?)", providers[0], engine.provider
            )
        log.info(
            "loaded bundle %s (%s %s, %s->%s) on %s, %s threads",
            bundle,
            manifest["name"],
            manifest["version"],
            manifest["source_language"],
            manifest["target_language"],
            engine.provider,
            threads or "default",
        )
        return engine

    def tokenize(self, text: str) -> list[int]:
        """Source ids without EOS; [] for empty text; unknown characters become the unk id."""
        return self.tokenizer.encode_source(text)

    def translate(self, texts: list[str], options: DecodeOptions) -> list[Translation]:
        items: list[tuple[list[int], list[str] | None]] = []
        for text in texts:
            pieces = self.tokenizer.source_pieces(text)
            items.append((self.tokenizer.to_ids(pieces), pieces))
        return self._translate(items, options)

    def translate_ids(self, batch: list[list[int]], options: DecodeOptions) -> list[Translation]:
        """One Translation per source (ids without EOS), in order; the batch is decoded together."""
        return self._translate([(list(ids), None) for ids in batch], options)

    def warmup(self) -> None:
        """Run every graph once (a short batch with beam 2, attention on) so the first request is fast."""
        token = min(4, self.vocab_size - 1)
        options = DecodeOptions(beam_size=2, max_length=3, return_attention=True)
        self.translate_ids([[token] * 3, [token] * 5], options)

    def _translate(self, items: list[tuple[list[int], list[str] | None]], options: DecodeOptions) -> list[Translation]:
        _check_options(options)
        results: list[Translation | None] = [None] * len(items)
        pending: list[tuple[int, list[int], list[str], bool]] = []
        for index, (ids, pieces) in enumerate(items):
            self._check_ids(ids, index)
            if pieces is None:
                pieces = [self.tokenizer.id_to_piece(i) for i in ids]
            truncated = len(ids) > self.max_source_pieces
            if truncated:
                ids, pieces = ids[: self.max_source_pieces], pieces[: self.max_source_pieces]
            if ids:
                pending.append((index, ids, pieces, truncated))
            else:
                results[index] = _empty(options)
        if pending:
            for (index, ids, pieces, truncated), finished in zip(
                pending, self._decode([ids for _, ids, _, _ in pending], options), strict=True
            ):
                results[index] = self._translation(ids, pieces, truncated, finished, options)
        return [r for r in results if r is not None]

    def source_batch(self, sources: list[list[int]]) -> np.ndarray:
        """The encoder's ``src_ids`` for these sources (ids without EOS): EOS appended, padded to the longest."""
        src = np.full((len(sources), max(map(len, sources)) + 1), self.pad_id, dtype=np.int64)
        for row, ids in enumerate(sources):
            src[row, : len(ids) + 1] = [*ids, self.eos_id]
        return src

    def _decode(self, sources: list[list[int]], options: DecodeOptions) -> list[list[Finished]]:
        return search(
            _Decoding(self, self.source_batch(sources)),
            [len(ids) for ids in sources],
            [options.max_steps(len(ids), self.max_positions) for ids in sources],
            beam_size=options.beam_size,
            length_penalty=options.length_penalty,
            n_best=options.n_best,
            vocab_size=self.vocab_size,
            bos_id=self.bos_id,
            eos_id=self.eos_id,
            with_attention=options.return_attention,
            no_repeat_ngram=options.no_repeat_ngram_size,
        )

    def _translation(
        self,
        ids: list[int],
        pieces: list[str],
        truncated: bool,
        finished: list[Finished],
        options: DecodeOptions,
    ) -> Translation:
        hypotheses = []
        for out in finished:
            tokens = out.tokens[:-1] if out.tokens and out.tokens[-1] == self.eos_id else out.tokens
            hypotheses.append(
                Hypothesis(
                    text=self.tokenizer.decode(tokens),
                    pieces=[self.tokenizer.id_to_piece(t) for t in tokens],
                    token_ids=tokens,
                    score=out.score,
                    token_logprobs=out.token_logprobs,
                    attention=piece_attention(out.attention, len(tokens), len(ids))
                    if options.return_attention
                    else None,
                )
            )
        alignment = None
        if options.return_attention:
            best = hypotheses[0]
            assert best.attention is not None
            alignment = word_alignment(pieces, best.pieces, best.attention)
        return Translation(pieces, hypotheses, alignment, truncated_source=truncated)

    def _check_ids(self, ids: list[int], index: int) -> None:
        for position, token in enumerate(ids):
            if not isinstance(token, (int, np.integer)) or not 0 <= token < self.vocab_size:
                raise ValueError(
                    f"source {index}, position {position}: id {token!r} is outside the "
                    f"vocabulary 0..{self.vocab_size - 1}"
                )


def _check_options(options: DecodeOptions) -> None:
    problems = []
    if options.beam_size < 1:
        problems.append(f"beam_size={options.beam_size} must be at least 1")
    if options.n_best < 1:
        problems.append(f"n_best={options.n_best} must be at least 1")
    if options.max_length < 1:
        problems.append(f"max_length={options.max_length} must be at least 1")
    if not math.isfinite(options.length_penalty):
        problems.append(f"length_penalty={options.length_penalty} must be a finite number")
    if options.no_repeat_ngram_size < 0:
        problems.append(f"no_repeat_ngram_size={options.no_repeat_ngram_size} must be 0 (off) or more")
    if not math.isfinite(options.max_length_ratio) or options.max_length_ratio < 0:
        problems.append(f"max_length_ratio={options.max_length_ratio} must be a number >= 0")
    if problems:
        raise ValueError("; ".join(problems))


def _empty(options: DecodeOptions) -> Translation:
    attention = np.zeros((0, 0), dtype=np.float32) if options.return_attention else None
    hypothesis = Hypothesis(text="", pieces=[], token_ids=[], score=0.0, token_logprobs=[], attention=attention)
    alignment = WordAlignment([], [], [], []) if options.return_attention else None
    return Translation(source_pieces=[], hypotheses=[hypothesis], alignment=alignment)


def _check_names(path: Path, role: str, session: ort.InferenceSession, layers: int) -> None:
    inputs = {i.name for i in session.get_inputs()}
    outputs = {o.name for o in session.get_outputs()}
    expected_in, expected_out = graph_names(role, layers)
    missing = [n for n in expected_in if n not in inputs]
    missing += [n for n in expected_out if n not in outputs]
    if missing:
        raise BundleError(
            f"{path} lacks the tensors {missing} that the engine needs; it was exported "
            "for another engine version: re-export the bundle"
        )
