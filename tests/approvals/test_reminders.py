"""Reminders: an approval nobody decided CALVIN_APPROVAL_REMIND_MINUTES (30) after it was asked
reminds the people who may decide, once, in its thread; never before, never once decided or
expired, once however many sweeps run at the same time. Time is moved by moving requested_at back.

Requests go over real MCP; beat's task runs on a real worker."""

import re
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from approvals.models import PendingApproval
from approvals.services import approval_decide, approval_remind, approvals_remind
from approvals.tasks import remind_approvals
from calvin.workspaces.models import Member, Workspace
from sessions.models import Message, Session
from tests.approvals.support import card_of, requested, worker_drain
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

S = PendingApproval.Status
PACKAGES = {"apt": ["jq"]}


def asked_ago(approval: PendingApproval, minutes: float) -> None:
    PendingApproval.objects.filter(id=approval.id).update(requested_at=timezone.now() - timedelta(minutes=minutes))


def sweep() -> None:
    """Beat's task, on the worker; returns once the worker has run it."""
    remind_approvals.delay()
    worker_drain()


def reminders(approval: PendingApproval) -> list[str]:
    return list(
        Message.objects.filter(
            thread_id=approval.session.thread_id, kind=Message.Kind.SYSTEM, text__contains=f"approval {approval.id} "
        )
        .filter(text__startswith="Reminder: ")
        .values_list("text", flat=True)
    )


def named(text: str) -> set[str]:
    """Who a reminder mentions: "Reminder: <@U1>, @owner: approval …"."""
    who = re.match(r"^Reminder: (.*?): approval \d+ ", text).group(1)
    return set(who.split(", "))


@pytest.fixture
def admin_member(workspace, django_user_model):
    """An admin of Acme whom Calvin knows in Slack as U0ADMIN."""
    user = django_user_model.objects.create_user("admin", password="pw-admin-123")
    return Member.objects.create(workspace=workspace, user=user, role=Member.Role.ADMIN, slack_user_id="U0ADMIN")


def test_beat_runs_the_reminder_sweep_as_often_as_the_other_sweeps(settings):
    from django_celery_beat.models import PeriodicTask
    from django_celery_beat.schedulers import DatabaseScheduler

    from calvin.celery import app as celery_app

    entry = settings.CELERY_BEAT_SCHEDULE["approvals-remind"]
    celery_app.loader.import_default_modules()  # the task modules, found as a worker finds them
    assert entry["task"] == "approvals.tasks.remind_approvals" and entry["task"] in celery_app.tasks
    assert entry["schedule"] == settings.CALVIN_SWEEP_SECONDS
    DatabaseScheduler(app=celery_app)  # what `celery -A calvin beat` starts: it installs the schedule
    installed = PeriodicTask.objects.get(name="approvals-remind")
    assert installed.task == "approvals.tasks.remind_approvals" and installed.enabled


def test_a_waiting_approval_reminds_once_after_the_bound_and_not_before(agent, admin_member, settings):
    assert settings.CALVIN_APPROVAL_REMIND_MINUTES == 30
    approval = requested(agent, "install_packages", PACKAGES)
    card = card_of(approval)
    asked_ago(approval, 29)
    sweep()
    assert reminders(approval) == [] and PendingApproval.objects.get(id=approval.id).reminded_at is None

    asked_ago(approval, 31)
    sweep()
    [text] = wait_for(lambda: reminders(approval))
    assert PendingApproval.objects.get(id=approval.id).reminded_at is not None
    assert named(text) == {"@owner", "<@U0ADMIN>"}
    assert "has waited 31 min for a decision" in text
    assert f"agent {agent.session.agent.name} asks to install packages ({approval.summary})" in text
    assert f"/threads/{agent.session.thread_id}/#message-{card.id}|its card>" in text

    for _ in range(2):  # later sweeps, later still: nothing more
        asked_ago(approval, 90)
        sweep()
    assert len(reminders(approval)) == 1


def test_decided_and_expired_approvals_are_not_reminded(agent):
    decided = requested(agent, "install_packages", PACKAGES)
    approval_decide(approval_id=decided.id, member=agent.session.owner, approve=False, via="web")
    expired = requested(agent, "install_packages", {"apt": ["curl"]})
    # Past its expiry, and not expired by the sweep yet: nobody can decide it any more.
    PendingApproval.objects.filter(id=expired.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    waiting = requested(agent, "install_packages", {"apt": ["git"]})
    for approval in (decided, expired, waiting):
        asked_ago(approval, 45)
    sweep()
    wait_for(lambda: reminders(waiting))
    assert reminders(decided) == [] and reminders(expired) == []
    assert PendingApproval.objects.filter(id__in=[decided.id, expired.id], reminded_at__isnull=False).count() == 0


def at_once(*runs) -> list:
    """Run each callable in a thread of its own, all starting together; their answers."""
    start, answers = threading.Barrier(len(runs)), []

    def run(fn):
        try:
            start.wait(timeout=10)
            answers.append(fn())
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(fn,)) for fn in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return answers


def test_two_sweeps_at_once_remind_once(agent):
    first = requested(agent, "install_packages", PACKAGES)
    second = requested(agent, "add_mcp_server", {"name": "docs", "command": "docs-server"})
    for approval in (first, second):
        asked_ago(approval, 31)
    now = timezone.now()
    # Two claims of the same approval at the same moment: one changes the row, the other nothing.
    claims = at_once(*[lambda: approval_remind(approval_id=first.id, now=now)] * 2)
    assert sorted(claims) == [False, True]
    assert len(reminders(first)) == 1
    # Two whole sweeps at the same moment, the second approval due to both, the first done already.
    assert sorted(at_once(*[lambda: approvals_remind(now=now)] * 2)) == [0, 1]
    assert len(reminders(first)) == 1 and len(reminders(second)) == 1


def test_the_reminder_names_exactly_who_may_decide(agent, plain_member, admin_member, stranger_member, workspace):
    """A session started by a plain member: under "admins" its agent's change to itself names the
    owners and admins only, its post into another thread names its starter too, as does any
    approval once the workspace lets the starter decide; another workspace's owner never."""
    Session.objects.filter(id=agent.session.id).update(owner=plain_member)
    gated = requested(agent, "install_packages", PACKAGES)
    post = PendingApproval.objects.create(
        session=agent.session,
        kind="post_thread",
        summary="post into #general",
        details={"target": {"label": "#general", "url": "https://example.com/t/1"}, "post": "hello"},
        expires_at=timezone.now() + timedelta(hours=1),
    )
    for approval in (gated, post):
        asked_ago(approval, 31)
    sweep()
    assert named(wait_for(lambda: reminders(gated))[0]) == {"@owner", "<@U0ADMIN>"}
    assert named(wait_for(lambda: reminders(post))[0]) == {"@member", "@owner", "<@U0ADMIN>"}

    Workspace.objects.filter(id=workspace.id).update(
        self_modification_deciders=Workspace.SelfModificationDeciders.ADMINS_AND_OWNER
    )
    later = requested(agent, "add_mcp_server", {"name": "docs", "command": "docs-server"})
    asked_ago(later, 31)
    sweep()
    [text] = wait_for(lambda: reminders(later))
    assert named(text) == {"@member", "@owner", "<@U0ADMIN>"}
    assert text.startswith("Reminder: @member, ")  # the one who started it first
    assert "stranger" not in text

    # The web channel shows each mention as the person's name.
    client = Client()
    client.force_login(plain_member.user)
    page = client.get(f"/threads/{agent.session.thread_id}/").content.decode()
    assert '<span class="mention">@admin</span>' in page


def test_no_reminders_where_the_bound_is_zero(agent, settings):
    approval = requested(agent, "install_packages", PACKAGES)
    asked_ago(approval, 600)
    settings.CALVIN_APPROVAL_REMIND_MINUTES = 0
    assert approvals_remind(now=timezone.now()) == 0
    assert reminders(approval) == [] and PendingApproval.objects.get(id=approval.id).reminded_at is None
    settings.CALVIN_APPROVAL_REMIND_MINUTES = 30
    assert approvals_remind(now=timezone.now()) == 1 and len(reminders(approval)) == 1
