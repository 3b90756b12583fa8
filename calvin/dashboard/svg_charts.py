"""Server-rendered SVG charts: axes with "nice" ticks, value labels, a legend, hover titles.

Used by the dashboard's charts and by cards' chart items. No script: each point and bar carries a
`<title>` ("tool X · 14:00 · 12 calls") that the browser shows on hover. Sizes go through the
viewBox, so a chart scales to its container. Every text is escaped here: a series named
`<script>` stays text. Colours are presentation attributes (the CSP forbids style attributes).

    series: [(name, [(x_label, value), ...]), ...]

The x axis is the union of the series' labels in first-seen order; a value of None is a gap.
bar_chart draws grouped bars (one bar per series side by side at each x), or stacked ones with
stacked=True (the dashboard's "calls per hour by tool", where many tools share an hour).
"""

import math
from decimal import Decimal

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 640, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 32, 44
LEGEND_ROW, LEGEND_ITEM = 18, 150
# Value labels over points and bars only while they fit; hover titles always.
MAX_VALUE_LABELS = 16
COLOURS = (
    "#3b82f6",
    "#f59e0b",
    "#10b981",
    "#ef4444",
    "#8b5cf6",
    "#ec4899",
    "#14b8a6",
    "#f97316",
    "#6366f1",
    "#84cc16",
    "#06b6d4",
    "#a855f7",
)
MUTED = "#57606a"
MAX_BAR_WIDTH = 64  # one agent's bar is a bar, not the whole plot
GRID = "#d0d7de"


def nice_step(span: float, count: int = 5) -> float:
    """The 1-2-5 step that cuts `span` into the number of intervals nearest `count`."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    power = 10 ** math.floor(math.log10(span / count))
    candidates = [factor * power for factor in (1, 2, 5, 10)]
    return min(candidates, key=lambda step: (abs(span / step - count), -step))


def nice_ticks(low: float, high: float, count: int = 5, *, whole: bool = False) -> list[float]:
    """Tick values from a multiple of the step at or below `low` to one at or above `high`;
    `whole`: steps of at least 1 (counts: no "0.5 calls")."""
    if high < low:
        low, high = high, low
    if high == low:
        high = low + (abs(low) or 1)
    step = nice_step(high - low, count)
    if whole:
        step = max(step, 1.0)
    start, stop = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    return [round(i * step, 10) for i in range(start, stop + 1)]


def format_number(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) < 0.01:
        return f"{value:.2g}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def format_value(value: float, unit: str = "") -> str:
    number = format_number(value)
    if unit in ("$", "€", "£"):
        return f"-{unit}{number[1:]}" if number.startswith("-") else f"{unit}{number}"
    if unit == "%":
        return f"{number}%"
    if unit.endswith("s") and abs(value) == 1:
        unit = unit[:-1]  # 1 call, 1 turn
    return f"{number} {unit}" if unit else number


def _tick_text(value: float, unit: str, y_label: str) -> str:
    # The axis label names the unit once; ticks repeat only a currency or percent sign.
    return format_value(value, unit if not y_label or unit in ("$", "€", "£", "%") else "")


def _ticks(values: list[float], *, low: float, high: float) -> list[float]:
    return nice_ticks(low, high, whole=all(float(v).is_integer() for v in values))


def _clean(series) -> list[tuple[str, list[tuple[str, float | None]]]]:
    cleaned = []
    for name, points in series or ():
        values = []
        for label, value in points or ():
            if isinstance(value, Decimal):
                value = float(value)
            values.append((str(label), None if value is None else float(value)))
        cleaned.append((str(name), values))
    return cleaned


def _x_labels(series) -> list[str]:
    seen: dict[str, None] = {}
    for _name, points in series:
        for label, _value in points:
            seen.setdefault(label, None)
    return list(seen)


class _Frame:
    """The plot area and its scales: x by label index, y by value."""

    def __init__(self, labels: list[str], ticks: list[float], legend_rows: int):
        self.labels, self.ticks = labels, ticks
        self.height = HEIGHT + legend_rows * LEGEND_ROW
        self.plot_w, self.plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
        self.low, self.high = ticks[0], ticks[-1]

    def y(self, value: float) -> float:
        return TOP + self.plot_h - (value - self.low) / ((self.high - self.low) or 1) * self.plot_h

    def band(self) -> float:
        return self.plot_w / max(len(self.labels), 1)

    def x_centre(self, index: int) -> float:
        return LEFT + (index + 0.5) * self.band()


def _axes(frame: _Frame, *, y_label: str, unit: str) -> list[str]:
    parts = ['<g class="axes" font-size="11">']
    for tick in frame.ticks:
        y = frame.y(tick)
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}" '
            f'stroke-width="1"/><text class="tick y-tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" '
            f'fill="{MUTED}">{escape(_tick_text(tick, unit, y_label))}</text>'
        )
    bottom = TOP + frame.plot_h
    parts.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{bottom}" stroke="{MUTED}"/>')
    parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{bottom}" y2="{bottom}" stroke="{MUTED}"/>')
    # Every k-th x label, so labels about 56 units wide never overlap.
    every = max(1, math.ceil(len(frame.labels) * 56 / frame.plot_w))
    for index, label in enumerate(frame.labels):
        if index % every:
            continue
        parts.append(
            f'<text class="tick x-tick" x="{frame.x_centre(index):.1f}" y="{bottom + 16}" text-anchor="middle" '
            f'fill="{MUTED}">{escape(label)}</text>'
        )
    if y_label:
        middle = TOP + frame.plot_h / 2
        parts.append(
            f'<text class="axis-label" x="14" y="{middle:.1f}" text-anchor="middle" fill="{MUTED}" '
            f'transform="rotate(-90 14 {middle:.1f})">{escape(y_label)}</text>'
        )
    parts.append("</g>")
    return parts


def _legend(names: list[str]) -> tuple[list[str], int]:
    """Swatch and name per series, in rows under the plot; none for a single series."""
    if len(names) < 2:
        return [], 0
    per_row = max(1, (WIDTH - LEFT) // LEGEND_ITEM)
    parts = ['<g class="legend" font-size="12">']
    for i, name in enumerate(names):
        row, col = divmod(i, per_row)
        x, y = LEFT + col * LEGEND_ITEM, HEIGHT - 4 + row * LEGEND_ROW
        parts.append(
            f'<g class="legend-item"><rect x="{x}" y="{y - 10}" width="10" height="10" '
            f'fill="{COLOURS[i % len(COLOURS)]}"/><text x="{x + 14}" y="{y}">{escape(_short(name, 20))}</text></g>'
        )
    parts.append("</g>")
    return parts, math.ceil(len(names) / per_row)


def _short(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def _svg(*, title: str, kind: str, frame_height: int, body: list[str]) -> SafeString:
    heading = escape(title)
    return mark_safe(
        f'<svg class="chart chart-{kind}" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {WIDTH} {frame_height}" preserveAspectRatio="xMidYMid meet" '
        f'font-family="system-ui, sans-serif"><title>{heading}</title>'
        f'<text class="chart-title" x="{LEFT}" y="18" font-size="13" font-weight="600">{heading}</text>'
        f"{''.join(body)}</svg>"
    )


def _empty(*, title: str, kind: str) -> SafeString:
    """The frame without ticks, saying so: an empty chart is not an error."""
    frame = _Frame([], [0.0, 1.0], 0)
    bottom = TOP + frame.plot_h
    body = [
        f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{bottom}" stroke="{GRID}"/>',
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{bottom}" y2="{bottom}" stroke="{GRID}"/>',
        f'<text class="no-data" x="{LEFT + frame.plot_w / 2:.1f}" y="{TOP + frame.plot_h / 2:.1f}" '
        f'text-anchor="middle" font-size="14" fill="{MUTED}">no data</text>',
    ]
    return _svg(title=title, kind=kind, frame_height=frame.height, body=body)


def _hover(name: str, label: str, value: float, unit: str) -> str:
    words = f"{label} · {format_value(value, unit)}"
    return escape(f"{name} · {words}" if name else words)


def _prepare(series, *, stacked: bool = False):
    cleaned = _clean(series)
    labels = _x_labels(cleaned)
    values = [v for _n, points in cleaned for _l, v in points if v is not None]
    if not labels or not values:
        return cleaned, labels, None
    if stacked:
        sums: dict[str, list[float]] = {}
        for _n, points in cleaned:
            for label, v in points:
                if v is not None:
                    sums.setdefault(label, [0.0, 0.0])[0 if v >= 0 else 1] += v
        values = [s for pair in sums.values() for s in pair]
    return cleaned, labels, values


def line_chart(*, title: str, series, y_label: str = "", unit: str = "") -> SafeString:
    cleaned, labels, values = _prepare(series)
    if values is None:
        return _empty(title=title, kind="line")
    legend, rows = _legend([name for name, _p in cleaned])
    frame = _Frame(labels, _ticks(values, low=min(values), high=max(values)), rows)
    index = {label: i for i, label in enumerate(labels)}
    show_values = len(labels) <= MAX_VALUE_LABELS and len(cleaned) <= 3
    body = _axes(frame, y_label=y_label, unit=unit)
    for i, (name, points) in enumerate(cleaned):
        colour = COLOURS[i % len(COLOURS)]
        body.append(f'<g class="series" data-series="{escape(name)}">')
        # A gap (None) breaks the line into runs.
        runs, run = [], []
        for label, value in points:
            if value is None:
                runs, run = runs + [run] if run else runs, []
                continue
            run.append(f"{frame.x_centre(index[label]):.1f},{frame.y(value):.1f}")
        runs += [run] if run else []
        for run in runs:
            body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(run)}"/>')
        for label, value in points:
            if value is None:
                continue
            x, y = frame.x_centre(index[label]), frame.y(value)
            body.append(
                f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}">'
                f"<title>{_hover(name, label, value, unit)}</title></circle>"
            )
            if show_values:
                body.append(
                    f'<text class="value" x="{x:.1f}" y="{y - 7:.1f}" text-anchor="middle" font-size="10" '
                    f'fill="{MUTED}">{escape(format_value(value, unit))}</text>'
                )
        body.append("</g>")
    return _svg(title=title, kind="line", frame_height=frame.height, body=body + legend)


def bar_chart(*, title: str, series, y_label: str = "", unit: str = "", stacked: bool = False) -> SafeString:
    cleaned, labels, values = _prepare(series, stacked=stacked)
    if values is None:
        return _empty(title=title, kind="bar")
    legend, rows = _legend([name for name, _p in cleaned])
    # Bars grow from zero, so zero is always on the axis.
    frame = _Frame(labels, _ticks(values, low=min(0.0, *values), high=max(0.0, *values)), rows)
    index = {label: i for i, label in enumerate(labels)}
    band = frame.band()
    groups = 1 if stacked else len(cleaned)
    width = max(1.0, min(band * 0.8 / groups, MAX_BAR_WIDTH))
    bars_drawn = sum(1 for _n, points in cleaned for _l, v in points if v is not None)
    show_values = (len(labels) if stacked else bars_drawn) <= MAX_VALUE_LABELS
    base_up: dict[str, float] = {}
    base_down: dict[str, float] = {}
    body = _axes(frame, y_label=y_label, unit=unit)
    for i, (name, points) in enumerate(cleaned):
        colour = COLOURS[i % len(COLOURS)]
        body.append(f'<g class="series" data-series="{escape(name)}">')
        for label, value in points:
            if value is None:
                continue
            centre = frame.x_centre(index[label])
            if stacked:
                bases = base_up if value >= 0 else base_down
                start = bases.get(label, 0.0)
                bases[label] = start + value
                top, bottom = frame.y(max(start, start + value)), frame.y(min(start, start + value))
                x = centre - width / 2
            else:
                top, bottom = frame.y(max(value, 0.0)), frame.y(min(value, 0.0))
                x = centre - width * groups / 2 + i * width
            hover = _hover(name, label, value, unit)
            body.append(
                f'<rect class="bar" x="{x:.1f}" y="{top:.1f}" width="{width:.1f}" '
                f'height="{max(bottom - top, 0.5):.1f}" fill="{colour}"><title>{hover}</title></rect>'
            )
            if show_values and not stacked:
                y = top - 4 if value >= 0 else bottom + 11
                body.append(
                    f'<text class="value" x="{x + width / 2:.1f}" y="{y:.1f}" text-anchor="middle" font-size="10" '
                    f'fill="{MUTED}">{escape(format_value(value, unit))}</text>'
                )
        body.append("</g>")
    if stacked and show_values:
        for label, total in base_up.items():
            body.append(
                f'<text class="value total" x="{frame.x_centre(index[label]):.1f}" y="{frame.y(total) - 4:.1f}" '
                f'text-anchor="middle" font-size="10" fill="{MUTED}">{escape(format_value(total, unit))}</text>'
            )
    return _svg(title=title, kind="bar", frame_height=frame.height, body=body + legend)
