"""Property-based tests from the OpenAPI spec (schemathesis) against the live server.

Every operation gets 30 requests, deterministically (``derandomize``), all with a valid
API key: 20 that conform to the schema and 10 that break it (operations with inputs).
No response may be a 5xx; conforming requests that succeed must answer as the spec says.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings

pytestmark = pytest.mark.slow

# schemathesis is not in the "test" extra yet: without it this module is skipped, visibly.
schemathesis = pytest.importorskip("schemathesis", reason="pip install 'schemathesis>=4' for the OpenAPI fuzz tests")
import requests  # noqa: E402  (a dependency of schemathesis)
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.specs.openapi.checks import response_schema_conformance  # noqa: E402

from beeweave_core.server import ServerConfig, create_app  # noqa: E402
from tests.service.service_support import ACME_KEY, event  # noqa: E402

EXAMPLES = {GenerationMode.POSITIVE: 20, GenerationMode.NEGATIVE: 10}
SPEC = create_app(ServerConfig(None, {"spec-only-key": "spec"})).openapi()
OPERATIONS = [(m.upper(), p) for p, ops in SPEC["paths"].items() for m in ops]
# A request can only break the schema where it has inputs (parameters or a body).
CASES = [(m, p, mode) for m, p in OPERATIONS for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
         if mode is GenerationMode.POSITIVE or {"parameters", "requestBody"} & set(SPEC["paths"][p][m.lower()])]
CALLS: dict[tuple[str, str, str], int] = {}


@pytest.fixture(scope="module")
def schema(live, acme):
    acme.ingest(event("alice", "How do I deploy?", "Run make deploy.", session_id="s1"))
    acme.ingest(event("alice", "vpn?", "on"))  # one pending memory for the review routes (too short; not small talk)
    assert acme.flush(20)
    return schemathesis.openapi.from_dict(SPEC)


def _operation(schema, method: str, path: str):
    for result in schema.get_all_operations():
        op = result.ok()
        if op.method.upper() == method and op.path == path:
            return op
    raise AssertionError(f"{method} {path} is not in the spec")


@pytest.mark.parametrize("method,path,mode", CASES, ids=[f"{m} {p} {mode.value}" for m, p, mode in CASES])
def test_no_server_errors(live, schema, method, path, mode):
    op = _operation(schema, method, path)
    key = (method, path, mode.value)
    CALLS[key] = 0
    session = requests.Session()

    @settings(max_examples=EXAMPLES[mode], derandomize=True, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=op.as_strategy(mode, headers={"X-API-Key": ACME_KEY}))
    def check(case):
        if path == "/api/v1/events":  # a stream: bounded, so the call returns
            case.query = {**(case.query or {}), "max_seconds": 0.5}
        response = case.call(base_url=live.url, session=session, timeout=30)
        CALLS[key] += 1
        assert response.status_code < 500, (case.as_curl_command(), response.status_code, response.text[:500])
        if mode is GenerationMode.POSITIVE and response.status_code < 300:
            case.validate_response(response, checks=[response_schema_conformance])

    try:
        check()
    finally:
        session.close()
    assert CALLS[key] > 0


def test_operations_covered():
    assert len(OPERATIONS) >= 15
    done = {(m, p) for m, p, _ in CALLS}
    assert done == set(OPERATIONS) or not CALLS  # run alone (-k), this module's other tests may be deselected
