"""The card spec as post_card's parameter, and the props each element type takes.

The parameter model stays loose on purpose (type, props, children) so that one call
reports every problem of a spec at once, in our words, instead of the first schema error.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, HttpUrl

ELEMENT_TYPES = ("Card", "Heading", "Text", "Field", "Table", "Chart", "Button", "Divider")
MAX_ELEMENTS = 500


class CardElement(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = Field(description="One of: " + ", ".join(ELEMENT_TYPES) + ".")
    props: dict[str, Any] = Field(default_factory=dict, description="Depends on the type; see the tool description.")
    children: list[str] = Field(default_factory=list, description="Ids of child elements (a Card's only).")


class CardSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    root: str = Field(description="Id of the root element, a Card.")
    elements: dict[str, CardElement] = Field(description="Id to {type, props, children}.")
    state: dict[str, Any] | None = Field(default=None, description="Optional state, kept with the card.")


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
    value: Annotated[str, Field(max_length=1900)] | int | float


Cell = str | int | float | bool | None


class TableProps(_Props):
    columns: list[str] | None = Field(default=None, max_length=20)
    rows: list[list[Cell]] = Field()


class ChartPoint(_Props):
    label: str = Field(min_length=1, max_length=20)
    value: float


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
