"""The models one server holds: a slot per bundle, found by name or by language pair.

Which bundles: ``MT_BUNDLES`` (comma-separated; each entry a bundle directory, or a directory whose
sub-directories are bundles), else ``MT_BUNDLE`` when it is set, else the default ``models/en-de`` together
with ``models/de-en`` where that exists. Each bundle's manifest names the model and its languages; they are
read when the server starts, so that requests are routed (and refused clearly) while the engines still load.

A request names a ``model``, or ``source_lang``/``target_lang`` (ISO 639-1), or neither (the first model).
Where two models serve the same pair, the first one listed serves it and the other is reached by name.
Every slot loads, reloads and fails on its own (service/loader.py); batches never mix models because the
schedulers group sentences by engine.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from core.bundle import MANIFEST_FILE
from service.detection import Detection, detector_for
from service.errors import ApiError
from service.loader import EngineLoader, LoadedModel, ModelSlot
from service.metrics import Metrics
from service.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_BUNDLES = (Path("models/en-de"), Path("models/de-en"))
"""Served when no bundle is configured: the first always, the others where they exist."""


class ConfigurationError(Exception):
    """The configured bundles cannot be served together (the server does not start)."""


def bundle_paths(settings: Settings) -> list[Path]:
    """The bundle directories to serve, in order (the first is the default model)."""
    if settings.bundles:
        paths: list[Path] = []
        for entry in settings.bundles:
            if entry.is_dir() and not (entry / MANIFEST_FILE).is_file():
                inside = sorted(p for p in entry.iterdir() if (p / MANIFEST_FILE).is_file())
                if not inside:
                    raise ConfigurationError(
                        f"MT_BUNDLES entry {str(entry)!r} is neither a bundle nor a directory of bundles"
                    )
                paths.extend(inside)
            else:
                paths.append(entry)  # a missing bundle fails its first load, with the loader's message
        return paths
    if "bundle" in settings.model_fields_set or settings.bundle != DEFAULT_BUNDLES[0]:
        return [settings.bundle]
    return [DEFAULT_BUNDLES[0], *(p for p in DEFAULT_BUNDLES[1:] if (p / MANIFEST_FILE).is_file())]


@dataclass(frozen=True)
class Pair:
    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.source}\u2192{self.target}"


def _declared(bundle: Path) -> tuple[str, Pair | None]:
    """Name and languages from the manifest, before any engine loads (the directory name if unreadable)."""
    try:
        manifest = json.loads((bundle / MANIFEST_FILE).read_text(encoding="utf-8"))
        name = str(manifest.get("name") or bundle.name)
        source, target = manifest.get("source_language"), manifest.get("target_language")
        return name, Pair(str(source), str(target)) if source and target else None
    except (OSError, ValueError, AttributeError):
        return bundle.name, None


class Models:
    """Every model the server holds, by name, in the configured order."""

    def __init__(self, bundles: list[Path], loader: EngineLoader, provider: str, threads: int, metrics: Metrics):
        if not bundles:
            raise ConfigurationError("no bundle to serve")
        self.slots: list[ModelSlot] = []
        self._declared: dict[int, Pair | None] = {}
        for bundle in bundles:
            name, pair = _declared(bundle)
            clash = next((s for s in self.slots if s.name == name), None)
            if clash is not None:
                raise ConfigurationError(
                    f"bundles {str(clash.bundle)!r} and {str(bundle)!r} are both named {name!r}: give each model "
                    "a name of its own (python -m training export --name)"
                )
            slot = ModelSlot(loader, provider, threads, metrics, name=name, bundle=bundle)
            self._declared[id(slot)] = pair
            self.slots.append(slot)
        self._draining = False

    @property
    def default(self) -> ModelSlot:
        return self.slots[0]

    @property
    def draining(self) -> bool:
        return self._draining

    @draining.setter
    def draining(self, value: bool) -> None:
        self._draining = value
        for slot in self.slots:
            slot.draining = value

    def pair_of(self, slot: ModelSlot) -> Pair | None:
        """The slot's languages: the loaded model's, else what its manifest declared at start."""
        if slot.current is not None:
            manifest = slot.current.engine.manifest
            source, target = manifest.get("source_language"), manifest.get("target_language")
            return Pair(str(source), str(target)) if source and target else None
        return self._declared[id(slot)]

    def pairs(self) -> list[Pair]:
        """The language pairs served, in the models' order (a model without languages has none)."""
        return [pair for pair in map(self.pair_of, self.slots) if pair is not None]

    def named(self, name: str) -> ModelSlot | None:
        return next((s for s in self.slots if s.name == name), None)

    def served(self) -> str:
        """What this server translates, for error messages: 'en→de (en-de-small), de→en (de-en-small)'."""
        return ", ".join(f"{self.pair_of(s) or 'unknown languages'} ({s.name})" for s in self.slots)

    def pick(self, model: str | None = None, source: str | None = None, target: str | None = None) -> ModelSlot:
        """The slot a request asks for (ApiError 400/404 naming what is served when none fits)."""
        if model is not None:
            slot = self.named(model)
            if slot is None:
                names = ", ".join(repr(s.name) for s in self.slots)
                raise ApiError(404, "unknown_model", f"no model named {model!r}; this server serves {names}")
            pair = self.pair_of(slot)
            for side, wanted in (("source", source), ("target", target)):
                have = getattr(pair, side) if pair else None
                if wanted is not None and have is not None and wanted != have:
                    raise ApiError(
                        400,
                        "unsupported_language_pair",
                        f"model {model!r} translates {pair}, not with {side}_lang {wanted!r}",
                    )
            return slot
        if source is None and target is None:
            return self.default
        for slot in self.slots:
            pair = self.pair_of(slot)
            if pair and source in (None, pair.source) and target in (None, pair.target):
                return slot
        asked = f"{source or 'any'}\u2192{target or 'any'}"
        raise ApiError(
            400,
            "unsupported_language_pair",
            f"no model translates {asked}; this server translates {self.served()}",
        )

    def current(self, slot: ModelSlot) -> LoadedModel:
        """The slot's model serving new requests, or 503 while it has none ready.

        While the server drains (SIGTERM) a request it has already received is still served: only
        /readyz turns 503, and the listening socket is closed, so no new ones arrive.
        """
        model = slot.current
        if model is None:
            if self.draining:
                raise ApiError(503, "shutting_down", "the server is shutting down", {"Retry-After": "1"})
            reason = f"loading failed: {slot.error}" if slot.error else "the model is still loading"
            raise ApiError(503, "not_ready", f"model {slot.name!r} not ready: {reason}", {"Retry-After": "5"})
        return model

    def languages(self) -> tuple[str, ...]:
        """Every language served, as a source or a target."""
        pairs = self.pairs()
        return tuple(sorted({p.source for p in pairs} | {p.target for p in pairs}))

    async def detect(self, text: str) -> list[Detection]:
        """The languages ``text`` may be in, among those served, most likely first (service/detection.py)."""
        return await asyncio.to_thread(lambda: detector_for(self.languages()).detect(text))

    async def detect_each(self, texts: list[str]) -> list[list[Detection]]:
        """``detect`` for each text, in one trip to a worker thread (a page's text nodes are many short texts)."""
        detector = detector_for(self.languages())
        return await asyncio.to_thread(lambda: [detector.detect(text) for text in texts])

    def ready(self) -> bool:
        return not self.draining and all(s.current is not None for s in self.slots)
