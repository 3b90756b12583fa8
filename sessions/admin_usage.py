"""The usage summary the admin's session and agent change pages show (read-only)."""

from django.utils.html import format_html, format_html_join

ROWS = (
    ("turns", "turns"),
    ("agent minutes", "agent_minutes"),
    ("input tokens", "input_tokens"),
    ("output tokens", "output_tokens"),
    ("cache read tokens", "cache_read_tokens"),
    ("cache written tokens", "cache_creation_tokens"),
)


def _cost(value) -> str:
    return "—" if value is None else f"${value:,.2f}"


def usage_table(usage: dict) -> str:
    """A small table: this month and all time, side by side."""
    month, total = usage["month"], usage["all"]
    rows = format_html_join(
        "", "<tr><th scope='row'>{}</th><td>{}</td><td>{}</td></tr>", ((n, month[k], total[k]) for n, k in ROWS)
    )
    return format_html(
        "<table class='usage-summary'><thead><tr><th></th><th>this month (UTC)</th><th>all time</th></tr></thead>"
        "<tbody>{}<tr><th scope='row'>cost</th><td>{}</td><td>{}</td></tr></tbody></table>",
        rows,
        _cost(month["cost_usd"]),
        _cost(total["cost_usd"]),
    )
