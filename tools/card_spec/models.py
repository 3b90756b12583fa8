"""The card spec as post_card's parameter, and the props each element type takes.

The parameter model stays loose on purpose (type, props, children) so that one call
reports every problem of a spec at once, in our words, instead of the first schema error.
"""

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, HttpUrl, field_validator

ELEMENT_TYPES = ("Card", "Heading", "Text", "Field", "Table", "Chart", "Button", "Divider")
MAX_ELEMENTS = 500
MAX_STATE_BYTES = 16 * 1024  # spec.state is kept with the card, not shown: a bound, not a canvas
MAX_CELL = 500
MAX_ID = 100

# NaN and Infinity cannot be drawn, compared or stored as JSON: refused as a problem.
Finite = Annotated[float, Field(allow_inf_nan=False)]
MAX_EXACT_INT = 2**53


def _exact_int(value):
    # Integers a browser's JSON keeps exactly. Left to the union, a bigger one would quietly
    # become a rounded float, and one past 4,300 digits could not even be printed.
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_EXACT_INT:
        raise ValueError("a whole number between -2^53 and 2^53")
    return value


ElementId = Annotated[str, Field(min_length=1, max_length=MAX_ID)]


class CardElement(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = Field(description="One of: " + ", ".join(ELEMENT_TYPES) + ".")
    props: dict[str, Any] = Field(default_factory=dict, description="Depends on the type; see the tool description.")
    children: list[ElementId] = Field(default_factory=list, description="Ids of child elements (a Card's only).")


class CardSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    root: ElementId = Field(description="Id of the root element, a Card.")
    elements: dict[ElementId, CardElement] = Field(description="Id to {type, props, children}.")
    state: dict[str, Any] | None = Field(
        default=None, description=f"Optional state, kept with the card; at most {MAX_STATE_BYTES} bytes as JSON."
    )

    @field_validator("state")
    @classmethod
    def _state_is_bounded(cls, state):
        if state is not None and len(json.dumps(state, allow_nan=False).encode()) > MAX_STATE_BYTES:
            raise ValueError(f"at most {MAX_STATE_BYTES} bytes as JSON")
        return state


class _Props(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CardProps(_Props):
    title: str | None = Field(default=None, max_length=150)


class HeadingProps(_Props):
    text: str = Field(min_length=1, max_length=150)


class TextProps(_Props):
    text: str = Field(min_length=1, max_length=3000)


class FieldProps(_Props):
    label: str = Field(min_length=1, max_length=100)
    value: Annotated[Annotated[str, Field(max_length=1900)] | int | Finite, BeforeValidator(_exact_int)]


Cell = Annotated[Annotated[str, Field(max_length=MAX_CELL)] | int | Finite | bool | None, BeforeValidator(_exact_int)]


class TableProps(_Props):
    columns: list[Annotated[str, Field(max_length=MAX_CELL)]] | None = Field(default=None, max_length=20)
    rows: list[list[Cell]] = Field()


class ChartPoint(_Props):
    label: str = Field(min_length=1, max_length=20)
    # Bounded so that scales (max - min) stay finite too.
    value: Finite = Field(ge=-1e15, le=1e15)


class ChartSeries(_Props):
    name: str = Field(min_length=1, max_length=20)
    points: list[ChartPoint] = Field(min_length=1, max_length=20)


class ChartProps(_Props):
    kind: Literal["bar", "line"] = "bar"
    title: str = Field(min_length=1, max_length=50)
    series: list[ChartSeries] = Field(min_length=1, max_length=12)


class ButtonProps(_Props):
    label: str = Field(min_length=1, max_length=75)
    url: HttpUrl


class DividerProps(_Props):
    pass


PROPS_BY_TYPE: dict[str, type[_Props]] = {
    "Card": CardProps,
    "Heading": HeadingProps,
    "Text": TextProps,
    "Field": FieldProps,
    "Table": TableProps,
    "Chart": ChartProps,
    "Button": ButtonProps,
    "Divider": DividerProps,
}
