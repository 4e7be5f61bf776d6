"""What route handlers get injected: the service state and the two kinds of credentials."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from inference.glossary import Glossary
from service.batcher import Batcher
from service.cache import TranslationCache
from service.engine_process import EngineProcess
from service.errors import ApiError, key_refusal
from service.keys import Client, KeyRefused, Keys
from service.metrics import Metrics
from service.models import Models
from service.scheduler import Scheduler
from service.settings import Settings


@dataclass
class ServiceState:
    """Everything one app instance owns; lives on ``app.state.service``."""

    settings: Settings
    metrics: Metrics
    batcher: Batcher | Scheduler | EngineProcess
    models: Models
    keys: Keys = field(default_factory=Keys)
    """Who may translate, and how much (MT_API_KEY, MT_API_KEYS)."""
    glossaries: dict[str, Glossary] = field(default_factory=dict)
    """The server's glossaries by language pair ("en-de"), MT_GLOSSARY."""
    cache: TranslationCache | None = None
    """Sentences translated before (MT_CACHE_MB; None: off)."""


# The dependencies are ``async def`` although they never await: FastAPI runs a plain ``def`` one in a
# worker thread, and under load each such hop waits for the GIL behind the inference thread.
async def get_service(request: Request) -> ServiceState:
    service: ServiceState = request.app.state.service
    return service


Service = Annotated[ServiceState, Depends(get_service)]

_api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="Needed when MT_API_KEY is set.")
_bearer = HTTPBearer(auto_error=False, description="The admin token (MT_ADMIN_TOKEN).")


async def check_api_key(
    request: Request, service: Service, key: Annotated[str | None, Depends(_api_key_header)]
) -> Client | None:
    """The request's client (its key's name and limits; None when the server needs no key), charged one request."""
    try:
        client = service.keys.admit(key)
    except KeyRefused as err:
        raise key_refusal(err) from None
    if client is not None:
        request.state.log_fields["api_key"] = client.name
    return client


async def check_admin_token(
    service: Service, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    expected = service.settings.admin_token
    if expected is None:
        raise ApiError(
            403,
            "forbidden",
            "admin endpoints are disabled: start the server with MT_ADMIN_TOKEN set",
        )
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ApiError(
            401,
            "unauthorized",
            "missing admin token: send 'Authorization: Bearer <MT_ADMIN_TOKEN>'",
            {"WWW-Authenticate": "Bearer"},
        )
    if not secrets.compare_digest(credentials.credentials.encode(), expected.get_secret_value().encode()):
        raise ApiError(403, "forbidden", "wrong admin token")


async def check_api_key_only(
    request: Request, service: Service, key: Annotated[str | None, Depends(_api_key_header)]
) -> Client | None:
    """As check_api_key, without refusing a key whose day is spent: for asking what is left."""
    try:
        return service.keys.admit(key, quota=False)
    except KeyRefused as err:
        raise key_refusal(err) from None


ApiKey = Annotated[Client | None, Depends(check_api_key)]
KeyOnly = Annotated[Client | None, Depends(check_api_key_only)]
AdminToken = Annotated[None, Depends(check_admin_token)]
