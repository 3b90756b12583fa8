"""A workspace's definition: its repositories as a file (TOML or YAML), and as the AGENTS.md
its sessions' agents read.

    [[repository]]
    name = "api"
    full_name = "acme/api"
    clone_url = "https://github.com/acme/api.git"
    default_branch = "main"
    published = true

An import replaces the whole definition or changes nothing: every entry is checked with the
model's own validators, and names and owner/names must be unique whatever their case, before
any row is touched. The file comes from people (an upload, a paste, a CI job), so it is
bounded and parsed without ever echoing back more than a short piece of what it holds.
"""

import re
import tomllib
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import tomli_w
import yaml
from django.core.exceptions import ValidationError
from django.db import transaction

from calvin.workspaces.models import Repository, Workspace
from calvin.workspaces.repository_rules import SCP_RE

FORMATS = ("toml", "yaml")
MAX_BYTES = 256 * 1024
MAX_REPOSITORIES = 500
FIELDS = ("name", "full_name", "clone_url", "default_branch", "published")
TEXT_FIELDS = ("name", "full_name", "clone_url", "default_branch")
REQUIRED = ("name", "full_name", "clone_url")
DEFAULTS = {"default_branch": "main", "published": True}
AGENTS_FILE = "AGENTS.md"


class DefinitionInvalid(Exception):
    """The file was refused; `problems` lists every reason. Nothing was changed."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass
class DefinitionImported:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        parts = []
        for label in ("created", "updated", "deleted", "unchanged"):
            names = getattr(self, label)
            parts.append(f"{len(names)} {label}" + (f" ({', '.join(names)})" if names and label != "unchanged" else ""))
        return ", ".join(parts)


# Reads


def definition_entries(*, workspace: Workspace) -> list[dict]:
    rows = Repository.objects.filter(workspace=workspace).order_by("name").values(*FIELDS)
    return [dict(row) for row in rows]


def definition_export(*, workspace: Workspace, format: str = "toml") -> str:
    entries = definition_entries(workspace=workspace)
    header = (
        f"# Calvin workspace definition of {workspace.slug}: its repositories.\n"
        f"# manage.py workspace_definition import {workspace.slug} <file> replaces them with this file's.\n"
    )
    if format == "toml":
        return header + tomli_w.dumps({"repository": entries})
    if format == "yaml":
        return header + yaml.safe_dump(
            {"repository": entries}, sort_keys=False, allow_unicode=True, default_flow_style=False
        )
    raise DefinitionInvalid([_unknown_format(format)])


# Parsing and checking


def _unknown_format(format) -> str:
    return f"unknown format {_short(format)}: {' or '.join(FORMATS)}"


def _short(value, limit: int = 60) -> str:
    """A piece of what the file said, for a message: never a whole (possibly huge) value."""
    if isinstance(value, str):
        return repr(value if len(value) <= limit else value[:limit] + "…")
    if isinstance(value, bool | int | float) or value is None:
        return repr(value)
    return f"a {type(value).__name__}"  # never repr a structure: YAML aliases can make it enormous


def _text_of(data: str | bytes) -> str:
    if isinstance(data, bytes):
        if len(data) > MAX_BYTES:
            raise DefinitionInvalid([f"the file is {len(data):,} bytes; a definition has at most {MAX_BYTES:,}"])
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DefinitionInvalid([f"the file is not UTF-8 text (byte {error.start:,} is not)"]) from None
    else:
        text = data
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise DefinitionInvalid(["the text holds characters that are not Unicode text (lone surrogates)"]) from None
        if size > MAX_BYTES:
            raise DefinitionInvalid([f"the file is {size:,} bytes; a definition has at most {MAX_BYTES:,}"])
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise DefinitionInvalid([f"the file holds a NUL character (line {line}): it is not a text file"])
    return text.removeprefix("\ufeff")


def _parsed(text: str, format: str):
    if format == "toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:  # its message names the line and column
            raise DefinitionInvalid([f"not valid TOML: {error}"]) from None
        except RecursionError:
            raise DefinitionInvalid(["not a definition: nested too deeply"]) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        said = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise DefinitionInvalid([f"not valid YAML: {said}{where}"]) from None
    except RecursionError:
        raise DefinitionInvalid(["not a definition: nested too deeply"]) from None


def definition_parse(*, text: str | bytes, format: str) -> list[dict]:
    """The entries of a definition file, each checked: every problem is reported at once."""
    if format not in FORMATS:
        raise DefinitionInvalid([_unknown_format(format)])
    document = _parsed(_text_of(text), format)
    empty = "repository = []" if format == "toml" else "repository: []"
    if not isinstance(document, dict) or "repository" not in document:
        # An empty file would delete every repository: that must be said, not implied.
        raise DefinitionInvalid([f"no repository list; a definition without repositories says `{empty}`"])
    others = [key for key in document if key != "repository"]
    problems = [f"unknown top-level key {_short(key)}; only repository" for key in others[:10]]
    entries = document["repository"]
    if not isinstance(entries, list):
        raise DefinitionInvalid([*problems, f"repository must be a list of repositories, not {_short(entries)}"])
    if len(entries) > MAX_REPOSITORIES:
        raise DefinitionInvalid(
            [*problems, f"{len(entries):,} repositories; a definition has at most {MAX_REPOSITORIES}"]
        )
    cleaned = []
    for number, entry in enumerate(entries, 1):
        entry_problems, values = _entry_problems(entry)
        label = _label(number, values)
        problems += [f"{label}: {problem}" for problem in entry_problems]
        cleaned.append(values)
    problems += _duplicates(cleaned)
    if problems:
        raise DefinitionInvalid(problems)
    return cleaned


def _label(number: int, values: dict) -> str:
    name = values.get("name")
    return f"repository {number}" + (f" ({_short(name)})" if isinstance(name, str) and name else "")


def _entry_problems(entry) -> tuple[list[str], dict]:
    """Every problem of one entry, and its values of the right types (for the duplicates check)."""
    if not isinstance(entry, dict):
        return [f"a repository is a table of {', '.join(FIELDS)}, not {_short(entry)}"], {}
    problems = [f"unknown key {_short(key)}" for key in entry if key not in FIELDS]
    values = {**DEFAULTS, **{key: entry[key] for key in FIELDS if key in entry}}
    problems += [f"{key} is required" for key in REQUIRED if key not in entry]
    for key in TEXT_FIELDS:
        if key in values and not isinstance(values[key], str):
            problems.append(f"{key} must be text, not {_short(values.pop(key))}")
    if not isinstance(values["published"], bool):
        problems.append(f"published must be true or false, not {_short(values.pop('published'))}")
    try:
        # The model's own validators (clone URL schemes, names, branches, lengths), on what is there.
        skipped = ["workspace", *(key for key in FIELDS if key not in values)]
        Repository(**values).full_clean(exclude=skipped, validate_unique=False, validate_constraints=False)
    except ValidationError as error:
        problems += [f"{key}: {message}" for key, messages in error.message_dict.items() for message in messages]
    return problems, values


def _duplicates(entries: list[dict]) -> list[str]:
    problems, seen = [], {"name": {}, "full_name": {}}
    for number, values in enumerate(entries, 1):
        for key, first in seen.items():
            value = values.get(key)
            if not isinstance(value, str):
                continue
            if value.lower() in first:
                problems.append(
                    f"{_label(number, values)}: {key} {_short(value)} is also"
                    f" repository {first[value.lower()]}'s (unique whatever the case)"
                )
            else:
                first[value.lower()] = number
    return problems


# The change


@transaction.atomic
def definition_import(*, workspace: Workspace, text: str | bytes, format: str, actor=None) -> DefinitionImported:
    """Make the workspace's repositories the file's: create, update, delete. Raises
    DefinitionInvalid with every problem, and then nothing was changed. `actor`: who imported it."""
    entries = definition_parse(text=text, format=format)
    Workspace.objects.select_for_update().filter(id=workspace.id).first()  # one import at a time per workspace
    existing = {row.name.lower(): row for row in Repository.objects.filter(workspace=workspace)}
    wanted = {entry["name"].lower(): entry for entry in entries}
    summary = DefinitionImported()
    for key, row in existing.items():
        if key not in wanted:
            row.delete()
            summary.deleted.append(row.name)
    changed = [(existing[k], e) for k, e in wanted.items() if k in existing and _differs(existing[k], e)]
    summary.unchanged = [e["name"] for k, e in wanted.items() if k in existing and not _differs(existing[k], e)]
    # Two rows trading owner/names would collide one save at a time: park theirs first.
    for row, entry in changed:
        if row.full_name.lower() != entry["full_name"].lower():
            Repository.objects.filter(id=row.id).update(full_name=f"~moving-{row.id}")
    for row, entry in changed:
        for key in FIELDS:
            setattr(row, key, entry[key])
        row.save()
        summary.updated.append(row.name)
    for key, entry in wanted.items():
        if key not in existing:
            Repository.objects.create(workspace=workspace, **entry)
            summary.created.append(entry["name"])
    if summary.created or summary.updated or summary.deleted:
        from calvin.audit.services import audit_record

        # The repositories' names only: a clone URL may hold a credential.
        changes = {
            "created": (None, summary.created),
            "updated": (None, summary.updated),
            "deleted": (summary.deleted, None),
        }
        audit_record(verb="definition.import", workspace=workspace, actor=actor, target=workspace, changes=changes)
    return summary


def _differs(row: Repository, entry: dict) -> bool:
    return any(getattr(row, key) != entry[key] for key in FIELDS)


# AGENTS.md

PREAMBLE = (
    "# Repositories of this workspace\n\n"
    "These are the repositories in this workspace's definition. `checkout_repo`"
    " (mcp__calvin__checkout_repo) checks them out into this session directory, each a git"
    " repository of its own on this session's branch (commit and push from it): give it a"
    " repository's name or its owner/name"
    " (case-insensitive).\n\n"
    "Calvin writes this file and rewrites it whenever the definition changes.\n\n"
)
NO_REPOSITORIES = (
    "This workspace has no repositories yet, so `checkout_repo` has nothing to check out."
    " A workspace owner or admin adds them in Calvin's admin.\n"
)
UNPUBLISHED = "not published yet"
CELL_UNSAFE = re.compile(r"[`|\\\x00-\x1f\x7f]")


def clone_url_shown(url: str) -> str:
    """The clone URL without what may be a credential: user:token@, a query, a fragment."""
    if "://" in url:
        try:
            parts = urlsplit(url)
        except ValueError:
            return "(not shown)"
        return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))
    if SCP_RE.match(url):
        return url.split("@", 1)[1] if "@" in url.split(":", 1)[0] else url
    return url


def _cell(value: str) -> str:
    # Backticks, pipes and line breaks would end the code span or the table row.
    return "`" + CELL_UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", value) + "`"


def agents_md_text(workspace_id: int) -> str:
    rows = list(Repository.objects.filter(workspace_id=workspace_id).order_by("name"))
    if not rows:
        return PREAMBLE + NO_REPOSITORIES
    lines = ["| Name | owner/name | Default branch | Clone URL | Status |", "| --- | --- | --- | --- | --- |"]
    for row in rows:
        status = UNPUBLISHED if not row.published else "published"
        cells = [
            _cell(row.name),
            _cell(row.full_name),
            _cell(row.default_branch),
            _cell(clone_url_shown(row.clone_url)),
        ]
        lines.append(f"| {' | '.join(cells)} | {status} |")
    note = f"A repository marked {UNPUBLISHED} is listed, but `checkout_repo` refuses it until it is published.\n"
    return PREAMBLE + "\n".join(lines) + "\n\n" + (note if any(not r.published for r in rows) else "")
