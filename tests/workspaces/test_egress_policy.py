"""A workspace's egress policy: entries checked strictly when saved, edited in the admin by staff
only (a workspace's own admins see it; another workspace's see nothing), carried in the turn."""

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from calvin.workspaces.egress_rules import EntryInvalid, entry_parse
from calvin.workspaces.models import Member, Workspace
from calvin.workspaces.services import workspace_create
from sessions.services import runner_start, session_start
from sessions.turn_messages import turn_message

pytestmark = pytest.mark.django_db


@pytest.fixture
def globex(django_user_model):
    return workspace_create(name="Globex", slug="globex", owner_user=django_user_model.objects.create_user("gus"))


@pytest.mark.parametrize(
    "text, shown",
    [
        ("pypi.org:443", "pypi.org:443"),
        ("  PyPI.Org:443 ", "pypi.org:443"),
        ("*.npmjs.org:443", "*.npmjs.org:443"),
        ("10.0.0.5:5432", "10.0.0.5:5432"),
        ("[2001:DB8::1]:443", "[2001:db8::1]:443"),
        ("localhost:1", "localhost:1"),
        ("a-b.c9.example:65535", "a-b.c9.example:65535"),
    ],
)
def test_good_entries_are_kept_normalised(text, shown):
    assert str(entry_parse(text)) == shown


@pytest.mark.parametrize(
    "text, said",
    [
        ("pypi.org", "write host:port"),
        ("pypi.org:0", "the port must be 1 to 65535"),
        ("pypi.org:65536", "the port must be 1 to 65535"),
        ("pypi.org:https", "write host:port"),
        ("2001:db8::1:443", "write host:port"),  # IPv6 without brackets
        ("[2001:db8::zz]:443", "is not an IPv6 address"),
        ("py_pi.org:443", "labels of letters, digits and hyphens"),
        ("-pypi.org:443", "labels of letters, digits and hyphens"),
        ("pypi..org:443", "labels of letters, digits and hyphens"),
        ("pypi.*.org:443", "a wildcard only as a leading '*.'"),
        ("*pypi.org:443", "a wildcard only as a leading '*.'"),
        ("*.*.org:443", "a wildcard only as a leading '*.'"),
        ("10.0.0.256:80", "is not all digits"),
        ("http://pypi.org:443", "write host:port"),
        ("pypi.org:443/simple", "write host:port"),
        ("a" * 64 + ".org:443", "labels of letters"),
    ],
)
def test_bad_entries_are_refused_with_what_is_wrong(text, said):
    with pytest.raises(EntryInvalid) as invalid:
        entry_parse(text)
    assert said in str(invalid.value)


def test_the_model_lists_every_bad_entry_and_defaults_to_open(workspace):
    assert (workspace.egress_policy, workspace.egress_allowlist) == ("open", "")
    workspace.egress_allowlist = "pypi.org:443\nnope\n\n*.npmjs.org:99999\n"
    with pytest.raises(ValidationError) as invalid:
        workspace.full_clean()
    messages = invalid.value.message_dict["egress_allowlist"]
    assert len(messages) == 2 and "'nope'" in messages[0] and "1 to 65535" in messages[1]
    workspace.egress_allowlist = "pypi.org:443\n\n  *.NPMJS.org:443\n"
    workspace.full_clean()
    assert workspace.egress_entries() == ["pypi.org:443", "*.npmjs.org:443"]


def test_the_turn_message_carries_the_policy(workspace):
    workspace.egress_policy, workspace.egress_allowlist = "allowlist", "PyPI.org:443\n10.0.0.5:5432"
    workspace.save()
    session = session_start(workspace=workspace, title="t", prompt="hello")
    runner, token = runner_start(session=session)
    message = turn_message(session=session, turns=list(session.turns.all()), runner=runner, token=token)
    assert message["egress"] == {
        "policy": "allowlist",
        "allowlist": ["pypi.org:443", "10.0.0.5:5432"],
        "workspace": "acme",
    }


# The admin


def change_data(client: Client, workspace: Workspace, **changes) -> dict:
    """The Workspace change form as the admin renders it, posted back with `changes`."""
    page = client.get(reverse("admin:workspaces_workspace_change", args=[workspace.id]))
    assert page.status_code == 200
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    for formset in page.context["inline_admin_formsets"]:
        management = formset.formset.management_form
        data |= {management[name].html_name: management[name].value() for name in management.fields}
        for index, inline in enumerate(formset.formset.forms):
            for name in inline.fields:
                value = inline[name].value()
                if value is not None:
                    data[f"{formset.formset.prefix}-{index}-{name}"] = value
    return {**data, **changes}


def staff(django_user_model, username, workspace, role=Member.Role.OWNER) -> Client:
    user = django_user_model.objects.create_user(username, password="pw", is_staff=True)
    Member.objects.create(workspace=workspace, user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


def test_staff_edit_the_policy_in_the_admin_and_see_every_bad_entry(admin_client, workspace):
    url = reverse("admin:workspaces_workspace_change", args=[workspace.id])
    bad = change_data(admin_client, workspace, egress_policy="allowlist", egress_allowlist="pypi.org:443\nx:0\n*bad:1")
    response = admin_client.post(url, bad)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["egress_allowlist"]
    assert len(errors) == 2 and "'x:0': the port must be 1 to 65535" in errors[0]
    workspace.refresh_from_db()
    assert workspace.egress_policy == "open"

    good = change_data(admin_client, workspace, egress_policy="none", egress_allowlist="pypi.org:443")
    assert admin_client.post(url, good).status_code == 302
    workspace.refresh_from_db()
    assert (workspace.egress_policy, workspace.egress_allowlist) == ("none", "pypi.org:443")
    bad_mode = change_data(admin_client, workspace, egress_policy="everything")
    assert "egress_policy" in admin_client.post(url, bad_mode).context["adminform"].form.errors


def test_a_workspace_owner_sees_their_policy_and_cannot_edit_it_or_see_anothers(django_user_model, workspace, globex):
    globex.egress_policy, globex.egress_allowlist = "allowlist", "secret-db.globex.internal:5432"
    globex.save()
    workspace.egress_allowlist = "pypi.org:443"
    workspace.save()
    client = staff(django_user_model, "ada", workspace)

    own = client.get(reverse("admin:workspaces_workspace_change", args=[workspace.id]))
    assert own.status_code == 200 and "pypi.org:443" in own.content.decode()
    client.post(reverse("admin:workspaces_workspace_change", args=[workspace.id]), {"egress_policy": "open",
                "egress_allowlist": "10.0.0.1:22", "name": "Acme", "slug": "acme"})  # fmt: skip
    workspace.refresh_from_db()
    assert workspace.egress_allowlist == "pypi.org:443"  # read-only for them: an allowlist opens private ranges

    theirs = reverse("admin:workspaces_workspace_change", args=[globex.id])
    assert client.get(theirs).status_code == 302  # "does not exist", as for any id
    client.post(theirs, {"egress_policy": "open", "egress_allowlist": "", "name": "Globex", "slug": "globex"})
    globex.refresh_from_db()
    assert (globex.egress_policy, globex.egress_allowlist) == ("allowlist", "secret-db.globex.internal:5432")
    listing = client.get(reverse("admin:workspaces_workspace_changelist")).content.decode()
    assert "secret-db.globex" not in listing and "Globex" not in listing
