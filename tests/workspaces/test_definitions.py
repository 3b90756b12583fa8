"""Workspace definitions: the file format, an import that applies all or nothing, the admin's
scoping and views, and the management command."""

import io
import os
import subprocess
import sys
import time

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from calvin.workspaces import repository_rules
from calvin.workspaces.definitions import (
    MAX_BYTES,
    MAX_REPOSITORIES,
    DefinitionInvalid,
    definition_entries,
    definition_export,
    definition_import,
)
from calvin.workspaces.models import Member, Repository
from calvin.workspaces.services import workspace_create
from tests.sessions.host_processes import ROOT
from tests.support.celery_processes import subprocess_database_url

pytestmark = pytest.mark.django_db

HOSTILE_URLS = ["ext::sh -c touch% /tmp/pwned", "ext::sh", "-uhack", "file:///etc", "/etc/passwd", "fd::17"]

DEFINITION = """
[[repository]]
name = "api"
full_name = "acme/api"
clone_url = "https://github.com/acme/api.git"
default_branch = "main"
published = true

[[repository]]
name = "Web"
full_name = "acme/web"
clone_url = "git@github.com:acme/web.git"
default_branch = "release/2.x"
published = false
"""


def repo(workspace, name, **fields) -> Repository:
    values = {
        "full_name": f"acme/{name.lower()}",
        "clone_url": f"https://github.com/acme/{name.lower()}.git",
        **fields,
    }
    return Repository.objects.create(workspace=workspace, name=name, **values)


def snapshot(workspace) -> list[tuple]:
    """Everything about the rows, ids and timestamps too: 'nothing changed' means this is equal."""
    return list(
        Repository.objects.filter(workspace=workspace)
        .order_by("id")
        .values_list("id", "name", "full_name", "clone_url", "default_branch", "published", "updated_at")
    )


def problems_of(workspace, text, format="toml") -> list[str]:
    with pytest.raises(DefinitionInvalid) as refused:
        definition_import(workspace=workspace, text=text, format=format)
    return refused.value.problems


@pytest.fixture
def globex(django_user_model):
    return workspace_create(name="Globex", slug="globex", owner_user=django_user_model.objects.create_user("gus"))


# The format


@pytest.mark.parametrize("format", ["toml", "yaml"])
def test_export_then_import_round_trips_exactly(workspace, globex, format):
    repo(workspace, "api")
    repo(workspace, "Web", clone_url="git@github.com:acme/web.git", default_branch="release/2.x", published=False)
    repo(workspace, "odd", full_name="acme/o.d-d_", clone_url="ssh://git@example.com:2222/acme/odd.git")
    text = definition_export(workspace=workspace, format=format)

    summary = definition_import(workspace=globex, text=text, format=format)
    assert sorted(summary.created) == ["Web", "api", "odd"]
    assert definition_entries(workspace=globex) == definition_entries(workspace=workspace)
    header_for_globex = text.replace("of acme:", "of globex:").replace("import acme ", "import globex ")
    assert definition_export(workspace=globex, format=format) == header_for_globex

    before = snapshot(workspace)
    again = definition_import(workspace=workspace, text=text, format=format)
    assert (again.created, again.updated, again.deleted) == ([], [], [])
    assert sorted(again.unchanged) == ["Web", "api", "odd"]
    assert snapshot(workspace) == before


def test_the_file_reads_as_documented(workspace):
    summary = definition_import(workspace=workspace, text=DEFINITION, format="toml")
    assert sorted(summary.created) == ["Web", "api"]
    assert definition_entries(workspace=workspace) == [
        {
            "name": "Web",
            "full_name": "acme/web",
            "clone_url": "git@github.com:acme/web.git",
            "default_branch": "release/2.x",
            "published": False,
        },
        {
            "name": "api",
            "full_name": "acme/api",
            "clone_url": "https://github.com/acme/api.git",
            "default_branch": "main",
            "published": True,
        },
    ]
    yaml_text = definition_export(workspace=workspace, format="yaml")
    assert "repository:\n- name: Web\n" in yaml_text


def test_an_empty_definition_is_said_not_implied(workspace, globex):
    repo(workspace, "api")
    assert "\nrepository = []\n" in definition_export(workspace=globex)
    assert "\nrepository: []\n" in definition_export(workspace=globex, format="yaml")
    for text, format in [("", "toml"), ("# nothing\n", "toml"), ("", "yaml"), ("other: 1\n", "yaml")]:
        problems = problems_of(workspace, text, format)
        assert any("no repository list" in p for p in problems), problems
    assert Repository.objects.filter(workspace=workspace).count() == 1
    summary = definition_import(workspace=workspace, text="repository = []\n", format="toml")
    assert summary.deleted == ["api"] and not Repository.objects.filter(workspace=workspace).exists()


def test_an_import_creates_updates_and_deletes(workspace):
    kept = repo(workspace, "api")
    changed = repo(workspace, "web", default_branch="main")
    gone = repo(workspace, "old")
    time.sleep(0.01)
    summary = definition_import(workspace=workspace, text=DEFINITION, format="toml")
    assert (summary.created, summary.updated, summary.deleted, summary.unchanged) == ([], ["Web"], ["old"], ["api"])
    assert not Repository.objects.filter(id=gone.id).exists()
    # Rows keep their ids: matched by name whatever its case.
    assert Repository.objects.get(id=changed.id).name == "Web"
    assert Repository.objects.get(id=changed.id).default_branch == "release/2.x"
    assert Repository.objects.get(id=kept.id).updated_at == kept.updated_at


def test_two_repositories_may_trade_owner_names_in_one_import(workspace):
    a = repo(workspace, "a", full_name="acme/one")
    b = repo(workspace, "b", full_name="acme/two")
    text = definition_export(workspace=workspace).replace("acme/one", "acme/tmp").replace("acme/two", "acme/one")
    text = text.replace("acme/tmp", "acme/two")
    summary = definition_import(workspace=workspace, text=text, format="toml")
    assert sorted(summary.updated) == ["a", "b"]
    assert Repository.objects.get(id=a.id).full_name == "acme/two"
    assert Repository.objects.get(id=b.id).full_name == "acme/one"


# All or nothing, with every problem


def test_an_import_with_problems_changes_nothing_and_lists_every_problem(workspace):
    repo(workspace, "api")
    repo(workspace, "keep-me")
    before = snapshot(workspace)
    text = """
[[repository]]
name = "api"
full_name = "acme/api"
clone_url = "https://github.com/acme/api-renamed.git"

[[repository]]
name = "evil"
full_name = "acme/evil"
clone_url = "ext::sh -c touch% /tmp/pwned"

[[repository]]
name = "API"
full_name = "Acme/API"
clone_url = "https://github.com/acme/api.git"

[[repository]]
name = "typed"
full_name = 7
clone_url = "fd::3"
published = "yes"
colour = "red"

[[repository]]
name = "-dash"
full_name = "acme/dash"
clone_url = "-uhack"
default_branch = "a..b"
"""
    problems = problems_of(workspace, text)
    joined = "\n".join(problems)
    assert snapshot(workspace) == before
    expected = [
        "repository 2 ('evil'): clone_url: " + repository_rules.clone_url_problem("ext::sh -c touch% /tmp/pwned"),
        "repository 3 ('API'): name 'API' is also repository 1's",
        "repository 3 ('API'): full_name 'Acme/API' is also repository 1's",
        "repository 4 ('typed'): unknown key 'colour'",
        "repository 4 ('typed'): full_name must be text, not 7",
        "repository 4 ('typed'): published must be true or false, not 'yes'",
        "repository 4 ('typed'): clone_url: " + repository_rules.clone_url_problem("fd::3"),
        "repository 5 ('-dash'): name: " + repository_rules.name_problem("-dash"),
        "repository 5 ('-dash'): clone_url: " + repository_rules.clone_url_problem("-uhack"),
        "repository 5 ('-dash'): default_branch: " + repository_rules.branch_problem("a..b"),
    ]
    for piece in expected:
        assert piece in joined, piece
    assert not any(p.startswith("repository 1 ") for p in problems)  # the good entry has none


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_a_hostile_clone_url_is_refused_by_the_model_and_by_an_import(workspace, url):
    row = Repository(workspace=workspace, name="x", full_name="acme/x", clone_url=url)
    with pytest.raises(ValidationError) as refused:
        row.full_clean()
    rule = repository_rules.clone_url_problem(url, allowed_schemes=("https", "ssh", "git"))
    assert refused.value.message_dict["clone_url"] == [rule]
    text = f'[[repository]]\nname = "x"\nfull_name = "acme/x"\nclone_url = {url!r}\n'.replace("'", '"')
    assert problems_of(workspace, text) == [f"repository 1 ('x'): clone_url: {rule}"]
    assert not Repository.objects.exists()


def test_file_urls_pass_only_where_the_gateway_allows_file(workspace, settings):
    text = '[[repository]]\nname = "x"\nfull_name = "acme/x"\nclone_url = "file:///srv/git/x.git"\n'
    assert "uses file, which this gateway does not allow" in problems_of(workspace, text)[0]
    settings.CALVIN_REPOSITORY_SCHEMES = ("https", "ssh", "git", "file")
    assert definition_import(workspace=workspace, text=text, format="toml").created == ["x"]


# Hostile files


def test_hostile_files_are_refused_with_a_clear_reason(workspace):
    repo(workspace, "api")
    before = snapshot(workspace)
    one = '[[repository]]\nname = "a"\nfull_name = "acme/a"\nclone_url = "https://h/a.git"\n'
    cases = [
        (b"\xff\xfe" + one.encode(), "toml", "not UTF-8 text (byte 0"),
        (one.replace('"a"', '"a\x00"', 1), "toml", "NUL character (line 2)"),
        (one.encode() + b"#" * MAX_BYTES, "toml", f"at most {MAX_BYTES:,}"),
        ("x" * (MAX_BYTES + 1), "yaml", f"at most {MAX_BYTES:,}"),
        ("repository = [\n  {name = 'a',\n", "toml", "not valid TOML"),
        ("repository:\n  - name: [a\n  - b: c\n", "yaml", "not valid YAML"),
        ("repository:\n- name: a\n  bad: [\n", "yaml", "line "),
        ("- a\n- b\n", "yaml", "no repository list"),
        ('repository = "all of them"\n', "toml", "repository must be a list"),
        ("repository = [1, 'two']\n", "toml", "repository 2: a repository is a table"),
        ("repository = [[]]\n" + "x = " + "[" * 5000 + "]" * 5000 + "\n", "toml", ""),
        (one, "json", "unknown format 'json': toml or yaml"),
        (one, "ini", "toml or yaml"),
    ]
    for text, format, said in cases:
        problems = problems_of(workspace, text, format)
        assert said in "\n".join(problems), (format, problems)
        assert all(len(p) < 600 for p in problems)  # never the whole file back
    toml_error = problems_of(workspace, "repository = [\n  {name = 'a',\n")[0]
    assert "line" in toml_error
    assert snapshot(workspace) == before


def test_too_many_repositories_are_refused(workspace):
    entry = '[[repository]]\nname = "r{n}"\nfull_name = "acme/r{n}"\nclone_url = "https://h/r.git"\n'
    text = "".join(entry.format(n=n) for n in range(MAX_REPOSITORIES + 1))
    assert problems_of(workspace, text) == [f"{MAX_REPOSITORIES + 1:,} repositories; a definition has at most 500"]
    exactly = "".join(entry.format(n=n) for n in range(MAX_REPOSITORIES))
    assert len(definition_import(workspace=workspace, text=exactly, format="toml").created) == MAX_REPOSITORIES


def test_a_yaml_alias_bomb_is_refused_without_expanding_it(workspace):
    bomb = "a: &a ['x','x','x','x','x','x','x','x','x']\n"
    for level in "bcdefghi":
        previous = chr(ord(level) - 1)
        bomb += f"{level}: &{level} [*{previous},*{previous},*{previous},*{previous},*{previous},*{previous}]\n"
    bomb += "repository:\n- name: *i\n  full_name: *i\n  clone_url: https://h/x.git\n"
    started = time.monotonic()
    problems = problems_of(workspace, bomb, "yaml")
    assert time.monotonic() - started < 5
    assert "repository 1: name must be text, not a list" in problems
    assert "unknown top-level key 'a'; only repository" in problems


# The admin


def staff(django_user_model, username, workspace=None, role=Member.Role.ADMIN) -> Client:
    user = django_user_model.objects.create_user(username, password="pw", is_staff=True)
    if workspace is not None:
        Member.objects.create(workspace=workspace, user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


REPO_ADD = "admin:workspaces_repository_add"


def form_errors(response) -> dict:
    return response.context["adminform"].form.errors


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_the_admin_form_refuses_a_hostile_clone_url_with_the_rules_message(django_user_model, workspace, url):
    client = staff(django_user_model, "ada", workspace)
    data = {"workspace": workspace.id, "name": "x", "full_name": "acme/x", "clone_url": url, "default_branch": "main"}
    response = client.post(reverse(REPO_ADD), data)
    assert response.status_code == 200
    rule = repository_rules.clone_url_problem(url, allowed_schemes=("https", "ssh", "git"))
    assert form_errors(response)["clone_url"] == [rule]
    assert not Repository.objects.exists()
    data["clone_url"] = "https://github.com/acme/x.git"
    assert client.post(reverse(REPO_ADD), data).status_code == 302
    assert Repository.objects.get().clone_url == "https://github.com/acme/x.git"


def test_the_admin_form_says_a_name_is_taken_whatever_its_case(admin_client, workspace):
    repo(workspace, "api")
    data = {"workspace": workspace.id, "name": "API", "full_name": "ACME/API", "clone_url": "https://h/a.git"}
    response = admin_client.post(reverse(REPO_ADD), {**data, "default_branch": "main"})
    errors = form_errors(response)
    assert "already has a repository with this name" in errors["name"][0]
    assert "already has a repository with this full name" in errors["full_name"][0]


def test_a_workspace_admin_sees_and_changes_only_their_workspaces_repositories(django_user_model, workspace, globex):
    ours, theirs = repo(workspace, "api"), repo(globex, "secret-project")
    client = staff(django_user_model, "ada", workspace)

    listing = client.get(reverse("admin:workspaces_repository_changelist"))
    assert [r.id for r in listing.context["cl"].result_list] == [ours.id]
    assert "Globex" not in listing.content.decode() and "secret-project" not in listing.content.decode()
    change_theirs = reverse("admin:workspaces_repository_change", args=[theirs.id])
    assert client.get(change_theirs).status_code == 302  # "does not exist", as for any id
    client.post(
        change_theirs, {"workspace": globex.id, "name": "x", "full_name": "globex/x", "clone_url": "https://h/x"}
    )
    assert Repository.objects.get(id=theirs.id).name == "secret-project"
    client.post(reverse("admin:workspaces_repository_delete", args=[theirs.id]), {"post": "yes"})
    assert Repository.objects.filter(id=theirs.id).exists()

    # The workspace choice lists only theirs; choosing another tenant's is refused.
    add = client.get(reverse(REPO_ADD))
    assert list(add.context["adminform"].form.fields["workspace"].queryset) == [workspace]
    data = {"workspace": globex.id, "name": "planted", "full_name": "globex/planted", "clone_url": "https://h/p.git"}
    response = client.post(reverse(REPO_ADD), {**data, "default_branch": "main"})
    assert "workspace" in form_errors(response)
    change_ours = reverse("admin:workspaces_repository_change", args=[ours.id])
    moved = {"workspace": globex.id, "name": "api", "full_name": "acme/api", "clone_url": ours.clone_url}
    client.post(change_ours, {**moved, "default_branch": "main", "published": "on"})
    assert Repository.objects.get(id=ours.id).workspace_id == workspace.id
    assert not Repository.objects.filter(name="planted").exists()

    # Their own: changed, and the superuser sees both.
    client.post(change_ours, {**moved, "workspace": workspace.id, "default_branch": "develop"})
    assert Repository.objects.get(id=ours.id).default_branch == "develop"


def test_a_plain_member_or_stranger_has_no_repositories_in_the_admin(django_user_model, workspace):
    repo(workspace, "api")
    for client in (staff(django_user_model, "mem", workspace, Member.Role.MEMBER), staff(django_user_model, "x")):
        # Neither administers a workspace: the admin sends them to its login page.
        for url in (
            reverse("admin:workspaces_repository_changelist"),
            reverse("admin:workspaces_workspace_definition_export", args=[workspace.id]),
        ):
            response = client.get(url)
            assert response.status_code == 302 and response.url.startswith(reverse("admin:login"))


def test_the_superuser_sees_every_workspaces_repositories(admin_client, workspace, globex):
    ids = {repo(workspace, "api").id, repo(globex, "web").id}
    listing = admin_client.get(reverse("admin:workspaces_repository_changelist"))
    assert {r.id for r in listing.context["cl"].result_list} == ids


def export_url(workspace, format="toml") -> str:
    return reverse("admin:workspaces_workspace_definition_export", args=[workspace.id]) + f"?format={format}"


def import_url(workspace) -> str:
    return reverse("admin:workspaces_workspace_definition_import", args=[workspace.id])


def test_a_workspace_admin_exports_and_imports_only_their_own_definition(django_user_model, workspace, globex):
    repo(workspace, "api")
    repo(globex, "secret-project")
    client = staff(django_user_model, "ada", workspace, Member.Role.OWNER)

    page = client.get(reverse("admin:workspaces_workspace_change", args=[workspace.id])).content.decode()
    assert export_url(workspace) in page
    assert import_url(workspace) in page
    form = client.get(import_url(workspace))
    assert form.status_code == 200 and 'type="file"' in form.content.decode()

    response = client.get(export_url(workspace, "yaml"))
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="acme-definition.yaml"'
    assert response.content.decode() == definition_export(workspace=workspace, format="yaml")

    before = snapshot(globex)
    for url in (export_url(globex), export_url(globex, "yaml"), import_url(globex)):
        assert client.get(url).status_code == 404
    posted = client.post(import_url(globex), {"text": "repository = []\n", "format": "toml"})
    assert posted.status_code == 404 and snapshot(globex) == before
    assert client.get(reverse("admin:workspaces_workspace_change", args=[globex.id])).status_code == 302
    listing = client.get(reverse("admin:workspaces_workspace_changelist"))
    assert [w.id for w in listing.context["cl"].result_list] == [workspace.id]

    # Pasted, then uploaded: applied, and the person lands on the workspace's repositories.
    response = client.post(import_url(workspace), {"text": DEFINITION, "format": "toml"})
    assert response.status_code == 302 and f"workspace__id__exact={workspace.id}" in response["Location"]
    assert sorted(r.name for r in Repository.objects.filter(workspace=workspace)) == ["Web", "api"]
    upload = io.BytesIO(b"repository:\n- name: only\n  full_name: acme/only\n  clone_url: https://h/o.git\n")
    upload.name = "acme.yml"
    response = client.post(import_url(workspace), {"file": upload, "format": "toml"})
    assert response.status_code == 302
    assert [r.name for r in Repository.objects.filter(workspace=workspace)] == ["only"]


def test_the_admin_import_shows_every_problem_and_changes_nothing(admin_client, workspace):
    repo(workspace, "api")
    before = snapshot(workspace)
    text = DEFINITION.replace("https://github.com/acme/api.git", "-uhack").replace('"acme/web"', '"acme/api"')
    response = admin_client.post(import_url(workspace), {"text": text, "format": "toml"})
    assert response.status_code == 200
    assert response.context["problems"] == [
        "repository 1 ('api'): clone_url: " + repository_rules.clone_url_problem("-uhack"),
        "repository 2 ('Web'): full_name 'acme/api' is also repository 1's (unique whatever the case)",
    ]
    page = response.content.decode()
    assert "nothing was changed" in page and "2 problems" in page
    assert snapshot(workspace) == before
    neither = admin_client.post(import_url(workspace), {"text": "", "format": "toml"})
    assert "Upload a file or paste" in neither.content.decode()


# The management command


def test_the_command_exports_and_imports(workspace, globex, tmp_path):
    repo(workspace, "api", published=False)
    out = io.StringIO()
    call_command("workspace_definition", "export", "acme", stdout=out)
    assert out.getvalue() == definition_export(workspace=workspace)
    call_command("workspace_definition", "export", "acme", "-o", str(tmp_path / "acme.yaml"))
    assert (tmp_path / "acme.yaml").read_text() == definition_export(workspace=workspace, format="yaml")

    said = io.StringIO()
    call_command("workspace_definition", "import", "globex", str(tmp_path / "acme.yaml"), stdout=said)
    assert "1 created (api)" in said.getvalue()
    assert definition_entries(workspace=globex) == definition_entries(workspace=workspace)


def test_the_command_prints_every_problem_and_changes_nothing(workspace, tmp_path):
    repo(workspace, "api")
    before = snapshot(workspace)
    bad = tmp_path / "bad.toml"
    bad.write_text(DEFINITION.replace("https://github.com/acme/api.git", "ext::sh").replace("release/2.x", "-x"))
    errors = io.StringIO()
    with pytest.raises(CommandError, match="2 problems; nothing was changed"):
        call_command("workspace_definition", "import", "acme", str(bad), stderr=errors)
    printed = errors.getvalue()
    assert "repository 1 ('api'): clone_url: " + repository_rules.clone_url_problem("ext::sh") in printed
    assert "repository 2 ('Web'): default_branch: " + repository_rules.branch_problem("-x") in printed
    assert snapshot(workspace) == before
    with pytest.raises(CommandError, match="no workspace with the slug 'nope'"):
        call_command("workspace_definition", "import", "nope", str(bad))
    with pytest.raises(CommandError, match="cannot read"):
        call_command("workspace_definition", "import", "acme", str(tmp_path / "missing.toml"))


@pytest.mark.django_db(transaction=True)
def test_the_command_exits_non_zero_on_problems(workspace, tmp_path):
    """As a shell sees it: `manage.py workspace_definition import` in a process of its own."""
    repo(workspace, "api")
    before = snapshot(workspace)
    bad = tmp_path / "bad.toml"
    bad.write_text('[[repository]]\nname = "x"\nfull_name = "acme/x"\nclone_url = "-uhack"\n')
    environment = {**os.environ, "DATABASE_URL": subprocess_database_url()}
    command = [sys.executable, str(ROOT / "manage.py"), "workspace_definition", "import", "acme", str(bad)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=environment)
    assert done.returncode == 1, done.stderr
    assert repository_rules.clone_url_problem("-uhack") in done.stderr
    assert "1 problem; nothing was changed" in done.stderr
    assert snapshot(workspace) == before
