"""Creates at the same moment: one person at their limit makes one workspace, not two; two people
asking for one slug get one workspace and a clear "taken", never an error page."""

import threading

import pytest
from django.db import connection

from calvin.workspaces.models import Member, Workspace
from calvin.workspaces.services import WorkspaceRefused, workspace_create

pytestmark = pytest.mark.django_db(transaction=True)


def all_at_once(calls) -> tuple[list, list]:
    barrier = threading.Barrier(len(calls))
    made, refused = [], []

    def run(call):
        try:
            barrier.wait()
            made.append(call())
        except WorkspaceRefused as exc:
            refused.append(str(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return made, refused


def test_one_person_creating_at_once_stays_within_the_limit(settings, django_user_model):
    settings.CALVIN_WORKSPACES_PER_PERSON = 1
    for round_ in range(3):
        person = django_user_model.objects.create_user(f"racer-{round_}")
        slugs = [f"r{round_}-w{i}" for i in range(4)]
        calls = [
            lambda slug=slug, person=person: workspace_create(name=slug, slug=slug, owner_user=person) for slug in slugs
        ]
        made, refused = all_at_once(calls)
        assert len(made) == 1 and len(refused) == 3, (made, refused)
        assert all("as many workspaces as one person may create" in text for text in refused)
        assert Member.objects.filter(user=person, role=Member.Role.OWNER).count() == 1


def test_two_people_asking_for_one_slug_get_one_workspace_and_taken(django_user_model):
    people = [django_user_model.objects.create_user(f"person-{i}") for i in range(4)]
    made, refused = all_at_once([lambda p=p: workspace_create(name="Same", slug="same", owner_user=p) for p in people])
    assert len(made) == 1 and refused == ["the slug 'same' is taken: choose another"] * 3
    assert Workspace.objects.filter(slug="same").count() == 1 and Member.objects.count() == 1
