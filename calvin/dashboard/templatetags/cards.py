"""Render a card's chart item as inline SVG for the web thread."""

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()

WIDTH, ROW, LABEL = 420, 18, 130
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


def _bars(item) -> str:
    values = [abs(p["value"]) for s in item["series"] for p in s["points"]] or [1]
    top = max(values) or 1
    parts, y = [], 0
    for i, series in enumerate(item["series"]):
        colour = COLOURS[i % len(COLOURS)]
        for point in series["points"]:
            width = abs(point["value"]) / top * (WIDTH - LABEL - 60)
            parts.append(
                f'<text x="0" y="{y + 13}" font-size="12">{escape(point["label"])}</text>'
                f'<rect x="{LABEL}" y="{y + 3}" width="{width:.1f}" height="{ROW - 6}" fill="{colour}">'
                f"<title>{escape(series['name'])}: {point['value']:g}</title></rect>"
                f'<text x="{LABEL + width + 4:.1f}" y="{y + 13}" font-size="11">{point["value"]:g}</text>'
            )
            y += ROW
    return f'<svg role="img" width="{WIDTH}" height="{y}" viewBox="0 0 {WIDTH} {y}">{"".join(parts)}</svg>'


def _lines(item) -> str:
    height, pad = 160, 20
    values = [p["value"] for s in item["series"] for p in s["points"]]
    low, high = min(values), max(values)
    span = (high - low) or 1
    parts = []
    for i, series in enumerate(item["series"]):
        points = series["points"]
        step = (WIDTH - 2 * pad) / max(len(points) - 1, 1)
        coords = " ".join(
            f"{pad + j * step:.1f},{height - pad - (p['value'] - low) / span * (height - 2 * pad):.1f}"
            for j, p in enumerate(points)
        )
        parts.append(
            f'<polyline fill="none" stroke-width="2" stroke="{COLOURS[i % len(COLOURS)]}" points="{coords}">'
            f"<title>{escape(series['name'])}</title></polyline>"
        )
    return f'<svg role="img" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}">{"".join(parts)}</svg>'


@register.simple_tag
def chart_svg(item) -> str:
    return mark_safe(_lines(item) if item["style"] == "line" else _bars(item))
