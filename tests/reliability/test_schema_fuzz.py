"""Schemathesis against the server's own OpenAPI schema, on a real uvicorn with the tiny bundle.

Every operation of the schema gets a bounded number of generated requests, valid and invalid ones;
each answer must be a status the schema documents for that operation, with the documented body,
headers and content type, never a 5xx, and invalid input must be refused with a 4xx; /healthz must
answer after each. Not checked: schemathesis' ``positive_data_acceptance``, because some limits are
settings that the static schema cannot carry (MT_MAX_TEXTS, MT_MAX_CHARS, n_best <= beam_size), so a
request valid by the schema may get a documented 413 or 422.

The schema is the app's own ``openapi()``, built at collection time (schemathesis parametrizes
then, before any server runs); ``test_served_schema_is_the_one_tested`` checks that the server
serves exactly that document at /openapi.json.
"""

from __future__ import annotations

from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service.app import create_app
from service.settings import Settings
from tests.reliability.conftest import ADMIN, KEY
from tests.service.servers import ProcessServer

EXAMPLES = 100
"""Generated requests per operation and generation mode (bounded: CI time)."""
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]

OPENAPI = create_app(Settings(bundle=Path("unused"))).openapi()
schema = schemathesis.openapi.from_dict(OPENAPI)
schema.config.generation.update(modes=[schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE])


def test_served_schema_is_the_one_tested(real_server: ProcessServer) -> None:
    assert real_server.client.get("/openapi.json").json() == OPENAPI


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_every_answer_is_documented_and_never_a_5xx(case: schemathesis.Case, real_server: ProcessServer) -> None:
    case.call_and_validate(base_url=real_server.url, headers={**ADMIN, **KEY}, checks=CHECKS, timeout=30)
    assert real_server.client.get("/healthz", timeout=5).status_code == 200
