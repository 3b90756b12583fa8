"""The live OpenAPI schema, checked with schemathesis: every operation, generated inputs, as an
owner with an API token and as an agent with its runner's token. No answer is a 500, every
documented answer matches its schema, and every error is a problem with a stable code."""

import json
from collections import Counter

import httpx2
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from calvin.api.main import api
from calvin.api.tokens import api_token_create
from calvin.schedules.services import task_create
from calvin.schedules.specs import TaskCreate
from calvin.workspaces.models import Member
from sessions.services import message_post_by_person
from tests.api.conftest import agent_client

pytestmark = pytest.mark.django_db(transaction=True)
SEEN: Counter = Counter()
CHECKS = [checks.not_a_server_error, checks.response_schema_conformance, checks.content_type_conformance]


@pytest.fixture
def tokens(gateway, workspace) -> dict[str, str]:
    """A workspace with something of each resource, and a token for a person and for an agent."""
    helper = agent_client(gateway + "/api/v1", workspace, name="helper")
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    message_post_by_person(thread=helper.session.thread, member=owner, text="hello")
    task_create(agent=helper.agent, spec=TaskCreate(name="hourly", prompt="p", recurrence="0 * * * *"), member=owner)
    helper.post(f"/sessions/{helper.session.id}/stop")  # an approval to read
    _, token = api_token_create(member=owner, name="schemathesis")
    return {"person": token, "agent": helper.token}


# Built from the same NinjaAPI the gateway serves (collection needs it before any server runs);
# the first test checks that the gateway serves exactly this.
SERVED = api.get_openapi_schema(path_prefix="/api/v1")
schema = schemathesis.openapi.from_dict(json.loads(json.dumps(SERVED, default=str)))


def test_the_schema_checked_is_the_one_the_gateway_serves(gateway):
    served = httpx2.get(gateway + "/api/v1/openapi.json", timeout=30).json()
    assert served == json.loads(json.dumps(SERVED, default=str))
    assert len(served["paths"]) >= 15


@schema.parametrize()
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_every_operation_answers_within_its_schema(case, tokens, gateway):
    for who, token in tokens.items():  # each generated request as a person, then as an agent
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {token}"}  # generated auth is junk
        response = case.call(base_url=gateway, timeout=30)
        case.validate_response(response, checks=CHECKS)
        SEEN[response.status_code] += 1
        if response.status_code >= 400:
            kind = (response.headers.get("content-type") or [""])[0]
            assert kind.startswith("application/problem+json"), (who, response.text[:300])
            body = response.json()
            assert body["status"] == response.status_code and body["code"] and body["detail"], (who, body)


def test_the_generated_requests_reached_the_endpoints():
    """After the cases (scripts/test keeps a file's tests in one process, in order): most were
    answered, none refused at the door for want of a token."""
    assert SEEN[401] == 0, SEEN  # every request carried a token that works
    assert SEEN[200] + SEEN[201] + SEEN[202] >= 10, SEEN  # (CI's hypothesis profile generates fewer)
