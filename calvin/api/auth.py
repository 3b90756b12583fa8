"""The API's one authentication: `Authorization: Bearer <token>`, a runner's or a person's."""

from ninja.security import HttpBearer

from calvin.api.principal import CliScopeDisabled, principal_for_token
from calvin.api.problems import Problem


class TokenAuth(HttpBearer):
    openapi_description = "A runner's token (an agent, scoped by its cli_scope) or a person's API token (cpt_…)."

    def authenticate(self, request, token):
        try:
            return principal_for_token(token)
        except CliScopeDisabled as exc:
            raise Problem(403, str(exc), code="cli_scope_disabled") from None
