"""The FastAPI application: ``create_app`` wires settings, models, batcher, metrics, routes."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
import re
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from inference.glossary import Glossary, GlossaryError, read_glossaries
from inference.threads import usable_cpus
from service.batcher import Batcher, BatchLimits
from service.cache import TranslationCache
from service.deps import ServiceState
from service.document_store import DocumentStore
from service.engine_process import EngineProcess, bundle_front
from service.errors import ERROR_CODES, install_error_handlers
from service.keys import Keys, KeysError
from service.loader import EngineLoader, LoadFailed, load_engine
from service.metrics import Metrics
from service.middleware import RequestContext, Shed
from service.models import ConfigurationError, Models, bundle_paths
from service.routes import admin, aws, deepl, google, google_v3, health, libretranslate, microsoft, translate
from service.scheduler import Scheduler
from service.settings import CPU_DEFAULTS, GPU_DEFAULTS, Settings

log = logging.getLogger(__name__)

CPU_REFILL_AT = 2
"""A running set on the CPU takes in new sentences while at most this many decode in it (MT_REFILL_AT)."""


def scheduler_kind(settings: Settings) -> str:
    """``MT_SCHEDULER``, with ``auto`` resolved: continuous batching, on a GPU and on the CPU. On the CPU, with
    refilling at two and admitting by length, it served 0.96-1.73x whole batches at 15 load levels with a lower
    p50 at 13 (docs/scheduler.md, "Admitting by length"); ``batch`` keeps whole batches."""
    if settings.scheduler != "auto":
        return settings.scheduler
    return "continuous"


def on_gpu(settings: Settings) -> bool:
    """Whether the engine will run on CUDA (where not, the model load reports why)."""
    from inference.engine import EngineError, choose_providers

    try:
        return choose_providers(settings.provider)[0] == "CUDAExecutionProvider"
    except EngineError:
        return False


def resolve(settings: Settings) -> Settings:
    """``settings`` with every -1 (the provider's default) and an unset ``MT_ENGINE_PROCESS`` replaced by the values
    for where the engine runs; ``MT_THREADS`` 0 and ``MT_REFILL_AT`` -1 are resolved by :func:`engine_threads` and
    :func:`refill_limit`."""
    gpu = on_gpu(settings)
    defaults = GPU_DEFAULTS if gpu else CPU_DEFAULTS
    continuous = scheduler_kind(settings) == "continuous"
    if not continuous:
        defaults = {**defaults, "inflight_batches": CPU_DEFAULTS["inflight_batches"]}
    update: dict[str, object] = {name: value for name, value in defaults.items() if getattr(settings, name) == -1}
    if settings.engine_process is None:  # auto: in a process of its own on a GPU (docs/scheduler.md)
        update["engine_process"] = gpu and continuous
    return settings.model_copy(update=update) if update else settings


def engine_threads(settings: Settings) -> int:
    """``MT_THREADS`` with 0 resolved (of resolved ``settings``). On the CPU: the usable CPUs shared out among the
    batches that decode at once (``MT_INFLIGHT_BATCHES``), at least 1 each, so that they never ask for more
    threads than there are cores; on 2 cores that is 1 thread a batch, which served more than 2 in 14 of 16
    comparisons (docs/scheduler.md, "One thread a batch in flight"). With a shared pool or on a GPU:
    onnxruntime's default."""
    if settings.threads or settings.shared_pool or on_gpu(settings):
        return settings.threads
    return max(1, usable_cpus() // max(1, settings.inflight_batches))


def refill_limit(settings: Settings) -> int | None:
    """``MT_REFILL_AT`` with -1 resolved: 2 on the CPU, no limit on a GPU (docs/scheduler.md)."""
    if settings.refill_at >= 0:
        return settings.refill_at
    return None if on_gpu(settings) else CPU_REFILL_AT


DECODING_PATHS: dict[str | re.Pattern[str], str] = {
    "/translate": "api",
    "/translate/document": "api",
    "/libretranslate/translate": "libretranslate",
    "/libretranslate/translate_file": "libretranslate",
    "/deepl/v2/translate": "deepl",
    "/deepl/v2/document": "deepl",
    "/language/translate/v2": "google",
    "/microsoft/translate": "microsoft",
    "/aws": "aws",
    "/aws/": "aws",
    re.compile(r"/v3/projects/[^/]+(/locations/[^/]+)?:translate(Text|Document)"): "google",
}
"""The routes that queue sentences (a path, or a pattern its whole path matches), and the shape of their errors:
refused early while the queue is full (Shed)."""

STATIC_DIR = Path(__file__).parent / "static"

API_DESCRIPTION = """
Neural machine translation over HTTP.

`POST /translate` with `{"text": "Hello world."}` (or a list of texts) answers
`{"translations": [{"text": "Hallo Welt."}], "model": {"name": ..., "version": ...}}`.
Sentences of concurrent requests are batched together on the server. Errors are JSON
`{"error": code, "message": what to fix, "request_id": ...}`; overload answers 503 with
`Retry-After`.
"""


def _glossaries(path: Path | None, models: Models) -> dict[str, Glossary]:
    """MT_GLOSSARY read and checked at start; a pair no model serves is named in the log, not refused."""
    if path is None:
        return {}
    try:
        glossaries = read_glossaries(path)
    except GlossaryError as err:
        raise ConfigurationError(f"MT_GLOSSARY {err}") from None
    served = {f"{pair.source}-{pair.target}" for pair in models.pairs()}
    for pair, glossary in glossaries.items():
        note = "" if pair in served else " (no model serves that pair)"
        log.info("glossary %s: %d terms from %s%s", pair, len(glossary), path, note)
    return glossaries


def _document_store(directory: Path | None, api: str, kept: int) -> DocumentStore:
    """Where an API keeps its translated documents: MT_DOCUMENT_DIR/<api> when it is set (made if missing)."""
    try:
        return DocumentStore(directory / api if directory is not None else None, kept)
    except OSError as err:
        raise ConfigurationError(f"MT_DOCUMENT_DIR {directory}: {err}") from None


def _deepl_state(directory: Path | None, documents: DocumentStore) -> deepl.DeepLState:
    """The DeepL API's glossaries, read from MT_GLOSSARY_DIR at start; a file there that cannot be used stops the
    server with its name."""
    try:
        state = deepl.DeepLState(directory, documents)
    except (OSError, ValueError, TypeError) as err:
        raise ConfigurationError(f"MT_GLOSSARY_DIR {directory}: {err}") from None
    if directory is not None:
        log.info("DeepL API: %d glossaries in %s", len(state.glossaries), directory)
    return state


def _keys(settings: Settings, metrics: Metrics) -> Keys:
    """MT_API_KEY and MT_API_KEYS, read and checked at start: a bad entry stops the server, named."""
    try:
        single = settings.api_key.get_secret_value() if settings.api_key else None
        keys = Keys.configured(single, settings.api_keys, metrics)
    except KeysError as err:
        raise ConfigurationError(f"MT_API_KEYS {err}") from None
    if keys:
        log.info("API keys: %s", ", ".join(keys.names))
    return keys


def create_app(
    settings: Settings | None = None,
    *,
    engine_loader: EngineLoader = load_engine,
    on_fatal: Callable[[str], None] | None = None,
) -> FastAPI:
    """An app serving the configured bundles (service/models.py); they load in the background (see /readyz).

    ``engine_loader`` builds an engine from a bundle directory (tests pass a fake one).
    ``on_fatal`` is called with the reason if a model's first load fails (``python -m service`` then
    exits non-zero). Bundles that cannot be served together raise ConfigurationError.
    """
    settings = resolve(settings or Settings())
    metrics = Metrics()
    for reason in ERROR_CODES:
        metrics.errors.labels(reason)  # export zeros, so rate() works from the first error on
    real = engine_loader is load_engine
    if real:  # a test's own loader has no such options
        engine_loader = functools.partial(
            load_engine,
            static_step=settings.static_step,
            masked_step=settings.masked_step,
            static_warm=settings.max_batch_sentences if settings.static_warm < 0 else settings.static_warm,
            shared_pool=settings.shared_pool,
            shortlist=settings.shortlist,
            cohorts=settings.cohorts,
            graphs=settings.graphs,
            lanes=settings.lanes,
        )
    threads = engine_threads(settings)
    if threads != settings.threads:
        log.info("onnxruntime threads: %d for each of the %d batches in flight", threads, settings.inflight_batches)
    limits = BatchLimits(
        max_tokens=settings.max_batch_tokens,
        max_sentences=settings.max_batch_sentences,
        max_wait_s=settings.max_wait_ms / 1000,
        max_queue=settings.max_queue,
        inflight=settings.inflight_batches,
        admit_every=settings.admit_every,
        refill_at=refill_limit(settings),
        admit_by_length=settings.admit_by_length,
    )
    kind = scheduler_kind(settings)
    remote = None
    if settings.engine_process:
        if kind != "continuous":
            raise ConfigurationError("MT_ENGINE_PROCESS runs the continuous scheduler, not MT_SCHEDULER=batch")
        # the server process keeps a bundle's manifest and tokenizer; a test's loader makes its fake engine in both
        front = bundle_front if real else engine_loader
        remote = EngineProcess(engine_loader, front, limits, metrics, log_level=settings.log_level, on_death=on_fatal)
        engine_loader = remote.load
    models = Models(bundle_paths(settings), engine_loader, settings.provider, threads, metrics)
    glossaries = _glossaries(settings.glossary, models)
    deepl_state = _deepl_state(
        settings.glossary_dir, _document_store(settings.document_dir, "deepl", 2 * deepl.KEPT_DOCUMENTS)
    )
    keys = _keys(settings, metrics)
    for slot in models.slots:
        metrics.model_ready.labels(slot.name).set(0)
        for result in ("success", "failure"):
            metrics.reloads.labels(slot.name, result)
        for outcome in ("present", "replaced", "unplaced"):
            metrics.glossary_terms.labels(slot.name, outcome)
        for result in ("hit", "miss"):
            metrics.cache_sentences.labels(slot.name, result)
    if kind == "continuous":
        log.info(
            "scheduler: continuous batching (%s)%s, %d running sets of at most %d sentences and %d tokens, refill at "
            "%s, admit by length %s",
            settings.scheduler,
            " in an engine process" if remote else "",
            settings.inflight_batches,
            settings.max_batch_sentences,
            settings.max_batch_tokens,
            "any size" if limits.refill_at is None else limits.refill_at,
            "on" if limits.admit_by_length else "off",
        )
    else:
        log.info(
            "scheduler: whole batches of at most %d sentences and %d tokens, %d in flight",
            settings.max_batch_sentences,
            settings.max_batch_tokens,
            settings.inflight_batches,
        )
    service = ServiceState(
        settings=settings,
        metrics=metrics,
        batcher=remote or (Scheduler(limits, metrics) if kind == "continuous" else Batcher(limits, metrics)),
        models=models,
        glossaries=glossaries,
        keys=keys,
        cache=TranslationCache(int(settings.cache_mb * 2**20)) if settings.cache_mb > 0 else None,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.batcher.start()
        background: set[asyncio.Task[None]] = set()
        first_load = asyncio.create_task(_first_load(service, on_fatal))
        hangup = _install_sighup(service, background)
        try:
            yield
        finally:
            models.draining = True
            metrics.ready.set(0)
            if hangup:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            first_load.cancel()
            await service.batcher.close(timeout_s=settings.request_timeout_s)

    app = FastAPI(
        title="Translation service",
        description=API_DESCRIPTION,
        version="1",
        lifespan=lifespan,
        docs_url=None,  # served below from the server's own copy of Swagger UI and ReDoc, not a CDN
        redoc_url=None,
    )
    _install_docs(app)
    app.state.service = service
    app.state.deepl = deepl_state
    app.state.libretranslate_files = _document_store(settings.document_dir, "libretranslate", libretranslate.KEPT_FILES)
    install_error_handlers(app, metrics)
    app.include_router(translate.router)
    app.include_router(health.router)
    app.include_router(admin.router)
    app.include_router(libretranslate.router)
    app.include_router(deepl.router)
    app.include_router(deepl.router_v3)
    app.include_router(google.router)
    app.include_router(microsoft.router)
    app.include_router(aws.router)
    app.include_router(google_v3.router)
    # a full queue refuses decoding requests before their bodies are parsed (inside CORS and RequestContext)
    app.add_middleware(
        Shed,
        refusal=service.batcher.refusal,
        paths=DECODING_PATHS,
        metrics=metrics,
        known=keys.known if keys else None,
    )
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "X-API-Key", "Authorization", "X-Request-ID"],
            expose_headers=["X-Request-ID", "Retry-After"],
        )
    # added last, so outermost: it sees every response, CORS preflights and 500s included
    app.add_middleware(
        RequestContext,
        metrics=metrics,
        max_body_bytes=settings.max_body_bytes,
        max_document_bytes=settings.max_document_bytes,
    )

    # The page lives under /static so that the API's own routes keep their 405s and JSON 404s.
    index = STATIC_DIR / "index.html"
    if index.is_file():
        app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

        @app.get("/", include_in_schema=False)
        async def page() -> FileResponse:
            return FileResponse(index)
    else:

        @app.get("/", include_in_schema=False)
        async def root() -> RedirectResponse:
            return RedirectResponse("/docs")

    return app


def _install_docs(app: FastAPI) -> None:
    """/docs (Swagger UI) and /redoc from the files of the fastapi-offline package: they render offline."""
    assets = Path(importlib.util.find_spec("fastapi_offline").origin or "").parent / "static"  # type: ignore[union-attr]
    app.mount("/docs-assets", StaticFiles(directory=assets), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - API documentation",
            swagger_js_url=f"{root}/docs-assets/swagger-ui-bundle.js",
            swagger_css_url=f"{root}/docs-assets/swagger-ui.css",
            swagger_favicon_url=f"{root}/docs-assets/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from validator.swagger.io
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - API reference",
            redoc_js_url=f"{root}/docs-assets/redoc.standalone.js",
            redoc_favicon_url=f"{root}/docs-assets/favicon.png",
            with_google_fonts=False,
        )


async def _first_load(service: ServiceState, on_fatal: Callable[[str], None] | None) -> None:
    """Load every model, one after another (loading two at once would only share the same cores)."""
    for slot in service.models.slots:
        try:
            await slot.load()
        except LoadFailed as err:
            log.error("%s", err)
            if on_fatal is not None:
                on_fatal(str(err))
            return
        service.metrics.ready.set(1 if service.models.ready() else 0)
    await service.models.detect("warm-up")  # builds the language detector before a request waits for it


def _install_sighup(service: ServiceState, background: set[asyncio.Task[None]]) -> bool:
    """SIGHUP reloads every configured bundle; only possible when the loop runs in the main thread."""
    if not hasattr(signal, "SIGHUP"):
        return False

    def reload() -> None:
        log.info("SIGHUP: reloading %s", ", ".join(str(slot.bundle) for slot in service.models.slots))
        task = asyncio.create_task(_reload_quietly(service))
        background.add(task)
        task.add_done_callback(background.discard)

    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload)
    except (RuntimeError, ValueError):  # not the main thread (e.g. a server run in a test thread)
        return False
    return True


async def _reload_quietly(service: ServiceState) -> None:
    for slot in service.models.slots:
        try:
            await slot.load()
        except Exception as err:  # LoadFailed or LoadInProgress: the old model keeps serving
            log.error("SIGHUP reload failed (%s), old model kept: %s", slot.name, err)
