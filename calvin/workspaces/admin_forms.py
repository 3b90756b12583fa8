"""The Agent's admin form: real widgets instead of raw JSON, checked by the rules the agent's own
tools follow (tools/services/agents.py), since what is saved here runs on a host the same way.

- tool sets: checkboxes;
- apt and npm packages: one name a line, each a bare name as install_packages accepts it;
- the provider's command: one argument a line (an argv, never a shell line);
- MCP servers: rows of name, command, arguments (one a line) and env (NAME=value a line;
  `vault:NAME` values stay references the host resolves), as add_mcp_server checks them.

Saving bumps environment_version when the packages changed, as an approved install does.
"""

import hashlib
import json

from django import forms
from django.core.exceptions import ValidationError
from django.utils.html import format_html, format_html_join

from calvin.workspaces.models import TOOL_SETS, Agent, Quota
from tools.services.agents import (
    APT_NAME,
    ARG_MAX,
    ARGS_MAX,
    NPM_NAME,
    PACKAGE_NAME_MAX,
    env_with_references,
    mcp_server_problems,
    shown,
)

# Per list, over all of an agent's installs (one install_packages request takes at most 20).
AGENT_PACKAGES_MAX = 200
MCP_SERVERS_MAX = 20
MCP_EXTRA_ROWS = 2  # blank rows offered for new servers
TOOL_SET_LABELS = {
    "calvin": "calvin — /mcp: replies, cards, files, approvals, secrets",
    "nanoclaw": "nanoclaw — /mcp/nanoclaw: NanoClaw's messaging, agents, packages and MCP servers",
}


def _lines(text: str) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


class LinesField(forms.CharField):
    """A list of strings as a textarea, one a line (blank lines ignored); a list when cleaned."""

    def __init__(self, *, rows: int = 4, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": rows, "cols": 60}))
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, (list, tuple)):
            return "\n".join(str(item) for item in value)
        return value

    def to_python(self, value):
        if isinstance(value, (list, tuple)):
            return list(value)
        return _lines(super().to_python(value))

    def has_changed(self, initial, data):
        try:
            return list(initial or []) != self.to_python(data)
        except ValidationError:
            return True


class PackagesField(LinesField):
    """Package names as install_packages accepts them: bare names, matched whole."""

    def __init__(self, *, kind: str, **kwargs):
        self.kind = kind
        self.pattern = APT_NAME if kind == "apt" else NPM_NAME
        super().__init__(**kwargs)

    def validate(self, value):
        super().validate(value)
        if len(value) > AGENT_PACKAGES_MAX:
            raise ValidationError(f"at most {AGENT_PACKAGES_MAX} {self.kind} packages (got {len(value)})")
        bad = [name for name in value if len(name) > PACKAGE_NAME_MAX or not self.pattern.fullmatch(name)]
        if bad:
            raise ValidationError(
                f"not a bare {self.kind} package name (no version, flag, space or shell character; "
                f"matched whole against ^{self.pattern.pattern}$, at most {PACKAGE_NAME_MAX} characters): "
                + ", ".join(shown(name) for name in bad[:10])
            )

    def clean(self, value):
        return list(dict.fromkeys(super().clean(value)))  # each once, in the order given


class ArgvField(LinesField):
    """The command provider's argv, one argument a line; no control or invisible characters."""

    def validate(self, value):
        super().validate(value)
        if len(value) > ARGS_MAX:
            raise ValidationError(f"at most {ARGS_MAX} arguments (got {len(value)})")
        bad = [arg for arg in value if len(arg) > ARG_MAX or not arg.isprintable()]
        if bad:
            raise ValidationError(
                f"an argument is printable text of at most {ARG_MAX:,} characters: " + ", ".join(map(shown, bad[:5]))
            )


# MCP servers


def _env_text(env: dict) -> str:
    return "\n".join(f"{key}={value}" for key, value in (env or {}).items())


def _rows_of(value) -> list[dict]:
    """The rows to show: the saved dict, or what was posted (shown again with its errors)."""
    if isinstance(value, dict):
        return [
            {
                "name": name,
                "command": spec.get("command", ""),
                "args": "\n".join(spec.get("args") or []),
                "env": _env_text(spec.get("env")),
                "delete": False,
            }
            for name, spec in value.items()
            if isinstance(spec, dict)
        ]
    # What was posted, less its blank rows (blank ones are offered again below).
    return [
        row for row in value or [] if any(str(row.get(key, "")).strip() for key in ("name", "command", "args", "env"))
    ]


class McpServersWidget(forms.Widget):
    """One table row per server, plus blank rows for new ones; a row is removed by ticking "delete"."""

    COLUMNS = ("name", "command", "args", "env")

    def value_from_datadict(self, data, files, name):
        try:
            count = min(int(data.get(f"{name}-count", 0)), MCP_SERVERS_MAX + MCP_EXTRA_ROWS)
        except (TypeError, ValueError):
            count = 0
        rows = []
        for index in range(max(count, 0)):
            row = {column: data.get(f"{name}-{index}-{column}", "") for column in self.COLUMNS}
            row["delete"] = bool(data.get(f"{name}-{index}-delete"))
            rows.append(row)
        return rows

    def value_omitted_from_data(self, data, files, name):
        return f"{name}-count" not in data

    def render(self, name, value, attrs=None, renderer=None):
        rows = _rows_of(value) + [{"name": "", "command": "", "args": "", "env": "", "delete": False}] * MCP_EXTRA_ROWS
        cells = []
        for index, row in enumerate(rows):
            prefix = f"{name}-{index}"
            cells.append(
                format_html(
                    '<tr class="mcp-server-row">'
                    '<td><input type="text" name="{}-name" value="{}" maxlength="63" aria-label="name"></td>'
                    '<td><input type="text" name="{}-command" value="{}" size="24" aria-label="command"></td>'
                    '<td><textarea name="{}-args" rows="3" cols="24" aria-label="arguments">{}</textarea></td>'
                    '<td><textarea name="{}-env" rows="3" cols="28" aria-label="env">{}</textarea></td>'
                    '<td><input type="checkbox" name="{}-delete" aria-label="delete"{}></td></tr>',
                    prefix,
                    row["name"],
                    prefix,
                    row["command"],
                    prefix,
                    row["args"],
                    prefix,
                    row["env"],
                    prefix,
                    " checked" if row["delete"] else "",
                )
            )
        return format_html(
            '<input type="hidden" name="{}-count" value="{}">'
            '<table class="mcp-servers" id="id_{}"><thead><tr><th>name</th><th>command</th>'
            "<th>arguments, one a line</th><th>env: NAME=value a line (vault:NAME for a secret)</th>"
            "<th>delete</th></tr></thead><tbody>{}</tbody></table>",
            name,
            len(rows),
            name,
            format_html_join("", "{}", ((cell,) for cell in cells)),
        )


class McpServersField(forms.Field):
    """{name: {"command", "args", "env"}} from the rows, each checked as add_mcp_server checks it."""

    widget = McpServersWidget

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_python(self, value):
        if isinstance(value, dict):
            return value
        servers, problems = {}, []
        for number, row in enumerate(value or [], start=1):
            name, command = row["name"].strip(), row["command"].strip()
            if row["delete"] or not (name or command or row["args"].strip() or row["env"].strip()):
                continue
            args = _lines(row["args"])
            env, env_problems = _env_parse(row["env"])
            env = env_with_references(env)
            # The duplicate check reads the servers above this row, as the tool reads the agent's own.
            above = Agent(mcp_servers=servers)
            found = mcp_server_problems(agent=above, name=name, command=command, args=args, env=env)
            if any("\x00" in text for text in (name, command, row["args"], row["env"])):
                found.append("a NUL character is not allowed")
            if found or env_problems:
                problems.append(
                    f"row {number} ({shown(name) if name else 'no name'}): " + "; ".join(env_problems + found)
                )
                continue
            servers[name] = {"command": command, "args": args, "env": env}
        if len(servers) > MCP_SERVERS_MAX:
            problems.append(f"at most {MCP_SERVERS_MAX} MCP servers")
        if problems:
            raise ValidationError(problems)
        return servers

    def has_changed(self, initial, data):
        try:
            return (initial or {}) != self.to_python(data)
        except ValidationError:
            return True


def _env_parse(text: str) -> tuple[dict, list[str]]:
    env, problems = {}, []
    for line in _lines(text):
        key, sep, value = line.partition("=")
        if not sep:
            problems.append(f"env line {shown(line)} is not NAME=value")
        elif key.strip() in env:
            problems.append(f"env {shown(key.strip())} is given twice")
        else:
            env[key.strip()] = value.strip()
    return env, problems


def agent_config_digest(agent: Agent) -> str:
    """A digest of what the agent may change itself, as stored (empty for a new agent)."""
    if agent.pk is None:
        return ""
    stored = Agent.objects.filter(pk=agent.pk).values("apt_packages", "npm_packages", "mcp_servers").first() or {}
    return hashlib.sha256(json.dumps(stored, sort_keys=True).encode()).hexdigest()[:32]


class AgentForm(forms.ModelForm):
    tool_sets = forms.MultipleChoiceField(
        choices=[(name, TOOL_SET_LABELS.get(name, name)) for name in TOOL_SETS],
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="The MCP servers its sessions are given.",
    )
    apt_packages = PackagesField(kind="apt", help_text="One apt package a line, a bare name (jq, ripgrep).")
    npm_packages = PackagesField(kind="npm", help_text="One npm package a line, a bare name (typescript, @scope/tool).")
    provider_command = ArgvField(
        rows=3, help_text="For the command provider: the program and its arguments, one a line (never a shell line)."
    )
    mcp_servers = McpServersField(help_text="Started for each of its sessions, as add_mcp_server would add them.")
    # What the agent changes itself (approved installs, MCP servers) as this page showed it: a save
    # from a page loaded before such a change is refused instead of silently undoing it.
    loaded_config = forms.CharField(widget=forms.HiddenInput, required=False)

    class Media:
        css = {"all": ["workspaces/agent-form.css"]}  # a stylesheet: the CSP allows no inline styles

    class Meta:
        model = Agent
        fields = [
            "workspace",
            "name",
            "instructions",
            "cli_scope",
            "model",
            "provider",
            "provider_command",
            "provider_script",
            "tool_sets",
            "apt_packages",
            "npm_packages",
            "mcp_servers",
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._packages_before = (list(self.instance.apt_packages or []), list(self.instance.npm_packages or []))
        self.fields["loaded_config"].initial = agent_config_digest(self.instance)

    def clean_loaded_config(self):
        loaded = self.cleaned_data.get("loaded_config") or ""
        if self.instance.pk and loaded != agent_config_digest(self.instance):
            raise ValidationError(
                "the agent's packages or MCP servers changed since this page was loaded (an approved request?): "
                "reload the page and make your change again"
            )
        return loaded

    def clean_name(self):
        name = self.cleaned_data["name"]
        if "\x00" in name or not name.isprintable():
            raise ValidationError(f"a name is printable text: {shown(name)}")
        return name

    def save(self, commit=True):
        """A change of packages is a new environment: the runner rebuilds it before the next start."""
        agent = self.instance
        packages = (list(agent.apt_packages or []), list(agent.npm_packages or []))
        if agent.pk and packages != self._packages_before:
            agent.environment_version += 1
        return super().save(commit=commit)

    def audit_changes(self) -> dict:
        """{field: (before, after)} of what this save changed, for the audit log: MCP servers by
        their names only, the command by its length (a value there may be a credential someone
        pasted), long texts by their length."""
        changes = {}
        for field in self.changed_data:
            before = self.initial.get(field)
            after = self.cleaned_data.get(field)
            if field == "mcp_servers":
                before, after = sorted(before or {}), sorted(after or {})
            elif field == "workspace":
                before, after = before, getattr(after, "pk", after)
            elif field in ("instructions", "provider_script"):
                before, after = f"{len(before or '')} characters", f"{len(after or '')} characters"
            elif field == "provider_command":  # an argument may be a credential someone pasted
                before, after = f"{len(before or [])} arguments", f"{len(after or [])} arguments"
            changes[field] = (before, after)
        return changes


def agent_form_save(*, request, agent: Agent, form: AgentForm, change: bool) -> None:
    """Save the admin's form (Django runs it in the change view's transaction) with one audit
    event; a new agent gets its own directory as agent_create gives it."""
    from calvin.audit.services import audit_record
    from calvin.operators import operator_for
    from calvin.workspaces.services import agent_directory_for

    agent.save()
    if not agent.directory:
        agent.directory = agent_directory_for(agent.id)
        agent.save(update_fields=["directory"])
    changes = form.audit_changes()
    if change and not changes:
        return
    audit_record(
        verb="agent.change" if change else "agent.create",
        workspace=agent.workspace_id,
        actor=operator_for(request.user, agent.workspace_id),
        target=agent,
        changes=changes,
    )


def destination_choices_limit(form_class, *, agent: Agent | None) -> None:
    """A destination form's choosers: this agent's workspace's threads and its other agents,
    named so a person recognises them (a thread by its title, never a raw id to type)."""
    if agent is None:
        return  # a new agent: its workspace is not known yet; Destination.clean checks on save
    from sessions.models import Thread

    fields = form_class.base_fields
    fields["thread"].queryset = Thread.objects.filter(workspace_id=agent.workspace_id).order_by("-created_at")
    fields["thread"].label_from_instance = lambda thread: f"{thread} (thread {thread.pk})"
    fields["target_agent"].queryset = (
        Agent.objects.filter(workspace_id=agent.workspace_id).exclude(pk=agent.pk).order_by("name")
    )


class QuotaForm(forms.ModelForm):
    """Each limit a tenant raises is checked against the platform's ceiling, next to its field."""

    request = None  # set by QuotaAdmin.get_form: whose edit this is

    class Meta:
        model = Quota
        fields = ["workspace", "concurrent_sessions", "turns_per_day", "agent_minutes_per_month"]
        fields += ["tool_calls_per_day", "storage_mib", "monthly_spend_cap_usd", "session_spend_cap_usd"]
        fields += ["spawn_depth_max", "spawn_live_descendants_max"]

    def clean(self):
        from calvin.operators import operator_for
        from calvin.workspaces.quota_changes import LIMITS, SPEND_CAPS, quota_limit_problem

        data = super().clean()
        if self.instance.pk is None or self.request is None:
            return data
        actor = operator_for(self.request.user, self.instance.workspace_id)
        for name in LIMITS:
            if name in self.changed_data and (data.get(name) is not None or name in SPEND_CAPS):
                before = self.initial.get(name)
                problem = quota_limit_problem(actor=actor, name=name, before=before, after=data[name])
                if problem:
                    self.add_error(name, problem)
        return data


def quota_form_save(*, request, quota: Quota, form: QuotaForm, change: bool) -> None:
    """A change goes through quota_change (its rule again, under the row's lock, audited)."""
    from calvin.operators import operator_for
    from calvin.workspaces.quota_changes import LIMITS, quota_change

    if not change:
        quota.save()  # made by a superuser for a workspace that had none
        return
    limits = {name: form.cleaned_data[name] for name in LIMITS if name in form.cleaned_data}
    quota_change(quota_id=quota.pk, limits=limits, actor=operator_for(request.user, quota.workspace_id))
