"""request_secret as an MCP tool: a thin adapter over tools.services.secret_requests.

The service checks name and reason and answers every problem in one refusal; the schema
still tells the agent the bounds.
"""

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from secrets_vault.models import MAX_NAME
from tools.adapter import call_service
from tools.auth import caller_from_context
from tools.services.secret_requests import MAX_REASON, MIN_REASON, secret_request

DESCRIPTION = """Posts a button; the person types the secret into a private form. The agent ends its turn and is \
told when the secret is set; the value is then in the environment of the session's next shell commands.

Limit: 10 per runner. Fails when a secret of that name is already set, or when a self-hosted gateway has no \
SP_STORE_KEY. Returns at once: never wait for the value, end your turn."""


class SecretRequested(BaseModel):
    tool_call_id: int = Field(description="Calvin's id for this call (audit, dashboard).")
    status: str = Field(description="pending: the card is being posted.")
    message: str = Field(description="What happens next.")


async def request_secret(
    name: Annotated[
        str,
        Field(
            description="An environment variable name, for example `STRIPE_API_KEY`.",
            json_schema_extra={"pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "maxLength": MAX_NAME},
        ),
    ],
    reason: Annotated[
        str,
        Field(
            description="One line shown to the person.",
            json_schema_extra={"minLength": MIN_REASON, "maxLength": MAX_REASON},
        ),
    ],
    ctx: Context,
    file: Annotated[
        bool, Field(strict=True, description="Store the secret as a file; `$NAME` holds its path.")
    ] = False,
) -> SecretRequested:
    result = await call_service(secret_request, caller=caller_from_context(ctx), name=name, reason=reason, as_file=file)
    return SecretRequested(
        tool_call_id=result["tool_call_id"],
        status=result["status"],
        message=f"A button to set {name} is in the thread. End your turn now: you will get a message when a person"
        f" has set it, and ${name} is then in the environment of your next shell commands.",
    )


TOOLS = [("request_secret", request_secret, DESCRIPTION)]
