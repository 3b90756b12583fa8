"""A card as the web thread shows it: charts as SVG with axes and a legend, send_card choices marked."""

from django import template

from calvin.dashboard.svg_charts import bar_chart, line_chart
from tools.models import CardChoice

register = template.Library()


@register.simple_tag
def chart_svg(item):
    """A card's chart item (tools/card_spec/layout.py) through the dashboard's charts. A single
    series has no legend there, so its name labels the y axis instead."""
    series = [(s["name"], [(p["label"], p["value"]) for p in s["points"]]) for s in item["series"]]
    draw = line_chart if item["style"] == "line" else bar_chart
    return draw(title=item["title"], series=series, y_label=series[0][0] if len(series) == 1 else "")


def _is_choice_row(item: dict) -> bool:
    return item.get("kind") == "actions" and item.get("action") == "choice"


def _names(people: list[str]) -> str:
    return people[0] if len(people) == 1 else ", ".join(people[:-1]) + " and " + people[-1]


def _choices_text(choices: list[CardChoice], labels: dict[int, str], viewer_id) -> str:
    by_label: dict[int, list[str]] = {}
    for choice in choices:
        who = "you" if choice.member_id == viewer_id else str(choice.member)
        by_label.setdefault(choice.action_index, []).append(who)
    parts = [f"{labels.get(index, '?')} by {_names(people)}" for index, people in sorted(by_label.items())]
    return "Chosen: " + "; ".join(parts) + "."


@register.simple_tag(takes_context=True)
def card_view(context, message) -> list[dict]:
    """The card's items for this page. On a send_card card, the button the reader chose stays
    marked (and the row disabled for them: a second choice is refused), every chosen button is
    marked as picked, and a line says who chose what. A page rendered for no reader (a live
    push) marks what was picked and names everyone.

    Choices are read only for cards that have choice buttons: one query per such card."""
    items = message.card or []
    if not any(_is_choice_row(item) for item in items):
        return items
    choices = list(CardChoice.objects.filter(message_id=message.id).select_related("member__user").order_by("id"))
    if not choices:
        return items
    viewer_id = getattr(context.get("current_member"), "id", None)
    mine = next((c.action_index for c in choices if c.member_id == viewer_id), None)
    picked = {c.action_index for c in choices}
    labels, shown, last_row = {}, [], None
    for item in items:
        if not _is_choice_row(item):
            shown.append(item)
            continue
        buttons = []
        for button in item["items"]:
            index = int(button["value"])
            labels[index] = button["label"]
            marks = {"picked": index in picked, "chosen": index == mine}
            buttons.append({**button, **marks, **({"disabled": True} if mine is not None else {})})
        shown.append({**item, "items": buttons})
        last_row = len(shown)
    shown.insert(last_row, {"kind": "choices", "text": _choices_text(choices, labels, viewer_id)})
    return shown
