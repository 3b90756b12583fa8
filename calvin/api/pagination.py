"""Cursor pagination, newest first: `?limit=` (1..100) and `?cursor=` from the last page's
`next_cursor`. A cursor is the last id shown, so a page never repeats or skips a row when
new ones arrive meanwhile."""

import base64
import binascii

from pydantic import BaseModel, Field, create_model

from calvin.api.problems import Problem

MAX_LIMIT = 100


class PageQuery(BaseModel):
    limit: int = Field(50, ge=1, le=MAX_LIMIT, description=f"How many items, at most {MAX_LIMIT}.")
    cursor: str | None = Field(None, max_length=40, description="The next_cursor of the previous page.")


def _cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def _after(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, number = text.partition(":")
        if kind == "id" and number.isdigit() and len(number) < 19:
            return int(number)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise Problem(422, "cursor: not a cursor this API gave (pass next_cursor as it came)", code="invalid")


def page(queryset, query: PageQuery, shown) -> dict:
    """One page of the queryset (newest first), each row through `shown`."""
    rows = queryset.order_by("-id")
    if query.cursor:
        rows = rows.filter(id__lt=_after(query.cursor))
    batch = list(rows[: query.limit + 1])
    more = len(batch) > query.limit
    batch = batch[: query.limit]
    return {"items": [shown(row) for row in batch], "next_cursor": _cursor(batch[-1].id) if more else None}


_PAGES: dict = {}


def page_of(schema: type[BaseModel]) -> type[BaseModel]:
    """The response schema of a page of `schema` items."""
    if schema not in _PAGES:
        _PAGES[schema] = create_model(
            f"{schema.__name__}Page",
            items=(list[schema], ...),
            next_cursor=(str | None, Field(None, description="Pass as ?cursor= for the next page; null: none.")),
        )
    return _PAGES[schema]
