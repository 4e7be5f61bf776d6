"""The translation engine: a verified bundle, its ONNX Runtime sessions, and a running set to decode with.

A :class:`RunningSet` is what a scheduler drives: :meth:`~RunningSet.admit` new sentences (each with its own
decode options) between steps, :meth:`~RunningSet.step` every running sentence by one token, get back the
sentences that finished, :meth:`~RunningSet.drop` those nobody waits for. :meth:`Engine.translate` is a loop
over one. Tensors that stay on the device between steps (the encoder's memory of every running sentence and
the self-attention cache) are ``OrtValue``s passed through IO binding, on the CPU provider as on CUDA, so both
run the same code. Per step only the tokens, positions, cache reorder and ``k`` go in and ``batch x hyps x k``
top-k log-probs and ids plus one attention row per hypothesis come out. The small state graphs (select, merge,
trim; core/graphs.py) reshape the device state when sentences leave or join.

Input handling, documented in docs/bundle.md: an empty source gets one empty hypothesis without a model
call; a source longer than ``max_source_pieces`` is cut and flagged ``truncated_source``; characters the
vocabulary lacks become the unk id (``Translation.source_pieces`` keeps the original piece, and an unk the
model generates is rendered as sentencepiece renders it, " ⁇ ").
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Hashable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from onnxruntime.capi import _pybind_state as _C

from core.bundle import BundleError, graph_files, read_manifest
from core.casing import Casing, restored, shouting
from core.graphs import (
    GRAPHS,
    GROW_KEY_SPLIT,
    KEY_LAYOUT,
    LEAN_STEP,
    MASKED_MOVE,
    MASKED_STEP,
    PACKED_STEP_IDS,
    SHORTLIST_INPUTS,
    STATIC_EXTRAS,
    STATIC_GRAPHS,
    STATIC_LEAN,
    WINDOW,
    cache_names,
    graph_spec,
    memory_names,
)
from core.tokenizer import Tokenizer, TokenizerError
from core.translation import DecodeOptions, Hypothesis, Translation, WordAlignment
from inference.alignment import LEXICAL_BOOST, Lexicon, piece_attention, word_alignment
from inference.beam_search import BeamSearch, Finished, SearchOptions, Stepper
from inference.capture import GATE
from inference.clock_state import ClockState
from inference.sampling import sample
from inference.shortlist import Listed, Shortlist
from inference.static_state import BufferPool, StaticState, warm
from inference.threads import session_options, share_pool, shared_pool_size

log = logging.getLogger(__name__)

PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
}

_FLOAT_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


COHORTS_CPU = 4
"""Most cohorts of a running set on the CPU with the dynamic state (RunningSet; measured in docs/scheduler.md)."""
COHORT_CELLS = 512
"""Padding (cache columns x beam) past which arrivals open a new cohort instead of joining the youngest."""
DECODE_THREADS = 4
"""Most threads of ``Engine.decode_threads``: a server decodes with one (a GPU's default) or two running sets."""
LANE_SENTENCES = 16
"""The fewest sentences a lane of ``translate`` takes (``Engine.lanes``): a smaller batch decodes as fewer lanes."""


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


def choose_graphs(manifest: dict[str, Any], requested: str, provider: str) -> str | None:
    """The graph variant to load (None: the main graphs) for ``auto``, ``main``, ``float`` (the first set that is
    not int8: its translations do not depend on the batch, docs/bundle.md "Batch mates") or a variant's name."""
    variants = manifest.get("variants", {})
    if requested == "auto":
        wanted = [name for name, v in variants.items() if v.get("provider") == provider]
        return wanted[0] if wanted else None
    if requested == "main":
        return None
    if requested == "float":
        if manifest.get("export", {}).get("quantize", "none") in ("none", None):
            return None
        floats = [name for name, v in variants.items() if not str(v.get("dtype", "")).startswith("int8")]
        if not floats:
            raise EngineError(
                "graphs='float': every graph set of the bundle is int8; re-export it with --gpu-dtype fp16w "
                "(a float set beside the int8 one) or without --quantize"
            )
        return floats[0]
    if requested not in variants:
        raise EngineError(
            f"graphs={requested!r}: the bundle has the main graphs and the variants {sorted(variants) or 'none'}; "
            "use auto, main, float or one of them"
        )
    return requested


SHORTLIST_MOST = 0.45
"""``Engine.shortlist_most``'s default: a set whose lists together hold more of the vocabulary decodes with all of it.
Session 39's shortlisted step lost past a quarter of the pieces (batch 8 and more). Since session 40 (the mask added,
the logits floored before the log-softmax, leavers keeping the set's union) it gains through batch 8 (~40 % of the
default model's pieces) and is at par at 16-32 (~47-54 %) and slower at 64 (en-de) with every set held to its lists
(`python -m bench shortlist ... --most 1 --speed-only`, docs/performance.md)."""


class DeviceState:
    """The device side of a running set (a beam_search.Stepper): every running sentence's encoder memory
    (source mask, cross K/V) and the self-attention cache, as OrtValues that never leave the device."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.memory: list[Any] | None = None  # src_mask, cross_k_0, cross_v_0, ... (pybind OrtValues)
        self.source_lens: list[int] = []  # per running sentence, EOS included
        self.width = 0  # source positions in the memory
        self.cache: list[Any] | None = None  # present_k_0, present_v_0, ... of the last step
        self.cached = 0  # columns in the cache
        self.lists: list[np.ndarray] = []  # with a shortlist: each running sentence's pieces (inference/shortlist.py)
        self._listed: Listed | None = None  # the set's Shortlist.union, None past shortlist_most
        self._listed_stale = True  # the set changed since it was computed
        self._mask_rows: np.ndarray | None = None  # its ``allowed`` as the step's mask, one row a hypothesis

    def _run(self, role: str, inputs: dict[str, Any], outputs: list[str], cpu: int = 0) -> list[Any]:
        return self.engine.run_graph(role, inputs, outputs, cpu)

    def admit(self, sources: list[list[int]]) -> None:
        engine = self.engine
        names = engine.memory_names
        new = self._run("encoder", {"src_ids": engine.source_batch(sources)}, names)
        self.source_lens += [len(ids) + 1 for ids in sources]
        if engine.shortlist is not None:
            self.lists += [engine.shortlist.sentence(ids) for ids in sources]
            self._listed_stale = True
        self.width = max(self.width, *(len(ids) + 1 for ids in sources))
        if self.memory is None:
            self.memory = new
        else:
            inputs = {**dict(zip(names, self.memory, strict=True))}
            inputs |= {"new_" + name: value for name, value in zip(names, new, strict=True)}
            self.memory = self._run("merge", inputs, ["merged_" + n for n in names])

    def step(
        self, tokens: np.ndarray, positions: np.ndarray, reorder: np.ndarray, k: int, attention: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        engine = self.engine
        assert self.memory is not None, "step() before admit()"
        if self.cache is None or self.cached == 0:
            arch = engine.manifest["architecture"]
            shape = [int(reorder.max()) + 1, arch["n_heads"], 0, arch["d_head"]]
            with GATE.shared():
                empty = ort.OrtValue.ortvalue_from_shape_and_type(shape, engine.float_type, *engine.device)._ortvalue
            self.cache, self.cached = [empty] * len(engine.past_names), 0
        else:
            self._trim(int(positions.max()))
        inputs: dict[str, Any] = {
            "tokens": tokens,
            "positions": positions,
            "reorder": reorder,
            "k": np.full(engine.k_shape, k, dtype=np.int64),
            **dict(zip(engine.memory_names, self.memory, strict=True)),
            **dict(zip(engine.past_names, self.cache, strict=True)),
        }
        role = "decoder"
        if self.lists:  # only the set's listed pieces are scored, each hypothesis' masked to its sentence's
            if self._listed_stale:
                assert engine.shortlist is not None
                self._listed = engine.shortlist.union(self.lists, engine.shortlist_most)
                self._listed_stale, self._mask_rows = False, None
            listed = self._listed
            if listed is not None:
                rows = len(self.lists) * tokens.shape[1]
                if self._mask_rows is None or len(self._mask_rows) != rows:
                    allowed = np.repeat(listed.allowed, tokens.shape[1], axis=0)
                    self._mask_rows = np.where(allowed, np.float32(0), np.float32(-np.inf))
                inputs |= listed.inputs
                inputs[SHORTLIST_INPUTS[3]] = self._mask_rows  # mask
                inputs["k"] = np.full(engine.k_shape, min(k, listed.allowed.shape[1]), dtype=np.int64)
                role = "decoder_shortlist"
        if role == "decoder" and not attention and LEAN_STEP in engine.sessions:  # nobody asked for the rows
            role = LEAN_STEP
        reported = [] if role == LEAN_STEP else ["attention"]  # the lean step has no rows to report
        outputs = ["topk_logprobs", "topk_ids", *reported, *engine.present_names]
        # The attention rows come to the host only when a sentence asked for them.
        top_lp, top_ids, *rest = self._run(role, inputs, outputs, cpu=3 if attention else 2)
        self.cache = rest[len(reported) :]
        self.cached += 1
        return top_lp.numpy(), top_ids.numpy(), rest[0].numpy() if attention else None

    def _keep_listed(self, sentences: np.ndarray) -> None:
        """Sentences leaving keep the set's listed pieces (a superset of what the others need, each row masked to its
        own list as before): only their rows of the mask go, not a new union and a new gather of the projection's
        rows, which at batch 32 cost more than the smaller step saved. A set past ``shortlist_most`` looks again."""
        listed, mask = self._listed, self._mask_rows
        if self._listed_stale or listed is None or not len(sentences):
            self._listed, self._mask_rows, self._listed_stale = None, None, True
            return
        self._listed = Listed(listed.inputs, listed.allowed[sentences])
        if mask is not None:
            hyps = len(mask) // len(listed.allowed)
            self._mask_rows = mask.reshape(len(listed.allowed), hyps, -1)[sentences].reshape(len(sentences) * hyps, -1)

    def _trim(self, oldest: int) -> None:
        """Drop the cache columns before the oldest running sentence's first and the source positions past
        the longest running source, once either is a quarter of its axis (each trim copies the state)."""
        dead, longest = self.cached - oldest, max(self.source_lens)
        if dead * 4 < max(1, self.cached) and (self.width - longest) * 4 < max(1, self.width):
            return
        assert self.cache is not None and self.memory is not None
        memory, past = self.engine.memory_names, self.engine.past_names
        inputs = {
            **dict(zip(memory, self.memory, strict=True)),
            **dict(zip(past, self.cache, strict=True)),
            "start": np.array(dead, dtype=np.int64),
            "src_len": np.array(longest, dtype=np.int64),
        }
        trimmed = self._run("trim", inputs, ["trimmed_" + n for n in (*memory, *past)])
        self.memory, self.cache = trimmed[: len(memory)], trimmed[len(memory) :]
        self.cached, self.width = oldest, longest

    def keep(self, sentences: np.ndarray) -> None:
        self.source_lens = [self.source_lens[i] for i in sentences.tolist()]
        if self.lists:
            self.lists = [self.lists[i] for i in sentences.tolist()]
            self._keep_listed(sentences)
        if not self.source_lens:  # the set is empty: the next admit starts afresh
            self.memory, self.cache, self.cached, self.width = None, None, 0, 0
            return
        assert self.memory is not None
        names = self.engine.memory_names
        inputs = {**dict(zip(names, self.memory, strict=True)), "keep": sentences}
        self.memory = self._run("select", inputs, ["kept_" + n for n in names])


class RunningSet:
    """Sentences translated together, step by step: admit between steps, results as sentences finish.

    Keys are the caller's (any hashable, unique among the running sentences). Not thread-safe: one thread
    drives a running set; the engine behind it may run several.

    **Cohorts.** A set's device state is one dense batch: every hypothesis carries as many cache columns as the
    set's oldest sentence has generated, so a sentence that joins late pays, at every one of its steps, for
    columns it never wrote. On the CPU that padding is what a step costs most (each step gathers and copies the
    whole cache), so there the set keeps up to ``engine.cohorts`` cohorts, each a beam search with its own state,
    stepped one after the other: arrivals open a new cohort when joining the youngest would pad them with
    ``COHORT_CELLS`` cache cells or more (columns x beam, summed), else they join it. On a GPU a graph call costs
    about a whole step whatever its size, so it keeps one (docs/scheduler.md, "Cohorts").
    """

    def __init__(self, engine: Engine):
        self.engine = engine
        self._cohorts: list[BeamSearch] = []  # oldest first
        self._sources: dict[Hashable, tuple[list[int], list[str], bool, DecodeOptions, bool]] = {}
        """key -> source ids, pieces, truncated, options, and whether a text in capitals was folded (core/casing.py)"""
        self._ready: list[tuple[Hashable, Translation]] = []

    def __len__(self) -> int:
        """Sentences admitted and not yet returned."""
        return sum(map(len, self._cohorts)) + len(self._ready)

    @property
    def keys(self) -> list[Hashable]:
        """The sentences still decoding."""
        return [key for cohort in self._cohorts for key in cohort.keys]

    @property
    def cohort_count(self) -> int:
        return len(self._cohorts)

    def admit(self, items: Iterable[tuple[Hashable, str | list[int], DecodeOptions]]) -> None:
        """Add sentences (key, text or source ids without EOS, options); ValueError for bad ids or options,
        before anything is admitted."""
        engine, entries, ready = self.engine, [], []
        for key, source, options in items:
            _check_options(options)
            if key in self._sources or any(key == k for k, _ in self._ready):
                raise ValueError(f"sentence key {key!r} is already in the running set")
            shouted = False
            if isinstance(source, str):
                shouted = shouting(source)
                pieces = engine.tokenizer.source_pieces(engine.casing.fold(source))
                ids = engine.tokenizer.to_ids(pieces)
            else:
                ids = list(source)
                engine.check_ids(ids, key)
                pieces = engine.tokenizer.to_pieces(ids)
            truncated = len(ids) > engine.max_source_pieces
            if truncated:
                ids, pieces = ids[: engine.max_source_pieces], pieces[: engine.max_source_pieces]
            if not ids:
                ready.append((key, _empty(options)))
                continue
            self._sources[key] = (ids, pieces, truncated, options, shouted)
            entries.append((key, ids, engine.search_options(options, len(ids))))
        if entries:
            self._cohort_for(entries).admit(entries)
        self._ready += ready

    def _cohort_for(self, entries: list[tuple[Hashable, list[int], SearchOptions]]) -> BeamSearch:
        young = self._cohorts[-1] if self._cohorts else None
        padding = young.age * sum(options.beam_size for _, _, options in entries) if young else 0
        if young is None or (len(self._cohorts) < self.engine.cohorts and padding >= COHORT_CELLS):
            engine = self.engine
            state: Stepper = (
                StaticState(engine)
                if engine.static_step
                else ClockState(engine)
                if engine.masked_step
                else DeviceState(engine)
            )
            young = BeamSearch(state, vocab_size=engine.vocab_size, bos_id=engine.bos_id, eos_id=engine.eos_id)
            self._cohorts.append(young)
        return young

    def step(self) -> list[tuple[Hashable, Translation]]:
        """One decoder step for every running sentence; the sentences done after it (and any empty ones
        admitted since the last step), as Translations."""
        done, self._ready = self._ready, []
        for cohort in self._cohorts:
            for key, finished in cohort.step():
                ids, pieces, truncated, options, shouted = self._sources.pop(key)
                translation = self.engine.translation(ids, pieces, truncated, finished, options)
                done.append((key, restored(translation) if shouted else translation))
        self._cohorts = [cohort for cohort in self._cohorts if cohort]
        return done

    def drop(self, keys: Iterable[Hashable]) -> None:
        """Forget these sentences (running or done but not yet returned); unknown keys are ignored."""
        gone = set(keys)
        self._ready = [(k, t) for k, t in self._ready if k not in gone]
        for cohort in self._cohorts:
            for key in cohort.drop(gone):
                self._sources.pop(key, None)
        self._cohorts = [cohort for cohort in self._cohorts if cohort]


class Engine:
    """Translates sentences with a bundle's ONNX graphs; thread-safe once loaded (one running set per caller)."""

    def __init__(
        self,
        bundle_dir: Path,
        manifest: dict[str, Any],
        tokenizer: Tokenizer,
        sessions: dict[str, ort.InferenceSession],
    ):
        self.bundle_dir = bundle_dir
        self.manifest = manifest
        self.graphs = "main"
        """Which of the bundle's graph sets runs: "main" or a variant's name (e.g. "cuda")."""
        self.tokenizer = tokenizer
        self.casing = Casing.load(bundle_dir, manifest)
        """How a sentence in capitals is read (core/casing.py): the bundle's truecase table, if it has one."""
        self.sessions = sessions
        self.provider: str = sessions["decoder"].get_providers()[0]
        self.device: tuple[str, int] = ("cuda", 0) if self.provider == "CUDAExecutionProvider" else ("cpu", 0)
        self.raw_sessions = {role: session._sess for role, session in sessions.items()}
        self.c_device = ort.OrtDevice.make(*self.device)._get_c_device()
        self.cpu_device = ort.OrtDevice.make("cpu", 0)._get_c_device()
        self.max_source_pieces: int = int(manifest["max_source_pieces"])
        self.max_positions: int = int(manifest["architecture"]["max_positions"])
        self.vocab_size: int = int(manifest["architecture"]["vocab_size"])
        layers = int(manifest["architecture"]["decoder_layers"])
        self.memory_names = memory_names(layers)
        self.past_names = cache_names("past", layers)
        self.present_names = cache_names("present", layers)
        past_type = next(i.type for i in sessions["decoder"].get_inputs() if i.name == self.past_names[0])
        self.float_type = _FLOAT_TYPES[past_type]
        k_input = next(i for i in sessions["decoder"].get_inputs() if i.name == "k")
        self.k_shape: tuple[int, ...] = (1,) if len(k_input.shape) == 1 else ()
        """How the decoders take ``k``: a 1-element vector, or a scalar in bundles exported before 2026-11-26
        (training/export/trace.py ``k_on_the_host``)."""
        specials = manifest["special_ids"]
        self.pad_id, self.bos_id, self.eos_id = specials["pad"], specials["bos"], specials["eos"]
        self.threads, self.providers = 0, [self.provider]
        self.spinning: bool | str = False
        self.static_step = False
        """Running sets keep fixed-shape state (inference/static_state.py) instead of ``DeviceState``."""
        self.masked_step = False
        """Running sets keep caches that never move and step with the set's masked step (inference/clock_state.py,
        core/graphs.py ``MASKED_STEP``) instead of ``DeviceState``."""
        self.cuda_graph = False
        """Static steps are captured and replayed as CUDA graphs (static_step on CUDA)."""
        self.static_decoder_path: Path | None = None
        self.static_lean_path: Path | None = None
        """The set's static step without attention rows (core/graphs.py ``STATIC_LEAN``), when static running sets
        replay it for the steps nobody asked rows for (``lean_step``)."""
        self.static_packed = False
        """The static decoder takes its step inputs as one vector and returns its top-k as one tensor
        (core/graphs.py ``PACKED_STEP_IDS``; exports since session 25)."""
        self.static_key_layout: np.ndarray | None = None
        """A static step with ``DecoderMaskedMultiHeadAttention`` (``export --static-attention decoder-masked``): the
        array bound as its ``KEY_LAYOUT`` input, whose shape is the layout of the key caches on this provider
        (``key_layout``); None for the default static step."""
        self.static_grow_keys = False
        """The set's ``grow`` takes the keys' own view (core/graphs.py ``GROW_KEY_SPLIT``: exports since session 46)."""
        self.static_windows: list[str] = []
        """The static step's window outputs (core/graphs.py ``WINDOW``: decoder-masked exports since session 46), each
        bound to the buffer of its layer's present; none for other static steps."""
        self.encoder_path: Path | None = None
        self.static_encoder = False
        """Static admissions run the encoder in fixed-size buckets whose runs are captured as CUDA graphs
        (inference/static_state.py ``EncoderBucket``): on CUDA with graph capture, for GPU sets whose encoder keeps
        the padding (``variants.cuda.encoder: padded``; a packed encoder's NonZero has no fixed shape)."""
        self.static_pool = BufferPool(self)
        self.static_warm = 0
        """Most sentences of the running sets whose static buckets ``warmup`` opens (and on CUDA captures) before
        the first request (inference/static_state.py ``warm``); 0: none."""
        self.decode_threads: ThreadPoolExecutor | None = None
        """With static steps or on CUDA, the threads that decode (a scheduler's workers, a batcher's batches,
        ``warmup``): onnxruntime keeps captured CUDA graphs per thread, so the threads that captured them must be the
        ones that replay them, and its CUDA provider gives each thread a context of its own (cuBLAS and cuDNN
        handles), made on the thread's first run. An executor's threads outlive their tasks (a scheduler's worker
        ends after a second idle, its thread, graphs and context stay); they end with the engine."""
        self.cohorts = 1
        """Most cohorts a running set keeps (RunningSet)."""
        self.lanes = 1
        """Running sets ``translate`` splits a batch into, each stepped by a thread of its own on decoder sessions of
        its own (``load(lanes=...)``); 1: one set, every thread sharing the sessions."""
        self.lane_threads: ThreadPoolExecutor | None = None
        """The threads of lanes 2 and up (the caller's thread steps the first); they end with the engine."""
        self.lane_sentences = LANE_SENTENCES
        """The fewest sentences a lane takes (tests lower it)."""
        self._lane_of = threading.local()
        self._lane_count = 0
        self._lane_lock = threading.Lock()
        self.lane_specs: dict[str, tuple[Path, ort.SessionOptions, list[Any]]] = {}
        """With lanes, the decoder steps' graphs (role -> file, options, providers), which each lane but the first
        opens a session of its own of (``session_of``)."""
        self.lane_sessions: dict[tuple[str, int], Any] = {}
        """Those sessions (raw), by role and lane."""
        self.shortlist: Shortlist | None = None
        """With ``load(shortlist=True)``: the bundle's vocabulary shortlist, which the running sets' steps use."""
        self.lexicon: Lexicon | None = None
        """The bundle's lexicon (its shortlist's table), which weighs the word alignments; None without one."""
        self.lexical_boost = LEXICAL_BOOST
        """How much (inference/alignment.py); 0 aligns by the attention alone."""
        self.shortlist_most = SHORTLIST_MOST
        """A running set whose sentences' lists together hold more than this share of the vocabulary decodes with the
        whole vocabulary: the shortlisted step, whose projection onnxruntime cannot pre-pack, costs more there."""

    @classmethod
    def load(
        cls,
        bundle_dir: str | Path,
        *,
        provider: str = "auto",
        threads: int = 0,
        spinning: bool | str = False,
        shared_pool: bool = False,
        graphs: str = "auto",
        static_step: bool = False,
        cuda_graph: bool = True,
        cohorts: int | None = None,
        static_warm: int = 0,
        shortlist: bool = False,
        lean_step: bool | None = None,
        masked_step: bool = False,
        lanes: int = 1,
    ) -> Engine:
        """Verify the bundle (manifest, sha256 of every file) and open its graphs; BundleError if bad.

        ``graphs`` picks the set: ``auto`` takes the bundle's ``cuda`` variant (fp16 or fp32 graphs) when the
        engine runs on CUDA and the bundle has one, else the main graphs (int8 for the CPU in the shipped
        model); ``main`` or a variant's name forces one.

        ``threads`` sets onnxruntime's intra-op threads (0: its default, one per physical core).
        ``spinning`` lets idle intra-op threads busy-wait for work: a little lower latency on a machine
        of its own, much slower when the cores are shared (measured in docs/bundle.md). ``"decoder"``: only the
        decoder steps' pools spin, the graph run dozens of times a sentence, which one thread calls back to back with
        the search's work between the calls; the other graphs' pools sleep, so no two pools of the engine spin at
        once (1.16-1.25x a pool of each on 2 cores: docs/inference-core.md, "Only the step's pool spins"). For one
        engine decoding in one thread (evaluation, back-translation, a script), not for a server running several.
        ``shared_pool`` makes this process's sessions share one pool of ``threads`` threads instead
        (inference/threads.py: faster, most at small batches, but process-wide and final; the server's
        ``MT_SHARED_POOL``).

        ``static_step`` decodes with fixed-shape state (inference/static_state.py; the graph set must have the
        static graphs: ``export --static-step``); on CUDA each step is then captured once and replayed as a
        CUDA graph, unless ``cuda_graph`` is False. ``static_warm``: ``warmup`` also opens the static buckets of
        running sets up to this many sentences (``Engine.static_warm``).

        ``cohorts`` caps the cohorts of a running set (RunningSet); None: ``COHORTS_CPU`` on the CPU with the
        dynamic state, 1 on CUDA and with static steps, where a graph call costs more than padding does.

        ``shortlist`` scores only the target pieces each sentence may plausibly produce (the bundle's table, written
        by ``python -m training shortlist``; inference/shortlist.py): faster on the CPU, an approximation, measured by
        ``python -m bench shortlist``. Used with the main graphs on the CPU and the dynamic state; elsewhere it is
        ignored with a warning (on a GPU the output projection is not what a step waits for).

        ``masked_step``: running sets keep their self-attention caches in place and step with the set's
        ``decoder_masked`` graph (``export --masked-step``; inference/clock_state.py): each step writes one column
        and reads each hypothesis' past through a beam index instead of gathering the caches. Not with
        ``static_step`` or ``shortlist``.

        ``lean_step``: run the graph set's step without attention rows (core/graphs.py ``LEAN_STEP``, in GPU sets
        with fused attention) for the steps no sentence asked rows for. None: on CUDA only; the CPU gained nothing
        from it and its session holds another copy of the decoder's weights (docs/inference-core.md). With
        ``static_step`` the same for the static step (``STATIC_LEAN``): a bucket then opens its full static step
        only when a step of its first asks for rows.

        ``lanes``: ``translate`` splits a batch of at least ``2 * LANE_SENTENCES`` sentences into this many running
        sets (sources dealt by length, so that each set holds long and short ones), each stepped by a thread of its
        own, the first on the caller's: while one set's graphs run (onnxruntime lets go of Python's lock), the host
        searches another's. Each thread that steps is a lane (``lane``; a server's workers too) with decoder
        sessions of its own past the first (``session_of``; with ``static_step`` its own static ones,
        ``BufferPool.session``): a session's runs share one CUDA stream (a static one's a lock too), so sets sharing
        one take turns. Each holds a copy of the decoder's weights; the other graphs are shared (onnxruntime runs a
        session from several threads at once). ``warmup`` runs on every lane's thread. Give each lane its share of
        the cores (``threads``). With int8 graphs a
        sentence's batch mates move its rounding, so lanes change some outputs as batch sizes do (docs/bundle.md,
        "Batch mates"). 1 (the default): one set.
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
        variant = choose_graphs(manifest, graphs, providers[0])
        if static_step and graphs == "auto":  # the set that has the static graphs (the GPU set), on the CPU too
            variant = next(
                (v for v in manifest.get("variants", {}) if "static_decoder" in graph_files(manifest, v)), variant
            )
        files = graph_files(manifest, variant)
        if static_step and not all(role in files for role in STATIC_GRAPHS):
            raise EngineError(
                f"static_step: the {variant or 'main'} graphs of {bundle} lack {', '.join(STATIC_GRAPHS)}; re-export "
                "the bundle with `--gpu-dtype fp16w --static-step`"
            )
        if lanes < 1 or lanes > DECODE_THREADS:
            raise EngineError(f"lanes={lanes} must be 1 to {DECODE_THREADS}")
        if masked_step and (static_step or shortlist):
            raise EngineError("masked_step runs neither with static_step nor with shortlist: choose one")
        if masked_step and MASKED_STEP not in files:
            raise EngineError(
                f"masked_step: the {variant or 'main'} graphs of {bundle} lack {MASKED_STEP}; re-export the bundle "
                "with `--masked-step`"
            )
        if masked_step and providers[0] == "CUDAExecutionProvider":
            check_head_size(manifest, "masked_step", "run without masked_step")
        if spinning not in (False, True, "decoder"):
            raise EngineError(f"spinning={spinning!r}: use False, True or 'decoder'")
        if shared_pool:
            share_pool(threads)
        options = session_options(threads, spinning is True)
        step_options = session_options(threads, bool(spinning))
        sessions = {}
        static_roles = ("place", *(role for role in STATIC_EXTRAS if role in files)) if static_step else ()
        if lean_step is None:
            lean_step = providers[0] == "CUDAExecutionProvider"
        lean = (LEAN_STEP,) if lean_step and LEAN_STEP in files and not static_step else ()  # DeviceState's
        masked = (MASKED_STEP, *((MASKED_MOVE,) if MASKED_MOVE in files else ())) if masked_step else ()
        for role in (*GRAPHS, *static_roles, *lean, *masked):
            chosen = step_options if role in ("decoder", LEAN_STEP, MASKED_STEP) else options
            sessions[role] = _open_session(bundle / files[role], role, chosen, providers, manifest)
        engine = cls(bundle, manifest, tokenizer, sessions)
        engine.graphs = variant or "main"
        engine.masked_step = masked_step
        engine.threads, engine.spinning, engine.providers = threads, spinning, providers
        if static_step:
            engine.static_step = True
            engine.static_decoder_path = bundle / files["static_decoder"]
            if lean_step and STATIC_LEAN in files:
                engine.static_lean_path = bundle / files[STATIC_LEAN]
            listed = manifest["variants"][variant]["graphs"] if variant else manifest["graphs"]
            engine.static_packed = PACKED_STEP_IDS in listed["static_decoder"]["inputs"]
            engine.static_key_layout = check_static_attention(engine, manifest, variant, listed)
            engine.static_grow_keys = GROW_KEY_SPLIT in listed.get("grow", {}).get("inputs", {})
            windows = cache_names(WINDOW, len(engine.past_names) // 2)
            if all(w in listed["static_decoder"]["outputs"] for w in windows):
                engine.static_windows = windows
            engine.encoder_path = bundle / files["encoder"]
            engine.cuda_graph = cuda_graph and engine.provider == "CUDAExecutionProvider"
            if engine.cuda_graph and engine.k_shape == ():
                # Its TopK reads k through a Reshape that CUDA runs on the device, and the copy back to the host
                # makes onnxruntime refuse the capture (training/export/trace.py ``k_on_the_host``).
                log.warning(
                    "%s was exported before 2026-11-26: its static steps run on CUDA without graph capture; "
                    "re-export it (--gpu-dtype fp16w --static-step) to replay them as CUDA graphs",
                    bundle,
                )
                engine.cuda_graph = False
            padded = variant is not None and manifest["variants"][variant].get("encoder") == "padded"
            engine.static_encoder = engine.cuda_graph and padded
            if static_warm < 0:
                raise EngineError(f"static_warm={static_warm} must be 0 (none) or more sentences")
            engine.static_warm = static_warm
        if shortlist:
            _open_shortlist(engine, step_options, providers)
        # the shortlist's table when it is open already, else read from the bundle
        engine.lexicon = Lexicon(engine.shortlist.candidates) if engine.shortlist else Lexicon.load(bundle, manifest)
        if static_step or engine.provider == "CUDAExecutionProvider":
            engine.decode_threads = ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix="mt-decode")
        if lanes > 1:
            engine.lanes, engine.lane_threads = lanes, ThreadPoolExecutor(lanes - 1, thread_name_prefix="mt-lane")
            for role in ("decoder", LEAN_STEP, MASKED_STEP):
                if role in sessions:
                    engine.lane_specs[role] = (bundle / files[role], step_options, providers)
        if cohorts is None:
            cohorts = COHORTS_CPU if engine.provider == "CPUExecutionProvider" and not static_step else 1
        if cohorts < 1:
            raise EngineError(f"cohorts={cohorts} must be at least 1")
        engine.cohorts = cohorts
        if providers[0] != engine.provider:
            log.warning(
                "asked for %s but onnxruntime runs on %s (CUDA/cuDNN libraries missing?)", providers[0], engine.provider
            )
        log.info(
            "loaded bundle %s (%s %s, %s->%s) on %s, %s graphs (%s), %s threads%s%s%s%s",
            bundle,
            manifest["name"],
            manifest["version"],
            manifest["source_language"],
            manifest["target_language"],
            engine.provider,
            engine.graphs,
            engine.graphs_dtype,
            threads or "default",
            " (one pool for the process)" if shared_pool_size() is not None else "",
            (", static-shape steps" + (" replayed as CUDA graphs" if engine.cuda_graph else "")) if static_step else "",
            ", vocabulary shortlist" if engine.shortlist is not None else "",
            ", a lean step for the steps without attention rows"
            if LEAN_STEP in sessions or engine.static_lean_path
            else "",
        )
        return engine

    @property
    def graphs_dtype(self) -> str:
        """What the running graphs compute in: fp32, fp16, int8 or int8-channel."""
        if self.graphs != "main":
            return str(self.manifest["variants"][self.graphs]["dtype"])
        export = self.manifest.get("export", {})
        quantize = export.get("quantize", "none")
        return str(quantize if quantize != "none" else export.get("dtype", "fp32"))

    def run_graph(
        self, role: str, inputs: dict[str, Any], outputs: list[str], cpu: int = 0, bound: dict[str, Any] | None = None
    ) -> list[Any]:
        """Run a graph with IO binding; the first ``cpu`` of ``outputs`` come back to the host, the rest stay on
        the device; ``bound`` outputs are written into the given OrtValues. Values are onnxruntime's pybind
        OrtValues (``.numpy()`` reads one): the public wrappers around them cost ~20 µs a decoder step, 8 % of a
        step at batch 1 on the CPU (docs/bundle.md)."""
        session = self.session_of(role)
        binding = _C.SessionIOBinding(session)
        for name, value in inputs.items():
            if isinstance(value, np.ndarray):
                binding.bind_input(name, value)
            else:
                binding.bind_ortvalue_input(name, value)
        for i, name in enumerate(outputs):
            binding.bind_output(name, self.cpu_device if i < cpu else self.c_device)
        for name, value in (bound or {}).items():
            binding.bind_ortvalue_output(name, value)
        with GATE.shared():  # out of the way of a CUDA graph capture (inference/capture.py)
            session.run_with_iobinding(binding, None)
            values = binding.get_outputs()
        return [values[i] for i in range(len(outputs))]

    def lane(self) -> int:
        """The calling thread's lane: 0 for every thread of an engine with one (``lanes``), which then share every
        session; else a number given on the thread's first call, in turn from 0 to ``lanes - 1``: its decoder steps
        run on that lane's sessions (``session_of``, ``BufferPool.session``), as a session's runs share one CUDA
        stream. Threads past ``lanes`` share a lane (taking turns on its sessions), so that no more than ``lanes``
        copies of the decoder open however many threads call."""
        if self.lanes == 1:
            return 0
        found = getattr(self._lane_of, "number", None)
        if found is None:
            with self._lane_lock:
                found = self._lane_of.number = self._lane_count % self.lanes
                self._lane_count += 1
        return found

    def session_of(self, role: str) -> Any:
        """``role``'s raw session for the calling thread: a decoder step's own to its lane past the first (opened on
        the lane's first step), every other graph's shared."""
        lane = self.lane() if role in self.lane_specs else 0
        if not lane:
            return self.raw_sessions[role]
        found = self.lane_sessions.get((role, lane))
        if found is None:
            path, options, providers = self.lane_specs[role]
            opened = _open_session(path, role, options, providers, self.manifest)._sess
            with self._lane_lock:
                found = self.lane_sessions.setdefault((role, lane), opened)
        return found

    def session_options(self, step: bool = False) -> ort.SessionOptions:
        """Options for another session of this engine: threads and spinning as load() opened the others (``step``: a
        decoder step's, whose pool spins with ``spinning="decoder"`` too)."""
        return session_options(self.threads, self.spinning is True or (step and bool(self.spinning)))

    def tokenize(self, text: str) -> list[int]:
        """Source ids without EOS, of the text as the model reads it (a sentence in capitals folded:
        core/casing.py, its translation then goes back to capitals with ``restored``); [] for empty text; unknown
        characters become the unk id."""
        return self.tokenizer.encode_source(self.casing.fold(text))

    def unknown_spans(self, text: str) -> list[tuple[int, int]]:
        """Runs of characters the source vocabulary lacks (``Tokenizer.unknown_spans``), which the server keeps as
        literals (core/protect.py)."""
        return self.tokenizer.unknown_spans(text)

    def running_set(self) -> RunningSet:
        """An empty running set on this engine, for a scheduler to drive."""
        return RunningSet(self)

    def translate(self, texts: list[str], options: DecodeOptions) -> list[Translation]:
        """One Translation per text, in order; the texts are decoded together."""
        return self._translate([str(t) for t in texts], options)

    def translate_ids(self, batch: list[list[int]], options: DecodeOptions) -> list[Translation]:
        """One Translation per source (ids without EOS), in order; the batch is decoded together."""
        return self._translate([list(ids) for ids in batch], options)

    def sample_ids(
        self, batch: list[list[int]], options: DecodeOptions, rng: np.random.Generator, top_k: int = 0
    ) -> list[str]:
        """One text per source (ids without EOS) drawn from the model (inference/sampling.py) instead of searched;
        sources are cut like translate's, ``options`` gives the length caps, and an empty source gives ""."""
        cut = [list(ids[: self.max_source_pieces]) for ids in batch]
        for i, ids in enumerate(cut):
            self.check_ids(ids, i)
        kept = [i for i, ids in enumerate(cut) if ids]
        drawn = sample(
            DeviceState(self),
            [cut[i] for i in kept],
            [self.search_options(options, len(cut[i])).max_len for i in kept],
            vocab_size=self.vocab_size,
            bos_id=self.bos_id,
            eos_id=self.eos_id,
            rng=rng,
            top_k=top_k,
        )
        texts = [""] * len(batch)
        for i, out in zip(kept, drawn, strict=True):
            tokens = out.tokens[:-1] if out.tokens and out.tokens[-1] == self.eos_id else out.tokens
            texts[i] = self.tokenizer.decode(tokens)
        return texts

    def _translate(self, sources: list[str | list[int]], options: DecodeOptions) -> list[Translation]:
        lanes = min(self.lanes, len(sources) // self.lane_sentences)
        if lanes <= 1 or self.lane_threads is None:
            results = self._decode(list(enumerate(sources)), options)
            return [results[i] for i in range(len(sources))]
        _check_options(options)  # what one set's admission refuses, refused before any lane decodes
        for i, source in enumerate(sources):
            if not isinstance(source, str):
                self.check_ids(source, i)
        by_length = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        groups = [[(i, sources[i]) for i in by_length[lane::lanes]] for lane in range(lanes)]
        futures = [self.lane_threads.submit(self._decode, group, options) for group in groups[1:]]
        try:
            results = self._decode(groups[0], options)
        finally:  # the other lanes finish (or fail) before this returns or raises: none decodes on, unread
            wait(futures)
        for future in futures:
            results.update(future.result())
        return [results[i] for i in range(len(sources))]

    def _decode(self, items: list[tuple[int, str | list[int]]], options: DecodeOptions) -> dict[Hashable, Translation]:
        """``items`` (key, source) decoded together as one running set, on the calling thread."""
        running = self.running_set()
        running.admit((key, source, options) for key, source in items)
        results: dict[Hashable, Translation] = {}
        while running:
            results.update(running.step())
        return results

    def warmup(self) -> None:
        """Run every graph once (sentences admitted mid-run, beam 2, attention on, then off: the lean step) so the
        first request is fast; with static steps, on a decoding thread, and open the buckets of ``static_warm``
        first: with lanes, every lane's, each on a decoding thread of its own (``_warm_lanes``)."""
        if self.decode_threads is not None and self.lanes > 1:
            self._warm_lanes()
        elif self.decode_threads is not None:
            self.decode_threads.submit(self._warmup).result()
        else:
            self._warmup()

    def _warm_lanes(self) -> None:
        """With lanes each thread that steps has decoder sessions of its own (``lane``): the warm-up on ``lanes``
        decoding threads at once, all started before any warms (so that they are distinct threads: the pool's, which
        a server's running sets then take), each opening its lane's sessions and, with ``static_warm``, its buckets
        with buffers of its own (held until it is done), so that as many sets stepping at once find a bucket's
        buffers bound for their lane (``BufferPool.acquire``); captures take the device one at a time
        (inference/capture.py). Each lane fills up to ``WARM_BYTES`` of buffers."""
        assert self.decode_threads is not None
        started = threading.Barrier(self.lanes)

        def one() -> None:
            started.wait(timeout=60)
            self._warmup()

        try:
            for future in [self.decode_threads.submit(one) for _ in range(self.lanes)]:
                future.result()
        except threading.BrokenBarrierError:  # the others then warmed nothing: one warm-up, the rest on first use
            log.warning("lanes: the decoding threads did not all start; some lanes open their sessions on first use")
            self.decode_threads.submit(self._warmup).result()

    def _warmup(self) -> None:
        if self.static_warm:
            self._warm_static()
        token = min(4, self.vocab_size - 1)
        options = DecodeOptions(beam_size=2, max_length=4, max_length_ratio=1.0, return_attention=True)
        running = self.running_set()
        running.admit([(0, [token] * 3, options), (1, [token] * 5, options)])
        running.step()
        running.step()
        running.admit([(2, [token] * 7, replace(options, return_attention=False))])  # merge
        running.drop([0, 1])  # select; the next step trims the cache columns of 0 and 1
        while running:
            running.step()

    def _warm_static(self) -> None:
        """Open the static buckets of ``static_warm`` (inference/static_state.py ``warm``); a failure is logged, not
        raised: the buckets then open on first use, and the warm-up translation still checks every graph."""
        started = time.monotonic()
        try:
            done = warm(self, self.static_warm)
        except Exception as err:  # onnxruntime's own types
            log.warning(
                "static steps: opening the buckets of up to %d sentences at load failed (%s: %s); they open on first "
                "use",
                self.static_warm,
                type(err).__name__,
                err,
            )
            return
        log.info(
            "static steps: opened %d buckets of up to %d sentences (%d MiB of buffers, %d step graphs, %d encoder "
            "buckets and %d encoder bindings into buffers%s) in %.1f s; %d larger ones open on first use",
            done.buckets,
            self.static_warm,
            done.nbytes >> 20,
            done.bindings,
            done.encoders,
            done.into,
            ", captured as CUDA graphs" if self.cuda_graph else "",
            time.monotonic() - started,
            done.skipped,
        )

    def source_batch(self, sources: list[list[int]]) -> np.ndarray:
        """The encoder's ``src_ids`` for these sources (ids without EOS): EOS appended, padded to the longest."""
        src = np.full((len(sources), max(map(len, sources)) + 1), self.pad_id, dtype=np.int64)
        for row, ids in enumerate(sources):
            src[row, : len(ids) + 1] = [*ids, self.eos_id]
        return src

    def search_options(self, options: DecodeOptions, source_len: int) -> SearchOptions:
        return SearchOptions(
            beam_size=options.beam_size,
            length_penalty=options.length_penalty,
            n_best=options.n_best,
            max_len=options.max_steps(source_len, self.max_positions),
            no_repeat_ngram=options.no_repeat_ngram_size,
            with_attention=options.return_attention,
        )

    def translation(
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
                    pieces=self.tokenizer.to_pieces(tokens),
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
            links = self.lexicon.links(ids, best.token_ids) if self.lexicon is not None else None
            alignment = word_alignment(pieces, best.pieces, best.attention, links, self.lexical_boost)
        return Translation(pieces, hypotheses, alignment, truncated_source=truncated)

    def check_ids(self, ids: list[int], source: Hashable) -> None:
        for position, token in enumerate(ids):
            if not isinstance(token, (int, np.integer)) or not 0 <= token < self.vocab_size:
                raise ValueError(
                    f"source {source}, position {position}: id {token!r} is outside the "
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


def _open_shortlist(engine: Engine, options: ort.SessionOptions, providers: list[str]) -> None:
    """Open the bundle's vocabulary shortlist for ``load(shortlist=True)``, where it applies."""
    bundle, manifest = engine.bundle_dir, engine.manifest
    if "shortlist" not in manifest:
        raise EngineError(
            f"shortlist: {bundle} has no vocabulary shortlist; add one with `python -m training shortlist "
            f"{bundle} --data TRAIN.tsv` (docs/bundle.md), or leave MT_SHORTLIST off"
        )
    if engine.provider != "CPUExecutionProvider" or engine.graphs != "main" or engine.static_step:
        log.warning(
            "shortlist: used with the main graphs on the CPU only; %s decodes with the whole vocabulary", bundle
        )
        return
    path = bundle / manifest["shortlist"]["graph"]
    session = _open_session(path, "decoder", options, providers, manifest)  # the decoder's tensors, and:
    if not set(SHORTLIST_INPUTS) <= {i.name for i in session.get_inputs()}:
        raise BundleError(
            f"{path} lacks the inputs {list(SHORTLIST_INPUTS)} (an older export's step took a bool `allowed`); add "
            f"the shortlist again: python -m training shortlist {bundle} --data TRAIN.tsv"
        )
    engine.sessions["decoder_shortlist"] = session
    engine.raw_sessions["decoder_shortlist"] = session._sess
    engine.shortlist = Shortlist.load(bundle, manifest)


def key_layout(provider: str, float_type: Any, d_head: int) -> tuple[int, int]:
    """How ``DecoderMaskedMultiHeadAttention`` on ``provider`` keeps its key caches, each (rows, heads, columns,
    d_head) seen as (rows, heads, a, columns, b): (a, b) (core/graphs.py ``KEY_LAYOUT``). onnxruntime's CUDA kernel
    keeps them as (d_head / x, x), ``x`` values in 16 bytes; its CPU kernel plain, (1, d_head)."""
    if provider == "CUDAExecutionProvider":
        x = 16 // np.dtype(float_type).itemsize
        return d_head // x, x
    return 1, d_head


DECODER_MASKED_HEAD_SIZES = (32, 64, 128)
"""The head sizes onnxruntime's CUDA ``DecoderMaskedMultiHeadAttention`` takes (its kernels are built for these)."""


def check_head_size(manifest: dict[str, Any], what: str, instead: str) -> None:
    """EngineError where ``what``, a step built on ``DecoderMaskedMultiHeadAttention``, would run on CUDA with heads
    its kernel does not take: onnxruntime would otherwise fail the first step."""
    d_head = int(manifest["architecture"]["d_head"])
    if d_head not in DECODER_MASKED_HEAD_SIZES:
        raise EngineError(
            f"{what} on CUDA needs heads of {', '.join(map(str, DECODER_MASKED_HEAD_SIZES))} values (onnxruntime's "
            f"DecoderMaskedMultiHeadAttention); this model's are {d_head}: {instead}"
        )


def check_static_attention(
    engine: Engine, manifest: dict[str, Any], variant: str | None, listed: dict[str, Any]
) -> np.ndarray | None:
    """For a static step that attends with ``DecoderMaskedMultiHeadAttention`` (``export --static-attention
    decoder-masked``), the array to bind as its ``KEY_LAYOUT`` input (``key_layout``); None for the default static
    step. EngineError where it cannot decode right: an export of session 45 (no ``KEY_LAYOUT`` input: its window's
    gather moves plain keys, which CUDA's kernel does not read) or one whose ``grow`` lacks ``GROW_KEY_SPLIT`` (or is
    missing: the host's copy moves plain keys) on CUDA, and head sizes CUDA's kernel does not take."""
    graph_set = manifest.get("variants", {}).get(variant, {}) if variant else manifest
    if graph_set.get("static_attention") != "decoder-masked":
        return None
    d_head = int(manifest["architecture"]["d_head"])
    layout = key_layout(engine.provider, engine.float_type, d_head)
    if engine.provider == "CUDAExecutionProvider":
        grow = listed.get("grow", {}).get("inputs", {})
        if KEY_LAYOUT not in listed["static_decoder"]["inputs"] or GROW_KEY_SPLIT not in grow:
            raise EngineError(
                "this bundle's static steps were exported with --static-attention decoder-masked before its key "
                "caches followed CUDA's layout (session 46): re-export it, or with --static-attention multihead"
            )
        check_head_size(manifest, "--static-attention decoder-masked", "re-export with --static-attention multihead")
    if KEY_LAYOUT not in listed["static_decoder"]["inputs"]:
        return None  # session 45's export: plain keys, which the CPU's kernel reads
    return np.zeros(layout, dtype=np.uint8)


def _open_session(
    path: Path, role: str, options: ort.SessionOptions, providers: list[str], manifest: dict[str, Any]
) -> ort.InferenceSession:
    """A session of one of the bundle's graphs, checked to have ``role``'s tensors; BundleError if it cannot be."""
    try:
        with GATE.shared():  # the weights' upload would break another engine's graph capture
            session = ort.InferenceSession(str(path), options, providers=providers)
    except Exception as err:  # onnxruntime's own exception types
        raise BundleError(f"{path} cannot be loaded by onnxruntime {ort.__version__}: {err}") from err
    _check_names(path, role, session, int(manifest["architecture"]["decoder_layers"]))
    return session


def _check_names(path: Path, role: str, session: ort.InferenceSession, layers: int) -> None:
    inputs = {i.name for i in session.get_inputs()}
    outputs = {o.name for o in session.get_outputs()}
    spec = graph_spec(role, layers)
    missing = [n for n in spec.input_names if n not in inputs]
    missing += [n for n in spec.output_names if n not in outputs]
    if missing:
        raise BundleError(
            f"{path} lacks the tensors {missing} that the engine needs; it was exported "
            "for another engine version: re-export the bundle"
        )
