"""POST /admin/reload: load a bundle beside the current model and swap it in, or keep the old."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Body

from service.deps import AdminToken, Service
from service.errors import ApiError
from service.loader import LoadFailed, model_ref
from service.schemas import ErrorResponse, ReloadRequest, ReloadResponse

router = APIRouter(prefix="/admin", tags=["admin"])


@router.post(
    "/reload",
    response_model=ReloadResponse,
    responses={
        400: {"model": ErrorResponse, "description": "Several models are served and none was named."},
        401: {"model": ErrorResponse, "description": "No admin token sent."},
        403: {
            "model": ErrorResponse,
            "description": "Wrong admin token, or admin endpoints disabled.",
        },
        404: {"model": ErrorResponse, "description": "No model of that name."},
        409: {"model": ErrorResponse, "description": "Another reload is in progress."},
        422: {
            "model": ErrorResponse,
            "description": "The bundle is missing, corrupt or mismatched; old model kept.",
        },
        500: {"model": ErrorResponse, "description": "Loading or warm-up failed; old model kept."},
    },
    summary="Load a model bundle and swap it in without downtime",
    description="Loads the bundle (default: the model's configured one) beside the current version of the "
    "model named in `model` (the other models keep serving untouched), verifies "
    "its checksums, runs a warm-up translation, then swaps atomically. Requests already queued "
    "finish on the model they started with. On any failure the current model keeps serving and the "
    "error says why. SIGHUP does the "
    "same for the configured bundle.",
)
async def reload(
    service: Service, _: AdminToken, body: Annotated[ReloadRequest | None, Body()] = None
) -> ReloadResponse:
    models = service.models
    name = body.model if body else None
    if name is None and len(models.slots) > 1:
        names = ", ".join(repr(slot.name) for slot in models.slots)
        raise ApiError(400, "bad_request", f"this server serves several models: name one in 'model' ({names})")
    slot = models.pick(model=name)
    bundle = Path(body.bundle) if body and body.bundle else slot.bundle
    previous = slot.current
    try:
        model = await slot.load(bundle)
    except LoadFailed as err:
        kept = f"; still serving {previous.name} {previous.version}" if previous else ""
        raise ApiError(422 if err.bad_bundle else 500, "reload_failed", f"{err}{kept}") from err
    return ReloadResponse(
        status="reloaded",
        model=model_ref(model),
        previous=model_ref(previous) if previous else None,
        bundle=str(bundle),
        load_seconds=round(model.load_seconds, 3),
    )
