"""Lay a checked card out as Slack Block Kit blocks (kept for the Slack adapter)."""

from tools.card_spec.layout import Item

MAX_BLOCKS = 50
SECTION_TEXT = 3000
BUTTONS_PER_ACTIONS = 25
BAR_WIDTH = 20


def _plain(text: str) -> dict:
    return {"type": "plain_text", "text": text, "emoji": True}


def _chart_lines(item: Item) -> list[str]:
    values = [p["value"] for s in item["series"] for p in s["points"]]
    top = max((abs(v) for v in values), default=0) or 1
    lines = []
    for series in item["series"]:
        if len(item["series"]) > 1:
            lines.append(series["name"])
        for point in series["points"]:
            bar = "█" * round(abs(point["value"]) / top * BAR_WIDTH)
            lines.append(f"{point['label']:<20} {bar} {point['value']:g}")
    return lines


def _chart_sections(item: Item) -> list[dict]:
    """A chart as monospaced bars, split so each section stays within Slack's 3,000 characters."""
    head = f"*{item['title']}*\n"
    chunks, current = [], []
    for line in _chart_lines(item):
        if len(head) + len("```\n" + "\n".join([*current, line]) + "\n```") > SECTION_TEXT and current:
            chunks.append(current)
            current, head = [], ""
        current.append(line)
    chunks.append(current)
    sections, head = [], f"*{item['title']}*\n"
    for chunk in chunks:
        sections.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": head + "```\n" + "\n".join(chunk) + "\n```"}}
        )
        head = ""
    return sections


def _table_block(item: Item) -> dict:
    rows = ([item["columns"]] if item["columns"] else []) + item["rows"]
    return {"type": "table", "rows": [[{"type": "raw_text", "text": cell} for cell in row] for row in rows]}


def card_blocks(items: list[Item]) -> list[dict]:
    blocks: list[dict] = []
    for item in items:
        kind = item["kind"]
        if kind == "header":
            blocks.append({"type": "header", "text": _plain(item["text"])})
        elif kind == "text":
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": item["text"]}})
        elif kind == "fields":
            fields = [{"type": "mrkdwn", "text": f"*{f['label']}*\n{f['value']}"} for f in item["items"]]
            blocks.append({"type": "section", "fields": fields})
        elif kind == "table":
            blocks.append(_table_block(item))
        elif kind == "chart":
            blocks.extend(_chart_sections(item))
        elif kind == "buttons":
            buttons = item["items"]
            for start in range(0, len(buttons), BUTTONS_PER_ACTIONS):
                blocks.append(
                    {
                        "type": "actions",
                        "elements": [
                            {
                                "type": "button",
                                "text": _plain(b["label"]),
                                "url": b["url"],
                                "action_id": f"link-{start + i}",
                            }
                            for i, b in enumerate(buttons[start : start + BUTTONS_PER_ACTIONS])
                        ],
                    }
                )
        elif kind == "actions":
            # Buttons people press (a question's options, an approval's decision): the
            # action_id carries where the press goes, as calvin/dashboard/actions.py names it.
            elements = []
            for i, b in enumerate(item["items"]):
                if b.get("disabled"):
                    continue  # Slack has no disabled button: a decided card shows its note instead
                button = {
                    "type": "button",
                    "text": _plain(b["label"]),
                    "value": str(b["value"]),
                    "action_id": f"{item['action']}:{item['target_id']}:{i}",
                }
                if b.get("style") in ("primary", "danger"):
                    button["style"] = b["style"]
                elements.append(button)
            for start in range(0, len(elements), BUTTONS_PER_ACTIONS):
                blocks.append({"type": "actions", "elements": elements[start : start + BUTTONS_PER_ACTIONS]})
        elif kind == "note":
            blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": item["text"]}]})
        elif kind == "divider":
            blocks.append({"type": "divider"})
    return blocks


def card_fallback_text(items: list[Item]) -> str:
    """The notification text Slack shows where blocks are not rendered."""
    for item in items:
        if item["kind"] in ("header", "text"):
            return item["text"][:300]
    return "Card"
