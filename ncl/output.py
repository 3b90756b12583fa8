"""How ncl shows answers: tables for people, JSON for programs.

Everything shown comes from the API, and much of it from agents (titles, messages, summaries),
so a table never prints a control character as it is: an escape sequence in a session's title
must not move the cursor, retitle the terminal or reverse the text of the line (bidi controls).
"""

import json
import unicodedata

CELL_WIDTH = 60


def printable(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        value = json.dumps(value, separators=(",", ":"))
    text = str(value)
    shown = []
    for char in text:
        if char == "\n":
            shown.append(" ⏎ ")
        elif char == "\t":
            shown.append(" ")
        elif unicodedata.category(char).startswith("C"):
            shown.append(f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")
        else:
            shown.append(char)
    return "".join(shown)


def _cell(value, width: int = CELL_WIDTH) -> str:
    text = printable(value)
    if isinstance(value, str) and len(value) >= 19 and value[4:5] == "-" and value[10:11] == "T":
        text = text[:16].replace("T", " ")  # a time, to the minute (the API's are UTC)
    return text if len(text) <= width else text[: width - 1] + "…"


def table(items: list[dict], columns: tuple[str, ...]) -> str:
    if not items:
        return "(none)"
    rows = [[_cell(item.get(column)) for column in columns] for item in items]
    widths = [max(len(column), *(len(row[i]) for row in rows)) for i, column in enumerate(columns)]
    lines = ["  ".join(column.upper().ljust(widths[i]) for i, column in enumerate(columns)).rstrip()]
    lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    return "\n".join(lines)


def record(item: dict) -> str:
    """One object, a field a line; nested values as indented JSON."""
    width = max((len(key) for key in item), default=0)
    lines = []
    for key, value in item.items():
        if isinstance(value, dict | list) and value:
            nested = json.dumps(value, indent=2, sort_keys=True)  # ASCII: escapes come out as \u....
            lines.append(f"{key}:")
            lines += ["  " + line for line in nested.splitlines()]
        else:
            lines.append(f"{key.ljust(width)}  {printable(value)}")
    return "\n".join(lines)


def as_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True)
