"""Argument sets for a tool, drawn from the tool's own inputSchema: valid, near-valid, hostile.

hypothesis-jsonschema would build the valid ones, but its last release (0.23.1) calls a
Hypothesis internal that 6.170 no longer has; the schemas pydantic writes use a small
subset of JSON Schema (type, properties, required, additionalProperties, anyOf, enum,
lengths, bounds, pattern, $ref into $defs), which is all this module reads.

A case is (kind, arguments): "valid" (drawn from the schema, or a known valid call the
test gives), a near-valid one ("wrong type", "out of range", "missing", "extra": one change
to a valid set), or "hostile" (one value replaced by a value of tests/hostile.py's corpus).
"""

import json
import math

from hypothesis import strategies as st

from tests.hostile import CORPUS

# Valid strings stay short (a few at their exact maximum): the bounds are probed by the
# near-valid cases, and short calls keep 10,000 of them within the suite's budget.
SHORT = 24
HOSTILE_VALUES = [json.loads(value) for value in CORPUS]
KINDS = ["valid"] * 3 + ["wrong type", "out of range", "missing", "extra"] + ["hostile"] * 2

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=SHORT),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


_ABSENT = object()  # an optional property left out


class Schema:
    """A tool's inputSchema, with its $refs resolved against its own $defs."""

    def __init__(self, root: dict):
        self.root = root

    def resolve(self, node: dict) -> dict:
        while "$ref" in node:
            target = self.root
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return node

    def branches(self, node: dict) -> list[dict]:
        """The alternatives of a node; a keyword beside anyOf (pydantic puts a pattern there) goes into each."""
        node = self.resolve(node)
        if "anyOf" not in node:
            return [node]
        beside = {k: v for k, v in node.items() if k not in ("anyOf", "default", "description", "title")}
        return [{**self.resolve(branch), **beside} for branch in node["anyOf"]]

    def branch_for(self, node: dict, value) -> dict:
        """The alternative `value` was drawn from (by its JSON type)."""
        branches = self.branches(node)
        for branch in branches:
            if _json_type(value) == branch.get("type") or (
                branch.get("type") == "number" and isinstance(value, int | float) and not isinstance(value, bool)
            ):
                return branch
        return branches[0]


def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _string(node: dict) -> st.SearchStrategy:
    low, high = node.get("minLength", 0), node.get("maxLength")
    if "enum" in node:
        return st.sampled_from(node["enum"])
    if "pattern" in node:
        fits = st.from_regex(node["pattern"], fullmatch=True)
        return fits.filter(lambda s: low <= len(s) <= (high if high is not None else math.inf))
    if node.get("format") == "uri":
        return st.text(st.characters(codec="ascii", categories=["L", "N"]), max_size=SHORT).map(
            lambda s: f"https://example.com/{s}"
        )
    short = st.text(min_size=low, max_size=max(low, min(high or SHORT, SHORT)))
    if high is None or high <= SHORT:
        return short
    return st.one_of(short, short, short, st.just("y" * high))  # now and then exactly at the bound


def _number(node: dict, integer: bool) -> st.SearchStrategy:
    low, high = node.get("minimum"), node.get("maximum")
    if integer:
        return st.integers(min_value=low, max_value=high)
    return st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False)


def valid(schema: Schema, node: dict) -> st.SearchStrategy:
    """Values `node` allows (as the schema says; the tool's own rules may still refuse them)."""
    return st.one_of([_valid_branch(schema, branch) for branch in schema.branches(node)])


def _valid_branch(schema: Schema, node: dict) -> st.SearchStrategy:
    kind = node.get("type")
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node and kind != "string":
        return st.sampled_from(node["enum"])
    if kind == "string":
        return _string(node)
    if kind in ("integer", "number"):
        return _number(node, kind == "integer")
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = valid(schema, node["items"]) if "items" in node else json_values
        low = node.get("minItems", 0)
        return st.lists(items, min_size=low, max_size=max(low, min(node.get("maxItems", 4), 4)))
    if kind == "object" or "properties" in node:
        return _object(schema, node)
    return json_values


def _object(schema: Schema, node: dict) -> st.SearchStrategy:
    properties, required = node.get("properties", {}), set(node.get("required", ()))
    fixed = {name: valid(schema, sub) for name, sub in properties.items()}
    extra = node.get("additionalProperties", not properties)
    if isinstance(extra, dict) or extra is True:
        names = node.get("propertyNames", {})
        keys = st.text(min_size=max(1, names.get("minLength", 0)), max_size=min(names.get("maxLength", 12), 12))
        values = valid(schema, extra) if isinstance(extra, dict) else json_values
        more = st.dictionaries(keys.filter(lambda k: k not in properties), values, max_size=3)
    else:
        more = st.just({})

    mandatory = {name: strategy for name, strategy in fixed.items() if name in required}

    def merged(parts) -> dict:
        extra, given, maybe = parts
        return {**extra, **given, **{k: v for k, v in maybe.items() if v is not _ABSENT}}

    maybe = st.fixed_dictionaries(
        {name: st.just(_ABSENT) | strategy for name, strategy in fixed.items() if name not in required}
    )
    return st.tuples(more, st.fixed_dictionaries(mandatory), maybe).map(merged)


# ---------------------------------------------------------------- one change to a valid set


def sites(schema: Schema, node: dict, value, path: tuple = ()) -> list[tuple[tuple, dict, object]]:
    """Every place of `value` (the whole, each property, each item) with the schema that governs it."""
    branch = schema.branch_for(node, value)
    found = [(path, branch, value)]
    if isinstance(value, dict):
        properties = branch.get("properties", {})
        extra = branch.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else {})
            found += sites(schema, sub, item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += sites(schema, branch.get("items", {}), item, (*path, index))
    return found


def replaced(value, path: tuple, new):
    """A deep copy of `value` with `new` at `path` (the whole value for the empty path)."""
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return copy


def _out_of_range(node: dict, value) -> list:
    """Values just past a bound of `node` (none when it has no bound)."""
    past = []
    if isinstance(value, str) or node.get("type") == "string":
        if "maxLength" in node:
            past.append("z" * (node["maxLength"] + 1))
        if node.get("minLength", 0) > 0:
            past.append("z" * (node["minLength"] - 1))
        if "enum" in node:
            past.append("not-" + str(node["enum"][0]))
        if "pattern" in node:
            past.append("does not match " + node["pattern"])
    if "maximum" in node:
        past += [node["maximum"] + 1, node["maximum"] + 0.5]
    if "minimum" in node:
        past += [node["minimum"] - 1, node["minimum"] - 0.5]
    if isinstance(value, list):
        if "maxItems" in node:
            past.append((value or ["x"]) * (node["maxItems"] + 1))
        if node.get("minItems", 0) > 0:
            past.append([])
    return past


def _wrong_type(node: dict) -> st.SearchStrategy:
    allowed = {b.get("type") for b in node.get("anyOf", [node])}
    if "number" in allowed:
        allowed.add("integer")
    return json_values.filter(lambda v: _json_type(v) not in allowed and v != {} and v != [])


def argument_sets(input_schema: dict, known: list[dict] = ()) -> st.SearchStrategy:
    """(kind, arguments) cases for a tool with this inputSchema; `known`: valid calls to start from too."""
    schema = Schema(input_schema)
    base = valid(schema, input_schema)  # built once: building a strategy costs more than drawing from it
    if known and schema.resolve(input_schema).get("properties"):
        # A known valid call, as it is or with one property drawn afresh: valid sets that get past
        # the tool's own rules (a real file, a real message) more often than wholly drawn ones.
        properties = schema.resolve(input_schema).get("properties", {})
        fresh = {name: valid(schema, node) for name, node in properties.items()}
        one_redrawn = st.tuples(st.sampled_from(list(known)), st.sampled_from(sorted(fresh))).flatmap(
            lambda pair: fresh[pair[1]].map(lambda value: {**pair[0], pair[1]: value})
        )
        base = st.one_of(base, st.sampled_from(list(known)), one_redrawn)
    return _case(schema, base)


@st.composite
def _case(draw, schema: Schema, base: st.SearchStrategy):
    input_schema = schema.root
    arguments = draw(base)
    kind = draw(st.sampled_from(KINDS))
    places = sites(schema, input_schema, arguments)
    # Where one value goes: each place inside the set, or (an empty set) each property it could have.
    properties = schema.resolve(input_schema).get("properties", {})
    inner = places[1:] or [((name,), schema.resolve(node), None) for name, node in properties.items()]
    if not inner and kind in ("wrong type", "out of range", "hostile"):
        kind = "extra"  # a tool without arguments: only an extra one can be wrong
    if kind == "wrong type":
        path, node, _ = draw(st.sampled_from(inner))
        return kind, replaced(arguments, path, draw(_wrong_type(node)))
    if kind == "out of range":
        bounded = [(path, past) for path, node, value in inner for past in _out_of_range(node, value)]
        if bounded:
            path, past = draw(st.sampled_from(bounded))
            return kind, replaced(arguments, path, past)
        kind = "extra"  # nothing of this set has a bound
    if kind == "missing":
        required = [
            (path, name)
            for path, node, value in places
            if isinstance(value, dict)
            for name in node.get("required", ())
            if name in value
        ]
        if required:
            path, name = draw(st.sampled_from(required))
            copy = json.loads(json.dumps(arguments))
            target = copy
            for key in path:
                target = target[key]
            del target[name]
            return kind, copy
        kind = "extra"  # nothing is required
    if kind == "extra":
        objects = [path for path, _, value in places if isinstance(value, dict)]
        path = draw(st.sampled_from(objects))
        name = "unexpected_" + draw(st.text(st.characters(codec="ascii", categories=["L"]), max_size=8))
        target = json.loads(json.dumps(arguments))
        node = target
        for key in path:
            node = node[key]
        node[name] = draw(json_values)
        return kind, target
    if kind == "hostile":
        path, _, _ = draw(st.sampled_from(inner))
        return kind, replaced(arguments, path, draw(st.sampled_from(HOSTILE_VALUES)))
    return kind, arguments
