"""/api/v1/: one NinjaAPI, its OpenAPI 3.1 schema at /api/v1/openapi.json and docs at /api/v1/docs."""

from django.http import Http404
from ninja import NinjaAPI

from calvin.api import approvals, records, resources, sessions, tasks, usage
from calvin.api.auth import TokenAuth
from calvin.api.problems import CONTENT_TYPE, install_handlers
from calvin.api.schemas import MeOut
from calvin.workspaces.models import Workspace


class CalvinAPI(NinjaAPI):
    def get_openapi_schema(self, *args, **kwargs):
        """Errors are documented as they are sent: application/problem+json (RFC 9457)."""
        schema = super().get_openapi_schema(*args, **kwargs)
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                for status, response in (operation.get("responses") or {}).items():
                    content = response.get("content") or {}
                    if str(status)[:1] in "45" and "application/json" in content:
                        content[CONTENT_TYPE] = content.pop("application/json")
        return schema


api = CalvinAPI(
    title="Calvin API",
    version="1",
    description=(
        "The workspace's agents, sessions, approvals and records, for people (an API token made on the"
        " dashboard) and agents (their runner's token, within their cli_scope; `ncl` uses this API)."
        " Errors are RFC 9457 problem details. Lists are newest first, paged by cursor."
    ),
    auth=TokenAuth(),
    urls_namespace="api",
)
install_handlers(api)


@api.get("/me", response=MeOut, summary="Who this token is", tags=["me"])
def me(request):
    principal = request.auth
    workspace = Workspace.objects.filter(id=principal.workspace_id).values("id", "slug", "name").first()
    if workspace is None:
        raise Http404("the token's workspace is gone")
    return {
        "kind": principal.kind,
        "scope": principal.scope,
        "workspace": workspace,
        "agent_id": principal.agent_id,
        "session_id": principal.session_id,
        "member_id": principal.member_id,
        "role": principal.role,
    }


for module in (resources, sessions, approvals, tasks, records, usage):
    api.add_router("", module.router)
