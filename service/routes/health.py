"""Probes and introspection: /healthz, /readyz, /metrics, /model, /models, /languages."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from service.deps import Service
from service.loader import ModelSlot, model_ref
from service.metrics import CONTENT_TYPE
from service.models import Models
from service.schemas import (
    ErrorResponse,
    Health,
    LanguagePair,
    Languages,
    ModelInfo,
    ModelList,
    ModelState,
    Readiness,
)

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="Liveness: the process answers")
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Loading, failed to load, or shutting down."}},
    summary="Readiness: a model is loaded and warmed up",
)
async def readyz(service: Service) -> JSONResponse:
    models = service.models
    states = [model_state(models, slot) for slot in models.slots]
    if models.draining:
        body = Readiness(status="draining", message="the server is shutting down", models=states)
    elif models.ready():
        default = models.default.current
        ready = Readiness(status="ready", model=model_ref(default) if default else None, models=states)
        return JSONResponse(ready.model_dump(exclude_none=True))
    else:
        waiting = [state for state in states if state.status != "ready"]
        status = "failed" if any(state.status == "failed" for state in waiting) else "loading"
        message = "; ".join(f"{state.name}: {state.message or 'loading'}" for state in waiting)
        body = Readiness(status=status, message=message, models=states)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=503, headers={"Retry-After": "5"})


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE: {}}, "description": "Prometheus text format."}},
    summary="Prometheus metrics",
)
async def metrics(service: Service) -> Response:
    return Response(service.metrics.render(), media_type=CONTENT_TYPE)


@router.get(
    "/model",
    response_model=ModelInfo,
    responses={
        404: {"model": ErrorResponse, "description": "No model of that name."},
        503: {"model": ErrorResponse, "description": "The model has not loaded yet."},
    },
    summary="One model: languages, architecture, scores, provider (default: the first model)",
)
async def model_info(service: Service, name: str | None = None) -> ModelInfo:
    model = service.models.current(service.models.pick(model=name))
    manifest = model.engine.manifest
    return ModelInfo(
        name=model.name,
        version=model.version,
        source_language=str(manifest.get("source_language", "")),
        target_language=str(manifest.get("target_language", "")),
        provider=model.engine.provider,
        graphs=str(getattr(model.engine, "graphs", "main")),
        dtype=getattr(model.engine, "graphs_dtype", None),
        loaded_at=model.loaded_at,
        manifest=manifest,
    )


@router.get("/models", response_model=ModelList, summary="Every model this server holds, with its state")
async def models_list(service: Service) -> ModelList:
    return ModelList(models=[model_state(service.models, slot) for slot in service.models.slots])


@router.get("/languages", response_model=Languages, summary="The language pairs served, and by which model")
async def languages(service: Service) -> Languages:
    models = service.models
    pairs = []
    for slot in models.slots:
        pair = models.pair_of(slot)
        if pair is not None:
            version = slot.current.version if slot.current else None
            pairs.append(
                LanguagePair(
                    source_lang=pair.source,
                    target_lang=pair.target,
                    model=slot.name,
                    version=version,
                    ready=slot.current is not None,
                )
            )
    return Languages(pairs=pairs)


def model_state(models: Models, slot: ModelSlot) -> ModelState:
    pair = models.pair_of(slot)
    current = slot.current
    status = "ready" if current else "loading" if slot.loading or slot.error is None else "failed"
    return ModelState(
        name=slot.name,
        status=status,
        version=current.version if current else None,
        source_lang=pair.source if pair else None,
        target_lang=pair.target if pair else None,
        message=slot.error,
    )
