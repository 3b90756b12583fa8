"""Secrets, hosts, Slack installs and the workspace definition: one AuditEvent per change (never a
secret's value), none when refused or unchanged, none when the change rolls back."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from calvin.audit.context import audit_origin
from calvin.audit.models import AuditEvent
from calvin.chat.models import SlackInstallation
from calvin.chat.slack.inbound import slack_team_uninstall
from calvin.chat.slack.installations import InstallRefused, installation_remove, installation_save
from calvin.workspaces.definitions import definition_import
from calvin.workspaces.models import Member, Repository
from calvin.workspaces.services import agent_create
from secrets_vault.management_services import secret_manage_put, secret_remove, secret_replace
from secrets_vault.models import Secret, SecretRequest
from secrets_vault.requests import secret_request_fulfil
from sessions.hosts import host_create, host_delete
from sessions.models import Host
from sessions.services import session_start
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

VALUE = "s3cr3t-value-never-logged-123"


class Boom(Exception):
    pass


def member(tenants, name, workspace="acme") -> Member:
    return Member.objects.select_related("user").get(workspace=tenants[workspace], user=tenants[name])


def events(verb=None) -> list[AuditEvent]:
    rows = AuditEvent.objects.order_by("id")
    return list(rows.filter(verb=verb) if verb else rows)


def no_value_in(event: AuditEvent) -> None:
    for field in ("actor_label", "target_label", "target_type", "via"):
        assert VALUE not in getattr(event, field)
    assert VALUE not in str(event.changes)


# secret.set / secret.replace / secret.delete


def test_a_workspace_secret_set_replaced_and_deleted_one_event_each(tenants, vault):
    acme, adam = tenants["acme"], member(tenants, "adam")
    with audit_origin(via="web", ip="192.0.2.4"):
        secret = secret_manage_put(workspace_id=acme.id, name="API_KEY", value=VALUE, member=adam)
    (created,) = events()
    assert (created.verb, created.workspace_id, created.actor_label, created.via, created.ip) == (
        "secret.set",
        acme.id,
        "adam",
        "web",
        "192.0.2.4",
    )
    assert created.changes == {"name": [None, "API_KEY"], "scope": [None, "workspace"]}
    secret_replace(secret=secret, value=VALUE + "2", as_file=True, member=member(tenants, "ann"))
    replaced = events("secret.replace")[0]
    assert replaced.changes == {
        "name": ["API_KEY", "API_KEY"],
        "scope": ["workspace", "workspace"],
        "as_file": [False, True],
    }
    assert secret_remove(secret_id=secret.id, workspace_id=acme.id, member=adam)
    deleted = events("secret.delete")[0]
    assert (deleted.changes, deleted.target_label) == (
        {"name": ["API_KEY", None], "scope": ["workspace", None]},
        "API_KEY",
    )
    assert not secret_remove(secret_id=secret.id, workspace_id=acme.id, member=adam)  # a second click
    assert [e.verb for e in events()] == ["secret.set", "secret.replace", "secret.delete"]
    for event in events():
        no_value_in(event)


def test_an_agents_secret_names_its_agent(tenants, vault):
    agent = agent_create(workspace=tenants["acme"], name="builder")
    secret_manage_put(workspace_id=tenants["acme"].id, name="TOKEN_A", value=VALUE, agent_id=agent.id)
    assert events("secret.set")[0].changes["scope"] == [None, "agent builder"]


def test_refused_secrets_write_nothing(tenants, vault):
    acme, globex = tenants["acme"], tenants["globex"]
    for name, value in (("BAD NAME", VALUE), ("OK", "nul\x00inside"), ("OK", "")):
        with pytest.raises(ValidationError):
            secret_manage_put(workspace_id=acme.id, name=name, value=value)
    other_agent = agent_create(workspace=globex, name="theirs")
    with pytest.raises(ValidationError):
        secret_manage_put(workspace_id=acme.id, name="X", value=VALUE, agent_id=other_agent.id)
    theirs = secret_manage_put(workspace_id=globex.id, name="G", value=VALUE)
    AuditEvent.objects.all().delete()
    assert not secret_remove(secret_id=theirs.id, workspace_id=acme.id)  # another tenant's id
    assert Secret.objects.filter(id=theirs.id).exists() and not events()


def test_a_secret_that_rolls_back_leaves_no_event(tenants, vault):
    with pytest.raises(Boom), transaction.atomic():
        secret_manage_put(workspace_id=tenants["acme"].id, name="API_KEY", value=VALUE)
        raise Boom
    assert not events() and not Secret.objects.exists()


def test_a_requested_secret_set_from_slack_says_slack(tenants, vault):
    ann = member(tenants, "ann")
    session = session_start(workspace=tenants["acme"], owner=ann, title="needs a key")
    call = ToolCall.objects.create(session=session, tool="request_secret", arguments={"name": "DB_URL"})
    request = SecretRequest.objects.create(session=session, tool_call=call, name="DB_URL", reason="the database")
    with audit_origin(via="slack"):
        secret_request_fulfil(request_id=request.pk, thread_id=session.thread_id, member=ann, value=VALUE)
    (event,) = events()
    assert (event.verb, event.via, event.actor_label) == ("secret.set", "slack", "ann")
    assert event.changes == {"name": [None, "DB_URL"], "scope": [None, f"session {session.id}"]}
    no_value_in(event)


# host.create / host.delete


def test_a_host_made_and_deleted_one_event_each_never_its_token(tenants):
    host, token = host_create(name="box-1", workspace=tenants["acme"], actor=tenants["ann"])
    (made,) = events()
    assert (made.verb, made.workspace_id, made.actor_user_id, made.target_id) == (
        "host.create",
        tenants["acme"].id,
        tenants["ann"].id,
        str(host.id),
    )
    assert made.changes == {"name": [None, "box-1"], "token_hint": [None, token[:10]]}
    assert token not in str(made.changes)
    assert host_delete(host_id=host.id, actor=member(tenants, "adam"))
    assert not host_delete(host_id=host.id, actor=member(tenants, "adam"))
    assert [(e.verb, e.actor_label, e.changes) for e in events()][1:] == [
        ("host.delete", "adam", {"name": ["box-1", None]})
    ]


def test_a_host_that_rolls_back_leaves_no_event(tenants):
    with pytest.raises(Boom), transaction.atomic():
        host_create(name="box-2", workspace=tenants["acme"])
        raise Boom
    assert not events() and not Host.objects.exists()


# slack.install / slack.uninstall


def install(workspace, team_id, **fields):
    return installation_save(
        workspace=workspace, team_id=team_id, bot_token="xoxb-1-2-abc", team_name="Acme HQ", **fields
    )


def test_an_install_and_its_uninstall_one_event_each_never_the_token(tenants, vault):
    install(tenants["acme"], "T0ACME", installed_by=tenants["ann"])
    (installed,) = events()
    assert (installed.verb, installed.workspace_id, installed.actor_label) == (
        "slack.install",
        tenants["acme"].id,
        "ann",
    )
    assert installed.changes == {"slack_team_id": ["", "T0ACME"], "team_name": ["", "Acme HQ"]}
    assert "xoxb" not in str(installed.changes)
    with pytest.raises(InstallRefused):
        install(tenants["globex"], "T0ACME")  # tied to another workspace
    assert installation_remove(team_id="T0ACME", actor=member(tenants, "adam"), via="web") == tenants["acme"].id
    assert installation_remove(team_id="T0ACME", actor=member(tenants, "adam")) is None
    assert [(e.verb, e.actor_label, e.via, e.changes) for e in events()][1:] == [
        ("slack.uninstall", "adam", "web", {"slack_team_id": ["T0ACME", ""]})
    ]


def test_an_install_made_from_the_environment_is_the_systems(tenants, vault):
    with audit_origin(via="web", ip="192.0.2.9"):  # made on first use, inside whatever request needed it
        install(tenants["acme"], "T0ACME", from_environment=True)
    (event,) = events()
    assert (event.verb, event.actor_kind, event.via) == ("slack.install", "system", "system")


def test_slacks_own_uninstall_event_is_the_systems_from_slack(tenants, vault):
    install(tenants["acme"], "T0ACME")
    AuditEvent.objects.all().delete()
    slack_team_uninstall(team_id="T0ACME")
    (event,) = events()
    assert (event.verb, event.actor_kind, event.via) == ("slack.uninstall", "system", "slack")


def test_an_install_that_rolls_back_leaves_no_event(tenants, vault):
    with pytest.raises(Boom), transaction.atomic():
        install(tenants["acme"], "T0ACME")
        raise Boom
    assert not events() and not SlackInstallation.objects.exists()


# definition.import

DEFINITION = """
[[repository]]
name = "api"
full_name = "acme/api"
clone_url = "https://user:ghp_notreal@github.com/acme/api.git"
default_branch = "main"
"""


def test_an_import_writes_its_summary_once_and_an_unchanged_one_nothing(tenants):
    acme = tenants["acme"]
    Repository.objects.create(
        workspace=acme, name="old", full_name="acme/old", clone_url="https://github.com/acme/old.git"
    )
    definition_import(workspace=acme, text=DEFINITION, format="toml", actor=tenants["ann"])
    (event,) = events()
    assert (event.verb, event.workspace_id, event.actor_label, event.target_type) == (
        "definition.import",
        acme.id,
        "ann",
        "workspaces.workspace",
    )
    assert event.changes == {"created": [None, ["api"]], "updated": [None, []], "deleted": [["old"], None]}
    assert "ghp_notreal" not in str(event.changes)
    definition_import(workspace=acme, text=DEFINITION, format="toml", actor=tenants["ann"])  # the same file again
    assert len(events()) == 1


def test_an_invalid_import_writes_nothing(tenants):
    from calvin.workspaces.definitions import DefinitionInvalid

    with pytest.raises(DefinitionInvalid):
        definition_import(workspace=tenants["acme"], text=DEFINITION.replace('"api"', '"a\x00"'), format="toml")
    assert not events()


def test_the_command_import_says_cli(tenants, tmp_path):
    from django.core.management import call_command

    path = tmp_path / "acme.toml"
    path.write_text(DEFINITION)
    call_command("workspace_definition", "import", "acme", str(path))
    (event,) = events()
    assert (event.verb, event.via, event.actor_kind) == ("definition.import", "cli", "system")
    assert timezone.now() - event.at < timedelta(minutes=1)
