"""Two workspaces with people of every role, for the invitation and people tests.

Acme: ann (owner), ada (admin), mo (member). Globex: gus (owner), gil (admin). Every user's
username is their email, as sign-up makes them; they are active (their email is verified).
"""

import re
from dataclasses import dataclass

import pytest

from calvin.workspaces.models import Member, Workspace
from calvin.workspaces.services import workspace_create

PASSWORD = "pw-people-123"


@dataclass
class People:
    acme: Workspace
    globex: Workspace
    ann: Member
    ada: Member
    mo: Member
    gus: Member
    gil: Member


def person(django_user_model, email: str, *, active: bool = True):
    user = django_user_model.objects.create_user(email.lower(), email=email, password=PASSWORD)
    if not active:
        user.is_active = False
        user.save(update_fields=["is_active"])
    return user


def member_of(workspace, user, role) -> Member:
    return Member.objects.create(workspace=workspace, user=user, role=role)


@pytest.fixture
def people(django_user_model) -> People:
    ann = person(django_user_model, "ann@acme.example")
    gus = person(django_user_model, "gus@globex.example")
    acme = workspace_create(name="Acme", slug="acme", owner_user=ann)
    globex = workspace_create(name="Globex", slug="globex", owner_user=gus)
    return People(
        acme=acme,
        globex=globex,
        ann=Member.objects.get(workspace=acme, user=ann),
        ada=member_of(acme, person(django_user_model, "ada@acme.example"), Member.Role.ADMIN),
        mo=member_of(acme, person(django_user_model, "mo@acme.example"), Member.Role.MEMBER),
        gus=Member.objects.get(workspace=globex, user=gus),
        gil=member_of(globex, person(django_user_model, "gil@globex.example"), Member.Role.ADMIN),
    )


def link_token(text: str) -> str:
    """The raw token of the (last) invitation link in an email's text."""
    return re.findall(r"/invite/([A-Za-z0-9_-]+)/", text)[-1]


def role_of(member: Member) -> str | None:
    row = Member.objects.filter(id=member.id).first()
    return row.role if row else None
