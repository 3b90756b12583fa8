"""calvin.dashboard.svg_charts: parsed as XML, as a browser would read them."""

import xml.etree.ElementTree as ET
from decimal import Decimal

import pytest

from calvin.dashboard.svg_charts import bar_chart, format_value, line_chart, nice_ticks

NS = "{http://www.w3.org/2000/svg}"


def parse(svg) -> ET.Element:
    return ET.fromstring(str(svg))


def texts(root, cls: str) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{NS}text") if cls in t.get("class", "").split()]


def hovers(root, tag: str) -> list[str]:
    return [el.find(f"{NS}title").text for el in root.iter(f"{NS}{tag}")]


TWO = [
    ("send_file", [("13:00", 3), ("14:00", 12), ("15:00", 7)]),
    ("read_thread", [("13:00", 1), ("14:00", 0), ("15:00", 4)]),
]


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (0, 12, [0, 2, 4, 6, 8, 10, 12]),
        (0, 95, [0, 20, 40, 60, 80, 100]),
        (0, 1, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (0, 0.034, [0, 0.01, 0.02, 0.03, 0.04]),
        (-7, 3, [-8, -6, -4, -2, 0, 2, 4]),
        (5, 5, [5, 6, 7, 8, 9, 10]),
        (0, 0, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    ],
)
def test_ticks_are_1_2_5_steps_covering_the_values(low, high, expected):
    assert nice_ticks(low, high) == pytest.approx(expected)


def test_values_read_as_people_write_them():
    assert format_value(12, "calls") == "12 calls"
    assert format_value(1234567) == "1,234,567"
    assert format_value(2.5, "$") == "$2.5"
    assert format_value(-3, "$") == "-$3"
    assert format_value(0.004, "$") == "$0.004"
    assert format_value(0.125, "min") == "0.12 min"
    assert (format_value(1, "calls"), format_value(1, "turns"), format_value(1, "min")) == ("1 call", "1 turn", "1 min")


def test_counts_have_whole_ticks_and_fractions_keep_theirs():
    counts = parse(bar_chart(title="turns", series=[("turns", [("main", 1), ("docs", 2)])], y_label="turns"))
    assert texts(counts, "y-tick") == ["0", "1", "2"]
    minutes = parse(bar_chart(title="minutes", series=[("min", [("a", 0.1)])], y_label="minutes", unit="min"))
    assert "0.1" in texts(minutes, "y-tick") and "0.05" not in texts(minutes, "y-tick")
    assert texts(minutes, "value") == ["0.1 min"]  # a bar's own value keeps its unit


def test_ticks_name_a_currency_even_with_an_axis_label_and_the_unit_without_one():
    spend = parse(bar_chart(title="spend", series=[("usd", [("a", 2)])], y_label="spend", unit="$"))
    assert texts(spend, "y-tick")[-1] == "$2"
    bare = parse(bar_chart(title="calls", series=[("calls", [("a", 2)])], unit="calls"))
    assert texts(bare, "y-tick")[-1] == "2 calls"


def test_a_lone_bar_is_a_bar_not_the_whole_plot():
    root = parse(bar_chart(title="turns per agent", series=[("turns", [("main", 1)])]))
    (bar,) = root.iter(f"{NS}rect")
    assert float(bar.get("width")) <= 64
    assert abs(float(bar.get("x")) + float(bar.get("width")) / 2 - (64 + (640 - 64 - 16) / 2)) < 0.5  # centred


def test_line_chart_has_ticks_a_point_per_value_hover_titles_and_a_legend():
    root = parse(line_chart(title="Tool calls per hour", series=TWO, y_label="calls", unit="calls"))
    assert root.get("viewBox") == "0 0 640 278"  # a legend row under the plot
    assert root.get("width") is None  # scales to its container
    assert root.find(f"{NS}title").text == "Tool calls per hour"
    assert texts(root, "y-tick") == ["0", "2", "4", "6", "8", "10", "12"]  # the axis label names the unit
    assert texts(root, "x-tick") == ["13:00", "14:00", "15:00"]
    assert texts(root, "axis-label") == ["calls"]
    points = hovers(root, "circle")
    assert len(points) == 6
    assert "send_file · 14:00 · 12 calls" in points and "read_thread · 14:00 · 0 calls" in points
    assert "12 calls" in texts(root, "value")
    assert [t.text for t in root.iter(f"{NS}text") if t.text in ("send_file", "read_thread")] == [
        "send_file",
        "read_thread",
    ]
    assert len(list(root.iter(f"{NS}polyline"))) == 2


def test_one_series_has_no_legend():
    root = parse(bar_chart(title="Turns per agent", series=[("turns", [("alpha", 4), ("beta", 9)])]))
    assert root.find(f".//{NS}g[@class='legend']") is None
    assert hovers(root, "rect") == ["turns · alpha · 4", "turns · beta · 9"]
    assert texts(root, "value") == ["4", "9"]


def test_grouped_bars_sit_side_by_side_and_stacked_ones_on_top_of_each_other():
    grouped = parse(bar_chart(title="g", series=TWO))
    rects = [r for r in grouped.iter(f"{NS}rect") if r.get("class") == "bar"]
    assert len(rects) == 6
    first, second = rects[0], rects[3]  # 13:00 of each series
    assert float(second.get("x")) > float(first.get("x"))

    stacked = parse(bar_chart(title="s", series=TWO, stacked=True))
    rects = [r for r in stacked.iter(f"{NS}rect") if r.get("class") == "bar"]
    first, second = rects[0], rects[3]
    assert first.get("x") == second.get("x")
    assert float(second.get("y")) + float(second.get("height")) == pytest.approx(float(first.get("y")), abs=0.15)
    # Ticks reach the tallest stack (12 + 0 at 14:00, 7 + 4 = 11 at 15:00), and totals are written.
    assert texts(stacked, "y-tick")[-1] == "12"
    assert texts(stacked, "total") == ["4", "12", "11"]


def test_names_and_labels_stay_text():
    evil = "<script>alert(1)</script>"
    svg = str(line_chart(title=f"t {evil}", series=[(evil, [("<b>x</b>", 1)]), ("b&c", [("<b>x</b>", 2)])]))
    assert "<script>" not in svg and "<b>" not in svg
    root = parse(svg)
    assert not list(root.iter(f"{NS}script"))
    assert root.find(f"{NS}title").text == f"t {evil}"
    assert texts(root, "x-tick") == ["<b>x</b>"]
    assert f"{evil} · <b>x</b> · 1" in hovers(root, "circle")
    assert "b&c" in [t.text for t in root.iter(f"{NS}text")]


@pytest.mark.parametrize("chart", [line_chart, bar_chart])
@pytest.mark.parametrize("series", [[], [("a", [])], [("a", [("x", None)])], None])
def test_empty_data_is_an_empty_chart_that_says_so(chart, series):
    root = parse(chart(title="Spend per day", series=series))
    assert texts(root, "no-data") == ["no data"]
    assert not texts(root, "y-tick")
    assert not list(root.iter(f"{NS}circle")) and not [r for r in root.iter(f"{NS}rect") if r.get("class") == "bar"]


def test_decimals_gaps_and_negative_bars():
    root = parse(line_chart(title="spend", series=[("usd", [("a", Decimal("0.5")), ("b", None), ("c", 2)])], unit="$"))
    assert hovers(root, "circle") == ["usd · a · $0.5", "usd · c · $2"]
    assert len(list(root.iter(f"{NS}polyline"))) == 2  # the gap breaks the line

    bars = parse(bar_chart(title="delta", series=[("d", [("a", -3), ("b", 5)])]))
    ticks = texts(bars, "y-tick")
    assert ticks[0].startswith("-") and "0" in ticks


def test_many_labels_are_thinned_but_every_value_has_its_point():
    days = [(f"2026-11-{d:02}", d) for d in range(1, 31)]
    root = parse(line_chart(title="30 days", series=[("minutes", days)]))
    assert len(hovers(root, "circle")) == 30
    assert 5 <= len(texts(root, "x-tick")) < 30
    assert texts(root, "x-tick")[0] == "2026-11-01"
    assert not texts(root, "value")  # too many to write; hover titles remain
