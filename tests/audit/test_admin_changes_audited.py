"""Repositories changed in the admin: repository.create / .change / .delete, one event each, by
the person, from the admin; a save that changes nothing and a refused form write nothing."""

import pytest
from django.urls import reverse

from calvin.audit.models import AuditEvent
from calvin.workspaces.models import Repository

pytestmark = pytest.mark.django_db(transaction=True)


def form(place, **fields) -> dict:
    return {
        "workspace": place.id,
        "name": "api",
        "full_name": "acme/api",
        "clone_url": "https://ann:ghp_notreal@github.com/acme/api.git",
        "default_branch": "main",
        "published": "on",
        **fields,
    }


def test_a_repository_added_changed_and_deleted_in_the_admin(client, tenants):
    acme = tenants["acme"]
    client.force_login(tenants["ann"])
    response = client.post(reverse("admin:workspaces_repository_add"), form(acme), REMOTE_ADDR="192.0.2.8")
    assert response.status_code == 302, response.content.decode()[:2000]
    repository = Repository.objects.get(workspace=acme)
    (created,) = AuditEvent.objects.all()
    assert (created.verb, created.workspace_id, created.actor_label, created.via, created.ip) == (
        "repository.create",
        acme.id,
        "ann",
        "admin",
        "192.0.2.8",
    )
    assert created.changes["clone_url"] == [None, "https://github.com/acme/api.git"]  # never the credential
    assert "ghp_notreal" not in str(created.changes)
    change = reverse("admin:workspaces_repository_change", args=[repository.id])
    assert client.post(change, form(acme)).status_code == 302  # saved as it is: nothing changed
    assert AuditEvent.objects.count() == 1
    assert client.post(change, form(acme, default_branch="develop")).status_code == 302
    changed = AuditEvent.objects.get(verb="repository.change")
    assert changed.changes == {"default_branch": ["main", "develop"]}
    delete = reverse("admin:workspaces_repository_delete", args=[repository.id])
    assert client.post(delete, {"post": "yes"}).status_code == 302
    deleted = AuditEvent.objects.get(verb="repository.delete")
    assert (deleted.target_id, deleted.actor_label) == (str(repository.id), "ann")
    assert AuditEvent.objects.count() == 3


def test_a_refused_repository_form_writes_nothing(client, tenants):
    client.force_login(tenants["ann"])
    for fields in ({"clone_url": "ext::sh -c touch% /tmp/pwned"}, {"workspace": tenants["globex"].id}):
        response = client.post(reverse("admin:workspaces_repository_add"), form(tenants["acme"], **fields))
        assert response.status_code == 200  # the form again, with its error
    assert not Repository.objects.exists() and not AuditEvent.objects.exists()


def test_the_delete_selected_action_writes_one_event_per_row(client, tenants):
    acme = tenants["acme"]
    rows = [
        Repository.objects.create(workspace=acme, name=n, full_name=f"acme/{n}", clone_url=f"https://x.test/{n}.git")
        for n in ("a", "b")
    ]
    client.force_login(tenants["adam"])
    ids = [r.id for r in rows]
    url = reverse("admin:workspaces_repository_changelist")
    response = client.post(url, {"action": "delete_selected", "_selected_action": ids, "post": "yes"})
    assert response.status_code == 302
    assert not Repository.objects.exists()
    assert sorted(AuditEvent.objects.values_list("verb", "target_id")) == [
        ("repository.delete", str(i)) for i in sorted(ids)
    ]


def test_a_host_made_and_deleted_in_the_admin_names_the_person(client, tenants):
    from sessions.models import Host

    client.force_login(tenants["ann"])
    response = client.post(
        reverse("admin:agent_sessions_host_add"), {"name": "box-ann", "workspace": tenants["acme"].id}
    )
    assert response.status_code == 200 and "Host box-ann made" in response.content.decode()  # its token's page
    host = Host.objects.get(name="box-ann")
    delete = reverse("admin:agent_sessions_host_delete", args=[host.id])
    assert client.post(delete, {"post": "yes"}).status_code == 302
    rows = AuditEvent.objects.order_by("id").values_list("verb", "workspace_id", "actor_label", "via", "target_id")
    assert list(rows) == [
        ("host.create", tenants["acme"].id, "ann", "admin", str(host.id)),
        ("host.delete", tenants["acme"].id, "ann", "admin", str(host.id)),
    ]
