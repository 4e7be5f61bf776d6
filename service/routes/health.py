"""Probes and introspection: /healthz, /readyz, /metrics, /model."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from service.deps import Service
from service.metrics import CONTENT_TYPE
from service.schemas import ErrorResponse, Health, ModelInfo, ModelRef, Readiness

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
    slot = service.slot
    model = slot.current
    if slot.draining:
        body = Readiness(status="draining", message="the server is shutting down")
    elif model is None:
        status = "loading" if slot.loading or slot.error is None else "failed"
        body = Readiness(status=status, message=slot.error or "the model is loading")
    else:
        ready = Readiness(status="ready", model=ModelRef(name=model.name, version=model.version))
        return JSONResponse(ready.model_dump(exclude_none=True))
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
    responses={503: {"model": ErrorResponse, "description": "No model loaded yet."}},
    summary="The model being served: languages, architecture, scores, provider",
)
async def model_info(service: Service) -> ModelInfo:
    model = service.model()
    manifest = model.engine.manifest
    return ModelInfo(
        name=model.name,
        version=model.version,
        source_language=str(manifest.get("source_language", "")),
        target_language=str(manifest.get("target_language", "")),
        provider=model.engine.provider,
        loaded_at=model.loaded_at,
        manifest=manifest,
    )
