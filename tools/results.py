from pydantic import BaseModel, Field


class Queued(BaseModel):
    """The call is recorded; a worker posts it into the thread."""

    tool_call_id: int = Field(description="Calvin's id for this call (audit, dashboard).")
    status: str = Field(description="pending: queued for delivery.")
