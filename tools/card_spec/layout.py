"""Check a card spec and lay it out as an ordered list of items.

`card_layout` returns every problem it finds (not just the first), and, when there are
none, the items both renderings (Slack blocks, the web thread) are built from.
"""

from typing import Any

from pydantic import ValidationError

from calvin.chat.people_words import cell_words
from tools.card_spec.models import ELEMENT_TYPES, MAX_ELEMENTS, PROPS_BY_TYPE, CardSpec

MAX_TABLES = 1
MAX_TABLE_ROWS = 100
MAX_TABLE_COLUMNS = 20
MAX_CHARTS = 2
MAX_FIELDS = 10

Item = dict[str, Any]


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "props"


# Names pydantic gives the members of a union in an error's location.
_UNION_MEMBERS = {"str", "constrained-str", "int", "constrained-int", "float", "constrained-float", "bool", "none"}


def _union_problem(where: str, errors: list[dict]) -> str:
    """One problem for a value that matched no member of a union (a cell, a field value)."""
    kinds = {e["type"] for e in errors}
    if "finite_number" in kinds:
        return f"{where}: must be a finite number (not NaN or Infinity)"
    if "string_too_long" in kinds:
        limit = next(e["ctx"]["max_length"] for e in errors if e["type"] == "string_too_long")
        return f"{where}: at most {limit} characters"
    return f"{where}: must be a string or a number"


def pydantic_problems(prefix: str, exc: ValidationError) -> list[str]:
    problems = []
    unions: dict[tuple, list[dict]] = {}
    for err in exc.errors():
        member = next((i for i, part in enumerate(err["loc"]) if part in _UNION_MEMBERS), None)
        if member is not None:
            unions.setdefault(err["loc"][:member], []).append(err)
            continue
        where, kind, ctx = _where(err["loc"]), err["type"], err.get("ctx", {})
        if kind == "string_too_long":
            text = f"{where}: at most {ctx['max_length']} characters"
        elif kind == "too_long":
            text = f"{where}: at most {ctx['max_length']} items (got {ctx.get('actual_length', '?')})"
        elif kind in ("missing", "string_too_short", "too_short"):
            text = f"{where}: required" if kind == "missing" else f"{where}: must not be empty"
        elif kind == "extra_forbidden":
            text = f"{where}: unknown property"
        else:
            text = f"{where}: {err['msg'].removeprefix('Value error, ')}"
        problems.append(f"{prefix}: {text}")
    problems.extend(f"{prefix}: {_union_problem(_where(loc), errs)}" for loc, errs in unions.items())
    return problems


def _cell(value) -> str:
    # As people write it, on the web and in Slack alike: yes / no / — for true, false and null.
    return cell_words(value)


def _table_problems(prefix: str, props) -> list[str]:
    problems = []
    rows = len(props.rows) + (1 if props.columns else 0)
    if not props.rows:
        problems.append(f"{prefix}: a table needs at least one row")
    if rows > MAX_TABLE_ROWS:
        problems.append(f"{prefix}: at most {MAX_TABLE_ROWS} rows, the header row included (got {rows})")
    width = len(props.columns) if props.columns else (len(props.rows[0]) if props.rows else 0)
    widest = max([width, *(len(r) for r in props.rows)])
    if widest > MAX_TABLE_COLUMNS:
        problems.append(f"{prefix}: at most {MAX_TABLE_COLUMNS} columns (got {widest})")
    uneven = [i for i, r in enumerate(props.rows) if len(r) != width]
    if uneven and widest <= MAX_TABLE_COLUMNS:
        problems.append(f"{prefix}: every row needs {width} cells (rows {', '.join(map(str, uneven[:5]))} differ)")
    return problems


def _item(etype: str, props) -> Item:
    if etype in ("Heading",):
        return {"kind": "header", "text": props.text}
    if etype == "Text":
        return {"kind": "text", "text": props.text}
    if etype == "Field":
        return {"kind": "field", "label": props.label, "value": _cell(props.value)}
    if etype == "Table":
        return {
            "kind": "table",
            "columns": props.columns,
            "rows": [[_cell(c) for c in row] for row in props.rows],
        }
    if etype == "Chart":
        chart = props.model_dump(mode="json")
        return {"kind": "chart", "style": chart["kind"], "title": chart["title"], "series": chart["series"]}
    if etype == "Button":
        return {"kind": "button", "label": props.label, "url": str(props.url)}
    return {"kind": "divider"}


def _group(items: list[Item]) -> list[Item]:
    """Consecutive fields become one fields item, consecutive buttons one buttons item."""
    grouped: list[Item] = []
    for item in items:
        kind = item["kind"]
        if kind in ("field", "button"):
            plural = kind + "s"
            if grouped and grouped[-1]["kind"] == plural:
                grouped[-1]["items"].append(item)
            else:
                grouped.append({"kind": plural, "items": [item]})
        else:
            grouped.append(item)
    return grouped


def card_layout(spec: CardSpec) -> tuple[list[Item], list[str]]:
    problems: list[str] = []
    elements = spec.elements
    if len(elements) > MAX_ELEMENTS:
        return [], [f"elements: at most {MAX_ELEMENTS} elements (got {len(elements)})"]
    root = elements.get(spec.root)
    if root is None:
        return [], [f"root: no element with id {spec.root!r}"]
    if root.type != "Card":
        problems.append(f"root: must be a Card (got {root.type})")

    items: list[Item] = []
    counts = {"Table": 0, "Chart": 0, "Field": 0}
    seen: set[str] = set()
    title = None

    def visit(eid: str, parent: str | None) -> None:
        nonlocal title
        element = elements[eid]
        prefix = f"elements.{eid} ({element.type})"
        if element.type not in ELEMENT_TYPES:
            problems.append(f"elements.{eid}: unknown type {element.type!r} (one of {', '.join(ELEMENT_TYPES)})")
            return
        if element.type == "Card" and parent is not None:
            problems.append(f"{prefix}: a Card can only be the root")
            return
        if element.type == "Button" and (set(element.props) - {"label", "url"} or "url" not in element.props):
            problems.append(f"{prefix}: buttons are links only (a label and an http or https url, nothing else)")
            return
        try:
            props = PROPS_BY_TYPE[element.type].model_validate(element.props)
        except ValidationError as exc:
            problems.extend(pydantic_problems(prefix, exc))
            props = None
        if element.children and element.type != "Card":
            problems.append(f"{prefix}: only a Card has children")
        if element.type in counts:
            counts[element.type] += 1
        if props is None:
            return
        if element.type == "Table":
            problems.extend(_table_problems(prefix, props))
        if element.type == "Card":
            title = props.title
            for child in element.children:
                if child not in elements:
                    problems.append(f"{prefix}: child {child!r} is not an element")
                elif child in seen:
                    problems.append(f"{prefix}: child {child!r} appears more than once")
                else:
                    seen.add(child)
                    visit(child, eid)
        else:
            items.append(_item(element.type, props))

    seen.add(spec.root)
    visit(spec.root, None)

    unreachable = [eid for eid in elements if eid not in seen]
    if unreachable:
        problems.append(f"elements not reachable from the root: {', '.join(unreachable[:10])}")
    if counts["Table"] > MAX_TABLES:
        problems.append(f"at most one table per card (got {counts['Table']})")
    if counts["Chart"] > MAX_CHARTS:
        problems.append(f"at most two charts per card (got {counts['Chart']})")
    if counts["Field"] > MAX_FIELDS:
        problems.append(f"at most {MAX_FIELDS} fields per card (got {counts['Field']})")
    if title:
        items.insert(0, {"kind": "header", "text": title})
    if not items and not problems:
        problems.append("root: the card is empty (give it a title or children)")
    return _group(items), problems
