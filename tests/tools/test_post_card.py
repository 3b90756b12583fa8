"""post_card over real MCP: every problem refused with the full list, Block Kit kept, limits."""

import json

import httpx2
import pytest

from secrets_vault.crypto import new_key
from secrets_vault.services import secret_set, secret_set_for_workspace
from sessions.models import Message
from tests.conftest import text_of, wait_for
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPT = "application/json, text/event-stream"


def card(*children: tuple[str, str, dict], title: str | None = "Report", extra: dict | None = None) -> dict:
    """A spec whose root Card has the given (id, type, props) children."""
    elements = {"root": {"type": "Card", "props": {"title": title} if title else {}, "children": []}}
    for eid, etype, props in children:
        elements[eid] = {"type": etype, "props": props}
        elements["root"]["children"].append(eid)
    elements.update(extra or {})
    return {"root": "root", "elements": elements}


def table(rows: int, columns: int = 2, header: bool = True) -> dict:
    props = {"rows": [[f"r{r}c{c}" for c in range(columns)] for r in range(rows)]}
    if header:
        props["columns"] = [f"col{c}" for c in range(columns)]
    return props


def chart(series: int = 1, points: int = 3, title: str = "Latency", label: str = "p", name: str = "s") -> dict:
    return {
        "title": title,
        "series": [
            {"name": f"{name}{s}", "points": [{"label": f"{label}{p}", "value": p * 1.5} for p in range(points)]}
            for s in range(series)
        ],
    }


def refused(agent, spec: dict, *expected: str) -> str:
    result = agent.call("post_card", {"spec": spec})
    text = text_of(result)
    assert result.is_error, text
    assert "invalid card spec" in text or not expected, text
    for piece in expected:
        assert piece in text, f"{piece!r} not in {text!r}"
    assert not ToolCall.objects.filter(session=agent.session).exists(), "a refused card leaves no row"
    return text


def posted(agent, spec: dict) -> Message:
    result = agent.call("post_card", {"spec": spec})
    assert not result.is_error, text_of(result)
    call_id = result.structured_content["tool_call_id"]
    wait_for(lambda: ToolCall.objects.get(id=call_id).status == ToolCall.Status.APPLIED)
    return Message.objects.get(tool_call_id=call_id)


PROBLEMS = [
    pytest.param({"root": "nope", "elements": {}}, ["root: no element with id 'nope'"], id="missing-root"),
    pytest.param(
        {"root": "t", "elements": {"t": {"type": "Text", "props": {"text": "hi"}}}},
        ["root: must be a Card (got Text)"],
        id="root-not-card",
    ),
    pytest.param(card(("x", "Marquee", {})), ["elements.x: unknown type 'Marquee'"], id="unknown-type"),
    pytest.param(card(("c2", "Card", {})), ["elements.c2 (Card): a Card can only be the root"], id="nested-card"),
    pytest.param(
        card(("b", "Button", {"label": "Deploy", "action": "deploy"})),
        ["elements.b (Button): buttons are links only"],
        id="button-action",
    ),
    pytest.param(
        card(("b", "Button", {"label": "Deploy"})), ["elements.b (Button): buttons are links only"], id="button-no-url"
    ),
    pytest.param(
        card(("b", "Button", {"label": "x", "url": "javascript:alert(1)"})),
        ["elements.b (Button): url:"],
        id="button-javascript-url",
    ),
    pytest.param(
        card(("t", "Text", {"text": "a"}), extra={"u": {"type": "Divider", "props": {}}}),
        ["elements not reachable from the root: u"],
        id="unreachable",
    ),
    pytest.param(
        {"root": "r", "elements": {"r": {"type": "Card", "children": ["gone"]}}},
        ["elements.r (Card): child 'gone' is not an element"],
        id="missing-child",
    ),
    pytest.param(
        {
            "root": "r",
            "elements": {
                "r": {"type": "Card", "children": ["t", "t"]},
                "t": {"type": "Text", "props": {"text": "a"}},
            },
        },
        ["child 't' appears more than once"],
        id="duplicate-child",
    ),
    pytest.param(
        {
            "root": "r",
            "elements": {
                "r": {"type": "Card", "children": ["t"]},
                "t": {"type": "Text", "props": {"text": "a"}, "children": ["r"]},
            },
        },
        ["elements.t (Text): only a Card has children"],
        id="children-on-text",
    ),
    pytest.param(
        card(("t1", "Table", table(2)), ("t2", "Table", table(2))),
        ["at most one table per card (got 2)"],
        id="two-tables",
    ),
    pytest.param(
        card(("t", "Table", table(100))),
        ["elements.t (Table): at most 100 rows, the header row included (got 101)"],
        id="table-101-rows",
    ),
    pytest.param(
        card(("t", "Table", table(3, columns=21, header=False))),
        ["elements.t (Table): at most 20 columns (got 21)"],
        id="table-21-columns",
    ),
    pytest.param(
        card(("t", "Table", {"columns": ["a", "b"], "rows": [["1", "2"], ["3"]]})),
        ["elements.t (Table): every row needs 2 cells (rows 1 differ)"],
        id="table-uneven",
    ),
    pytest.param(card(("h", "Heading", {})), ["elements.h (Heading): text: required"], id="heading-without-text"),
    pytest.param(
        card(("t", "Table", table(101, header=False))),
        ["elements.t (Table): at most 100 rows, the header row included (got 101)"],
        id="headerless-101-rows",
    ),
    pytest.param(
        card(("t", "Table", {"columns": ["a"], "rows": []})),
        ["elements.t (Table): a table needs at least one row"],
        id="table-empty",
    ),
    pytest.param(
        card(*[(f"c{i}", "Chart", chart()) for i in range(3)]),
        ["at most two charts per card (got 3)"],
        id="three-charts",
    ),
    pytest.param(
        card(("c", "Chart", chart(title="t" * 51))), ["elements.c (Chart): title: at most 50 characters"], id="title-51"
    ),
    pytest.param(
        card(("c", "Chart", chart(series=13))),
        ["elements.c (Chart): series: at most 12 items (got 13)"],
        id="13-series",
    ),
    pytest.param(
        card(("c", "Chart", chart(points=21))),
        ["elements.c (Chart): series[0].points: at most 20 items (got 21)"],
        id="21-points",
    ),
    pytest.param(
        card(("c", "Chart", chart(label="l" * 20))),
        ["elements.c (Chart): series[0].points[0].label: at most 20 characters"],
        id="label-21",
    ),
    pytest.param(
        card(("c", "Chart", chart(name="n" * 20))),
        ["elements.c (Chart): series[0].name: at most 20 characters"],
        id="series-name-21",
    ),
    pytest.param(
        card(*[(f"f{i}", "Field", {"label": f"L{i}", "value": i}) for i in range(11)]),
        ["at most 10 fields per card (got 11)"],
        id="eleven-fields",
    ),
    pytest.param(
        card(*[(f"d{i}", "Divider", {}) for i in range(50)]),
        ["at most 50 Slack blocks (this card needs 51)"],
        id="fifty-one-blocks",
    ),
    pytest.param(
        card(("t", "Text", {"text": "x" * 3001})), ["elements.t (Text): text: at most 3000 characters"], id="text-3001"
    ),
    pytest.param(card(title=None), ["root: the card is empty"], id="empty"),
    pytest.param(
        card(("h", "Heading", {"text": "hi", "color": "red"})),
        ["elements.h (Heading): color: unknown property"],
        id="unknown-prop",
    ),
]


@pytest.mark.parametrize(("spec", "expected"), PROBLEMS)
def test_each_problem_is_refused_exactly(agent, spec, expected):
    refused(agent, spec, *expected)


def test_every_problem_is_listed_at_once(agent):
    spec = card(
        ("t1", "Table", table(2)),
        ("t2", "Table", table(2)),
        *[(f"f{i}", "Field", {"label": "k", "value": "v"}) for i in range(11)],
        ("b", "Button", {"label": "go", "action": "x"}),
        ("c", "Chart", chart(title="t" * 60)),
    )
    text = refused(
        agent,
        spec,
        "at most one table per card (got 2)",
        "at most 10 fields per card (got 11)",
        "elements.b (Button): buttons are links only",
        "elements.c (Chart): title: at most 50 characters",
    )
    assert text.count(";") >= 3


def test_a_malformed_spec_is_refused_by_the_schema(agent):
    result = agent.call("post_card", {"spec": {"root": "r", "elements": {"r": {"props": {}}}}})
    # pydantic names the missing field by its full location.
    assert result.is_error and "spec.elements.r.type\n  Field required" in text_of(result), text_of(result)
    result = agent.call("post_card", {"spec": "not an object"})
    assert result.is_error and "spec\n  Input should be a valid dictionary" in text_of(result), text_of(result)
    assert not ToolCall.objects.exists()


# The seed gives some bounds and Slack the rest (header text 150, button text 75, a section
# field 2,000 with its label): each is accepted at the bound and refused one past it.
BOUNDS = [
    pytest.param("Heading", {"text": "{}"}, "text", 150, id="heading"),
    pytest.param("Field", {"label": "{}", "value": "v"}, "label", 100, id="field-label"),
    pytest.param("Field", {"label": "k", "value": "{}"}, "value", 1900, id="field-value"),
    pytest.param("Button", {"label": "{}", "url": "https://example.com"}, "label", 75, id="button-label"),
    pytest.param("Text", {"text": "{}"}, "text", 3000, id="text"),
]


@pytest.mark.parametrize(("etype", "props", "prop", "limit"), BOUNDS)
def test_text_bounds_of_each_element(agent, etype, props, prop, limit):
    def at(length):
        return card(("e", etype, {k: ("x" * length if v == "{}" else v) for k, v in props.items()}))

    refused(agent, at(limit + 1), f"elements.e ({etype}): {prop}: at most {limit} characters")
    posted(agent, at(limit))


def test_card_title_bound(agent):
    refused(agent, card(("t", "Text", {"text": "hi"}), title="x" * 151), "elements.root (Card): title: at most 150")
    posted(agent, card(("t", "Text", {"text": "hi"}), title="x" * 150))


def test_nan_infinity_and_huge_numbers_are_listed_problems(agent):
    """Sent as raw JSON (NaN, Infinity and 1e999 are what a careless client writes), so the
    SDK client's own serialiser cannot turn them into null first."""
    spec = (
        '{"root": "r", "elements": {"r": {"type": "Card", "props": {"title": "t"}, "children": ["c", "f", "t"]},'
        ' "c": {"type": "Chart", "props": {"title": "c", "series": [{"name": "s", "points":'
        ' [{"label": "a", "value": NaN}, {"label": "b", "value": Infinity}, {"label": "c", "value": 1e999}]}]}},'
        ' "f": {"type": "Field", "props": {"label": "l", "value": -Infinity}},'
        ' "t": {"type": "Table", "props": {"rows": [[NaN, 1' + "0" * 400 + "]]}}}}"
    )
    result = agent.raw_call("post_card", '{"spec": ' + spec + "}")
    text = result["content"][0]["text"]
    assert result["isError"] is True
    for problem in (
        "elements.c (Chart): series[0].points[0].value: Input should be a finite number",
        "elements.c (Chart): series[0].points[1].value: Input should be a finite number",
        "elements.c (Chart): series[0].points[2].value: Input should be a finite number",
        "elements.f (Field): value: must be a finite number (not NaN or Infinity)",
        "elements.t (Table): rows[0][0]: must be a finite number (not NaN or Infinity)",
        "elements.t (Table): rows[0][1]: a whole number between -2^53 and 2^53",
    ):
        assert problem in text, text
    assert not ToolCall.objects.exists()


def test_nul_is_refused_with_where_it_is(agent):
    spec = card(("t", "Text", {"text": "a\u0000b"}), ("h", "Heading", {"text": "x\u0000"}))
    result = agent.raw_call("post_card", json.dumps({"spec": spec}))
    text = result["content"][0]["text"]
    assert result["isError"] is True
    assert "spec.elements.t.props.text: contains a NUL character" in text, text
    assert "spec.elements.h.props.text: contains a NUL character" in text, text
    assert not ToolCall.objects.exists()


def test_an_unpaired_surrogate_is_a_json_parse_error_before_any_tool(agent):
    body = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "post_card", "arguments": '
    body += '{"spec": {"root": "\\ud800", "elements": {}}}}}'
    response = httpx2.post(
        agent.url,
        content=body.encode(),
        headers={"authorization": f"Bearer {agent.token}", "content-type": "application/json", "accept": ACCEPT},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700 and "hex escape" in response.json()["error"]["message"]


def test_integers_are_kept_exactly_or_refused(agent):
    refused(
        agent,
        card(("f", "Field", {"label": "big", "value": 2**53 + 1}), ("t", "Table", {"rows": [[-(2**53) - 1]]})),
        "elements.f (Field): value: a whole number between -2^53 and 2^53",
        "elements.t (Table): rows[0][0]: a whole number between -2^53 and 2^53",
    )
    exact = posted(
        agent, card(("f", "Field", {"label": "big", "value": 2**53}), ("t", "Table", {"rows": [[-(2**53)]]}))
    )
    assert exact.card[1]["items"][0]["value"] == str(2**53) and exact.card[2]["rows"] == [[str(-(2**53))]]


def test_element_count_and_id_length_bounds(agent):
    def dividers(count: int) -> dict:
        elements = {f"d{i}": {"type": "Divider"} for i in range(count - 1)}
        return {"root": "r", "elements": {"r": {"type": "Card", "children": list(elements)}, **elements}}

    assert "at most 500 elements (got 501)" in refused(agent, dividers(501))
    assert "elements" not in refused(agent, dividers(500), "at most 50 Slack blocks").split("invalid card spec:")[1][:9]
    result = agent.call("post_card", {"spec": card(("x" * 101, "Text", {"text": "hi"}))})
    assert result.is_error and "String should have at most 100 characters" in text_of(result)
    posted(agent, card(("x" * 100, "Text", {"text": "hi"})))


def test_state_at_its_bound_and_non_finite_state(agent):
    spec = card(("t", "Text", {"text": "hi"}))
    padding = 16 * 1024 - len(json.dumps({"blob": ""}))
    nan = agent.raw_call("post_card", json.dumps({"spec": {**spec, "state": {"blob": "x"}}}).replace('"x"', "NaN"))
    assert nan["isError"] and "Out of range float values are not JSON compliant" in nan["content"][0]["text"]
    result = agent.call("post_card", {"spec": {**spec, "state": {"blob": "x" * (padding + 1)}}})
    assert result.is_error and "at most 16384 bytes as JSON" in text_of(result)
    posted(agent, {**spec, "state": {"blob": "x" * padding}})  # exactly 16 KiB


def test_a_chart_series_needs_a_point(agent):
    refused(
        agent,
        card(("c", "Chart", {"title": "t", "series": [{"name": "s", "points": []}]})),
        "elements.c (Chart): series[0].points: must not be empty",
    )


def test_state_is_bounded(agent):
    spec = card(("t", "Text", {"text": "hi"}))
    result = agent.call("post_card", {"spec": {**spec, "state": {"blob": "x" * (16 * 1024)}}})
    assert result.is_error and "spec.state\n  Value error, at most 16384 bytes as JSON" in text_of(result)
    posted(agent, {**spec, "state": {"blob": "x" * 1000}})


def test_table_cells_and_columns_are_bounded(agent):
    text = refused(
        agent,
        card(("t", "Table", {"columns": ["c" * 501], "rows": [["x" * 501]]})),
        "elements.t (Table): columns[0]: at most 500 characters",
        "elements.t (Table): rows[0][0]: at most 500 characters",
    )
    assert "Error executing tool post_card:" in text


def test_a_full_card_is_kept_as_block_kit_and_shown_in_the_thread(agent):
    spec = card(
        ("h", "Heading", {"text": "Deploy 42"}),
        ("t", "Text", {"text": "*All* checks passed"}),
        ("f1", "Field", {"label": "Branch", "value": "main"}),
        ("f2", "Field", {"label": "Duration", "value": 93}),
        ("tb", "Table", {"columns": ["job", "time"], "rows": [["lint", "3s"], ["test", "80s"]]}),
        ("c", "Chart", chart(series=2, points=3, title="Build times")),
        ("d", "Divider", {}),
        ("b1", "Button", {"label": "Open run", "url": "https://ci.example.com/run/42"}),
        ("b2", "Button", {"label": "Diff", "url": "https://git.example.com/c/abc"}),
    )
    spec["state"] = {"run": 42}
    message = posted(agent, spec)
    blocks = message.blocks
    assert [b["type"] for b in blocks] == [
        "header",
        "header",
        "section",
        "section",
        "table",
        "section",
        "divider",
        "actions",
    ]
    assert blocks[0]["text"] == {"type": "plain_text", "text": "Report", "emoji": True}
    assert blocks[3]["fields"] == [
        {"type": "mrkdwn", "text": "*Branch*\nmain"},
        {"type": "mrkdwn", "text": "*Duration*\n93"},
    ]
    assert blocks[4]["rows"][0] == [{"type": "raw_text", "text": "job"}, {"type": "raw_text", "text": "time"}]
    assert len(blocks[4]["rows"]) == 3
    assert blocks[5]["text"]["text"].startswith("*Build times*\n```")
    assert [e["url"] for e in blocks[7]["elements"]] == [
        "https://ci.example.com/run/42",
        "https://git.example.com/c/abc",
    ]
    assert all(e["type"] == "button" and "value" not in e for e in blocks[7]["elements"])
    assert message.text == "Report"  # the notification fallback
    assert message.thread_id == agent.session.thread_id
    assert ToolCall.objects.get(id=message.tool_call_id).arguments["state"] == {"run": 42}


def test_limits_at_the_boundary_are_accepted(agent):
    spec = card(
        ("t", "Table", table(99, columns=20)),
        ("c1", "Chart", chart(series=12, points=20, title="t" * 50, label="l" * 18, name="n" * 18)),
        ("c2", "Chart", chart()),
        *[(f"f{i}", "Field", {"label": "k", "value": "v"}) for i in range(10)],
    )
    message = posted(agent, spec)
    assert len(message.blocks) <= 50
    table_block = next(b for b in message.blocks if b["type"] == "table")
    assert len(table_block["rows"]) == 100 and len(table_block["rows"][0]) == 20


def test_uneven_rows_are_named_at_the_widest_allowed_table(agent):
    props = table(8, columns=20)
    for row in range(1, 8):
        props["rows"][row] = props["rows"][row][:19]
    refused(
        agent, card(("t", "Table", props)), "elements.t (Table): every row needs 20 cells (rows 1, 2, 3, 4, 5 differ)"
    )


def test_a_headerless_table_of_100_rows_is_accepted(agent):
    message = posted(agent, card(("t", "Table", table(100, header=False))))
    assert len(next(b for b in message.blocks if b["type"] == "table")["rows"]) == 100


def test_long_charts_split_into_sections_within_slack_limits(agent):
    spec = card(("c", "Chart", chart(series=12, points=20, title="Wide")))
    message = posted(agent, spec)
    sections = [b for b in message.blocks if b["type"] == "section"]
    assert len(sections) > 1
    assert all(len(s["text"]["text"]) <= 3000 for s in sections)


def test_fifty_cards_per_runner(agent):
    spec = card(("t", "Text", {"text": "hi"}))
    results = agent.call_many("post_card", [{"spec": spec}] * 55)
    assert sum(not r.is_error for r in results) == 50
    refusals = [text_of(r) for r in results if r.is_error]
    assert len(refusals) == 5 and all("limit of 50 cards per runner reached" in t for t in refusals)


def test_a_workspace_wide_secret_refuses_a_card(agent, settings):
    settings.SP_STORE_KEY = [new_key()]
    secret_set_for_workspace(workspace_id=agent.session.workspace_id, name="SHARED", value="ws-card-secret-1")
    result = agent.call("post_card", {"spec": card(("t", "Text", {"text": "key: ws-card-secret-1"}))})
    assert result.is_error and "contains the value of the secret" in text_of(result)
    assert not ToolCall.objects.exists()


def test_a_card_containing_a_secret_is_refused(agent, settings):
    settings.SP_STORE_KEY = [new_key()]
    secret_set(session=agent.session, name="DB_PASSWORD", value="pa55-w0rd-xyz")
    spec = card(("f", "Field", {"label": "password", "value": "pa55-w0rd-xyz"}))
    result = agent.call("post_card", {"spec": spec})
    text = text_of(result)
    assert result.is_error and "contains the value of the secret" in text
    assert "pa55-w0rd-xyz" not in text
    assert not ToolCall.objects.exists()


def test_a_very_long_problem_list_is_capped(agent):
    spec = card(("c", "Chart", chart(series=12, points=20, label="l" * 30)))
    text = refused(agent, spec, "series[0].points[0].label: at most 20 characters", "and 210 more problems")
    assert text.count("at most 20 characters") == 30


def test_one_character_is_enough_and_empty_is_refused(agent):
    def spec(text: str) -> dict:
        one_point = {"title": text, "series": [{"name": text, "points": [{"label": text, "value": 1}]}]}
        return card(
            ("h", "Heading", {"text": text}),
            ("t", "Text", {"text": text}),
            ("f", "Field", {"label": text, "value": "v"}),
            ("c", "Chart", one_point),
            ("b", "Button", {"label": text, "url": "https://example.com"}),
        )

    refused(
        agent,
        spec(""),
        "elements.h (Heading): text: must not be empty",
        "elements.t (Text): text: must not be empty",
        "elements.f (Field): label: must not be empty",
        "elements.c (Chart): title: must not be empty",
        "elements.c (Chart): series[0].name: must not be empty",
        "elements.c (Chart): series[0].points[0].label: must not be empty",
        "elements.b (Button): label: must not be empty",
    )
    posted(agent, spec("x"))
