"""The model slot: loads an engine beside the one being served, warms it up, swaps it in atomically.

Requests read ``slot.current`` once and keep that model to the end; a reload replaces the reference,
never the object, so in-flight work finishes on the model it started with and the old engine is
freed after it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from core.bundle import BundleError, read_manifest
from core.translation import DecodeOptions, Translation
from service.batcher import BatchEngine
from service.metrics import Metrics
from service.scheduler import RunningSet
from service.schemas import ModelRef

log = logging.getLogger(__name__)


class Engine(BatchEngine, Protocol):
    """What the service needs of an engine (inference.engine.Engine, or a fake one in tests)."""

    @property
    def manifest(self) -> dict[str, Any]: ...

    @property
    def provider(self) -> str: ...

    @property
    def max_source_pieces(self) -> int: ...

    def tokenize(self, text: str) -> list[int]: ...

    def unknown_spans(self, text: str) -> list[tuple[int, int]]: ...

    def translate_ids(self, batch: list[list[int]], options: DecodeOptions) -> list[Translation]: ...

    def running_set(self) -> RunningSet: ...

    def warmup(self) -> None: ...


class EngineLoader(Protocol):
    def __call__(self, bundle: Path, *, provider: str, threads: int) -> Engine: ...


def load_engine(
    bundle: Path,
    *,
    provider: str,
    threads: int,
    static_step: bool = False,
    masked_step: bool = False,
    static_warm: int = 0,
    shared_pool: bool = False,
    shortlist: bool = False,
    cohorts: int = 0,
    graphs: str = "auto",
    lanes: int = 1,
) -> Engine:
    """The real engine (onnxruntime), imported only when a real bundle is loaded; ``cohorts`` 0: the engine's
    default; ``graphs``: which of the bundle's graph sets (``Engine.load``); ``static_warm``: with ``static_step``,
    the largest running sets whose buckets the warm-up opens; ``shortlist``: the bundle's vocabulary shortlist where
    it has one (a warning where it has none); ``lanes``: static sessions per decoding thread (``Engine.load``)."""
    from inference.engine import Engine as OnnxEngine

    if shortlist and "shortlist" not in read_manifest(bundle, verify=False):
        log.warning(
            "MT_SHORTLIST: %s has no vocabulary shortlist (add one: python -m training shortlist %s --data TRAIN.tsv); "
            "it decodes with the whole vocabulary",
            bundle,
            bundle,
        )
        shortlist = False

    return OnnxEngine.load(
        bundle,
        provider=provider,
        threads=threads,
        static_step=static_step,
        masked_step=masked_step,
        static_warm=static_warm if static_step else 0,
        shared_pool=shared_pool,
        shortlist=shortlist,
        cohorts=cohorts or None,
        graphs=graphs,
        lanes=lanes,
    )


@dataclass(frozen=True)
class LoadedModel:
    engine: Engine
    bundle: Path
    loaded_at: float
    """Unix time the model went live."""
    load_seconds: float
    """Loading, checksum verification and warm-up."""

    @property
    def name(self) -> str:
        return str(self.engine.manifest.get("name", "unknown"))

    @property
    def version(self) -> str:
        return str(self.engine.manifest.get("version", "unknown"))

    @property
    def source_language(self) -> str:
        return str(self.engine.manifest.get("source_language", "en"))

    @property
    def target_language(self) -> str:
        return str(self.engine.manifest.get("target_language", "de"))


def model_ref(model: LoadedModel) -> ModelRef:
    manifest = model.engine.manifest
    return ModelRef(
        name=model.name,
        version=model.version,
        source_lang=manifest.get("source_language"),
        target_lang=manifest.get("target_language"),
    )


class LoadFailed(Exception):
    """A bundle could not be loaded or warmed up; the model being served (if any) stays."""

    def __init__(self, bundle: Path, reason: str, bad_bundle: bool):
        super().__init__(f"could not load bundle {str(bundle)!r}: {reason}")
        self.bundle = bundle
        self.reason = reason
        self.bad_bundle = bad_bundle
        """True when the bundle is at fault (missing, corrupt, mismatched), not the server."""


class LoadInProgress(Exception):
    def __init__(self) -> None:
        super().__init__("another model load is in progress; retry when it is done")


class ModelSlot:
    """One model of the server: the engine serving it now, and its loads and reloads."""

    def __init__(self, loader: EngineLoader, provider: str, threads: int, metrics: Metrics, *, name: str, bundle: Path):
        self.name = name
        """What requests call it by (``model``), its metrics' ``model`` label; the manifest's name."""
        self.bundle = bundle
        """The configured bundle: what a reload without a bundle and SIGHUP load again."""
        self._loader = loader
        self._provider = provider
        self._threads = threads
        self._metrics = metrics
        self._lock = asyncio.Lock()
        self.current: LoadedModel | None = None
        self.loading = False
        self.error: str | None = None
        """Why the last load failed, until one succeeds."""
        self.draining = False
        """Set when the server is shutting down: not ready for new work."""

    async def load(self, bundle: Path | None = None) -> LoadedModel:
        """Load and warm up ``bundle`` (default: the configured one) off the event loop, then make it current
        (or LoadFailed). A bundle with another model's name than this slot's is refused: the name is how
        requests and metrics find the model."""
        bundle = bundle or self.bundle
        if self._lock.locked():
            raise LoadInProgress()
        async with self._lock:
            self.loading = True
            try:
                model = await asyncio.to_thread(self._load_and_warm, bundle)
                if model.name != self.name:
                    raise LoadFailed(
                        bundle,
                        f"it holds model {model.name!r}, this slot serves {self.name!r}: a reload replaces a model "
                        "by another version of itself (export it with --name "
                        f"{self.name}, or serve it beside this one in MT_BUNDLES)",
                        True,
                    )
            except LoadFailed as err:
                self.error = err.reason
                if self.current is not None:
                    self._metrics.reloads.labels(self.name, "failure").inc()
                raise
            finally:
                self.loading = False
            previous, self.current, self.error = self.current, model, None
            if previous is not None:
                self._metrics.reloads.labels(self.name, "success").inc()
            self._metrics.set_model(model.name, model.version, model.engine.provider)
            log.info(
                "serving model %s %s from %s (%s, loaded in %.1f s)%s",
                model.name,
                model.version,
                bundle,
                model.engine.provider,
                model.load_seconds,
                f"; replaced {previous.name} {previous.version}" if previous else "",
            )
            return model

    def _load_and_warm(self, bundle: Path) -> LoadedModel:
        started = time.monotonic()
        if not bundle.is_dir():
            raise LoadFailed(bundle, "not a directory; point MT_BUNDLE (or --bundle) at a model bundle", True)
        try:
            engine = self._loader(bundle, provider=self._provider, threads=self._threads)
        except LoadFailed:  # said as it should be (service/engine_process.py: the engine process's reason)
            raise
        except BundleError as err:
            raise LoadFailed(bundle, str(err), True) from err
        except Exception as err:
            log.exception("loading %s failed", bundle)
            raise LoadFailed(bundle, f"{type(err).__name__}: {err}", False) from err
        try:
            engine.warmup()
        except Exception as err:
            log.exception("warm-up of %s failed", bundle)
            raise LoadFailed(bundle, f"warm-up translation failed: {type(err).__name__}: {err}", False) from err
        return LoadedModel(engine, bundle, time.time(), time.monotonic() - started)
