"""POST /admin/reload: load a bundle beside the current model and swap it in, or keep the old."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Body

from service.deps import AdminToken, Service
from service.errors import ApiError
from service.loader import LoadFailed
from service.schemas import ErrorResponse, ModelRef, ReloadRequest, ReloadResponse

router = APIRouter(prefix="/admin", tags=["admin"])


@router.post(
    "/reload",
    response_model=ReloadResponse,
    responses={
        401: {"model": ErrorResponse, "description": "No admin token sent."},
        403: {
            "model": ErrorResponse,
            "description": "Wrong admin token, or admin endpoints disabled.",
        },
        409: {"model": ErrorResponse, "description": "Another reload is in progress."},
        422: {
            "model": ErrorResponse,
            "description": "The bundle is missing, corrupt or mismatched; old model kept.",
        },
        500: {"model": ErrorResponse, "description": "Loading or warm-up failed; old model kept."},
    },
    summary="Load a model bundle and swap it in without downtime",
    description="Loads the bundle (default: the configured one) beside the current model, verifies "
    "its checksums, runs a warm-up translation, then swaps atomically. Requests already queued "
    "finish on the model they started with. On any failure the current model keeps serving and the "
    "error says why. SIGHUP does the "
    "same for the configured bundle.",
)
async def reload(
    service: Service, _: AdminToken, body: Annotated[ReloadRequest | None, Body()] = None
) -> ReloadResponse:
    bundle = Path(body.bundle) if body and body.bundle else service.settings.bundle
    previous = service.slot.current
    try:
        model = await service.slot.load(bundle)
    except LoadFailed as err:
        kept = f"; still serving {previous.name} {previous.version}" if previous else ""
        raise ApiError(422 if err.bad_bundle else 500, "reload_failed", f"{err}{kept}") from err
    return ReloadResponse(
        status="reloaded",
        model=ModelRef(name=model.name, version=model.version),
        previous=ModelRef(name=previous.name, version=previous.version) if previous else None,
        bundle=str(bundle),
        load_seconds=round(model.load_seconds, 3),
    )
