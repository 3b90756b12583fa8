"""The audit log in the admin: read-only for everyone, each person's workspaces only, exported as filtered."""

import csv
import io
import json

import pytest
from django.urls import reverse

from calvin.audit.models import AuditEvent
from tests.audit.conftest import event

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "admin:audit_auditevent_changelist"
EXPORT = "admin:audit_auditevent_export"


def change_url(event_id) -> str:
    return reverse("admin:audit_auditevent_change", args=[event_id])


def listed(client, **params) -> set[int]:
    response = client.get(reverse(LIST), params)
    assert response.status_code == 200
    return {e.pk for e in response.context["cl"].result_list}


def exported(client, **params) -> list[dict]:
    response = client.get(reverse(EXPORT), {"format": "jsonl", **params})
    assert response.status_code == 200
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


@pytest.fixture
def events(tenants):
    acme, globex = tenants["acme"], tenants["globex"]
    return {
        "acme": event(workspace=acme, verb="member.role_change", changes={"role": ("member", "admin")}),
        "acme_stop": event(workspace=acme, verb="session.stop", via="slack"),
        "globex": event(workspace=globex, verb="secret.set"),
        "system": event(workspace=None, verb="vault.rotate", via="cli"),
    }


def test_owners_and_admins_see_their_workspaces_events_only(client, tenants, events):
    for person in ("ann", "adam"):
        client.force_login(tenants[person])
        assert listed(client) == {events["acme"].id, events["acme_stop"].id}
        assert client.get(change_url(events["acme"].id)).status_code == 200
        for other in ("globex", "system"):
            response = client.get(change_url(events[other].id))
            assert response.status_code == 302 and "/admin/" in response.url  # "doesn't exist", no peek
    client.force_login(tenants["gus"])
    assert listed(client) == {events["globex"].id}


def test_a_plain_member_sees_no_audit_log(client, tenants, events):
    client.force_login(tenants["mo"])
    for url in (reverse(LIST), reverse(EXPORT), change_url(events["acme"].id)):
        response = client.get(url)
        assert response.status_code in (302, 403) and b"member.role_change" not in response.content


def test_superusers_see_every_event_the_systems_too(admin_client, events):
    assert listed(admin_client) == {e.id for e in events.values()}
    assert listed(admin_client, workspace__isnull="True") == {events["system"].id}


def test_nobody_adds_changes_or_deletes_superusers_included(admin_client, client, tenants, events):
    target = events["acme"]
    for who in (admin_client, client):
        if who is client:
            client.force_login(tenants["ann"])
        assert who.get(reverse("admin:audit_auditevent_add")).status_code == 403
        assert who.post(change_url(target.id), {"verb": "x"}).status_code == 403
        assert who.post(reverse("admin:audit_auditevent_delete", args=[target.id]), {"post": "yes"}).status_code == 403
        response = who.post(reverse(LIST), {"action": "delete_selected", "_selected_action": [target.id]})
        assert response.status_code in (200, 302)
    assert AuditEvent.objects.get(id=target.id).verb == "member.role_change"
    assert AuditEvent.objects.count() == 4


def test_filters_offer_only_the_persons_workspaces_and_verbs(client, tenants, events):
    client.force_login(tenants["ann"])
    response = client.get(reverse(LIST))
    page = response.content.decode()
    assert "Globex" not in page and "secret.set" not in page and "vault.rotate" not in page
    assert "member.role_change" in page
    titles = [spec.title for spec in response.context["cl"].filter_specs]
    assert titles == ["verb", "actor kind", "via", "workspace"]
    changelist = response.context["cl"]
    workspaces = [c["display"] for c in changelist.filter_specs[3].choices(changelist)]
    assert workspaces == ["All", "Acme"]  # no "no workspace" choice: those events are the platform's
    assert listed(client, verb="session.stop") == {events["acme_stop"].id}
    assert listed(client, via="slack") == {events["acme_stop"].id}
    assert listed(client, workspace__id__exact=tenants["globex"].id) == set()
    assert listed(client, q="ann") == set()  # the events were made by the system


def test_an_events_page_shows_its_changes_before_and_after(client, tenants, events):
    client.force_login(tenants["ann"])
    page = client.get(change_url(events["acme"].id)).content.decode()
    assert '<table class="audit-changes">' in page
    assert "<th>role</th><td>member</td><td>→</td><td>admin</td>" in page
    assert "Save" not in page and "Delete" not in page


def test_export_is_the_list_as_filtered_and_never_another_workspaces(client, tenants, events):
    client.force_login(tenants["ann"])
    assert {r["id"] for r in exported(client)} == {events["acme"].id, events["acme_stop"].id}
    assert [r["id"] for r in exported(client, verb="session.stop")] == [events["acme_stop"].id]
    assert exported(client, workspace__id__exact=tenants["globex"].id) == []
    today = events["acme"].at.date().isoformat()
    assert len(exported(client, at__gte=today)) == 2


def test_export_as_csv_downloads_a_file(client, tenants, events):
    client.force_login(tenants["adam"])
    response = client.get(reverse(EXPORT), {"format": "csv", "via": "slack"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="audit-')
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["id"], r["workspace"], r["via"]) for r in rows] == [(str(events["acme_stop"].id), "acme", "slack")]


@pytest.mark.parametrize("params", [{"format": "xlsx"}, {"format": "csv", "at__gte": "not a day"}])
def test_export_refuses_bad_input_clearly(client, tenants, events, params):
    client.force_login(tenants["ann"])
    response = client.get(reverse(EXPORT), params)
    assert response.status_code == 400


def test_the_list_links_its_export_with_the_same_filters(client, tenants, events):
    client.force_login(tenants["ann"])
    page = client.get(reverse(LIST), {"verb": "session.stop"}).content.decode()
    assert f'href="{reverse(EXPORT)}?verb=session.stop&amp;format=csv"' in page
    assert f'href="{reverse(EXPORT)}?verb=session.stop&amp;format=jsonl"' in page


def test_export_asks_the_admins_view_permission_not_only_the_sites(client, tenants, events, monkeypatch):
    """Should the site ever let in someone this admin does not show the log to, the export refuses them too."""
    from django.contrib import admin

    from calvin.audit.models import AuditEvent as Model

    monkeypatch.setattr(type(admin.site._registry[Model]), "has_view_permission", lambda self, request, obj=None: False)
    client.force_login(tenants["ann"])
    assert client.get(reverse(EXPORT), {"format": "csv"}).status_code == 403
