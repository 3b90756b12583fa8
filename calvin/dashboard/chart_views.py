"""/w/<slug>/charts/: the workspace's charts, each with its own period picker (?calls=24h&spend=30d).
Thin: the numbers come from chart_selectors, the drawing from svg_charts."""

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.http import urlencode

from calvin.dashboard import chart_selectors as charts
from calvin.dashboard.selectors import member_for_slug
from calvin.dashboard.svg_charts import bar_chart, line_chart
from calvin.dashboard.workspace_views import workspace_enter


@dataclass(frozen=True)
class Chart:
    key: str  # its query parameter
    title: str
    select: Callable
    default: str
    draw: Callable
    unit: str = ""
    y_label: str = ""
    per_bucket: bool = True  # "… per hour" / "… per day" after the title
    stacked: bool = False


CHARTS = (
    Chart("calls", "Tool calls", charts.tool_calls_by_tool, "24h", bar_chart, "calls", "calls", stacked=True),
    Chart("latency", "Approval latency (p50, p90)", charts.approval_latency, "7d", line_chart),
    Chart("minutes", "Agent minutes", charts.agent_minutes, "7d", bar_chart, "min", "minutes"),
    Chart("spend", "Spend", charts.spend, "7d", bar_chart, "$", "USD"),
    Chart("turns", "Turns per agent", charts.turns_per_agent, "7d", bar_chart, "turns", "turns", per_bucket=False),
)


def _svg(chart: Chart, workspace, period):
    series = chart.select(workspace, period)
    title = f"{chart.title} per {period.bucket}" if chart.per_bucket else chart.title
    title += f", last {period.words}"
    unit, y_label = chart.unit, chart.y_label
    if chart.key == "latency":
        unit, divisor = charts.latency_unit(series)
        series = [
            (name, [(x, None if v is None else round(v / divisor, 1)) for x, v in points]) for name, points in series
        ]
        y_label = {"s": "seconds", "min": "minutes", "h": "hours"}[unit]
    extra = {"stacked": True} if chart.stacked else {}
    return chart.draw(title=title, series=series, y_label=y_label, unit=unit, **extra)


@login_required
def workspace_charts(request, slug: str):
    member = member_for_slug(request.user, slug)
    workspace_enter(request, member)
    chosen = {chart.key: charts.period_from(request.GET.get(chart.key), chart.default) for chart in CHARTS}
    shown = []
    for chart in CHARTS:
        picks = []
        for key in charts.PERIODS:
            query = {c.key: (key if c.key == chart.key else chosen[c.key].key) for c in CHARTS}
            picks.append(
                {
                    "key": key,
                    "words": charts.PERIODS[key].words,
                    "query": urlencode(query),
                    "current": key == chosen[chart.key].key,
                }
            )
        shown.append({"chart": chart, "svg": _svg(chart, member.workspace, chosen[chart.key]), "picks": picks})
    context = {"member": member, "workspace": member.workspace, "charts": shown}
    return render(request, "dashboard/charts.html", context)
