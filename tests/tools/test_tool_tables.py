"""The README's tool tables are the servers' own: made from each tool's schema and the modes'
availability, and the README's block is what `manage.py tool_tables` makes now."""

from pathlib import Path

import pytest

from tools.tables import BEGIN, END, parameters, readme_with_tool_tables, tool_tables

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readmes_tables_are_the_ones_the_code_makes():
    readme = README.read_text(encoding="utf-8")
    assert readme_with_tool_tables(readme) == readme, "stale: run `python manage.py tool_tables --write`"


def test_each_row_has_the_tools_parameters_and_the_seeds_availability():
    calvin = tool_tables().split("`nanoclaw` at")[0]  # the first table: seed 000's
    rows = {line.split(" | ")[0]: line for line in calvin.splitlines() if line.startswith("| `")}
    assert rows["| `send_file`"].endswith("| yes | yes | yes |")
    assert "`path`: string, 1..4,096 characters; `comment`?: string, at most 3,000 characters" in rows["| `send_file`"]
    assert rows["| `preview`"].endswith("| no | offered; the gateway refuses the call | yes |")
    assert "| no | when the host has a workspace definition | yes |" in rows["| `checkout_repo`"]
    assert "`port`: integer, 1..65,535" in rows["| `preview`"]


def test_parameters_read_a_schema_as_a_person_would():
    schema = {
        "properties": {
            "ids": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 5},
            "mode": {"anyOf": [{"enum": ["a", "b"]}, {"type": "null"}]},
            "id": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
        },
        "required": ["ids", "id"],
    }
    assert parameters(schema) == "`ids`: array of integer, 1..5 items; `mode`?: `a` / `b`; `id`: integer, at least 1"


def test_a_readme_without_the_markers_is_refused():
    with pytest.raises(ValueError, match="no <!-- tool tables"):
        readme_with_tool_tables("# no tables here")
    assert readme_with_tool_tables(f"a\n{BEGIN}\nold\n{END}\nb").startswith(f"a\n{BEGIN}\n")
