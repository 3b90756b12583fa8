"""A person's workspaces through Django's test client: creating one (slug rules, the per-person
limit, the audit row), `/` taking the person to the right one, each workspace's home and the
header showing only that workspace's things, and a person of one workspace getting 404 on another's."""

from types import SimpleNamespace

import pytest
from django.test import Client

from calvin.audit.models import AuditEvent
from calvin.workspaces.models import Member, Quota, Workspace
from calvin.workspaces.services import WorkspaceRefused, workspace_create
from sessions.models import Session, Thread
from sessions.services import session_start
from tools.models import ToolCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner_client(client, owner_member):
    client.force_login(owner_member.user)
    return client


@pytest.fixture
def in_both(owner_member, other_workspace):
    """Acme's owner is also a plain member of Globex."""
    return Member.objects.create(workspace=other_workspace, user=owner_member.user, role=Member.Role.MEMBER)


@pytest.fixture
def newcomer(django_user_model):
    return django_user_model.objects.create_user("newcomer", password="pw-newcomer-123")


# -- creating a workspace (the service)


def test_creating_a_workspace_makes_its_owner_quota_and_one_audit_row(newcomer):
    workspace = workspace_create(name="  Initech  ", slug="initech", owner_user=newcomer)
    assert (workspace.name, workspace.slug) == ("Initech", "initech")
    member = Member.objects.get(workspace=workspace)
    assert (member.user, member.role) == (newcomer, Member.Role.OWNER)
    assert Quota.objects.filter(workspace=workspace).exists()
    event = AuditEvent.objects.get(verb="workspace.create")
    assert event.workspace_id == workspace.id and event.actor_user_id == newcomer.id
    assert event.target_id == str(workspace.id) and event.changes == {
        "name": [None, "Initech"],
        "slug": [None, "initech"],
    }


@pytest.mark.parametrize(
    ("slug", "says"),
    [
        ("асme", "'а' (CYRILLIC SMALL LETTER A) is not one of them"),  # Cyrillic а and с
        ("acmе", "CYRILLIC SMALL LETTER IE"),
        ("ａｃｍｅ", "FULLWIDTH LATIN SMALL LETTER A"),
        ("a", "at least 2 characters"),
        ("x" * 51, "at most 50 characters"),
        ("-acme", "not first or last"),
        ("acme-", "not first or last"),
        ("ac_me", "'_' (LOW LINE) is not one of them"),
        ("ac me", "(SPACE) is not one of them"),
        ("ac\x00me", "U+0000"),
        ("", "a slug is required"),
        ("new", "reserved"),
        ("admin", "reserved"),
        ("api", "reserved"),
        ("static", "reserved"),
    ],
)
def test_a_slug_outside_the_rule_is_refused_with_the_rule_and_nothing_is_made(newcomer, slug, says):
    with pytest.raises(WorkspaceRefused) as refused:
        workspace_create(name="Acme", slug=slug, owner_user=newcomer)
    assert says in str(refused.value) and refused.value.field == "slug"
    assert not Workspace.objects.exists() and not AuditEvent.objects.exists()


def test_a_taken_slug_is_refused_whatever_its_case(workspace, newcomer):
    Workspace.objects.create(name="Old", slug="Mixed-Case")  # made before the rule, e.g. in the admin
    for slug in ("acme", "ACME", "mixed-case"):
        with pytest.raises(WorkspaceRefused, match=f"the slug '{slug.lower()}' is taken"):
            workspace_create(name="Mine", slug=slug, owner_user=newcomer)
    assert not Member.objects.filter(user=newcomer).exists()


def test_ascii_capitals_become_small_letters(newcomer):
    assert workspace_create(name="Initech", slug="IniTech", owner_user=newcomer).slug == "initech"


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("", "a name is required"),
        ("   ", "a name is required"),
        ("n" * 201, "at most 200 characters"),
        ("Acme\x00", "U+0000"),
        ("Acme\u202eemcA", "RIGHT-TO-LEFT OVERRIDE"),
        ("Ac\u200bme", "ZERO WIDTH SPACE"),
        ("Acme\nInc", "U+000A"),
    ],
)
def test_a_name_that_is_empty_too_long_or_holds_invisible_characters_is_refused(newcomer, name, says):
    with pytest.raises(WorkspaceRefused) as refused:
        workspace_create(name=name, slug="initech", owner_user=newcomer)
    assert says in str(refused.value) and refused.value.field == "name"
    assert not Workspace.objects.exists()


def test_one_person_creates_at_most_the_limit(settings, newcomer, django_user_model):
    settings.CALVIN_WORKSPACES_PER_PERSON = 2
    workspace_create(name="One", slug="one", owner_user=newcomer)
    workspace_create(name="Two", slug="two", owner_user=newcomer)
    with pytest.raises(
        WorkspaceRefused, match=r"you already own as many workspaces as one person may create here \(2\)"
    ):
        workspace_create(name="Three", slug="three", owner_user=newcomer)
    assert not Workspace.objects.filter(slug="three").exists()
    # Someone else is not counted against them; an operator (superuser) is not limited.
    workspace_create(name="Other", slug="other", owner_user=django_user_model.objects.create_user("other"))
    root = django_user_model.objects.create_superuser("root", password="pw-root-123")
    for slug in ("r1", "r2", "r3"):
        workspace_create(name=slug, slug=slug, owner_user=root)


# -- creating a workspace (the page)


def test_a_person_without_a_workspace_lands_on_the_create_page_and_becomes_the_owner(client, newcomer):
    client.force_login(newcomer)
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/workspaces/new/"
    page = client.get("/workspaces/new/").content.decode()
    assert "You are not in any workspace yet" in page and 'name="slug"' in page

    response = client.post("/workspaces/new/", {"name": "Initech", "slug": "initech"})
    assert response.status_code == 302 and response["Location"] == "/w/initech/"
    assert Member.objects.get(user=newcomer).role == Member.Role.OWNER
    assert client.get("/")["Location"] == "/w/initech/"
    home = client.get("/w/initech/").content.decode()
    assert "Workspace Initech created: you are its owner." in home


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"name": "Acme", "slug": "асme"}, "CYRILLIC SMALL LETTER A"),
        ({"name": "Acme", "slug": "acme"}, "The slug &#x27;acme&#x27; is taken: choose another"),
        ({"name": "Acme", "slug": "Acme"}, "The slug &#x27;acme&#x27; is taken: choose another"),
        ({"name": "Acme\x00", "slug": "acme2"}, "U+0000"),
        ({"name": "N" * 10_000, "slug": "acme2"}, "at most 200 characters"),
        ({"name": "Acme", "slug": "s" * 10_000}, "at most 50 characters"),
        ({"name": "Acme", "slug": "new"}, "reserved for Calvin"),
    ],
)
def test_the_create_page_says_what_is_wrong_and_makes_nothing(client, workspace, newcomer, data, says):
    client.force_login(newcomer)
    response = client.post("/workspaces/new/", data)
    assert response.status_code == 400
    assert says in response.content.decode()
    assert Workspace.objects.count() == 1 and not Member.objects.filter(user=newcomer).exists()


def test_the_create_page_at_the_limit_says_so(settings, client, newcomer):
    settings.CALVIN_WORKSPACES_PER_PERSON = 1
    client.force_login(newcomer)
    client.post("/workspaces/new/", {"name": "One", "slug": "one"})
    page = client.get("/workspaces/new/").content.decode()
    assert "You already own as many workspaces as one person may create here (1)." in page and 'name="slug"' not in page
    response = client.post("/workspaces/new/", {"name": "Two", "slug": "two"})
    assert (
        response.status_code == 400
        and "you already own as many workspaces as one person may create here (1)" in response.content.decode().lower()
    )
    assert not Workspace.objects.filter(slug="two").exists()


def test_creating_needs_a_login_and_the_csrf_token(newcomer):
    response = Client().post("/workspaces/new/", {"name": "Initech", "slug": "initech"})
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(newcomer)
    assert forged.post("/workspaces/new/", {"name": "Initech", "slug": "initech"}).status_code == 403
    assert not Workspace.objects.exists()


# -- `/` and the switcher


def test_home_goes_to_the_workspace_used_last_else_the_first(owner_client, in_both, owner_member):
    assert owner_client.get("/")["Location"] == "/w/acme/"  # Acme before Globex by name
    owner_client.get("/w/globex/")
    assert owner_client.get("/")["Location"] == "/w/globex/"
    owner_client.get("/w/acme/settings/")
    assert owner_client.get("/")["Location"] == "/w/acme/"
    owner_client.get("/w/globex/")
    in_both.delete()  # removed from Globex since: back to one they are still in
    assert owner_client.get("/")["Location"] == "/w/acme/"


def test_the_header_names_the_workspace_and_lists_only_ones_own(owner_client, in_both, django_user_model):
    workspace_create(name="Umbrella", slug="umbrella", owner_user=django_user_model.objects.create_user("u"))
    page = owner_client.get("/w/globex/").content.decode()
    assert '<summary id="current-workspace">Globex</summary>' in page
    assert 'href="/w/acme/">Acme</a>' in page and 'href="/w/globex/" aria-current="page">Globex</a>' in page
    assert "Umbrella" not in page and "/w/umbrella/" not in page
    assert '<summary id="current-workspace">Acme</summary>' in owner_client.get("/w/acme/").content.decode()


def test_a_thread_page_names_its_threads_workspace(owner_client, in_both, other_workspace, stranger_member):
    session = session_start(workspace=other_workspace, owner=stranger_member, prompt="Globex plan")
    page = owner_client.get(f"/threads/{session.thread_id}/").content.decode()
    assert '<summary id="current-workspace">Globex</summary>' in page
    assert 'id="thread-workspace">In <a href="/w/globex/">Globex</a>' in page
    assert owner_client.get("/")["Location"] == "/w/globex/"  # a thread page is a use of its workspace


# -- a workspace's home shows only that workspace


def test_each_workspace_home_shows_only_its_own_threads_and_tool_calls(
    owner_client, in_both, workspace, owner_member, other_workspace, stranger_member
):
    acme = session_start(workspace=workspace, owner=owner_member, prompt="Acme nightly build")
    globex = session_start(workspace=other_workspace, owner=stranger_member, prompt="Globex secret plan")
    acme_call = ToolCall.objects.create(session=acme, tool="post_card", status=ToolCall.Status.APPLIED)
    globex_call = ToolCall.objects.create(session=globex, tool="send_file", status=ToolCall.Status.FAILED)
    for slug, own, own_call, foreign, foreign_call in (
        ("acme", acme, acme_call, globex, globex_call),
        ("globex", globex, globex_call, acme, acme_call),
    ):
        page = owner_client.get(f"/w/{slug}/").content.decode()
        assert f'href="/threads/{own.thread_id}/"' in page and f"<td>{own_call.id}</td><td>{own_call.tool}</td>" in page
        assert f'href="/threads/{foreign.thread_id}/"' not in page and f"<td>{foreign_call.id}</td>" not in page
        assert foreign.thread.title not in page and foreign_call.tool not in page
        assert f'action="/w/{slug}/threads/start/"' in page and 'name="workspace"' not in page


def test_the_home_links_secrets_for_admins_people_and_settings_for_everyone(owner_client, in_both, workspace):
    acme = owner_client.get("/w/acme/").content.decode()  # owner
    assert f'href="/workspaces/{workspace.id}/secrets/"' in acme
    globex = owner_client.get("/w/globex/").content.decode()  # plain member
    assert 'id="secrets-link"' not in globex and "/secrets/" not in globex
    for page, slug in ((acme, "acme"), (globex, "globex")):
        assert f'href="/w/{slug}/people/"' in page and f'href="/w/{slug}/settings/"' in page


def test_a_session_starts_in_the_workspace_of_the_page(owner_client, in_both, other_workspace):
    response = owner_client.post("/w/globex/threads/start/", {"prompt": "Fix the Globex build"})
    thread = Thread.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/threads/{thread.id}/"
    session = Session.objects.get(thread=thread)
    assert session.workspace == other_workspace and session.owner == in_both
    assert owner_client.post("/w/globex/threads/start/", {"prompt": ""}).status_code == 400
    assert Session.objects.count() == 1


def test_a_person_of_one_workspace_gets_404_on_anothers_pages_like_on_none(owner_client, other_workspace, vault):
    missing = owner_client.get("/w/no-such-workspace/")
    for method, url, data in (
        ("get", "/w/globex/", None),
        ("get", "/w/globex/settings/", None),
        ("post", "/w/globex/settings/", {"name": "Taken over"}),
        ("post", "/w/globex/threads/start/", {"prompt": "sneak in"}),
        ("get", "/w/globex/settings/slack/uninstall/", None),
        ("post", "/w/globex/settings/slack/uninstall/", {"team_id": "T1"}),
        ("get", "/w/GLOBEX/", None),
    ):
        response = getattr(owner_client, method)(url, data)
        assert response.status_code == 404, url
        assert "Globex" not in response.content.decode(), url
        assert response.content == missing.content, url  # no hint that Globex exists
    other_workspace.refresh_from_db()
    assert other_workspace.name == "Globex" and not Session.objects.exists()


def test_workspace_pages_need_a_login(client, workspace):
    for url in ("/w/acme/", "/w/acme/settings/", "/workspaces/new/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"] == f"/accounts/login/?next={url}", url
    response = client.post("/w/acme/threads/start/", {"prompt": "sneak in"})
    assert response.status_code == 302 and not Session.objects.exists()


def test_a_page_of_a_workspace_names_it_in_the_header_even_when_its_view_did_not(rf, in_both, owner_member):
    """/w/<slug>/ pages of others (people, ...) need not set request.current_member: the URL's slug
    names the workspace, when the person is a member there and only then."""
    from calvin.dashboard.context_processors import workspaces

    def current(slug):
        request = rf.get(f"/w/{slug}/people/")
        request.user, request.resolver_match = owner_member.user, SimpleNamespace(kwargs={"slug": slug})
        return workspaces(request)["current_member"]

    assert current("globex").workspace.name == "Globex"
    assert current("acme").workspace.name == "Acme"
    workspace_create(name="Umbrella", slug="umbrella")
    assert not current("umbrella")  # not theirs: nothing named


def test_pages_named_by_a_workspace_or_thread_id_name_their_workspace(owner_client, in_both, other_workspace, vault):
    globex_thread = session_start(workspace=other_workspace, owner=in_both, prompt="Globex plan").thread_id
    other_workspace_id = other_workspace.id
    umbrella = workspace_create(name="Umbrella", slug="umbrella")
    umbrella_thread = session_start(workspace=umbrella, prompt="Umbrella plan").thread_id
    from calvin.dashboard.context_processors import workspaces

    def current(**kwargs):
        request = owner_client.get("/workspaces/new/").wsgi_request
        request.resolver_match = SimpleNamespace(kwargs=kwargs)
        return workspaces(request)["current_member"]

    assert current(workspace_id=other_workspace_id).workspace.name == "Globex"
    assert current(thread_id=globex_thread).workspace.name == "Globex"
    assert not current(workspace_id=umbrella.id) and not current(thread_id=umbrella_thread)
    assert not current(thread_id=999_999)


def test_the_admin_link_shows_for_those_the_admin_lets_in(client, owner_member, plain_member, django_user_model):
    for user, shown in (
        (owner_member.user, True),
        (plain_member.user, False),
        (django_user_model.objects.create_user("staff-only", is_staff=True), False),  # the flag plays no part
        (django_user_model.objects.create_superuser("root", password="pw-root-123"), True),
    ):
        client.force_login(user)
        assert ('id="admin-link"' in client.get("/workspaces/new/").content.decode()) is shown, user


@pytest.mark.parametrize("page", ["", "settings/", "people/"])
def test_every_page_of_a_workspace_names_it_in_the_header(owner_client, in_both, page):
    for slug, name in (("acme", "Acme"), ("globex", "Globex")):
        response = owner_client.get(f"/w/{slug}/{page}")
        assert response.status_code == 200, (slug, page)
        assert f'<summary id="current-workspace">{name}</summary>' in response.content.decode(), (slug, page)
